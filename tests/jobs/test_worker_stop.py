"""``manage.py worker`` stops cleanly under a process manager (operations issue):
SIGTERM to its whole process group (systemd's and Docker's stop) ends the cluster
within 10 s, finishing or re-queuing the task in hand."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest

from jobs.models import Job, WorkerHeartbeat
from jobs.services import job_enqueue
from tests.jobs.test_worker_kill import ROOT, child_env, real_queue

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.slow

__all__ = ["real_queue"]  # a fixture of the kill tests, used here too

STOP_LIMIT = 10.0  # seconds: the operations issue's bound for a clean stop
WAIT_SECONDS = 60  # a guard against hanging, not a speed assertion


_STARTED: list[int] = []  # process groups this module started, killed at teardown


@pytest.fixture(autouse=True)
def _kill_leftover_workers() -> Iterator[None]:
    """SIGKILL every process group a test started, whatever the test's outcome: a
    worker left running after a failed assertion would keep claiming the jobs of
    later tests and hold the test database open."""
    yield
    while _STARTED:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(_STARTED.pop(), signal.SIGKILL)


def start_worker(
    log: Path, *args: str, module: str | None = None
) -> subprocess.Popen[bytes]:
    """``manage.py worker`` (or ``python -m module args``) in a new process group,
    as a process manager runs it."""
    command = ["-m", module] if module else [str(ROOT / "manage.py"), "worker"]
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, *command, *args],
        cwd=ROOT,
        env=child_env("tests.jobs.worker_settings", BRAIN_LOG_LEVEL="INFO"),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    _STARTED.append(proc.pid)
    return proc


def wait_for(condition, what: str, log: Path) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"gave up waiting for {what}:\n{log.read_text()[-3000:]}")


def cluster_processes(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    return [
        psutil.Process(proc.pid),
        *psutil.Process(proc.pid).children(recursive=True),
    ]


def stop_group_and_time(
    proc: subprocess.Popen[bytes],
) -> tuple[float, list[psutil.Process]]:
    """SIGTERM the worker's whole process group; seconds until every process of the
    worker and its cluster is gone, and the processes still alive after the guard."""
    members = cluster_processes(proc)
    started = time.monotonic()
    os.killpg(proc.pid, signal.SIGTERM)
    gone, alive = psutil.wait_procs(members, timeout=WAIT_SECONDS)
    elapsed = time.monotonic() - started
    for p in alive:
        p.kill()
    return elapsed, alive


def test_sigterm_to_the_worker_process_group_stops_it_within_10_seconds(
    restore_migrated_rows: None, transactional_db: None, tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    proc = start_worker(log)
    wait_for(lambda: WorkerHeartbeat.objects.exists(), "the worker's heartbeat", log)
    wait_for(lambda: len(cluster_processes(proc)) >= 4, "the cluster processes", log)

    elapsed, alive = stop_group_and_time(proc)

    assert not alive, f"still running after {WAIT_SECONDS} s: {alive}"
    assert elapsed < STOP_LIMIT, f"stopped in {elapsed:.1f} s"
    assert proc.wait(timeout=WAIT_SECONDS) == 0, log.read_text()[-2000:]
    assert not WorkerHeartbeat.objects.exists(), "a clean stop removes the heartbeat"


def test_a_task_that_does_not_finish_in_time_is_killed_and_requeued(
    restore_migrated_rows: None,
    transactional_db: None,
    test_kinds: dict[str, str],
    real_queue: None,
    tmp_path: Path,
) -> None:
    hold = tmp_path / "hold"
    hold.write_text("hold")
    job, _ = job_enqueue(
        kind="test_items",
        params={"items": 6, "hold_after": 2, "hold_file": str(hold)},
        idempotency_key="stop-test",
    )
    log = tmp_path / "worker.log"
    proc = start_worker(log, "--stop-timeout", "1")
    wait_for(
        lambda: Job.objects.filter(pk=job.pk, checkpoint={"next": 2}).exists(),
        "two committed items",
        log,
    )

    elapsed, alive = stop_group_and_time(proc)

    assert not alive
    assert elapsed < STOP_LIMIT, f"stopped in {elapsed:.1f} s"
    job.refresh_from_db()
    assert job.status == Job.Status.QUEUED, (job.status, log.read_text()[-3000:])
    assert job.checkpoint == {"next": 2}, "the next attempt resumes after item 2"
    assert "re-queued" in log.read_text().lower()


def test_sigterm_to_the_master_alone_requeues_a_stuck_task(
    restore_migrated_rows: None,
    transactional_db: None,
    test_kinds: dict[str, str],
    real_queue: None,
    tmp_path: Path,
) -> None:
    """KillMode=mixed (the deploy/ unit): only the master gets SIGTERM; the task in
    hand does not finish within --stop-timeout, so it is stopped and its job
    re-queued from the checkpoint."""
    hold = tmp_path / "hold"
    hold.write_text("hold")
    job, _ = job_enqueue(
        kind="test_items",
        params={"items": 6, "hold_after": 2, "hold_file": str(hold)},
        idempotency_key="stop-master-test",
    )
    log = tmp_path / "worker.log"
    proc = start_worker(log, "--stop-timeout", "1")
    wait_for(
        lambda: Job.objects.filter(pk=job.pk, checkpoint={"next": 2}).exists(),
        "two committed items",
        log,
    )
    members = cluster_processes(proc)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    gone, alive = psutil.wait_procs(members, timeout=WAIT_SECONDS)
    elapsed = time.monotonic() - started

    assert not alive
    assert elapsed < STOP_LIMIT, f"stopped in {elapsed:.1f} s"
    proc.wait(timeout=WAIT_SECONDS)
    job.refresh_from_db()
    assert job.status == Job.Status.QUEUED, (job.status, log.read_text()[-3000:])
    assert job.checkpoint == {"next": 2}
    assert "re-queued" in log.read_text().lower()


@pytest.mark.parametrize("target", ["self", "group"])
def test_a_stop_signal_while_the_cluster_starts_stops_it_and_requeues(
    restore_migrated_rows: None,
    transactional_db: None,
    test_kinds: dict[str, str],
    real_queue: None,
    tmp_path: Path,
    target: str,
) -> None:
    """SIGTERM that lands while ``Cluster.start()`` still waits for the sentinel (a
    process manager stopping a worker that has just started; seen in CI as a
    master blocked for good, or a held job left ``running``): the worker still
    exits within 10 s, leaves no process behind and no job running."""
    hold = tmp_path / "hold"
    hold.write_text("hold")
    job, _ = job_enqueue(
        kind="test_items",
        params={"items": 6, "hold_after": 2, "hold_file": str(hold)},
        idempotency_key=f"start-race-{target}",
    )
    log = tmp_path / "worker.log"
    started = time.monotonic()
    proc = start_worker(log, target, module="tests.jobs.start_race")
    proc.wait(timeout=WAIT_SECONDS)
    leftover = [p for p in psutil.process_iter(["pid"]) if _in_group(p, proc.pid)]
    elapsed = time.monotonic() - started

    assert not leftover, f"left running: {leftover}\n{log.read_text()[-3000:]}"
    assert "Stopping the cluster (signal SIGTERM)" in log.read_text(), log.read_text()
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
    assert elapsed < STOP_LIMIT + 5, (
        f"stopped in {elapsed:.1f} s (Django start included)"
    )
    job.refresh_from_db()
    assert job.status == Job.Status.QUEUED, (job.status, log.read_text()[-3000:])


def _in_group(proc: psutil.Process, pgid: int) -> bool:
    try:
        return os.getpgid(proc.pid) == pgid
    except (ProcessLookupError, PermissionError):
        return False
