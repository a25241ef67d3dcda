"""A real django-q2 worker is killed mid-job; the job resumes from its checkpoint
(SPEC §7 "a job that stops heartbeating (worker killed) is re-queued from its
checkpoint", SPEC §11 "a killed worker leaves the database as it was before that
item")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

from brain.models import Page, RawRecord
from connectors.models import ImportedItem
from jobs.models import Job
from jobs.services import job_enqueue, job_reap_stalled

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

pytestmark = pytest.mark.slow

ROOT = Path(settings.BASE_DIR)
WAIT_SECONDS = 30  # a guard against hanging, not a speed assertion


def database_url() -> str:
    """A URL for the test database this process uses (Unix socket or TCP)."""
    db = connection.settings_dict
    host = db["HOST"] or "localhost"
    netloc = quote(host, safe="") if host.startswith("/") else host
    if db.get("PORT"):
        netloc += f":{db['PORT']}"
    auth = quote(db["USER"] or "postgres")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"])
    return f"postgres://{auth}@{netloc}/{db['NAME']}"


def child_env(
    settings_module: str = "gbrain_site.settings", **extra: str
) -> dict[str, str]:
    """The environment of a child ``manage.py``/Python process that uses this
    test run's database (a separate process cannot see a test transaction, so
    callers use ``transactional_db``)."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings_module,
        "DATABASE_URL": database_url(),
        "PYTHONPATH": str(ROOT),
        **extra,
    }


class Worker:
    """``manage.py qcluster`` (or ``worker``) in its own process group, so SIGKILL
    takes the whole cluster (sentinel, pusher, workers) down at once, like a lost
    machine."""

    def __init__(self, log: Path, command: str = "qcluster") -> None:
        env = child_env("tests.jobs.worker_settings", BRAIN_LOG_LEVEL="INFO")
        self.log = log
        self.proc = subprocess.Popen(  # noqa: S603
            [sys.executable, str(ROOT / "manage.py"), command],
            cwd=ROOT,
            env=env,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        """Idle workers are killed too: a graceful qcluster stop takes ~30 s."""
        if self.proc.poll() is None:
            self.kill()


def wait_for(
    condition: Callable[[], Any],
    what: str,
    worker: Worker,
    *,
    alive_required: bool = True,
) -> Any:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if alive_required and worker.proc.poll() is not None:
            break
        time.sleep(0.1)
    log = worker.log.read_text(errors="replace")[-3000:]
    raise AssertionError(f"gave up waiting for {what}; worker log:\n{log}")


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.stop()


@pytest.fixture
def real_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    """Send tasks through the ORM broker instead of running them in-process."""
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)


def test_killed_worker_job_resumes_from_checkpoint_with_every_item_once(
    restore_migrated_rows: None,
    transactional_db: None,
    test_kinds: dict[str, str],
    real_queue: None,
    workers: list[Worker],
    tmp_path: Path,
) -> None:
    """GIVEN a 12-item import running on a real worker that has committed 5 items
    WHEN the worker's whole process group is SIGKILLed, the reaper runs and a new
    worker starts
    THEN the job finishes on attempt 2 starting at item 5, and every item exists
    exactly once (a re-import would have hit the unique constraint and failed)."""
    hold = tmp_path / "hold"
    hold.write_text("hold")
    job, created = job_enqueue(
        kind="test_items",
        params={"items": 12, "hold_after": 5, "hold_file": str(hold)},
        idempotency_key="kill-test",
    )
    assert created

    first = Worker(tmp_path / "worker1.log", command="worker")
    workers.append(first)
    wait_for(
        lambda: RawRecord.objects.filter(external_id__startswith="item-").count() == 5,
        "5 committed items",
        first,
    )
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    assert job.checkpoint == {"next": 5}
    assert job.attempts == 1

    first.kill()
    hold.unlink()
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING, "nobody noticed the death yet"

    # A live worker beats every second; a zero threshold reaps any beat in the past.
    assert job_reap_stalled(stale_after_seconds=0) == [job.pk]
    job.refresh_from_db()
    assert job.status == Job.Status.QUEUED
    assert job.checkpoint == {"next": 5}
    assert "stopped heartbeating" in job.error

    second = Worker(tmp_path / "worker2.log")
    workers.append(second)
    wait_for(
        lambda: Job.objects.filter(
            pk=job.pk, status__in=["succeeded", "failed", "dead"]
        ).exists(),
        "the job to finish",
        second,
    )
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED, job.error
    assert job.attempts == 2
    assert job.result == {"imported": 7, "resumed_from": 5, "attempt": 2}
    ids = list(
        RawRecord.objects.filter(external_id__startswith="item-").values_list(
            "external_id", flat=True
        )
    )
    assert sorted(ids) == sorted(f"item-{i}" for i in range(12))
    contents = set(
        RawRecord.objects.filter(external_id__startswith="item-").values_list(
            "content", flat=True
        )
    )
    assert {c for c in contents if "attempt 1" in c} == {
        f"item {i} (attempt 1)" for i in range(5)
    }
    assert [h["outcome"] for h in job.history] == ["stalled, re-queued", "succeeded"]


