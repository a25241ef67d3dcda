"""Models of the loops app (SPEC §5): open loops, mutes, the append-only loop audit,
grace holds for the sweep, and the ledger of commitment extractions (idempotency key
per thread revision plus metered LLM spend).

Rows change only through ``loops.services``; uniqueness and status rules are database
constraints.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from brain.models import Fact, Page, Source, TimeStampedModel


class LoopType(models.TextChoices):
    """What kind of unfinished business a loop is (SPEC §5)."""

    COMMITMENT_OWED_BY_ME = "commitment_owed_by_me", "I promised"
    COMMITMENT_OWED_TO_ME = "commitment_owed_to_me", "Promised to me"
    UNANSWERED_INBOUND = "unanswered_inbound", "Reply owed by me"
    UNANSWERED_OUTBOUND = "unanswered_outbound", "Waiting on a reply"
    DECISION_PENDING = "decision_pending", "Decision pending"


class LoopStatus(models.TextChoices):
    """Lifecycle of a loop; loops close by state change, never deletion (SPEC §5)."""

    OPEN = "open", "Open"
    DONE = "done", "Done"
    DROPPED = "dropped", "Dropped"
    STALE = "stale", "Stale"


class Detector(models.TextChoices):
    """Which code opened the loop (SPEC §5)."""

    DETERMINISTIC_THREAD = "deterministic_thread", "Thread detector"
    LLM_EXTRACT = "llm_extract", "LLM extractor"
    RULE_EXTRACT = "rule_extract", "Rule extractor"
    MANUAL = "manual", "Manual"


# closed_by values with meaning; a free-text note is also allowed (SPEC §5).
CLOSED_BY_REPLY = "reply_detected"
CLOSED_BY_STALENESS = "staleness"
CLOSED_BY_MANUAL = "manual"
CLOSED_BY_FULFILLED = "fulfilled"
CLOSED_BY_MODEL = "model"  # the learned decision did not keep it (SPEC §5.1b)


class OpenLoop(TimeStampedModel):
    """Something not yet finished: a promise, a reply owed, a question waiting, a
    decision pending (SPEC §5).

    ``dedup_key`` is unique per source (``thread:<id>:<type>`` or ``commit:<8 hex>``).
    ``evidence`` is a list of ``{message_id?, raw_record_id?, page_slug?, quote?}``
    (quote ≤ 200 chars). ``counterparty`` is set only when the email resolved to one
    person page; never a guess. ``fulfilment_suspected_at`` marks a later message of
    mine that seems to deliver the promise (evidence in ``fulfilment_evidence``).
    """

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="loops")
    dedup_key = models.CharField(max_length=300)
    loop_type = models.CharField(max_length=32, choices=LoopType.choices)
    counterparty = models.ForeignKey(
        Page,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="loops_as_counterparty",
    )
    counterparty_email = models.CharField(max_length=320, blank=True)
    counterparty_name = models.CharField(max_length=200, blank=True)
    summary = models.TextField()
    evidence = models.JSONField(default=list, blank=True)
    thread_id = models.CharField(max_length=300, blank=True)
    page = models.ForeignKey(
        Page, null=True, blank=True, on_delete=models.SET_NULL, related_name="loops"
    )
    due_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(
        max_length=8, choices=LoopStatus.choices, default=LoopStatus.OPEN
    )
    detector = models.CharField(max_length=24, choices=Detector.choices)
    confidence = models.FloatField(default=1.0)
    fact = models.ForeignKey(
        Fact, null=True, blank=True, on_delete=models.SET_NULL, related_name="loops"
    )
    opened_at = models.DateTimeField(default=timezone.now)
    last_activity_at = models.DateTimeField(default=timezone.now)
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.CharField(max_length=200, blank=True)
    fulfilment_suspected_at = models.DateTimeField(null=True, blank=True)
    fulfilment_evidence = models.JSONField(default=dict, blank=True)
    snoozed_until = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Left out of waiting until then (a curator's snooze); still open.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "dedup_key"],
                name="%(app_label)s_%(class)s_unique_dedup_key",
            ),
            models.CheckConstraint(
                condition=Q(status__in=LoopStatus.values),
                name="%(app_label)s_%(class)s_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(loop_type__in=LoopType.values),
                name="%(app_label)s_%(class)s_loop_type_valid",
            ),
            models.CheckConstraint(
                condition=Q(detector__in=Detector.values),
                name="%(app_label)s_%(class)s_detector_valid",
            ),
            models.CheckConstraint(
                condition=Q(confidence__gte=0) & Q(confidence__lte=1),
                name="%(app_label)s_%(class)s_confidence_range",
            ),
            # Open loops carry no close stamp; closed ones always do.
            models.CheckConstraint(
                condition=(Q(status=LoopStatus.OPEN) & Q(closed_at__isnull=True))
                | (~Q(status=LoopStatus.OPEN) & Q(closed_at__isnull=False)),
                name="%(app_label)s_%(class)s_closed_at_matches_status",
            ),
        ]
        indexes = [
            # waiting and open_loops: open loops of a source, newest activity first.
            models.Index(fields=["source", "status", "-last_activity_at"]),
            # the detector's per-thread close/refresh lookups.
            models.Index(
                fields=["source", "thread_id"],
                condition=Q(status="open"),
                name="loops_open_by_thread",
            ),
            # entity cards and push context: open loops with a person.
            models.Index(
                fields=["counterparty"],
                condition=Q(status="open"),
                name="loops_open_by_counterparty",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_loop_type_display()}: {self.summary[:60]}"

    @property
    def is_open(self) -> bool:
        """True while the loop is open."""
        return self.status == LoopStatus.OPEN


class LoopSuppression(models.Model):
    """A mute: per source, a sender address or a thread id (lower-cased). Mutes gate
    new detection only; existing loops keep their state (SPEC §5)."""

    class Kind(models.TextChoices):
        SENDER = "sender", "Sender"
        THREAD = "thread", "Thread"

    source = models.ForeignKey(
        Source, on_delete=models.CASCADE, related_name="loop_suppressions"
    )
    kind = models.CharField(max_length=8, choices=Kind.choices)
    value = models.CharField(max_length=320)
    created_by = models.CharField(max_length=200, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "kind", "value"],
                name="%(app_label)s_%(class)s_unique_mute",
            ),
            models.CheckConstraint(
                condition=Q(kind__in=["sender", "thread"]),
                name="%(app_label)s_%(class)s_kind_valid",
            ),
            models.CheckConstraint(
                condition=Q(value=models.functions.Lower("value"))
                & Q(value__regex=r"\S"),
                name="%(app_label)s_%(class)s_value_lower_case",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind}:{self.value}"


class LoopEvent(models.Model):
    """Append-only audit of every loop change (SPEC §5): who, what, when, and the
    before/after values in ``extra_data``. Mute and unmute events have no loop."""

    class EventType(models.TextChoices):
        OPENED = "opened", "Opened"
        REFRESHED = "refreshed", "Refreshed"
        CLOSED = "closed", "Closed"
        REOPENED = "reopened", "Reopened"
        STALE = "stale", "Went stale"
        DUE_CORRECTED = "due_corrected", "Deadline corrected"
        FULFILMENT_SUSPECTED = "fulfilment_suspected", "Fulfilment suspected"
        MERGED = "merged", "Merged (same as)"
        FACT_EXPIRED = "fact_expired", "Projected fact expired"
        MUTED = "muted", "Muted"
        UNMUTED = "unmuted", "Unmuted"
        SENDER_MARKED = "sender_marked", "Sender marked person/automated"
        SNOOZED = "snoozed", "Snoozed"

    loop = models.ForeignKey(
        OpenLoop,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="events",
        editable=False,
    )
    source = models.ForeignKey(
        Source, on_delete=models.CASCADE, related_name="+", editable=False
    )
    event_type = models.CharField(
        max_length=24, choices=EventType.choices, editable=False
    )
    actor = models.CharField(max_length=200, editable=False)
    event_time = models.DateTimeField(
        default=timezone.now, db_index=True, editable=False
    )
    extra_data = models.JSONField(default=dict, editable=False)

    class Meta:
        ordering = ["-event_time", "-id"]

    def __str__(self) -> str:
        return f"{self.event_type} loop {self.loop_id}"


class GraceHold(models.Model):
    """A thread inside its 24 h / 72 h grace window, to be re-checked by the first
    sweep after ``recheck_at`` even with no new mail (SPEC §5.2 rule 8). One per
    (source, thread)."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="+")
    thread_id = models.CharField(max_length=300)
    recheck_at = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "thread_id"],
                name="%(app_label)s_%(class)s_one_per_thread",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_id}:{self.thread_id} @ {self.recheck_at:%Y-%m-%d %H:%M}"


