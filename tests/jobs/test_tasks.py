"""The django-q2 task functions are thin and idempotent (STYLE rules 13, 14)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from brain.models import RawRecord
from jobs import tasks
from jobs.models import Job
from jobs.services import job_claim, job_enqueue

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("test_kinds")]


def test_run_job_twice_is_noop() -> None:
    job, _ = job_enqueue(kind="test_items", params={"items": 2}, dispatch=False)
    assert tasks.run_job(job.pk) == f"job {job.pk}: succeeded"
    assert tasks.run_job(job.pk) == "nothing to claim"
    job.refresh_from_db()
    assert job.attempts == 1
    assert RawRecord.objects.filter(external_id__startswith="item-").count() == 2


def test_run_job_on_a_missing_job_returns_quietly() -> None:
    assert tasks.run_job(123456789) == "nothing to claim"


def test_enqueue_kind_twice_is_noop() -> None:
    first = tasks.enqueue_kind("test_items", items=2)
    second = tasks.enqueue_kind("test_items", items=2)
    job = Job.objects.get(kind="test_items")
    assert first == f"job {job.pk} queued"
    assert second == f"job {job.pk} already queued"
    assert job.created_by == "schedule"


def test_reap_and_dispatch_twice_is_noop(
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    job, _ = job_enqueue(kind="test_items", params={"items": 1}, dispatch=False)
    job_claim(job_id=job.pk)
    Job.objects.filter(pk=job.pk).update(
        heartbeat_at=timezone.now() - timedelta(hours=1)
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert (
            tasks.reap_and_dispatch()
            == "reaped 1, closed 0 dead sync runs, dispatched 0"
        )
    job.refresh_from_db()
    assert (job.status, job.attempts) == (Job.Status.SUCCEEDED, 2)
    with django_capture_on_commit_callbacks(execute=True):
        assert (
            tasks.reap_and_dispatch()
            == "reaped 0, closed 0 dead sync runs, dispatched 0"
        )
