"""The parsing pool of big mailbox imports (SPEC §11 ingest rate) must not outlive
an import that is killed: its workers hold a copy of the importer's database
socket. A regression from the fresh-clone check (orphaned parsers after SIGKILL)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from tests.jobs.test_worker_kill import child_env

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

ROOT = Path(settings.BASE_DIR)
MBOX = ROOT / "tests" / "data" / "spamassassin" / "easy-ham-1-slice.mbox"
WAIT_SECONDS = 20  # a guard against hanging, not a speed assertion

SCRIPT = """
import sys, time, django
django.setup()
import connectors.mailbox.sync as sync
from connectors.mailbox.client import iter_mailbox
sync.PARALLEL_PARSE_MIN = 1
entries = list(iter_mailbox(sys.argv[1])) * 200
for _ in sync.parse_entries(entries):
    time.sleep(0.05)  # a slow consumer keeps the pool busy until killed
"""


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie nobody reaped)."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def test_parse_workers_exit_when_the_import_is_killed() -> None:
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, "-c", SCRIPT, str(MBOX)], cwd=ROOT, env=child_env()
    )
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        workers: list[int] = []
        while len(workers) < 2 and time.monotonic() < deadline:
            workers = _children(proc.pid)
            time.sleep(0.1)
        assert len(workers) >= 2, "the parsing pool never started"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=WAIT_SECONDS)
        deadline = time.monotonic() + WAIT_SECONDS
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [w for w in workers if _alive(w)]
        assert not left, "parse workers outlived the import"
    finally:
        if proc.poll() is None:
            proc.kill()
