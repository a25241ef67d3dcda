"""``manage.py import_mail`` stopped with SIGTERM behaves like Ctrl-C: the batch in
flight rolls back, the sync run is recorded as failed (not left "running"), the
command says how to finish, and a re-run completes the import. A regression from
the fresh-clone check."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from brain.models import RawRecord
from connectors.mailbox.sync import mailbox_import
from connectors.models import ImportedItem, SyncRun
from tests.jobs.test_worker_kill import child_env

pytestmark = pytest.mark.slow

ROOT = Path(settings.BASE_DIR)
WAIT_SECONDS = 60  # a guard against hanging, not a speed assertion
MESSAGES = 2000  # enough batches that the import is still running when stopped


def _mbox(path: Path, count: int) -> Path:
    lines = []
    for n in range(count):
        lines.append(
            f"From sender{n}@example.org Mon Oct  7 10:00:00 2002\n"
            f"From: Sender {n} <sender{n}@example.org>\nTo: me@example.org\n"
            f"Subject: Topic number {n}\nMessage-ID: <m{n}@example.org>\n"
            f"Date: Mon, 7 Oct 2002 10:{n % 60:02d}:00 +0000\n\n"
            f"Body of message {n}, for the record.\n\n"
        )
    path.write_text("".join(lines))
    return path


def test_sigterm_stops_an_import_cleanly_and_a_rerun_finishes_it(
    restore_migrated_rows: None, transactional_db: None, tmp_path: Path
) -> None:
    mbox = _mbox(tmp_path / "big.mbox", MESSAGES)
    proc = subprocess.Popen(  # noqa: S603
        [
            sys.executable,
            "manage.py",
            "import_mail",
            str(mbox),
            "--source",
            "sig",
            "--owner",
            "me@example.org",
        ],
        cwd=ROOT,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline and proc.poll() is None:
        if ImportedItem.objects.filter(source_id="sig").exists():
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the import ended before it could be stopped"
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=WAIT_SECONDS)
    assert proc.returncode == 130
    assert "run the same command again" in err
    assert "Traceback" not in err
    assert SyncRun.objects.get(source_id="sig").status == "failed"
    stored = RawRecord.objects.filter(source_id="sig").count()
    assert 0 < stored < MESSAGES
    ledger = ImportedItem.objects.filter(source_id="sig", kind="message")
    assert stored == ledger.count()

    report = mailbox_import(source_id="sig", path=mbox, owners=["me@example.org"])
    assert report.counts["messages"] == MESSAGES - stored
    assert RawRecord.objects.filter(source_id="sig").count() == MESSAGES
