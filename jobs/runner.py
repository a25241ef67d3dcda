"""Runs one job attempt: claim, call the kind's handler, record the outcome (SPEC §7).

``execute_job`` is what the django-q2 task (``jobs.tasks.run_job``) and the
``run_job`` command call. While the handler runs, a background thread beats the
job's heart every ``BRAIN_JOB_HEARTBEAT_SECONDS`` (10 s) on its own connection, so a
long step never looks stalled; when the process dies (SIGKILL, OOM, a django-q2
timeout) the beats stop and ``job_reap_stalled`` re-queues the job from its checkpoint.
"""

from __future__ import annotations

import json
import logging
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction

from brain.exceptions import InvalidParams
from jobs import services
from jobs.exceptions import JobInterrupted
from jobs.models import Job
from jobs.registry import handler_for

if TYPE_CHECKING:
    import uuid

logger = logging.getLogger(__name__)

ProgressListener = Callable[[int, "int | None", str], None]


@dataclass(frozen=True)
class PartialResult:
    """What a handler returns when it finished but part of its work did not (a dream
    phase failed or warned): the job ends ``partial`` (SPEC §7) with ``result`` as
    its result and ``reason`` as its error line, instead of ``succeeded``."""

    result: Any
    reason: str


class JobContext:
    """What a handler gets besides the job row.

    - ``resume``: the checkpoint dict of the previous attempt (empty on a first run).
    - ``checkpoint(data, step=, total=, message=)``: store what to resume from; call it
      inside the ``transaction.atomic()`` of the work it describes.
    - ``progress(step, total, message)``: counts in the kind's own units.
    - ``heartbeat()``, ``check_cancelled()``: raise ``JobInterrupted`` once the job
      was cancelled or handed to another worker.
    """

    def __init__(
        self, job: Job, *, on_progress: ProgressListener | None = None
    ) -> None:
        self.job_id: int = job.pk
        self.token: uuid.UUID = job.claim_token  # type: ignore[assignment]
        self.attempt: int = job.attempts
        self.resume: dict[str, Any] = dict(job.checkpoint or {})
        self._on_progress = on_progress
        self._interrupted = threading.Event()

    def heartbeat(self) -> None:
        """Record liveness; raises ``JobInterrupted`` when the job was taken away."""
        self.check_cancelled()
        try:
            services.job_heartbeat(job_id=self.job_id, token=self.token)
        except JobInterrupted:
            self._interrupted.set()
            raise

    def check_cancelled(self) -> None:
        """Raise ``JobInterrupted`` if the heartbeat thread saw the job taken away."""
        if self._interrupted.is_set():
            raise JobInterrupted(f"job {self.job_id} was cancelled or reassigned")

    def checkpoint(
        self,
        data: dict[str, Any],
        *,
        step: int | None = None,
        total: int | None = None,
        message: str = "",
    ) -> None:
        """Store ``data`` as the resume point (and progress when ``step`` is given)."""
        self.check_cancelled()
        progress = None
        if step is not None:
            progress = {"step": step, "total": total, "message": message[:500]}
        try:
            services.job_checkpoint(
                job_id=self.job_id,
                token=self.token,
                checkpoint=data,
                progress=progress,
            )
        except JobInterrupted:
            self._interrupted.set()
            raise
        # ``resume`` stays the previous attempt's checkpoint (empty on a first run).
        if step is not None:
            self._notify(step, total, message)

    def progress(self, step: int, total: int | None = None, message: str = "") -> None:
        """Store ``{step, total, message}`` and beat the heart."""
        self.check_cancelled()
        try:
            services.job_progress(
                job_id=self.job_id,
                token=self.token,
                step=step,
                total=total,
                message=message,
            )
        except JobInterrupted:
            self._interrupted.set()
            raise
        self._notify(step, total, message)

    def _notify(self, step: int, total: int | None, message: str) -> None:
        if self._on_progress is not None:
            self._on_progress(step, total, message)


class _HeartbeatThread(threading.Thread):
    """Beats the job's heart on its own database connection until stopped."""

    def __init__(self, ctx: JobContext, interval: float) -> None:
        super().__init__(name=f"job-{ctx.job_id}-heartbeat", daemon=True)
        self.ctx = ctx
        self.interval = interval
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopped.wait(self.interval):
                try:
                    services.job_heartbeat(job_id=self.ctx.job_id, token=self.ctx.token)
                except JobInterrupted:
                    self.ctx._interrupted.set()
                    return
                except Exception:  # a flaky beat must not kill the job
                    logger.exception("Heartbeat of job %s failed", self.ctx.job_id)
        finally:
            connection.close()


def _json_safe(value: Any) -> Any:
    """Round-trip through JSON (dates and decimals become strings)."""
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder, default=str))


def _is_permanent(exc: BaseException) -> bool:
    return bool(getattr(exc, "permanent", False)) or isinstance(exc, InvalidParams)


def execute_job(
    *,
    job_id: int,
    worker: str | None = None,
    on_progress: ProgressListener | None = None,
) -> Job | None:
    """Claim job ``job_id`` and run one attempt of it.

    Returns the job row after the attempt, or None when there was nothing to claim
    (gone, not queued, backoff not over, or another worker won): a redelivered task
    is a no-op (STYLE rule 14). A handler returning ``PartialResult`` ends the job
    ``partial``, anything else ``succeeded``. Handler errors never propagate: they are recorded
    with ``job_fail`` (retry with backoff, or ``failed``/``dead``). A
    ``JobInterrupted`` (cancelled or reassigned) ends the attempt without writing.
    """
    job = services.job_claim(job_id=job_id, worker=worker)
    if job is None:
        return None
    ctx = JobContext(job, on_progress=on_progress)
    interval = float(getattr(settings, "BRAIN_JOB_HEARTBEAT_SECONDS", 10))
    beat: _HeartbeatThread | None = None
    # Inside an outer transaction (tests, or a caller's atomic block) the thread's own
    # connection could not see the claimed row, so the handler's own calls beat alone.
    if interval > 0 and not connection.in_atomic_block:
        beat = _HeartbeatThread(ctx, interval)
        beat.start()
    try:
        handler = handler_for(job.kind)
        result = handler(job, ctx)
    except JobInterrupted:
        logger.info("Job %s stopped: cancelled or reassigned", job_id)
    except Exception as exc:
        if transaction.get_connection().needs_rollback:
            # Outer atomic block poisoned by the handler: nothing can be recorded here.
            raise
        logger.exception("Job %s (%s) failed", job_id, job.kind)
        error = f"{type(exc).__name__}: {exc}\n\n{traceback.format_exc(limit=8)}"
        services.job_fail(
            job_id=job_id,
            token=ctx.token,
            error=error,
            permanent=_is_permanent(exc),
        )
    else:
        if isinstance(result, PartialResult):
            services.job_succeed(
                job_id=job_id,
                token=ctx.token,
                result=_json_safe(result.result),
                partial=result.reason,
            )
        else:
            services.job_succeed(
                job_id=job_id, token=ctx.token, result=_json_safe(result)
            )
    finally:
        if beat is not None:
            beat.stopped.set()
            beat.join(timeout=interval + 5)
    return Job.objects.filter(pk=job_id).first()