class ExtractionRun(models.Model):
    """The outcome of commitment extraction for one thread revision (SPEC §5.3).

    ``idempotency_key`` = ``<extractor>:<source>:<thread>:<newest message ms>`` is
    unique, so an unchanged thread is never re-extracted; a ``failed`` run is retried
    by updating its row. Outcomes: extracted, skipped (reason), failed (retryable).
    """

    class Status(models.TextChoices):
        EXTRACTED = "extracted", "Extracted"
        SKIPPED = "skipped", "Skipped"
        FAILED = "failed", "Failed (retryable)"

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="+")
    thread_id = models.CharField(max_length=300)
    extractor = models.CharField(max_length=24, choices=Detector.choices)
    idempotency_key = models.CharField(max_length=500)
    status = models.CharField(max_length=12, choices=Status.choices)
    reason = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveIntegerField(default=1)
    result = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["idempotency_key"], name="%(app_label)s_%(class)s_unique_key"
            ),
        ]
        indexes = [models.Index(fields=["source", "thread_id"])]

    def __str__(self) -> str:
        return f"{self.idempotency_key}: {self.status}"


class LlmUsage(models.Model):
    """One metered model call of the LLM extractor; the daily spend cap sums
    ``usd_estimate`` over the current UTC day (SPEC §5.3). Append-only."""

    source = models.ForeignKey(
        Source, on_delete=models.CASCADE, related_name="+", editable=False
    )
    thread_id = models.CharField(max_length=300, editable=False)
    model = models.CharField(max_length=100, editable=False)
    input_tokens = models.PositiveIntegerField(default=0, editable=False)
    output_tokens = models.PositiveIntegerField(default=0, editable=False)
    usd_estimate = models.DecimalField(
        max_digits=10, decimal_places=6, default=0, editable=False
    )
    outcome = models.CharField(max_length=32, editable=False)
    created_at = models.DateTimeField(
        default=timezone.now, db_index=True, editable=False
    )

    class Meta:
        verbose_name_plural = "LLM usage"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.model} ${self.usd_estimate} ({self.outcome})"


