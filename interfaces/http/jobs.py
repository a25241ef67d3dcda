"""HTTP endpoints of the jobs app: list, get, enqueue, cancel, retry (SPEC §7).

Every operation needs a key with the ``admin`` scope. (No postponed annotations here:
ninja resolves ``Query[...]`` parameters at import.)
"""

from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Path, Query, Router, Status
from ninja.pagination import paginate

from brain.access import Caller
from interfaces.http.auth import request_caller
from interfaces.http.schemas import MAX_ID, BoundedPagination
from interfaces.http.schemas.jobs import JobEnqueueOut, JobFilter, JobIn, JobOut
from jobs.models import Job
from jobs.selectors import job_get, job_list
from jobs.services import job_cancel, job_enqueue, job_retry

# A job id as OpenAPI states it: a positive PostgreSQL bigint.
JobId = Annotated[int, Path(ge=1, le=MAX_ID)]

router = Router(tags=["jobs"])


def _admin(request: HttpRequest) -> Caller:
    caller = request_caller(request)
    caller.require("admin")
    return caller


@router.get("/jobs", response=list[JobOut])
@paginate(BoundedPagination)
def list_jobs(request: HttpRequest, filters: Query[JobFilter]) -> Any:
    """Jobs newest first; filter by ``kind`` and ``status``. A key lists only the
    jobs on its write source and those of kinds that touch no source (SPEC §8)."""
    caller = _admin(request)
    return job_list(kind=filters.kind, status=filters.status, caller=caller)


@router.get("/jobs/{job_id}", response=JobOut)
def get_job(request: HttpRequest, job_id: JobId) -> Job:
    """One job with its progress, checkpoint, result and last error (``not_found``
    for another source's job, as for a missing one)."""
    return job_get(job_id=job_id, caller=_admin(request))


@router.post("/jobs", response={200: JobEnqueueOut, 201: JobEnqueueOut})
def enqueue_job(request: HttpRequest, payload: JobIn) -> Status:
    """Queue a job; with an ``idempotency_key`` already used by a live job, that job
    is returned (200, ``created: false``) and nothing runs twice.

    A key's job runs only on its write source (``source_id`` / ``source_ids``
    default to it; another source is ``scope_denied``, and no job is stored); kinds
    that touch every source (``dream``) or read a server folder (``import_mail``,
    ``import_markdown``) and path params (``backup``'s ``directory``, ``keep``) are
    for the CLI and staff (``jobs.access``, SPEC §8)."""
    caller = _admin(request)
    job, created = job_enqueue(
        kind=payload.kind,
        params=payload.params,
        idempotency_key=payload.idempotency_key,
        max_attempts=payload.max_attempts,
        created_by=str(caller.actor),
        caller=caller,
    )
    return Status(201 if created else 200, {"created": created, "job": job})


@router.post("/jobs/{job_id}/cancel", response=JobOut)
def cancel_job(request: HttpRequest, job_id: JobId) -> Job:
    """Cancel a queued, running or failed job (one the key could have queued)."""
    caller = _admin(request)
    return job_cancel(job_id=job_id, actor=str(caller.actor), caller=caller)


@router.post("/jobs/{job_id}/retry", response=JobOut)
def retry_job(request: HttpRequest, job_id: JobId) -> Job:
    """Queue a failed, dead or cancelled job again (one the key could have queued)."""
    caller = _admin(request)
    return job_retry(job_id=job_id, actor=str(caller.actor), caller=caller)
