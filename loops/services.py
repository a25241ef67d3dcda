"""Writes of the loops app (SPEC §5). Every state change of a loop goes through one
of these functions, inside a transaction, and writes a ``LoopEvent`` (append-only).

Public functions (keyword-only): ``loop_upsert``, ``loop_open``, ``loop_close``,
``loop_reopen``, ``loop_mark_stale``, ``loop_correct_due``,
``loop_mark_fulfilment_suspected``, ``loop_confirm_fulfilment``, ``loop_mute``,
``loop_unmute``, ``sender_loops_close``, ``loop_apply_verdict``, ``loop_project_commitment``,
``loops_stale_sweep``, ``grace_hold_set``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from brain.bulk import bulk_insert_objects
from brain.exceptions import InvalidParams, NotFound
from brain.models import (
    Fact,
    Page,
    Source,
    Visibility,
)
from brain.services.facts import fact_expire_one, fact_record, fact_supersede_with
from brain.services.relations import relation_ensure
from loops.models import (
    CLOSED_BY_FULFILLED,
    CLOSED_BY_MANUAL,
    CLOSED_BY_MODEL,
    CLOSED_BY_REPLY,
    CLOSED_BY_STALENESS,
    Detector,
    GraceHold,
    LoopEvent,
    LoopStatus,
    LoopSuppression,
    LoopType,
    OpenLoop,
)
from loops.selectors import counterparty_page, counterparty_pages

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from loops.detectors import LoopSpec, Verdict

MUTE_VALUE_RE = re.compile(r"^[^\s\x00-\x1f\x7f]{1,320}$")
STALE_OVERDUE = timedelta(days=14)
STALE_INACTIVE = timedelta(days=90)
LLM_COMMITMENT_CONFIDENCE = 0.85
LLM_DECISION_CONFIDENCE = 0.8
MAX_EVIDENCE = 8


def _event_row(
    *, loop: OpenLoop | None, source_id: str, event_type: str, actor: str, **extra: Any
) -> LoopEvent:
    """An unsaved audit row (``extra`` made JSON-safe: dates as ISO 8601)."""
    return LoopEvent(
        loop=loop,
        source_id=source_id,
        event_type=event_type,
        actor=actor,
        extra_data=json.loads(json.dumps(extra, default=_json_default)),
    )


def _event(
    *, loop: OpenLoop | None, source_id: str, event_type: str, actor: str, **extra: Any
) -> LoopEvent:
    row = _event_row(
        loop=loop, source_id=source_id, event_type=event_type, actor=actor, **extra
    )
    row.save()
    return row


def _json_default(value: Any) -> str:
    """ISO 8601 for dates and datetimes in audit rows; str() for anything else."""
    return value.isoformat() if isinstance(value, date | datetime) else str(value)


def due_end_of_day(day: date) -> datetime:
    """A due date stored at 23:59:59 in the owner's timezone
    (``settings.BRAIN_TIME_ZONE``), as an aware datetime (SPEC §5.3)."""
    return datetime.combine(
        day, time(23, 59, 59), tzinfo=ZoneInfo(settings.BRAIN_TIME_ZONE)
    )


def commitment_dedup_key(*, thread_id: str, direction: str, text: str) -> str:
    """``commit:`` + 8 hex of SHA-256 over thread, direction and lower-cased text."""
    canonical = json.dumps(
        {"t": thread_id, "d": direction, "x": text.strip().lower()},
        sort_keys=True,
        separators=(",", ":"),
    )
    return "commit:" + hashlib.sha256(canonical.encode()).hexdigest()[:8]


# --- upsert, open, close, reopen ------------------------------------------------------


@transaction.atomic
def loop_upsert(
    *,
    source: Source,
    dedup_key: str,
    loop_type: str,
    summary: str,
    detector: str,
    opened_at: datetime,
    last_activity_at: datetime,
    evidence: list[dict[str, Any]],
    thread_id: str = "",
    page: Page | None = None,
    counterparty_email: str = "",
    counterparty_name: str = "",
    counterparty: Page | None = None,
    due_at: datetime | None = None,
    confidence: float = 1.0,
    actor: str = "detector",
) -> tuple[OpenLoop, str]:
    """Insert or refresh a loop by ``(source, dedup_key)`` (SPEC §5, §5.4).

    Returns ``(loop, action)`` with action ``opened`` | ``refreshed`` | ``reopened`` |
    ``unchanged``. Closed means closed: a closed loop reopens only when
    ``last_activity_at`` is strictly newer than its own; otherwise nothing changes.
    """
    counterparty_email = (counterparty_email or "").lower()
    if counterparty is None and counterparty_email:
        counterparty = counterparty_page(source_id=source.id, email=counterparty_email)
    loop = (
        OpenLoop.objects.select_for_update()
        .filter(source=source, dedup_key=dedup_key)
        .first()
    )
    if loop is None:
        fields = {
            "loop_type": loop_type,
            "summary": summary,
            "detector": detector,
            "opened_at": opened_at,
            "last_activity_at": last_activity_at,
            "evidence": evidence[-MAX_EVIDENCE:],
            "thread_id": thread_id,
            "page": page,
            "counterparty_email": counterparty_email,
            "counterparty_name": counterparty_name[:200],
            "counterparty": counterparty,
            "due_at": due_at,
            "confidence": confidence,
        }
        loop, created = _loop_insert(
            source=source, dedup_key=dedup_key, fields=fields, actor=actor
        )
        if created:
            return loop, "opened"
    if not loop.is_open and last_activity_at <= loop.last_activity_at:
        return loop, "unchanged"
    changed = {
        "summary": summary,
        "evidence": evidence[-MAX_EVIDENCE:],
        "confidence": confidence,
        "last_activity_at": max(last_activity_at, loop.last_activity_at),
        "counterparty_email": counterparty_email or loop.counterparty_email,
        "counterparty_name": (counterparty_name or loop.counterparty_name)[:200],
        "counterparty_id": counterparty.pk if counterparty else loop.counterparty_id,
        "page_id": page.pk if page else loop.page_id,
        "due_at": due_at or loop.due_at,
        "thread_id": thread_id or loop.thread_id,
    }
    return loop, _loop_refresh(loop, changed, opened_at=opened_at, actor=actor)


def _loop_insert(
    *, source: Source, dedup_key: str, fields: dict[str, Any], actor: str
) -> tuple[OpenLoop, bool]:
    """Insert a loop row with its ``opened`` event: ``(loop, True)``; or, when a
    concurrent writer inserted the same key first, ``(that row, locked, False)``
    for the caller to refresh."""
    try:
        with transaction.atomic():
            loop = OpenLoop.objects.create(source=source, dedup_key=dedup_key, **fields)
    except IntegrityError:
        loop = OpenLoop.objects.select_for_update().get(
            source=source, dedup_key=dedup_key
        )
        return loop, False
    _event(
        loop=loop,
        source_id=source.id,
        event_type=LoopEvent.EventType.OPENED,
        actor=actor,
        detector=fields["detector"],
        summary=fields["summary"],
        due_at=fields["due_at"],
        evidence=fields["evidence"][-1:],
    )
    return loop, True


def _loop_refresh(
    loop: OpenLoop, changed: dict[str, Any], *, opened_at: datetime, actor: str
) -> str:
    """Write the ``changed`` fields that differ (a closed loop reopens with
    ``opened_at``) and their ``refreshed``/``reopened`` event; returns the action,
    ``unchanged`` when nothing differs (SPEC §5.4 closed means closed)."""
    was_open = loop.is_open
    if not was_open:
        changed.update(
            status=LoopStatus.OPEN, closed_at=None, closed_by="", opened_at=opened_at
        )
    dirty = [k for k, v in changed.items() if getattr(loop, k) != v]
    if not dirty:
        return "unchanged"
    for key in dirty:
        setattr(loop, key, changed[key])
    loop.save(update_fields=[*dirty, "updated_at"])
    _event(
        loop=loop,
        source_id=loop.source_id,
        event_type=LoopEvent.EventType.REFRESHED
        if was_open
        else LoopEvent.EventType.REOPENED,
        actor=actor,
        fields=sorted(dirty),
        last_activity_at=loop.last_activity_at,
    )
    return "refreshed" if was_open else "reopened"


def loop_open(
    *,
    source: Source,
    loop_type: str,
    summary: str,
    actor: str,
    counterparty_email: str = "",
    due_at: datetime | None = None,
    thread_id: str = "",
    evidence: list[dict[str, Any]] | None = None,
) -> OpenLoop:
    """Open a manual loop (curator or harness). Raises ``InvalidParams`` for an
    unknown ``loop_type`` or an empty summary."""
    if loop_type not in LoopType.values:
        raise InvalidParams(
            f"Unknown loop_type '{loop_type}'.",
            suggestion=f"Use one of {', '.join(LoopType.values)}.",
            detail={"allowed": LoopType.values},
        )
    if not summary.strip():
        raise InvalidParams("summary is empty.", suggestion="Describe what is owed.")
    now = timezone.now()
    key = (
        "manual:"
        + hashlib.sha256(
            f"{loop_type}:{summary}:{now.isoformat()}".encode()
        ).hexdigest()[:12]
    )
    loop, _ = loop_upsert(
        source=source,
        dedup_key=key,
        loop_type=loop_type,
        summary=summary.strip(),
        detector=Detector.MANUAL,
        opened_at=now,
        last_activity_at=now,
        evidence=evidence or [],
        thread_id=thread_id,
        counterparty_email=counterparty_email,
        due_at=due_at,
        actor=actor,
    )
    return loop


def _expire_projected_fact(
    *, loop: OpenLoop, actor: str, reason: str
) -> tuple[bool, str]:
    """Expire the loop's commitment fact unless another open loop shares it."""
    if loop.fact_id is None:
        return False, "no_fact"
    if (
        OpenLoop.objects.filter(fact_id=loop.fact_id, status=LoopStatus.OPEN)
        .exclude(pk=loop.pk)
        .exists()
    ):
        return False, "shared_with_open_loop"
    updated = fact_expire_one(
        fact_id=loop.fact_id,
        source_id=loop.source_id,
        actor=actor,
        reason=reason,
        audit_extra={"loop_id": loop.pk},
    )
    if updated:
        _event(
            loop=loop,
            source_id=loop.source_id,
            event_type=LoopEvent.EventType.FACT_EXPIRED,
            actor=actor,
            fact_id=loop.fact_id,
            reason=reason,
        )
    return bool(updated), "expired" if updated else "already_expired"


