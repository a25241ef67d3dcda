"""Every state change of a ``Job`` (SPEC §7).

- ``job_enqueue`` inserts the row and sends the django-q2 task after commit; an
  idempotency key already held by a live job returns that job instead.
- ``job_claim`` is a compare-and-set ``update()`` that must change exactly one row;
  the winner gets a fresh ``claim_token`` that every later write of the attempt names.
- ``job_heartbeat`` / ``job_checkpoint`` / ``job_progress`` refuse (``JobInterrupted``)
  once the attempt lost its claim (cancelled, or reaped and handed to another worker).
- ``job_succeed`` / ``job_fail`` finish an attempt; failures back off exponentially
  with jitter until ``max_attempts``, then the job is ``dead``.
- ``job_reap_stalled`` re-queues running jobs whose heartbeat is too old (the worker
  died); the next attempt resumes from ``checkpoint``.
- ``job_dispatch_due`` sends tasks for queued jobs whose backoff has passed or whose
  task was lost.

Times are aware UTC datetimes; durations are seconds.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import psutil
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from brain.exceptions import AlreadyExists, InvalidParams, NotFound, ScopeDenied
from brain.services.pages import pages_embed_backlog
from jobs.access import job_authorise, job_visible
from jobs.exceptions import JobInterrupted
from jobs.models import Job, WorkerHeartbeat
from jobs.registry import kind_spec

if TYPE_CHECKING:
    from brain.access import Caller

logger = logging.getLogger(__name__)

TASK_PATH = "jobs.tasks.run_job"
HISTORY_LIMIT = 50


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


def worker_name() -> str:
    """``host:pid`` of this process, stored on claimed jobs for the admin."""
    return worker_name_of(os.getpid())


def worker_name_of(pid: int) -> str:
    """``host:pid`` of process ``pid`` on this host (the form :func:`worker_name`
    stores on claimed jobs)."""
    return f"{socket.gethostname()}:{pid}"


# --- enqueue and dispatch ---


def _existing_job(
    *,
    kind: str,
    params: dict[str, Any],
    key: str | None,
    coalesce: bool,
    caller: Caller | None,
) -> Job | None:
    """The job ``job_enqueue`` returns instead of creating one: the live holder of
    ``key`` (refused when ``caller`` may not see it), else, with ``coalesce``, the
    oldest queued or running job of the same kind and params; None otherwise."""
    if key:
        existing = _live_with_key(key, caller)
        if existing is not None:
            return existing
    if not coalesce:
        return None
    return (
        Job.objects.filter(
            kind=kind, params=params, status__in=[Job.Status.QUEUED, Job.Status.RUNNING]
        )
        .order_by("id")
        .first()
    )


def job_enqueue(
    *,
    kind: str,
    params: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
    max_attempts: int | None = None,
    parent_id: int | None = None,
    run_after: Any = None,
    created_by: str = "system",
    coalesce: bool = False,
    dispatch: bool = True,
    caller: Caller | None = None,
) -> tuple[Job, bool]:
    """Create a queued job and send it to django-q2 after commit (STYLE rule 15).

    Returns ``(job, created)``. With ``idempotency_key`` held by a job that is not
    cancelled or dead, that job is returned with ``created=False`` and nothing is
    sent: running the same job twice changes nothing (SPEC §7). With ``coalesce``, a
    queued or running job of the same kind and params is returned likewise (schedules
    use it so a slow sync never stacks). ``dispatch=False`` leaves sending to the
    caller (the ``run_job`` command runs the job in the foreground instead).

    ``caller`` is whoever asked (an API key, staff; None for the system's own
    jobs): ``jobs.access.job_authorise`` checks it first and may fill in its write
    source, and an idempotency key held by a job it may not see is refused
    (SPEC §8, issue 46).

    Raises ``InvalidParams`` for an unknown kind, non-dict params or a bad
    ``max_attempts``; ``ScopeDenied`` when ``caller`` may not have the job run.
    """
    spec = kind_spec(kind)
    params = dict(params or {})
    if caller is not None:
        params = job_authorise(caller=caller, kind=kind, params=params)
    if max_attempts is not None and max_attempts < 1:
        raise InvalidParams(
            "max_attempts must be at least 1.",
            suggestion="Pass max_attempts >= 1 or omit it for the kind's default.",
            detail={"max_attempts": max_attempts},
        )
    key = (idempotency_key or "").strip() or None
    existing = _existing_job(
        kind=kind, params=params, key=key, coalesce=coalesce, caller=caller
    )
    if existing is not None:
        return existing, False
    try:
        with transaction.atomic():
            job = Job.objects.create(
                kind=kind,
                params=params,
                idempotency_key=key,
                max_attempts=max_attempts or spec.max_attempts,
                parent_id=parent_id,
                run_after=run_after or timezone.now(),
                # Stamped in the same transaction as the row, so the dispatcher never
                # sends a second task for a job whose on-commit send is pending.
                dispatched_at=timezone.now() if dispatch else None,
                created_by=created_by[:200],
            )
    except IntegrityError:
        # A concurrent submitter inserted the same key between the check and here;
        # the database constraint decided, so return its job.
        existing = _live_with_key(key, caller) if key else None
        if existing is None:
            raise
        return existing, False
    if dispatch:
        job_dispatch_on_commit(job_id=job.pk, kind=job.kind)
    return job, True


def embed_pending_enqueue(
    *,
    source_ids: list[str] | None = None,
    created_by: str,
    parent_id: int | None = None,
    dispatch: bool = True,
) -> tuple[Job, bool]:
    """Queue an ``embed_pending`` job for ``source_ids`` (None: every source)
    unless a queued or running one already covers them (SPEC §7, docs/jobs.md).

    A live job without a ``limit`` covers every source when it names none, and its
    ``source_ids`` otherwise; a request for every source is also covered when the
    live jobs' sources hold the whole backlog (``pages_embed_backlog``). Returns
    ``(job, created)``: the covering job with ``created=False``, or the new one.
    Whatever the outcome, two embedders never embed the same chunk
    (``pages_embed_pending`` claims its batches).
    """
    wanted = set(source_ids or [])
    live = [
        job
        for job in Job.objects.filter(
            kind="embed_pending", status__in=[Job.Status.QUEUED, Job.Status.RUNNING]
        ).order_by("id")
        if not (job.params or {}).get("limit")
    ]
    covered: set[str] = set()
    for job in live:
        named = set((job.params or {}).get("source_ids") or [])
        if not named or (wanted and wanted <= named):
            return job, False
        covered |= named
    if live and not wanted and not pages_embed_backlog(exclude_source_ids=covered):
        return live[0], False
    return job_enqueue(
        kind="embed_pending",
        params={"source_ids": sorted(wanted)} if wanted else {},
        coalesce=True,
        parent_id=parent_id,
        created_by=created_by,
        dispatch=dispatch,
    )


def _live_with_key(key: str, caller: Caller | None = None) -> Job | None:
    """The live job holding idempotency ``key``; ``ScopeDenied`` when it is one
    ``caller`` may not see (it is neither returned nor described)."""
    job = (
        Job.objects.filter(idempotency_key=key)
        .exclude(status__in=[Job.Status.CANCELLED, Job.Status.DEAD])
        .first()
    )
    if job is not None and caller is not None:
        if not Job.objects.filter(job_visible(caller), pk=job.pk).exists():
            raise ScopeDenied(
                "This idempotency key is taken by a job this key may not see.",
                suggestion="Choose another idempotency_key (e.g. prefix it with "
                "the key's name).",
                detail={"idempotency_key": key},
            )
    return job


def commitments_extraction_enqueue(*, source_id: str, thread_id: str) -> Job:
    """Enqueue the ``extract_commitments`` job of one thread (SPEC §5.3, §7); a
    queued or running one for the same thread is reused (coalesced). Sent to
    django-q2 after the current transaction commits."""
    job, _created = job_enqueue(
        kind="extract_commitments",
        params={"source_id": source_id, "thread_id": thread_id},
        created_by="loops",
        coalesce=True,
    )
    return job


def job_dispatch_on_commit(*, job_id: int, kind: str) -> None:
    """Send ``jobs.tasks.run_job(job_id)`` to django-q2 once the transaction commits.

    ``dispatched_at`` is stamped first, so a lost send is retried by
    ``job_dispatch_due``; a duplicate send is harmless because the claim is a
    compare-and-set.
    """

    def send() -> None:
        from django_q.tasks import async_task

        Job.objects.filter(pk=job_id).update(dispatched_at=timezone.now())
        async_task(
            TASK_PATH,
            job_id,
            task_name=f"job-{job_id}-{kind}-{uuid.uuid4().hex[:6]}",
            group=kind,
            timeout=kind_spec(kind).timeout,
        )

    transaction.on_commit(send)


def job_dispatch_due(*, redispatch_after_seconds: float | None = None) -> list[int]:
    """Send tasks for queued jobs whose ``run_after`` has passed and that have no
    recent task: never sent, sent before their backoff ended, or sent longer than
    ``redispatch_after_seconds`` ago (default ``BRAIN_JOB_REDISPATCH_SECONDS``, 900 s)
    and still unclaimed. Returns the job ids sent."""
    now = timezone.now()
    wait = redispatch_after_seconds
    if wait is None:
        wait = _setting("BRAIN_JOB_REDISPATCH_SECONDS", 900)
    due = Job.objects.filter(status=Job.Status.QUEUED, run_after__lte=now).filter(
        Q(dispatched_at__isnull=True)
        | Q(dispatched_at__lt=F("run_after"))
        | Q(dispatched_at__lt=now - timedelta(seconds=wait))
    )
    sent = []
    for job_id, kind in due.values_list("id", "kind")[:500]:
        job_dispatch_on_commit(job_id=job_id, kind=kind)
        sent.append(job_id)
    return sent


# --- the running attempt ---


def job_claim(*, job_id: int, worker: str | None = None) -> Job | None:
    """Claim a queued job whose backoff has passed: compare-and-set to ``running``.

    Returns the claimed job (with its new ``claim_token``, ``attempts`` counted) or
    None when another worker won, the job is not queued, or its ``run_after`` is
    still in the future (STYLE rule 14a).
    """
    now = timezone.now()
    token = uuid.uuid4()
    changed = Job.objects.filter(
        Q(run_after__isnull=True) | Q(run_after__lte=now),
        pk=job_id,
        status=Job.Status.QUEUED,
    ).update(
        status=Job.Status.RUNNING,
        claim_token=token,
        attempts=F("attempts") + 1,
        started_at=now,
        heartbeat_at=now,
        finished_at=None,
        worker=(worker or worker_name())[:200],
        updated_at=now,
    )
    if changed != 1:
        return None
    return Job.objects.get(pk=job_id)


def _owned(job_id: int, token: uuid.UUID) -> Any:
    return Job.objects.filter(pk=job_id, status=Job.Status.RUNNING, claim_token=token)


def job_heartbeat(*, job_id: int, token: uuid.UUID) -> None:
    """Record that the attempt holding ``token`` is alive.

    Raises ``JobInterrupted`` when the attempt no longer owns the job (cancelled or
    reaped), which tells the handler to stop.
    """
    now = timezone.now()
    if _owned(job_id, token).update(heartbeat_at=now, updated_at=now) != 1:
        raise JobInterrupted(f"job {job_id} is no longer owned by this attempt")


def job_checkpoint(
    *,
    job_id: int,
    token: uuid.UUID,
    checkpoint: dict[str, Any],
    progress: dict[str, Any] | None = None,
) -> None:
    """Store what a re-queued attempt resumes from (and optionally progress).

    Call it inside the same ``transaction.atomic()`` as the work it describes, so the
    work and the checkpoint commit together and a killed worker never redoes a
    committed item. Raises ``JobInterrupted`` like ``job_heartbeat``.
    """
    now = timezone.now()
    fields: dict[str, Any] = {
        "checkpoint": checkpoint,
        "heartbeat_at": now,
        "updated_at": now,
    }
    if progress is not None:
        fields["progress"] = progress
    if _owned(job_id, token).update(**fields) != 1:
        raise JobInterrupted(f"job {job_id} is no longer owned by this attempt")


def job_progress(
    *,
    job_id: int,
    token: uuid.UUID,
    step: int,
    total: int | None = None,
    message: str = "",
) -> None:
    """Store ``{step, total, message}`` (counts of the kind's own units) and beat the
    heart. Raises ``JobInterrupted`` like ``job_heartbeat``."""
    now = timezone.now()
    progress = {"step": step, "total": total, "message": message[:500]}
    if (
        _owned(job_id, token).update(
            progress=progress, heartbeat_at=now, updated_at=now
        )
        != 1
    ):
        raise JobInterrupted(f"job {job_id} is no longer owned by this attempt")


def _history(job: Job, outcome: str, error: str = "") -> list[dict[str, Any]]:
    entry = {
        "attempt": job.attempts,
        "at": timezone.now().isoformat(),
        "outcome": outcome,
        "worker": job.worker,
    }
    if error:
        entry["error"] = error[:2000]
    return [*(job.history or []), entry][-HISTORY_LIMIT:]


def job_succeed(
    *, job_id: int, token: uuid.UUID, result: Any = None, partial: str = ""
) -> bool:
    """Finish the attempt holding ``token`` as ``succeeded`` with ``result`` (JSON),
    or as ``partial`` when ``partial`` names what did not complete (kept as the
    job's error line).

    Returns False (and changes nothing) when the attempt lost its claim meanwhile.
    """
    with transaction.atomic():
        job = _owned(job_id, token).select_for_update().first()
        if job is None:
            return False
        job.status = Job.Status.PARTIAL if partial else Job.Status.SUCCEEDED
        job.result = result
        job.error = partial
        job.finished_at = timezone.now()
        job.claim_token = None
        job.history = _history(job, "partial" if partial else "succeeded", partial)
        total = (job.progress or {}).get("total")
        if total:
            job.progress = {**job.progress, "step": total}
        job.save(
            update_fields=[
                "status",
                "result",
                "error",
                "finished_at",
                "claim_token",
                "history",
                "progress",
                "updated_at",
            ]
        )
    return True


def backoff_seconds(*, attempts: int) -> float:
    """Delay before the next attempt after ``attempts`` failures (seconds).

    ``BRAIN_JOB_BACKOFF_SECONDS × 2^(attempts−1)``, capped at
    ``BRAIN_JOB_BACKOFF_MAX_SECONDS``, then ± ``BRAIN_JOB_BACKOFF_JITTER`` of itself
    (defaults 30 s, 3600 s, 0.2).
    """
    base = _setting("BRAIN_JOB_BACKOFF_SECONDS", 30)
    cap = _setting("BRAIN_JOB_BACKOFF_MAX_SECONDS", 3600)
    jitter = _setting("BRAIN_JOB_BACKOFF_JITTER", 0.2)
    delay = min(cap, base * 2 ** max(0, attempts - 1))
    return max(0.0, delay * (1 + random.uniform(-jitter, jitter)))  # noqa: S311


def job_fail(
    *, job_id: int, token: uuid.UUID, error: str, permanent: bool = False
) -> Job | None:
    """Finish the attempt holding ``token`` as failed.

    With attempts left and a transient error the job goes back to ``queued`` with
    ``run_after`` = now + ``backoff_seconds``; a permanent error makes it ``failed``;
    no attempts left makes it ``dead``. ``error`` is kept on the row and in
    ``history`` either way. Returns the job, or None if the attempt had lost its claim.
    """
    with transaction.atomic():
        job = _owned(job_id, token).select_for_update().first()
        if job is None:
            return None
        now = timezone.now()
        job.error = error[:10000]
        job.claim_token = None
        if permanent:
            job.status = Job.Status.FAILED
            job.finished_at = now
            outcome = "failed"
        elif job.attempts >= job.max_attempts:
            job.status = Job.Status.DEAD
            job.finished_at = now
            outcome = "dead"
        else:
            job.status = Job.Status.QUEUED
            job.run_after = now + timedelta(
                seconds=backoff_seconds(attempts=job.attempts)
            )
            outcome = "retry"
        job.history = _history(job, outcome, error)
        job.save(
            update_fields=[
                "status",
                "error",
                "claim_token",
                "finished_at",
                "run_after",
                "history",
                "updated_at",
            ]
        )
    return job


# --- people and the reaper ---


def _get(job_id: int, caller: Caller | None = None) -> Job:
    """The job locked for update; ``NotFound`` when it is missing or ``caller`` may
    not see it, ``ScopeDenied`` when it may see but not have run it (SPEC §8)."""
    jobs = Job.objects.select_for_update().filter(pk=job_id)
    if caller is not None:
        jobs = jobs.filter(job_visible(caller))
    job = jobs.first()
    if job is not None and caller is not None:
        job_authorise(caller=caller, kind=job.kind, params=job.params or {})
    if job is None:
        raise NotFound(
            f"Job {job_id} does not exist.",
            suggestion="List jobs with GET /api/jobs to find its id.",
            detail={"job_id": job_id},
        )
    return job


def job_cancel(*, job_id: int, actor: str, caller: Caller | None = None) -> Job:
    """Cancel a queued, running or failed job (a running attempt stops at its next
    heartbeat, checkpoint or progress call). Cancelling releases its idempotency key.

    Raises ``NotFound`` (also for a job ``caller`` may not see), ``ScopeDenied``
    (one it may see but not have run, ``jobs.access``), or ``InvalidParams`` for a
    job that already succeeded, is dead or is cancelled.
    """
    with transaction.atomic():
        job = _get(job_id, caller)
        if job.status in {
            Job.Status.SUCCEEDED,
            Job.Status.PARTIAL,
            Job.Status.DEAD,
            Job.Status.CANCELLED,
        }:
            raise InvalidParams(
                f"Job {job_id} is {job.status}; only queued, running or failed jobs "
                "can be cancelled.",
                suggestion="Retry it instead, or leave it as it is.",
                detail={"job_id": job_id, "status": job.status},
            )
        job.status = Job.Status.CANCELLED
        job.claim_token = None
        job.finished_at = timezone.now()
        job.history = _history(job, f"cancelled by {actor}")
        job.save(
            update_fields=[
                "status",
                "claim_token",
                "finished_at",
                "history",
                "updated_at",
            ]
        )
    return job


def job_retry(*, job_id: int, actor: str, caller: Caller | None = None) -> Job:
    """Queue a failed, partial, dead or cancelled job again, now, from its checkpoint.

    An exhausted job gets one more attempt (``max_attempts`` = attempts + 1), so the
    attempt count stays an honest record. Raises ``NotFound`` and ``ScopeDenied`` as
    ``job_cancel`` does for ``caller``, ``InvalidParams`` for a
    job that is queued, running or succeeded, or ``AlreadyExists`` when a newer live
    job holds the same idempotency key.
    """
    try:
        with transaction.atomic():
            job = _get(job_id, caller)
            if job.status not in {
                Job.Status.FAILED,
                Job.Status.PARTIAL,
                Job.Status.DEAD,
                Job.Status.CANCELLED,
            }:
                raise InvalidParams(
                    f"Job {job_id} is {job.status}; only failed, partial, dead or "
                    "cancelled jobs can be retried.",
                    suggestion="Wait for it to finish, or cancel it first.",
                    detail={"job_id": job_id, "status": job.status},
                )
            job.status = Job.Status.QUEUED
            job.run_after = timezone.now()
            job.finished_at = None
            job.dispatched_at = job.run_after
            job.max_attempts = max(job.max_attempts, job.attempts + 1)
            job.history = _history(job, f"retried by {actor}")
            job.save(
                update_fields=[
                    "status",
                    "run_after",
                    "finished_at",
                    "dispatched_at",
                    "max_attempts",
                    "history",
                    "updated_at",
                ]
            )
            job_dispatch_on_commit(job_id=job.pk, kind=job.kind)
    except IntegrityError as exc:
        raise AlreadyExists(
            f"Another live job holds the idempotency key of job {job_id}.",
            suggestion="Look at the newer job with the same key instead.",
            detail={"job_id": job_id},
        ) from exc
    return job


def job_reap_stalled(
    *,
    stale_after_seconds: float | None = None,
    workers: list[str] | None = None,
    stopped: bool = False,
) -> list[int]:
    """Re-queue running jobs whose worker stopped heartbeating (SPEC §7).

    ``workers`` (``host:pid`` names) limits the reap to jobs claimed by those
    processes; ``manage.py worker`` passes the processes it has just killed, with
    ``stale_after_seconds=0``.

    A job is stalled when ``heartbeat_at`` is older than ``stale_after_seconds``
    (default ``BRAIN_JOB_STALL_SECONDS``, 120 s; a live worker beats every
    ``BRAIN_JOB_HEARTBEAT_SECONDS``). With attempts left it goes back to ``queued``
    (keeping its ``checkpoint``) and is sent again; otherwise it is ``dead``. Rows a
    live transaction holds are skipped (``SKIP LOCKED``). Returns the re-queued ids.

    ``stopped`` says the workers were stopped on purpose (SIGTERM or SIGINT to
    ``manage.py worker``: a deploy, a restart): the interrupted attempt is not a
    failed one, so it is given back (``attempts`` − 1) and the job is re-queued
    whatever its attempts (issue 46: three deploys during a long import left it
    ``dead``).
    """
    stale = stale_after_seconds
    if stale is None:
        stale = _setting("BRAIN_JOB_STALL_SECONDS", 120)
    now = timezone.now()
    requeued: list[int] = []
    with transaction.atomic():
        stalled = (
            Job.objects.select_for_update(skip_locked=True)
            .filter(status=Job.Status.RUNNING)
            .filter(Q(worker__in=workers) if workers is not None else Q())
            .filter(
                Q(heartbeat_at__isnull=True)
                | Q(heartbeat_at__lt=now - timedelta(seconds=stale))
            )
        )
        for job in stalled:
            if _reap_one(job, now=now, stopped=stopped):
                requeued.append(job.pk)
    if requeued:
        logger.warning("Re-queued stalled jobs %s", requeued)
    return requeued


def _reap_one(job: Job, *, now: datetime, stopped: bool) -> bool:
    """Re-queue (True) or bury (False) one stalled running ``job``, in the
    caller's transaction; see ``job_reap_stalled``."""
    if job.heartbeat_at:
        error = (
            f"worker {job.worker or '?'} stopped heartbeating "
            f"(last beat {job.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC)"
        )
    else:
        error = f"worker {job.worker or '?'} never heartbeated"
    outcome = "stalled, re-queued"
    if stopped:
        error = f"worker {job.worker or '?'} was stopped (clean stop)"
        outcome = "stopped with the worker, re-queued (attempt not counted)"
    job.claim_token = None
    job.error = error
    requeue = stopped or job.attempts < job.max_attempts
    if requeue:
        job.history = _history(job, outcome, error)
        if stopped:
            job.attempts = max(0, job.attempts - 1)
        job.status = Job.Status.QUEUED
        job.run_after = job.dispatched_at = now
        job_dispatch_on_commit(job_id=job.pk, kind=job.kind)
    else:
        job.status = Job.Status.DEAD
        job.finished_at = now
        job.history = _history(job, "dead (stalled)", error)
    job.save(
        update_fields=[
            "status",
            "attempts",
            "claim_token",
            "error",
            "finished_at",
            "run_after",
            "dispatched_at",
            "history",
            "updated_at",
        ]
    )
    return requeue


# --- worker liveness (operations: doctor, /api/health) ---


def running_job_workers_gone() -> list[str]:
    """``host:pid`` names of the workers of running jobs on this host whose process
    no longer exists (killed before ``manage.py worker`` saw its pid, e.g. by a group
    SIGTERM while the cluster was starting); ``job_reap_stalled(workers=…)`` takes
    them."""
    host = worker_name_of(0).rsplit(":", 1)[0]
    names = (
        Job.objects.filter(status=Job.Status.RUNNING, worker__startswith=f"{host}:")
        .values_list("worker", flat=True)
        .distinct()
    )
    return [name for name in names if not _process_runs(name.rsplit(":", 1)[1])]


def running_job_workers(workers: list[str]) -> list[str]:
    """Which of ``workers`` (``host:pid`` names) still hold a running job."""
    return list(
        Job.objects.filter(status=Job.Status.RUNNING, worker__in=workers)
        .values_list("worker", flat=True)
        .distinct()
    )


def _process_runs(pid: str) -> bool:
    """Whether process ``pid`` (digits) exists and is not a zombie (a killed worker
    whose parent died stays a zombie until something reaps it)."""
    if not pid.isdigit():
        return True  # not a name this module wrote: leave it alone
    try:
        return psutil.Process(int(pid)).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def worker_beat(*, name: str) -> None:
    """Record that worker ``name`` (``host:pid``) is alive now (upsert)."""
    now = timezone.now()
    updated = WorkerHeartbeat.objects.filter(name=name).update(beat_at=now)
    if not updated:
        WorkerHeartbeat.objects.get_or_create(
            name=name, defaults={"started_at": now, "beat_at": now}
        )


def worker_gone(*, name: str) -> None:
    """Forget worker ``name`` after a clean stop (idempotent)."""
    WorkerHeartbeat.objects.filter(name=name).delete()
