"""HTTP endpoints of the jobs app: list, get, enqueue, cancel, retry (SPEC §7).

Every operation needs a key with the ``admin`` scope. (No postponed annotations here:
ninja resolves ``Query[...]`` parameters at import.)
"""

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Status
from ninja.pagination import paginate

from interfaces.http.auth import request_caller
from interfaces.http.schemas.jobs import JobEnqueueOut, JobFilter, JobIn, JobOut
from jobs.models import Job
from jobs.selectors import job_get, job_list
from jobs.services import job_cancel, job_enqueue, job_retry

router = Router(tags=["jobs"])


def _admin(request: HttpRequest) -> str:
    caller = request_caller(request)
    caller.require("admin")
    return str(caller.actor)


@router.get("/jobs", response=list[JobOut])
@paginate
def list_jobs(request: HttpRequest, filters: Query[JobFilter]) -> Any:
    """Jobs newest first; filter by ``kind`` and ``status``."""
    _admin(request)
    return job_list(kind=filters.kind, status=filters.status)


@router.get("/jobs/{job_id}", response=JobOut)
def get_job(request: HttpRequest, job_id: int) -> Job:
    """One job with its progress, checkpoint, result and last error."""
    _admin(request)
    return job_get(job_id=job_id)


@router.post("/jobs", response={200: JobEnqueueOut, 201: JobEnqueueOut})
def enqueue_job(request: HttpRequest, payload: JobIn) -> Status:
    """Queue a job; with an ``idempotency_key`` already used by a live job, that job
    is returned (200, ``created: false``) and nothing runs twice."""
    actor = _admin(request)
    job, created = job_enqueue(
        kind=payload.kind,
        params=payload.params,
        idempotency_key=payload.idempotency_key,
        max_attempts=payload.max_attempts,
        created_by=actor,
    )
    return Status(201 if created else 200, {"created": created, "job": job})


@router.post("/jobs/{job_id}/cancel", response=JobOut)
def cancel_job(request: HttpRequest, job_id: int) -> Job:
    """Cancel a queued, running or failed job."""
    return job_cancel(job_id=job_id, actor=_admin(request))


@router.post("/jobs/{job_id}/retry", response=JobOut)
def retry_job(request: HttpRequest, job_id: int) -> Job:
    """Queue a failed, dead or cancelled job again."""
    return job_retry(job_id=job_id, actor=_admin(request))