@transaction.atomic
def loop_close(
    *,
    loop: OpenLoop,
    status: str = LoopStatus.DONE,
    closed_by: str = CLOSED_BY_MANUAL,
    actor: str,
    note: str = "",
    at: datetime | None = None,
    evidence: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Close a loop (done | dropped | stale) and expire its projected fact unless
    another open loop shares it (SPEC §5.4). ``evidence`` (the message that
    closed it, e.g. the counterparty's "sent") is kept in the ``LoopEvent``.
    Idempotent: closing a closed loop changes nothing. Returns ``{closed, id,
    status, fact_expired, reason}``. Raises ``InvalidParams`` for status ``open``
    or an unknown status."""
    if status not in (LoopStatus.DONE, LoopStatus.DROPPED, LoopStatus.STALE):
        raise InvalidParams(
            f"Cannot close a loop with status '{status}'.",
            suggestion="Use status 'done' or 'dropped'.",
            detail={"allowed": ["done", "dropped"]},
        )
    locked = OpenLoop.objects.select_for_update().get(pk=loop.pk)
    if not locked.is_open:
        return {
            "closed": False,
            "id": str(locked.pk),
            "status": locked.status,
            "fact_expired": False,
            "reason": "already_closed",
        }
    locked.status = status
    locked.closed_at = at or timezone.now()
    locked.closed_by = (note or closed_by)[:200]
    locked.save(update_fields=["status", "closed_at", "closed_by", "updated_at"])
    _event(
        loop=locked,
        source_id=locked.source_id,
        event_type=(
            LoopEvent.EventType.STALE
            if status == LoopStatus.STALE
            else LoopEvent.EventType.CLOSED
        ),
        actor=actor,
        status=status,
        closed_by=locked.closed_by,
        **({"evidence": evidence} if evidence else {}),
    )
    fact_expired, reason = False, ""
    if locked.loop_type in (
        LoopType.COMMITMENT_OWED_BY_ME,
        LoopType.COMMITMENT_OWED_TO_ME,
    ):
        fact_expired, reason = _expire_projected_fact(
            loop=locked, actor=actor, reason=f"loop {locked.pk} closed: {status}"
        )
    loop.refresh_from_db()
    return {
        "closed": True,
        "id": str(locked.pk),
        "status": status,
        "fact_expired": fact_expired,
        "reason": reason,
    }


@transaction.atomic
def loop_reopen(*, loop: OpenLoop, actor: str, note: str = "") -> OpenLoop:
    """Reopen a closed loop by hand (curator). No-op on an open loop."""
    locked = OpenLoop.objects.select_for_update().get(pk=loop.pk)
    if locked.is_open:
        return locked
    previous = {"status": locked.status, "closed_by": locked.closed_by}
    locked.status, locked.closed_at, locked.closed_by = LoopStatus.OPEN, None, ""
    locked.save(update_fields=["status", "closed_at", "closed_by", "updated_at"])
    _event(
        loop=locked,
        source_id=locked.source_id,
        event_type=LoopEvent.EventType.REOPENED,
        actor=actor,
        previous=previous,
        note=note,
    )
    return locked


def loop_mark_stale(*, loop: OpenLoop, actor: str = "sweep") -> dict[str, Any]:
    """Close a loop as ``stale`` with ``closed_by = staleness`` (SPEC §5.4)."""
    return loop_close(
        loop=loop, status=LoopStatus.STALE, closed_by=CLOSED_BY_STALENESS, actor=actor
    )


def loops_stale_sweep(*, source: Source, now: datetime, actor: str = "sweep") -> int:
    """Mark open extracted commitment loops stale when (overdue > 14 days and no
    activity for 14 days) or no activity for 90 days (SPEC §5.4). Returns the count."""
    candidates = OpenLoop.objects.filter(
        source=source,
        status=LoopStatus.OPEN,
        detector__in=[Detector.LLM_EXTRACT, Detector.RULE_EXTRACT],
    ).filter(stale_at(now))
    count = 0
    for loop in candidates:
        if loop_mark_stale(loop=loop, actor=actor)["closed"]:
            count += 1
    return count


def stale_at(now: datetime) -> Any:
    """The staleness rule of extracted commitments at ``now`` as a filter on
    ``OpenLoop`` (SPEC §5.4): overdue by more than 14 days with no activity for
    14 days, or no activity for 90 days. ``loops_stale_sweep`` closes the open
    loops it matches; a ``waiting --as-of`` replay leaves them out."""
    return (
        models_q(due_at__lt=now - STALE_OVERDUE)
        & models_q(last_activity_at__lt=now - STALE_OVERDUE)
    ) | models_q(last_activity_at__lt=now - STALE_INACTIVE)


def models_q(**kwargs: Any) -> Any:
    """A ``Q`` object (kept local so the staleness rule reads as SPEC writes it)."""
    from django.db.models import Q

    return Q(**kwargs)


# --- corrections and fulfilment ------------------------------------------------


@transaction.atomic
def loop_correct_due(
    *,
    loop: OpenLoop,
    due_at: datetime | None,
    actor: str,
    evidence: dict[str, Any] | None = None,
) -> OpenLoop:
    """Move a loop's deadline (SPEC §5.4): update ``due_at``, supersede the projected
    commitment fact with one carrying the new ``valid_until``, and record the old
    value and the evidence in a ``LoopEvent`` ("why is it Monday now?")."""
    evidence = {"message_date": timezone.now().isoformat(), **(evidence or {})}
    locked = OpenLoop.objects.select_for_update().get(pk=loop.pk)
    old = locked.due_at
    if old == due_at:
        return locked
    locked.due_at = due_at
    fields = ["due_at", "updated_at"]
    new_fact_id = None
    if locked.fact_id:
        old_fact = Fact.objects.select_for_update().get(pk=locked.fact_id)
        if old_fact.expired_at is None:
            new_fact = fact_supersede_with(
                old=old_fact,
                actor=actor,
                reason="deadline corrected",
                valid_until=due_at,
                evidence={**old_fact.evidence, "correction": evidence},
                audit_extra={"loop_id": locked.pk},
            )
            locked.fact = new_fact
            fields.append("fact")
            new_fact_id = new_fact.pk
    locked.save(update_fields=fields)
    _event(
        loop=locked,
        source_id=locked.source_id,
        event_type=LoopEvent.EventType.DUE_CORRECTED,
        actor=actor,
        old_due_at=old,
        new_due_at=due_at,
        evidence=evidence,
        new_fact_id=new_fact_id,
    )
    return locked


@transaction.atomic
def loop_snooze(*, loop: OpenLoop, until: datetime | None, actor: str) -> OpenLoop:
    """Snooze an open loop until ``until`` (aware datetime; None wakes it now): it
    stays open but the waiting view leaves it out until then (SPEC §5.5). Records a
    ``snoozed`` LoopEvent with the old and new times. Raises ``InvalidParams`` for
    a closed loop."""
    locked = OpenLoop.objects.select_for_update().get(pk=loop.pk)
    if not locked.is_open:
        raise InvalidParams(
            f"Loop {locked.pk} is {locked.status}; only open loops can be snoozed.",
            suggestion="Reopen it first, or leave it closed.",
            detail={"id": locked.pk, "status": locked.status},
        )
    old = locked.snoozed_until
    locked.snoozed_until = until
    locked.save(update_fields=["snoozed_until", "updated_at"])
    _event(
        loop=locked,
        source_id=locked.source_id,
        event_type=LoopEvent.EventType.SNOOZED,
        actor=actor,
        old_until=old,
        until=until,
    )
    loop.refresh_from_db()
    return locked


@transaction.atomic
def loop_mark_fulfilment_suspected(
    *, loop: OpenLoop, evidence: dict[str, Any], actor: str = "detector"
) -> bool:
    """Flag an open commitment as probably delivered by a later message of mine
    (SPEC §5.4); a curator confirms with ``loop_confirm_fulfilment``. Returns True
    when the flag was newly set."""
    updated = OpenLoop.objects.filter(
        pk=loop.pk, status=LoopStatus.OPEN, fulfilment_suspected_at__isnull=True
    ).update(
        fulfilment_suspected_at=timezone.now(),
        fulfilment_evidence=evidence,
        updated_at=timezone.now(),
    )
    if updated:
        _event(
            loop=loop,
            source_id=loop.source_id,
            event_type=LoopEvent.EventType.FULFILMENT_SUSPECTED,
            actor=actor,
            evidence=evidence,
        )
    return bool(updated)


def loop_confirm_fulfilment(*, loop: OpenLoop, actor: str) -> dict[str, Any]:
    """Confirm a suspected fulfilment: ``done`` with ``closed_by = fulfilled``."""
    return loop_close(
        loop=loop, status=LoopStatus.DONE, closed_by=CLOSED_BY_FULFILLED, actor=actor
    )


# --- mutes ----------------------------------------------------------------------------


def _mute_value(kind: str, value: str) -> str:
    if kind not in LoopSuppression.Kind.values:
        raise InvalidParams(
            f"Unknown mute kind '{kind}'.",
            suggestion="Use 'sender' or 'thread'.",
            detail={"allowed": LoopSuppression.Kind.values},
        )
    cleaned = (value or "").strip().lower()
    if not MUTE_VALUE_RE.match(cleaned):
        raise InvalidParams(
            f"'{value}' is not a valid {kind} to mute.",
            suggestion="Give a bare email address (sender) or a thread id (thread).",
        )
    return cleaned


def loop_mute(
    *, source: Source, kind: str, value: str, actor: str
) -> tuple[LoopSuppression, bool]:
    """Mute a sender or thread in ``source``; gates new detection only, existing
    loops keep their state (SPEC §5). Returns ``(row, created)``; idempotent."""
    cleaned = _mute_value(kind, value)
    with transaction.atomic():
        row, created = LoopSuppression.objects.get_or_create(
            source=source, kind=kind, value=cleaned, defaults={"created_by": actor}
        )
        if created:
            _event(
                loop=None,
                source_id=source.id,
                event_type=LoopEvent.EventType.MUTED,
                actor=actor,
                kind=kind,
                value=cleaned,
            )
    return row, created


def sender_loops_close(*, source: Source, address: str, actor: str) -> int:
    """Close (dropped, ``closed_by`` "muted") every open loop of ``source`` whose
    counterparty is ``address``: the "mute and close its open loops" choice (a
    plain mute leaves existing loops as they are, SPEC §5). Returns how many
    closed."""
    cleaned = _mute_value(LoopSuppression.Kind.SENDER, address)
    closed = 0
    for loop in OpenLoop.objects.filter(
        source=source, counterparty_email=cleaned, status=LoopStatus.OPEN
    ):
        closed += int(
            loop_close(
                loop=loop,
                status=LoopStatus.DROPPED,
                closed_by="muted",
                actor=actor,
            )["closed"]
        )
    return closed


def loops_mute_many(
    *, kind: str, targets: Iterable[tuple[Source, str]], actor: str, close: bool = False
) -> tuple[int, int]:
    """Mute each ``(source, value)`` of ``kind`` (``loop_mute``) and, for senders
    with ``close``, close their open loops (``sender_loops_close``): the admin's
    mute actions on loops and pages (SPEC §5). Returns ``(muted, closed)``, muted
    counting new mutes only."""
    muted = closed = 0
    for source, value in targets:
        muted += int(loop_mute(source=source, kind=kind, value=value, actor=actor)[1])
        if close:
            closed += sender_loops_close(source=source, address=value, actor=actor)
    return muted, closed


def loop_unmute(*, source: Source, kind: str, value: str, actor: str) -> bool:
    """Remove the exact mute; returns ``removed`` (False when absent, not an error)."""
    cleaned = _mute_value(kind, value)
    with transaction.atomic():
        removed, _ = LoopSuppression.objects.filter(
            source=source, kind=kind, value=cleaned
        ).delete()
        if removed:
            _event(
                loop=None,
                source_id=source.id,
                event_type=LoopEvent.EventType.UNMUTED,
                actor=actor,
                kind=kind,
                value=cleaned,
            )
    return bool(removed)


# --- detector verdicts and grace holds ------------------------------------------


def grace_hold_set(
    *, source: Source, thread_id: str, recheck_at: datetime | None
) -> None:
    """Record (or clear, with None) the sweep re-check time of a thread in grace."""
    if recheck_at is None:
        GraceHold.objects.filter(source=source, thread_id=thread_id).delete()
    else:
        GraceHold.objects.update_or_create(
            source=source, thread_id=thread_id, defaults={"recheck_at": recheck_at}
        )


@dataclass
class LoopBatch:
    """New detector loops of one import chunk, written together by ``flush``: a
    fixed number of statements per chunk (counterparty pages, loops, their
    ``opened`` events) instead of about twenty per loop (SPEC §11 loop-heavy mail).

    ``known`` holds the dedup keys the chunk's threads already have, in any status
    (loaded once by the caller); a spec whose key is known goes through
    ``loop_upsert`` (refresh, reopen) as before. The rows are the ones
    ``loop_upsert`` would insert, with the same counterparty rule
    (``counterparty_pages``). A concurrent insert of the same key makes ``flush``
    raise ``IntegrityError``: the caller's chunk rolls back and runs again thread by
    thread, without a batch."""

    source: Source
    known: set[str]
    pending: list[tuple[OpenLoop, LoopEvent]] = field(default_factory=list)

    def takes(self, dedup_key: str) -> bool:
        """Whether a loop with ``dedup_key`` is new to this chunk (batched)."""
        return dedup_key not in self.known

    def add(self, loop: OpenLoop, event: LoopEvent) -> None:
        """Queue an unsaved loop and its ``opened`` event."""
        self.known.add(loop.dedup_key)
        self.pending.append((loop, event))

    def flush(self) -> int:
        """Insert the queued loops and events; returns how many loops."""
        if not self.pending:
            return 0
        pages = counterparty_pages(
            source_id=self.source.id,
            emails={lp.counterparty_email for lp, _ in self.pending},
        )
        loops = []
        for loop, _ in self.pending:
            if loop.counterparty_id is None and loop.counterparty_email:
                loop.counterparty = pages.get(loop.counterparty_email)
            loops.append(loop)
        # One unnest statement each (``brain.bulk``), the rows ``bulk_create``
        # would write: its per-value compilation cost more than the inserts.
        bulk_insert_objects(loops)
        events = []
        for loop, event in self.pending:
            event.loop = loop
            events.append(event)
        bulk_insert_objects(events)
        count = len(self.pending)
        self.pending.clear()
        return count


def spec_loop(
    *,
    source: Source,
    spec: LoopSpec,
    page: Page | None = None,
    evidence: list[dict[str, Any]] | None = None,
) -> OpenLoop:
    """The unsaved ``OpenLoop`` a detector verdict's ``spec`` opens (SPEC §5.2): the
    row ``loop_upsert`` writes for an unknown key, with ``evidence`` (default the
    spec's, at most ``MAX_EVIDENCE``), confidence 1.0 until decided. Used by the
    batched import and by the ``--as-of`` replay's decision."""
    return OpenLoop(
        source=source,
        dedup_key=spec.dedup_key,
        loop_type=spec.loop_type,
        summary=spec.summary,
        detector=Detector.DETERMINISTIC_THREAD,
        opened_at=spec.opened_at,
        last_activity_at=spec.last_activity_at,
        evidence=(spec.evidence if evidence is None else evidence)[-MAX_EVIDENCE:],
        thread_id=spec.thread_id,
        page=page,
        counterparty_email=(spec.counterparty_email or "").lower(),
        counterparty_name=(spec.counterparty_name or "")[:200],
        due_at=due_end_of_day(spec.due) if spec.due else None,
        confidence=1.0,
    )


def _batched_open(
    *,
    batch: LoopBatch,
    source: Source,
    actor: str,
    page: Page | None,
    spec: LoopSpec,
    evidence: list[dict[str, Any]],
) -> None:
    """Queue a new detector loop in ``batch``: the row and event ``loop_upsert``
    would have written for an unknown key."""
    loop = spec_loop(source=source, spec=spec, page=page, evidence=evidence)
    due_at = loop.due_at
    event = _event_row(
        loop=None,
        source_id=source.id,
        event_type=LoopEvent.EventType.OPENED,
        actor=actor,
        detector=Detector.DETERMINISTIC_THREAD,
        summary=spec.summary,
        due_at=due_at,
        evidence=evidence[-1:] if evidence else [],
    )
    batch.add(loop, event)


def loop_apply_verdict(
    *,
    source: Source,
    thread_id: str,
    verdict: Verdict,
    page: Page | None,
    actor: str = "detector",
    open_loops: list[OpenLoop] | None = None,
    has_hold: bool | None = None,
    batch: LoopBatch | None = None,
) -> dict[str, int]:
    """Apply a detector verdict to one thread (SPEC §5.2 rule 9): close deterministic
    loops of the closed types (``done``, ``reply_detected``), upsert the opens, and
    set or clear the grace hold. ``open_loops`` (the thread's open loops) and
    ``has_hold`` may be preloaded by a batch caller to save queries; with ``batch``,
    opens of keys new to the chunk are queued there (``LoopBatch.flush`` writes
    them). Returns counts ``{opened, closed, reopened, refreshed}``."""
    counts = {"opened": 0, "closed": 0, "reopened": 0, "refreshed": 0}
    # No savepoint of its own: its caller (``thread_process``) runs each thread in
    # one, and a savepoint per step is a round trip per thread (SPEC §11).
    with transaction.atomic(savepoint=False):
        _apply_verdict(
            source=source,
            thread_id=thread_id,
            verdict=verdict,
            page=page,
            actor=actor,
            open_loops=open_loops,
            has_hold=has_hold,
            counts=counts,
            batch=batch,
        )
    return counts


def _apply_verdict(
    *,
    source: Source,
    thread_id: str,
    verdict: Verdict,
    page: Page | None,
    actor: str,
    open_loops: list[OpenLoop] | None,
    has_hold: bool | None,
    counts: dict[str, int],
    batch: LoopBatch | None = None,
) -> None:
    """``loop_apply_verdict``'s steps: closes and retractions, opens, the grace
    hold; ``counts`` is updated in place."""
    if verdict.close or verdict.retract:
        if open_loops is None:
            open_loops = list(
                OpenLoop.objects.filter(
                    source=source, thread_id=thread_id, status=LoopStatus.OPEN
                )
            )
        counts["closed"] += _apply_closes(verdict, open_loops, actor=actor)
    for spec in verdict.open:
        action = _apply_open(spec, source=source, page=page, actor=actor, batch=batch)
        if action in counts:
            counts[action] += 1
    if verdict.recheck_at is not None or has_hold is not False:
        grace_hold_set(
            source=source, thread_id=thread_id, recheck_at=verdict.recheck_at
        )


def _apply_closes(verdict: Verdict, open_loops: list[OpenLoop], *, actor: str) -> int:
    """Close the thread's open deterministic loops the verdict settles (SPEC §5.2
    rule 2: ``done`` with the verdict's ``closed_by``, default ``reply_detected``)
    or retracts (SPEC §5.1a: ``dropped``, ``not_expected: <reason>``); returns how
    many closed."""
    closed = 0
    for loop in open_loops:
        if loop.detector != Detector.DETERMINISTIC_THREAD or not loop.is_open:
            continue
        if loop.loop_type in verdict.close:
            closed_by, proof = verdict.closed_by.get(
                loop.loop_type, (CLOSED_BY_REPLY, None)
            )
            result = loop_close(
                loop=loop,
                status=LoopStatus.DONE,
                closed_by=closed_by,
                actor=actor,
                evidence=proof,
            )
        elif loop.loop_type in verdict.retract:
            result = loop_close(
                loop=loop,
                status=LoopStatus.DROPPED,
                closed_by=f"not_expected: {verdict.retract[loop.loop_type]}",
                actor=actor,
            )
        else:
            continue
        closed += int(bool(result["closed"]))
    return closed


def _apply_open(
    spec: LoopSpec,
    *,
    source: Source,
    page: Page | None,
    actor: str,
    batch: LoopBatch | None,
) -> str:
    """Open (or refresh) one loop the verdict wants open, its evidence linked to
    the thread page; queued on ``batch`` when it takes the key (``opened``).
    Returns the ``loop_upsert`` action."""
    evidence = [
        {**item, "page_slug": page.slug} if page else item for item in spec.evidence
    ]
    if batch is not None and batch.takes(spec.dedup_key):
        _batched_open(
            batch=batch,
            source=source,
            actor=actor,
            page=page,
            spec=spec,
            evidence=evidence,
        )
        return "opened"
    _, action = loop_upsert(
        source=source,
        dedup_key=spec.dedup_key,
        loop_type=spec.loop_type,
        summary=spec.summary,
        detector=Detector.DETERMINISTIC_THREAD,
        opened_at=spec.opened_at,
        last_activity_at=spec.last_activity_at,
        evidence=evidence,
        thread_id=spec.thread_id,
        page=page,
        counterparty_email=spec.counterparty_email,
        counterparty_name=spec.counterparty_name,
        due_at=due_end_of_day(spec.due) if spec.due else None,
        actor=actor,
    )
    return action


# --- commitment projections -----------------------------------------------------------


@dataclass(frozen=True)
class CommitmentInput:
    """One extracted item, from either extractor (SPEC §5.3).

    ``direction``: owed_by_me | owed_to_me | decision. ``due``: a calendar date in the
    owner's timezone or None. ``message_id``/``raw_record_id`` point at the evidence.
    """

    direction: str
    text: str
    quote: str
    due: date | None
    counterparty_email: str
    counterparty_name: str
    message_id: str
    raw_record_id: int | None
    message_date: datetime
    confidence: float
    same_as_loop_id: int | None = None
    link: str = ""


def _relation(
    *, page: Page, person: Page, type_name: str, context: str, detector: str
) -> None:
    relation_ensure(
        from_page=page,
        to_page=person,
        type_name=type_name,
        source_id=page.source_id,
        context=context,
        provenance={"extractor": detector},
        created_by=f"loops:{detector}",
    )


# The loop type of an extracted item's direction (``CommitmentInput.direction``).
_LOOP_TYPE_OF = {
    "owed_by_me": LoopType.COMMITMENT_OWED_BY_ME,
    "owed_to_me": LoopType.COMMITMENT_OWED_TO_ME,
    "decision": LoopType.DECISION_PENDING,
}


@transaction.atomic
def loop_project_commitment(
    *,
    source: Source,
    thread_id: str,
    page: Page | None,
    item: CommitmentInput,
    detector: str,
    model: str = "",
    actor: str = "extractor",
) -> tuple[OpenLoop, str]:
    """Write the three projections of one commitment (SPEC §5.3): the loop row, a
    private ``commitment`` fact (entity = counterparty page, ``valid_until`` = due
    end of day) and a thread page → person relation (``owes_to`` when owed by me,
    ``awaiting_reply_from`` when owed to me) only when the counterparty resolved.
    Decisions get the loop row only. ``same_as_loop_id`` merges into that loop
    (evidence appended, no new fact or relation). Returns ``(loop, action)``."""
    evidence = {
        "message_id": item.message_id,
        "raw_record_id": item.raw_record_id,
        "page_slug": page.slug if page else "",
        "quote": item.quote[:200],
        "link": item.link,
    }
    evidence = {k: v for k, v in evidence.items() if v not in (None, "")}
    if item.same_as_loop_id:
        target = _merge_into(
            item.same_as_loop_id,
            item,
            source=source,
            thread_id=thread_id,
            evidence=evidence,
            actor=actor,
        )
        if target is not None:
            return target, "merged"
    email = (item.counterparty_email or "").lower()
    person = counterparty_page(source_id=source.id, email=email)
    due_at = due_end_of_day(item.due) if item.due else None
    summary = _commitment_summary(item, email)
    loop, action = loop_upsert(
        source=source,
        dedup_key=commitment_dedup_key(
            thread_id=thread_id, direction=item.direction, text=item.text
        ),
        loop_type=_LOOP_TYPE_OF[item.direction],
        summary=summary[:1000],
        detector=detector,
        opened_at=item.message_date,
        last_activity_at=item.message_date,
        evidence=[evidence],
        thread_id=thread_id,
        page=page,
        counterparty_email=email,
        counterparty_name=item.counterparty_name,
        counterparty=person,
        due_at=due_at,
        confidence=item.confidence,
        actor=actor,
    )
    if item.direction == "decision" or action == "unchanged" or loop.fact_id:
        return loop, action
    _project_fact(
        loop,
        item,
        person=person,
        page=page,
        thread_id=thread_id,
        summary=summary,
        evidence=evidence,
        detector=detector,
        model=model,
        actor=actor,
    )
    return loop, action


def _project_fact(
    loop: OpenLoop,
    item: CommitmentInput,
    *,
    person: Page | None,
    page: Page | None,
    thread_id: str,
    summary: str,
    evidence: dict[str, Any],
    detector: str,
    model: str,
    actor: str,
) -> None:
    """The commitment's other two projections (SPEC §5.3): a private
    ``commitment`` fact on the counterparty, valid until the due date's end of
    day, linked from the loop; and, when the counterparty resolved, the thread
    page → person relation (``owes_to`` / ``awaiting_reply_from``)."""
    title = page.title if page else thread_id
    loop.fact = fact_record(
        source_id=loop.source_id,
        entity=person,
        text=summary,
        kind=Fact.Kind.COMMITMENT,
        visibility=Visibility.PRIVATE,
        provenance=f'email thread "{title[:80]}" ({page.slug if page else thread_id})',
        raw_record_id=item.raw_record_id,
        evidence={**evidence, "extractor": detector, "model": model},
        confidence=item.confidence,
        valid_from=item.message_date,
        valid_until=due_end_of_day(item.due) if item.due else None,
        created_by=f"loops:{detector}",
        actor=actor,
        audit_extra={"loop_id": loop.pk},
    )
    OpenLoop.objects.filter(pk=loop.pk).update(fact=loop.fact)
    if person is not None and page is not None:
        _relation(
            page=page,
            person=person,
            type_name="owes_to"
            if item.direction == "owed_by_me"
            else "awaiting_reply_from",
            context=item.quote or item.text,
            detector=detector,
        )


def _commitment_summary(item: CommitmentInput, email: str) -> str:
    """The loop's summary, no age baked in (SPEC §5): "I promised <who>: …",
    "<who> promised me: …" or "Decision pending: …"."""
    who = item.counterparty_name or email or "someone"
    if item.direction == "decision":
        return f"Decision pending: {item.text}"
    if item.direction == "owed_by_me":
        return f"I promised {who}: {item.text}"
    return f"{who} promised me: {item.text}"


def _merge_into(
    loop_id: int,
    item: CommitmentInput,
    *,
    source: Source,
    thread_id: str,
    evidence: dict[str, Any],
    actor: str,
) -> OpenLoop | None:
    """Append ``evidence`` of ``item`` to the loop ``loop_id`` (at most
    ``MAX_EVIDENCE`` kept, last activity moved on, a ``merged`` event); None when
    no such loop is in the source."""
    target = (
        OpenLoop.objects.select_for_update().filter(pk=loop_id, source=source).first()
    )
    if target is None:
        return None
    merged = [e for e in target.evidence if e != evidence] + [evidence]
    target.evidence = merged[-MAX_EVIDENCE:]
    target.last_activity_at = max(target.last_activity_at, item.message_date)
    target.save(update_fields=["evidence", "last_activity_at", "updated_at"])
    _event(
        loop=target,
        source_id=source.id,
        event_type=LoopEvent.EventType.MERGED,
        actor=actor,
        thread_id=thread_id,
        evidence=evidence,
    )
    return target


def loop_get(
    *, loop_id: int | str, source_ids: tuple[str, ...] | None = None
) -> OpenLoop:
    """Fetch one loop by id inside ``source_ids`` (None: any). Raises ``NotFound``."""
    try:
        pk = int(loop_id)
    except (TypeError, ValueError):
        pk = -1
    qs = OpenLoop.objects.filter(pk=pk)
    if source_ids is not None:
        qs = qs.filter(source_id__in=source_ids)
    loop = qs.first()
    if loop is None:
        raise NotFound(
            f"No loop {loop_id} in your sources.",
            suggestion="List loops with open_loops and use one of their ids.",
        )
    return loop


def loops_apply_decisions(
    *,
    loops: Sequence[OpenLoop],
    probabilities: Mapping[int, float],
    threshold: float,
    now: datetime,
) -> dict[str, int]:
    """Write the learned decision (SPEC §5.1b) on open candidates: each loop's
    ``confidence`` becomes its probability (rounded to 4 places; one bulk update),
    and a loop below ``threshold`` closes ``dropped`` with ``closed_by`` ``model``
    and the probability in its ``LoopEvent``. Returns ``{scored, closed}``."""
    scored = [lp for lp in loops if lp.pk in probabilities]
    for lp in scored:
        lp.confidence = round(float(probabilities[lp.pk]), 4)
    OpenLoop.objects.bulk_update(scored, ["confidence"], batch_size=500)
    closed = 0
    for lp in scored:
        if lp.confidence >= threshold:
            continue
        result = loop_close(
            loop=lp,
            status=LoopStatus.DROPPED,
            closed_by=CLOSED_BY_MODEL,
            actor="model",
            at=now,
            note=f"{CLOSED_BY_MODEL}: p={lp.confidence:.2f} < {threshold:.2f}",
        )
        closed += bool(result["closed"])
    return {"scored": len(scored), "closed": closed}


# --- page merges (SPEC §10; issue 46) ---------------------------------------------


def loops_merge_move(*, keep_id: int, merge_id: int) -> dict[str, list[int]]:
    """Repoint open loops from a merged page to the kept one (``counterparty`` and
    ``page``); returns the moved loop ids per field (``loops_counterparty``,
    ``loops_page``) for ``loops_merge_restore``."""
    moved: dict[str, list[int]] = {}
    for name in ("counterparty", "page"):
        ids = list(
            OpenLoop.objects.filter(**{f"{name}_id": merge_id}).values_list(
                "pk", flat=True
            )
        )
        OpenLoop.objects.filter(pk__in=ids).update(**{f"{name}_id": keep_id})
        moved[f"loops_{name}"] = ids
    return moved


def loops_merge_restore(
    *, keep_id: int, merge_id: int, moved: dict[str, list[int]]
) -> int:
    """Put the loops ``loops_merge_move`` moved back on the merged page (only those
    still on the kept page); returns how many rows went back."""
    back = 0
    for name in ("counterparty", "page"):
        back += OpenLoop.objects.filter(
            pk__in=moved.get(f"loops_{name}") or [], **{f"{name}_id": keep_id}
        ).update(**{f"{name}_id": merge_id})
    return back
