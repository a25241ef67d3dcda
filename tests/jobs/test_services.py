"""Job services and runner (SPEC §7), against test-only kinds and the real database.

django-q2 runs tasks synchronously in tests (``Q_CLUSTER["sync"]``), so a job whose
on-commit callbacks are executed runs in this process.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import OrmQ

from brain.exceptions import AlreadyExists, InvalidParams, NotFound
from brain.models import RawRecord
from jobs import tasks
from jobs.exceptions import JobInterrupted
from jobs.models import Job
from jobs.runner import JobContext, execute_job
from jobs.services import (
    backoff_seconds,
    job_cancel,
    job_checkpoint,
    job_claim,
    job_dispatch_due,
    job_enqueue,
    job_fail,
    job_heartbeat,
    job_reap_stalled,
    job_retry,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("test_kinds")]


def items() -> list[str]:
    return sorted(
        RawRecord.objects.filter(external_id__startswith="item-").values_list(
            "external_id", flat=True
        )
    )


def test_the_same_job_twice_with_one_idempotency_key_does_nothing_the_second_time(
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    with django_capture_on_commit_callbacks(execute=True) as sent:
        job, created = job_enqueue(
            kind="test_items", params={"items": 3}, idempotency_key="import-1"
        )
    assert created and len(sent) == 1
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED
    assert items() == ["item-0", "item-1", "item-2"]

    with django_capture_on_commit_callbacks(execute=True) as sent_again:
        again, created_again = job_enqueue(
            kind="test_items", params={"items": 3}, idempotency_key="import-1"
        )
    assert (again.pk, created_again, sent_again) == (job.pk, False, [])
    assert Job.objects.count() == 1
    assert items() == ["item-0", "item-1", "item-2"]
    assert tasks.run_job(job.pk) == "nothing to claim"
    again.refresh_from_db()
    assert again.attempts == 1


def test_idempotency_key_is_unique_among_live_jobs_only() -> None:
    first, _ = job_enqueue(
        kind="test_items", params={"items": 1}, idempotency_key="k", dispatch=False
    )
    job_cancel(job_id=first.pk, actor="test")
    second, created = job_enqueue(
        kind="test_items", params={"items": 1}, idempotency_key="k", dispatch=False
    )
    assert created and second.pk != first.pk
    with pytest.raises(AlreadyExists, match="Another live job holds the idempotency"):
        job_retry(job_id=first.pk, actor="test")


def test_a_job_is_sent_to_the_queue_only_after_commit(
    django_capture_on_commit_callbacks,
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job, _ = job_enqueue(kind="test_items", params={"items": 1})
        assert OrmQ.objects.count() == 0
    assert len(callbacks) == 1 and OrmQ.objects.count() == 0
    callbacks[0]()
    assert OrmQ.objects.count() == 1
    job.refresh_from_db()
    assert job.dispatched_at is not None and job.status == Job.Status.QUEUED


def test_unknown_kind_is_refused_with_the_allowed_kinds() -> None:
    with pytest.raises(InvalidParams, match="Unknown job kind 'nope'") as exc:
        job_enqueue(kind="nope")
    assert "sync_source" in exc.value.detail["allowed"]
    assert "dream" in exc.value.detail["allowed"]


def test_claim_is_compare_and_set_so_only_one_worker_wins() -> None:
    job, _ = job_enqueue(kind="test_items", params={"items": 1}, dispatch=False)
    winner = job_claim(job_id=job.pk, worker="a")
    assert winner is not None and winner.worker == "a" and winner.attempts == 1
    assert job_claim(job_id=job.pk, worker="b") is None


def test_a_job_is_not_claimed_before_its_backoff_ends() -> None:
    later = timezone.now() + timedelta(minutes=5)
    job, _ = job_enqueue(
        kind="test_items", params={"items": 1}, run_after=later, dispatch=False
    )
    assert job_claim(job_id=job.pk) is None


def test_retries_back_off_exponentially_with_jitter(settings) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_JOB_BACKOFF_SECONDS = 10
    settings.BRAIN_JOB_BACKOFF_JITTER = 0.2
    settings.BRAIN_JOB_BACKOFF_MAX_SECONDS = 3600
    for attempts, base in [(1, 10), (2, 20), (3, 40), (4, 80)]:
        delays = {backoff_seconds(attempts=attempts) for _ in range(20)}
        assert all(base * 0.8 <= d <= base * 1.2 for d in delays)
        assert len(delays) > 1, "jitter spreads retries"
    settings.BRAIN_JOB_BACKOFF_SECONDS = 1000
    assert backoff_seconds(attempts=10) <= 3600 * 1.2


def test_a_transient_failure_is_retried_after_backoff_then_dead_after_max_attempts(
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        job, _ = job_enqueue(
            kind="test_flaky", params={"fail_times": 5}, max_attempts=2
        )
    job.refresh_from_db()
    assert job.status == Job.Status.QUEUED
    assert job.attempts == 1
    assert "ConnectionError: transient failure on attempt 1" in job.error
    assert job.run_after > timezone.now()
    assert job_claim(job_id=job.pk) is None, "backoff not over"

    Job.objects.filter(pk=job.pk).update(run_after=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        assert job_dispatch_due() == [job.pk]
    job.refresh_from_db()
    assert job.status == Job.Status.DEAD
    assert job.attempts == 2
    assert "attempt 2" in job.error
    assert [h["outcome"] for h in job.history] == ["retry", "dead"]


def test_a_flaky_job_succeeds_on_a_later_attempt() -> None:
    job, _ = job_enqueue(kind="test_flaky", params={"fail_times": 1}, dispatch=False)
    execute_job(job_id=job.pk)
    Job.objects.filter(pk=job.pk).update(run_after=timezone.now())
    done = execute_job(job_id=job.pk)
    assert done is not None and done.status == Job.Status.SUCCEEDED
    assert done.result == {"attempt": 2}


def test_a_permanent_error_fails_the_job_without_retrying() -> None:
    job, _ = job_enqueue(kind="test_broken", dispatch=False)
    done = execute_job(job_id=job.pk)
    assert done is not None and done.status == Job.Status.FAILED
    assert done.attempts == 1
    assert "PermanentJobError: the mailbox file is not a mailbox" in done.error


def test_a_missing_service_fails_the_job_permanently(settings) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_JOB_HANDLERS = {"test_missing": "no.such.module.handler"}
    job, _ = job_enqueue(kind="test_missing", dispatch=False)
    done = execute_job(job_id=job.pk)
    assert done is not None and done.status == Job.Status.FAILED
    assert "ImportError" in done.error or "ModuleNotFoundError" in done.error


def test_reaper_requeues_a_stalled_job_and_keeps_its_checkpoint() -> None:
    job, _ = job_enqueue(kind="test_items", params={"items": 4}, dispatch=False)
    claimed = job_claim(job_id=job.pk)
    assert claimed is not None
    job_checkpoint(job_id=job.pk, token=claimed.claim_token, checkpoint={"next": 2})
    Job.objects.filter(pk=job.pk).update(
        heartbeat_at=timezone.now() - timedelta(minutes=10)
    )
    assert job_reap_stalled(stale_after_seconds=120) == [job.pk]
    job.refresh_from_db()
    assert (job.status, job.checkpoint, job.claim_token) == (
        "queued",
        {"next": 2},
        None,
    )
    with pytest.raises(JobInterrupted):
        job_heartbeat(job_id=job.pk, token=claimed.claim_token)
    # The next attempt resumes from item 2.
    RawRecord.objects.filter(external_id__startswith="item-").delete()
    done = execute_job(job_id=job.pk)
    assert done is not None and done.result["resumed_from"] == 2
    assert items() == ["item-2", "item-3"]


def test_reaper_leaves_a_job_with_a_fresh_heartbeat_alone() -> None:
    job, _ = job_enqueue(kind="test_items", params={"items": 1}, dispatch=False)
    job_claim(job_id=job.pk)
    assert job_reap_stalled(stale_after_seconds=120) == []
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING


def test_reaper_marks_a_job_dead_when_its_attempts_are_used_up() -> None:
    job, _ = job_enqueue(
        kind="test_items", params={"items": 1}, max_attempts=1, dispatch=False
    )
    job_claim(job_id=job.pk)
    Job.objects.filter(pk=job.pk).update(
        heartbeat_at=timezone.now() - timedelta(hours=1)
    )
    assert job_reap_stalled(stale_after_seconds=60) == []
    job.refresh_from_db()
    assert job.status == Job.Status.DEAD
    assert "stopped heartbeating" in job.error


def test_cancel_stops_a_running_job_at_its_next_checkpoint() -> None:
    job, _ = job_enqueue(kind="test_items", params={"items": 3}, dispatch=False)
    claimed = job_claim(job_id=job.pk)
    assert claimed is not None
    ctx = JobContext(claimed)
    ctx.checkpoint({"next": 1}, step=1, total=3)
    job_cancel(job_id=job.pk, actor="alice")
    with pytest.raises(JobInterrupted):
        ctx.checkpoint({"next": 2}, step=2, total=3)
    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED
    assert job.checkpoint == {"next": 1}
    assert job.history[-1]["outcome"] == "cancelled by alice"


def test_cancel_refuses_a_finished_job_and_unknown_ids() -> None:
    job, _ = job_enqueue(kind="test_items", params={"items": 1}, dispatch=False)
    execute_job(job_id=job.pk)
    with pytest.raises(InvalidParams, match="is succeeded; only queued, running"):
        job_cancel(job_id=job.pk, actor="test")
    with pytest.raises(NotFound, match="Job 987654 does not exist"):
        job_cancel(job_id=987654, actor="test")


def test_retry_gives_a_dead_job_one_more_attempt_from_its_checkpoint(
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    job, _ = job_enqueue(
        kind="test_flaky", params={"fail_times": 1}, max_attempts=1, dispatch=False
    )
    execute_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.DEAD
    with django_capture_on_commit_callbacks(execute=True):
        job_retry(job_id=job.pk, actor="admin")
    job.refresh_from_db()
    assert (job.status, job.attempts, job.max_attempts) == ("succeeded", 2, 2)
    with pytest.raises(InvalidParams, match="only failed, partial, dead or cancelled"):
        job_retry(job_id=job.pk, actor="admin")


def test_a_lost_claim_cannot_finish_the_job() -> None:
    job, _ = job_enqueue(kind="test_items", params={"items": 1}, dispatch=False)
    claimed = job_claim(job_id=job.pk)
    assert claimed is not None
    Job.objects.filter(pk=job.pk).update(
        heartbeat_at=timezone.now() - timedelta(hours=1)
    )
    job_reap_stalled(stale_after_seconds=1)
    assert job_fail(job_id=job.pk, token=claimed.claim_token, error="late") is None
    job.refresh_from_db()
    assert job.status == Job.Status.QUEUED and job.error != "late"


def test_schedules_never_stack_a_second_live_job_of_the_same_params() -> None:
    first = tasks.enqueue_kind("test_items", items=2)
    second = tasks.enqueue_kind("test_items", items=2)
    assert first.endswith(" queued")
    assert "already" in second
    assert Job.objects.filter(kind="test_items").count() == 1


def test_a_requeue_after_a_clean_stop_is_not_a_failed_attempt() -> None:
    """Three deploys (SIGTERM to ``manage.py worker``) during one job with three
    attempts: each stop re-queues it through the worker's own stop path without
    counting the attempt, so it is queued, not dead (issue 46). The stop path is
    called directly: no process is killed."""
    import os

    from jobs.management.commands.worker import Command
    from jobs.services import worker_name_of

    job, _ = job_enqueue(
        kind="test_items", params={"items": 1}, max_attempts=3, dispatch=False
    )
    me = os.getpid()
    for _deploy in range(3):
        assert job_claim(job_id=job.pk, worker=worker_name_of(me)) is not None
        Command()._requeue({me}, killed=True, stopped=True)
        job.refresh_from_db()
        assert (job.status, job.attempts) == (Job.Status.QUEUED, 0)
    assert [h["outcome"] for h in job.history] == [
        "stopped with the worker, re-queued (attempt not counted)"
    ] * 3
    done = execute_job(job_id=job.pk)
    assert done is not None and done.status == Job.Status.SUCCEEDED
    assert done.attempts == 1


def test_a_worker_that_dies_without_a_stop_signal_still_uses_an_attempt() -> None:
    import os

    from jobs.management.commands.worker import Command
    from jobs.services import worker_name_of

    job, _ = job_enqueue(
        kind="test_items", params={"items": 1}, max_attempts=1, dispatch=False
    )
    job_claim(job_id=job.pk, worker=worker_name_of(os.getpid()))
    Command()._requeue({os.getpid()}, killed=True, stopped=False)
    job.refresh_from_db()
    assert (job.status, job.attempts) == (Job.Status.DEAD, 1)
