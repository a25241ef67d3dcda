"""Reads of the jobs app."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from django.utils import timezone

from brain.exceptions import NotFound
from jobs.access import job_visible
from jobs.models import Job, WorkerHeartbeat

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from brain.access import Caller


def job_list(
    *, kind: str | None = None, status: str | None = None, caller: Caller | None = None
) -> QuerySet[Job]:
    """Jobs newest first, optionally filtered by kind and status; only those
    ``caller`` may see when given (``jobs.access.job_visible``, SPEC §8)."""
    qs = Job.objects.all()
    if caller is not None:
        qs = qs.filter(job_visible(caller))
    if kind:
        qs = qs.filter(kind=kind)
    if status:
        qs = qs.filter(status=status)
    return qs.order_by("-created_at", "-id")


def job_get(*, job_id: int, caller: Caller | None = None) -> Job:
    """One job; raises ``NotFound`` when it is missing or, with ``caller``, one the
    caller may not see (the same answer: nothing revealed, SPEC §8)."""
    jobs = Job.objects.filter(pk=job_id)
    if caller is not None:
        jobs = jobs.filter(job_visible(caller))
    job = jobs.first()
    if job is None:
        raise NotFound(
            f"Job {job_id} does not exist.",
            suggestion="List jobs with GET /api/jobs to find its id.",
            detail={"job_id": job_id},
        )
    return job


# A worker beats every 15 s; four missed beats and it counts as gone.
WORKER_ALIVE_SECONDS = 60


def worker_alive() -> bool:
    """True when some ``manage.py worker`` beat within ``WORKER_ALIVE_SECONDS``: a
    queued job with no live worker never runs (SPEC §7)."""
    return worker_heartbeats(alive_within_seconds=WORKER_ALIVE_SECONDS).exists()


def worker_heartbeats(*, alive_within_seconds: float) -> QuerySet[WorkerHeartbeat]:
    """Workers whose last beat is at most ``alive_within_seconds`` old, newest
    first (``manage.py worker`` beats every ``BRAIN_WORKER_BEAT_SECONDS``)."""
    since = timezone.now() - timedelta(seconds=alive_within_seconds)
    return WorkerHeartbeat.objects.filter(beat_at__gte=since)


def job_outcome(job: Job) -> str:
    """The status a person should read: the status's label, except that a job
    recorded as succeeded whose own result says ``partial`` or ``failed`` (rows from
    before the ``partial`` status, SPEC §10 dream reports) reads "Succeeded,
    partial" rather than a plain success."""
    label = job.get_status_display()
    inner = (job.result or {}).get("status") if isinstance(job.result, dict) else None
    if job.status == Job.Status.SUCCEEDED and inner in ("partial", "failed"):
        return f"{label}, {inner}"
    return label