SPAMASSASSIN = ROOT / "tests" / "data" / "spamassassin" / "easy-ham-1-slice.mbox"


def email_threads(source_id: str) -> list[str]:
    return list(
        Page.objects.filter(source_id=source_id, type__name="email").values_list(
            "frontmatter__thread_id", flat=True
        )
    )


def test_killed_worker_mid_sync_finishes_with_every_thread_imported_exactly_once(
    restore_migrated_rows: None,
    transactional_db: None,
    test_kinds: dict[str, str],
    real_queue: None,
    workers: list[Worker],
    tmp_path: Path,
) -> None:
    """GIVEN a real mailbox import (12 threads, 26 messages, batches of 4 threads)
    running on a real worker, paused inside its second batch
    WHEN the worker is SIGKILLed, the reaper runs and a new worker starts
    THEN the first batch stays, the half-written second batch is gone, and the
    re-queued job imports the other 8 threads: every thread and message once."""
    hold, reached = tmp_path / "hold", tmp_path / "reached"
    hold.write_text("hold")
    job, _ = job_enqueue(
        kind="test_import_mail_hold",
        params={
            "source_id": "sa",
            "path": str(SPAMASSASSIN),
            "batch_threads": 4,
            "hold_after": 8,
            "hold_file": str(hold),
            "reached_file": str(reached),
        },
    )
    first = Worker(tmp_path / "worker1.log")
    workers.append(first)
    wait_for(reached.exists, "the import to pause in its second batch", first)
    first.kill()
    hold.unlink()
    assert len(email_threads("sa")) == 4, "batch 1 committed, batch 2 rolled back"
    assert (
        RawRecord.objects.filter(source_id="sa").count()
        == ImportedItem.objects.filter(source_id="sa", kind="message").count()
    )

    # The dead backend's transaction ends asynchronously; the reaper skips a row
    # that is still locked, so ask until it is free.
    requeued = wait_for(
        lambda: job_reap_stalled(stale_after_seconds=0),
        "the reaper",
        first,
        alive_required=False,
    )
    assert requeued == [job.pk]

    second = Worker(tmp_path / "worker2.log")
    workers.append(second)
    wait_for(
        lambda: Job.objects.filter(
            pk=job.pk, status__in=["succeeded", "failed", "dead"]
        ).exists(),
        "the job to finish",
        second,
    )
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED, job.error
    assert job.attempts == 2
    assert job.result["counts"]["threads"] == 8
    threads = email_threads("sa")
    assert len(threads) == len(set(threads)) == 12
    assert RawRecord.objects.filter(source_id="sa").count() == 26
    assert ImportedItem.objects.filter(source_id="sa", kind="message").count() == 26
