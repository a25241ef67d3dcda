"""Durable jobs (SPEC §7): one ``Job`` row per unit of work, executed by django-q2.

The row is the source of truth; the django-q2 task is only a doorbell that names the
row's id (``jobs.tasks.run_job``). Every state change goes through
``jobs.services``: claims are compare-and-set updates, a worker proves it still owns a
running job with its ``claim_token``, and the reaper re-queues jobs whose worker
stopped heartbeating.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from brain.models import TimeStampedModel


class Job(TimeStampedModel):
    """One durable unit of work: a sync, an extraction, a sweep, an embed, dream.

    Statuses (SPEC §7):
    - ``queued``: waiting for a worker; ``run_after`` holds a retry's backoff.
    - ``running``: claimed by ``worker`` (holding ``claim_token``), heartbeating.
    - ``succeeded``: done, ``result`` filled.
    - ``partial``: done, ``result`` filled, but part of the work did not complete
      (``error`` says which: a dream phase that failed or warned).
    - ``failed``: stopped on a permanent error; an admin may retry it.
    - ``cancelled``: stopped by a person or a caller.
    - ``dead``: attempts exhausted (errors or stalled workers).

    ``idempotency_key`` is unique among jobs that are not cancelled or dead, so the
    same key submitted twice returns the first job (SPEC §7 "running the same job
    twice changes nothing the second time").
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        PARTIAL = "partial", "Partial"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"
        DEAD = "dead", "Dead"

    kind = models.CharField(max_length=64, db_index=True)
    params = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True
    )
    attempts = models.PositiveIntegerField(
        default=0, help_text="Attempts started so far (claims)."
    )
    max_attempts = models.PositiveIntegerField(default=3)
    # NULL, not "", means "no key": the partial unique constraint skips NULLs.
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    checkpoint = models.JSONField(
        default=dict, blank=True, help_text="What a re-queued attempt resumes from."
    )
    progress = models.JSONField(
        default=dict, blank=True, help_text="{step, total, message}"
    )
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, help_text="The last attempt's error.")
    history = models.JSONField(
        default=list,
        blank=True,
        help_text="One entry per attempt outcome: {attempt, at, outcome, error}.",
    )
    run_after = models.DateTimeField(
        null=True, blank=True, help_text="Not claimed before this time (backoff)."
    )
    dispatched_at = models.DateTimeField(
        null=True, blank=True, help_text="When the django-q2 task was last sent."
    )
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    claim_token = models.UUIDField(null=True, blank=True, editable=False)
    worker = models.CharField(max_length=200, blank=True, help_text="host:pid")
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="children",
    )
    created_by = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["idempotency_key"],
                condition=Q(idempotency_key__isnull=False)
                & ~Q(status__in=["cancelled", "dead"]),
                name="%(app_label)s_%(class)s_unique_live_idempotency_key",
            ),
            models.CheckConstraint(
                condition=Q(max_attempts__gte=1),
                name="%(app_label)s_%(class)s_max_attempts_positive",
            ),
            models.CheckConstraint(
                condition=~Q(status="running") | Q(claim_token__isnull=False),
                name="%(app_label)s_%(class)s_running_has_claim",
            ),
        ]
        indexes = [
            # job_dispatch_due: queued jobs whose backoff has passed.
            models.Index(
                fields=["run_after"],
                condition=Q(status="queued"),
                name="jobs_job_queued_run_after",
            ),
            # job_reap_stalled: running jobs ordered by their last heartbeat.
            models.Index(
                fields=["heartbeat_at"],
                condition=Q(status="running"),
                name="jobs_job_running_heartbeat",
            ),
            models.Index(fields=["kind", "status"]),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.kind} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        """True once the job will not run again without a retry."""
        return self.status in {
            self.Status.SUCCEEDED,
            self.Status.PARTIAL,
            self.Status.FAILED,
            self.Status.CANCELLED,
            self.Status.DEAD,
        }

    @property
    def progress_percent(self) -> int | None:
        """``step / total`` as a whole percentage, or None without a total."""
        total = (self.progress or {}).get("total")
        step = (self.progress or {}).get("step") or 0
        if not total:
            return None
        return max(0, min(100, int(100 * step / total)))


class WorkerHeartbeat(models.Model):
    """One row per running ``manage.py worker`` (its ``host:pid``), beaten every
    ``BRAIN_WORKER_BEAT_SECONDS`` (15 s) while its django-q2 cluster is alive.

    ``manage.py doctor`` and ``/api/health`` read it to say whether any worker is
    alive (a queued job with no live worker never runs). A clean stop deletes the
    row; a killed worker's row simply ages.
    """

    name = models.CharField(max_length=200, unique=True, help_text="host:pid")
    started_at = models.DateTimeField(default=timezone.now)
    beat_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-beat_at"]

    def __str__(self) -> str:
        return f"worker {self.name}"