class SenderProfile(models.Model):
    """Who a sender is, per source (SPEC §5.1a): ``person`` or ``automated``.

    ``kind`` is the verdict in force: the computed one (``computed_kind``, from the
    signals in ``signals`` and the short ``reasons``) unless a curator decided
    (``decided_by`` set, ``admin_kind`` holds the decision). Automated senders open
    no reply-owed loop and never rank as people in ``waiting``. Written only by
    ``loops.services`` (``sender_profiles_refresh``, ``sender_mark``)."""

    class Kind(models.TextChoices):
        PERSON = "person", "Person"
        AUTOMATED = "automated", "Automated"

    source = models.ForeignKey(
        Source, on_delete=models.CASCADE, related_name="sender_profiles"
    )
    address = models.CharField(max_length=320)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    computed_kind = models.CharField(max_length=10, choices=Kind.choices)
    admin_kind = models.CharField(max_length=10, choices=Kind.choices, blank=True)
    reasons = models.JSONField(default=list, blank=True)
    signals = models.JSONField(default=dict, blank=True)
    messages = models.PositiveIntegerField(default=0)
    decided_by = models.CharField(max_length=200, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    computed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "address"],
                name="%(app_label)s_%(class)s_one_per_address",
            ),
            models.CheckConstraint(
                condition=Q(address=models.functions.Lower("address"))
                & Q(address__regex=r"\S"),
                name="%(app_label)s_%(class)s_address_lower_case",
            ),
        ]
        indexes = [models.Index(fields=["source", "kind"])]

    def __str__(self) -> str:
        return f"{self.address} ({self.kind})"
