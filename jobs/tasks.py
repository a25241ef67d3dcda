"""django-q2 task functions: thin adapters taking primitive ids (STYLE rule 13).

Each re-fetches by id, returns quietly when there is nothing to do, and calls one
service. Schedules (``manage.py setup_schedules``) name these functions.
"""

from __future__ import annotations

from typing import Any

from connectors.services import sync_runs_reap
from jobs import runner, services


def run_job(job_id: int) -> str:
    """Run one attempt of job ``job_id``; a job already claimed or gone is a no-op."""
    job = runner.execute_job(job_id=job_id)
    return "nothing to claim" if job is None else f"job {job_id}: {job.status}"


def enqueue_kind(kind: str, **params: Any) -> str:
    """Schedule entry point: queue ``kind`` with ``params`` unless the same job is
    already queued or running (coalesced, so slow runs never stack)."""
    job, created = services.job_enqueue(
        kind=kind, params=params, coalesce=True, created_by="schedule"
    )
    return f"job {job.pk} {'queued' if created else 'already ' + job.status}"


def reap_and_dispatch() -> str:
    """Every minute: re-queue stalled jobs, close sync runs of killed imports
    (SPEC §6), then send tasks for due queued jobs."""
    reaped = services.job_reap_stalled()
    runs = sync_runs_reap()
    sent = services.job_dispatch_due()
    return f"reaped {len(reaped)}, closed {runs} dead sync runs, dispatched {len(sent)}"
