"""Waiting, the daily surface (SPEC §5.5): "who is waiting on me, what did I promise,
and the context to respond". One read function, ``waiting_report``, serves the CLI,
the API and the admin dashboard; it only reads.

Ranking per counterparty group (one per person: the addresses a person page holds,
or one full display name within a source), deterministic for a given ``as_of``:
``group_score``: 100 × the best learned confidence among the group's loops (SPEC
§5.1b, ``loops.decisions``: recency and relationship, never volume) + a fifth of
the nearest due date's bonus; ties by counterparty. ≤ 5 entries per group. A
triage list, not a volume count (SPEC §5.1a, §5.5): loops of one group on the
same subject collapse into one entry with a ``repeats`` count. Automated senders (``SenderProfile``) are never
ranked: their loops are counted on one ``automated`` line.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.models import Count, Max, Min, Q
from django.db.models.fields.json import KeyTextTransform
from django.utils import timezone

from brain.access import Caller, ReadScope
from brain.models import RawRecord, Source
from brain.people import person_name
from brain.selectors import backlink_counts
from loops.decisions import replay_decide
from loops.definitions import normalise_subject
from loops.detectors import CLOSED_BY_NOT_EXPECTED
from loops.extractors.rules import SenderTimezones
from loops.message import MailMessage
from loops.models import (
    CLOSED_BY_FULFILLED,
    CLOSED_BY_MODEL,
    CLOSED_BY_REPLY,
    CLOSED_BY_STALENESS,
    Detector,
    LoopStatus,
    LoopType,
    OpenLoop,
)
from loops.pipeline import (
    CLOSED_BY_SENT_ON,
    COMMITMENT_TYPES,
    kept_message,
    later_in_thread,
    settled_elsewhere,
    sibling_kept,
    source_thread_verdict,
)
from loops.selectors import (
    MAILBOX_WINDOW_DAYS,
    automated_senders,
    counterparty_page,
    counterparty_pages,
    full_names,
    loop_list,
    mail_coverage,
    messages_outside_window,
    mutes_for,
    reference_clock,
    replay_senders,
    same_person,
    snoozed_loops,
    threads_messages,
    undeliverable,
)
from loops.services import due_end_of_day, spec_loop, stale_at

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping, Sequence

    from brain.models import Page
    from loops.detectors import LoopSpec
    from loops.senders import Contact

STALE_AFTER = timedelta(hours=24)
LOOPS_PER_GROUP = 5
MAIL_KINDS = (Source.Kind.GOOGLE, Source.Kind.MAILBOX, Source.Kind.IMAP)
# Live sources sync on a schedule: stale when no successful sync for 24 h (SPEC §5.5).
LIVE_KINDS = (Source.Kind.GOOGLE, Source.Kind.IMAP)
# A mailbox whose detection window (SPEC §5.2) holds fewer messages than this, while
# most of its mail is older, gets a warning naming how little was examined.
FEW_IN_WINDOW = 50
# A window of at least this many messages whose received mail outnumbers the
# owner's sent mail more than this ratio to one is missing its sent mail (SPEC
# §5.1b): 1,781 received beside 2 sent, never an owner who answers by phone.
SENT_SCARCE_MIN = 200
SENT_SCARCE_RATIO = 50


@dataclass
class LoopView:
    """A loop as waiting shows it (stored row or an ``--as-of`` replay)."""

    id: str
    source_id: str
    loop_type: str
    status: str
    summary: str
    detector: str
    confidence: float
    due_at: datetime | None
    opened_at: datetime
    last_activity_at: datetime
    counterparty_slug: str
    counterparty_page_id: int | None
    counterparty_email: str
    counterparty_name: str
    counterparty_title: str
    page_slug: str
    quote: str
    link: str
    fulfilment_suspected: bool
    thread_id: str = ""
    ask: str = ""
    snoozed_until: datetime | None = None

    def as_dict(self, *, trusted: bool) -> dict[str, Any]:
        """Trusted: everything; remote: counts, counterparty, summary, due and
        ``snoozed_until`` only (when a curator's snooze ends, ISO 8601 UTC, while it
        is ahead: ``snooze_end``; else null), so no caller offers parked work as
        open (SPEC §5.5)."""
        base = {
            "id": self.id,
            "loop_type": self.loop_type,
            "summary": self.summary,
            "due_at": _iso(self.due_at),
            "snoozed_until": _utc(self.snoozed_until),
        }
        if not trusted:
            return base
        return {
            **base,
            "source_id": self.source_id,
            "status": self.status,
            "detector": self.detector,
            "confidence": self.confidence,
            "opened_at": _iso(self.opened_at),
            "last_activity_at": _iso(self.last_activity_at),
            "counterparty_slug": self.counterparty_slug or None,
            "counterparty_email": self.counterparty_email or None,
            "page_slug": self.page_slug or None,
            "quote": self.quote or None,
            "ask": self.ask or None,
            "link": self.link or None,
            "fulfilment_suspected": self.fulfilment_suspected,
        }


def _iso(value: datetime | None) -> str | None:
    """ISO 8601 in the owner's timezone (SPEC §5.3: due dates shown in local time)."""
    if value is None:
        return None
    return value.astimezone(ZoneInfo(settings.BRAIN_TIME_ZONE)).isoformat()


def _utc(value: datetime | None) -> str | None:
    """ISO 8601 in UTC (``2026-05-01T22:00:00+00:00``), or None."""
    return None if value is None else value.astimezone(UTC).isoformat()


def snooze_end(loop: OpenLoop, now: datetime | None = None) -> datetime | None:
    """When ``loop``'s snooze ends (SPEC §5.5: a snoozed loop stays open but is left
    out of waiting and of ``open_loops`` until then), or None when it is not
    snoozed at ``now`` (default the wall clock): closed, never snoozed, or its
    date has passed."""
    until = loop.snoozed_until
    if until is None or loop.status != LoopStatus.OPEN:
        return None
    return until if until > (now or timezone.now()) else None


def shown_evidence(evidence: Sequence[dict[str, Any]]) -> tuple[str, str, str]:
    """SPEC §5.5: ``(quote, link, ask)`` that waiting shows for a loop's
    ``evidence`` items (oldest first, ``loops.detectors._evidence``): the newest item that carries an
    ``ask`` (the message that asks: a reader checks the loop there, not in a later
    forward of mine in the same thread), else the newest item; ``ask`` is that
    item's asking sentence ("" when none). Stored loops and ``--as-of`` replays
    show the same."""
    asking = next((e for e in reversed(evidence) if e.get("ask")), None)
    item = asking or (evidence[-1] if evidence else {})
    return item.get("quote", ""), item.get("link", ""), item.get("ask", "")


def loop_view(loop: OpenLoop) -> LoopView:
    """The ``LoopView`` of a stored loop (its shown evidence: ``shown_evidence``)."""
    quote, link, ask = shown_evidence(loop.evidence or [])
    return LoopView(
        id=str(loop.pk),
        source_id=loop.source_id,
        loop_type=loop.loop_type,
        status=loop.status,
        summary=loop.summary,
        detector=loop.detector,
        confidence=loop.confidence,
        due_at=loop.due_at,
        opened_at=loop.opened_at,
        last_activity_at=loop.last_activity_at,
        counterparty_slug=loop.counterparty.slug if loop.counterparty else "",
        counterparty_page_id=loop.counterparty_id,
        counterparty_email=loop.counterparty_email,
        counterparty_name=loop.counterparty_name,
        counterparty_title=loop.counterparty.title if loop.counterparty else "",
        page_slug=loop.page.slug if loop.page else "",
        quote=quote,
        link=link,
        fulfilment_suspected=loop.fulfilment_suspected_at is not None,
        thread_id=loop.thread_id,
        ask=ask,
        snoozed_until=snooze_end(loop),
    )


def group_score(
    loops: Sequence[LoopView], nearest: datetime | None, now: datetime
) -> int:
    """A group's rank (SPEC §5.1b: by recency and relationship, never by volume):
    100 × the best ``confidence`` among its loops (the learned decision's
    probability that the loop is real, which reads the time since, the
    relationship and what followed) plus a fifth of the nearest due date's bonus
    (``due_bonus``: overdue 10, within 3 days 6, within 7 days 3, later 1). Five
    loops from one sender rank no higher than their best one."""
    best = max((v.confidence for v in loops), default=0.0)
    return round(100 * best) + due_bonus(nearest, now) // 5


def due_bonus(due_at: datetime | None, as_of: datetime) -> int:
    """50 overdue (≤ 0 days left), 30 within 3 days, 15 within 7, 5 later, 0 none."""
    if due_at is None:
        return 0
    days = (due_at - as_of).total_seconds() / 86400
    if days <= 0:
        return 50
    if days <= 3:
        return 30
    if days <= 7:
        return 15
    return 5


def closed_by_person() -> Q:
    """Loops a person closed (``done`` or ``dropped`` from the console, the admin,
    the API or the CLI: ``closed_by`` "manual", "muted" or their note), as opposed
    to the closes the import and the sweeps write (a reply or fulfilment seen in the
    mail, "not expected", sent on, staleness). A replay honours a person's verdict
    on every day it shows: the close is stamped with the wall clock, which says
    nothing about where in a mailbox file's own time it belongs (SPEC §5.5)."""
    machine = (
        Q(closed_by__in=(CLOSED_BY_REPLY, CLOSED_BY_STALENESS, CLOSED_BY_FULFILLED))
        | Q(closed_by__startswith=CLOSED_BY_NOT_EXPECTED)
        | Q(closed_by__startswith=CLOSED_BY_SENT_ON)
    )
    return Q(status__in=(LoopStatus.DONE, LoopStatus.DROPPED)) & ~machine


def _replay_threads(source: Source, as_of: datetime) -> dict[str, list[MailMessage]]:
    """Thread id → every message of the threads active in the 90 days up to
    ``as_of`` (SPEC §5.2 window), read from the source's raw records."""
    floor = as_of - timedelta(days=MAILBOX_WINDOW_DAYS)
    records = (
        RawRecord.objects.filter(source=source)
        .annotate(
            msg_date=KeyTextTransform("date", "metadata"),
            tid=KeyTextTransform("thread_id", "metadata"),
        )
        .filter(msg_date__gte=floor.isoformat(), msg_date__lte=as_of.isoformat())
    )
    thread_ids = set(records.values_list("tid", flat=True))
    by_thread: dict[str, list[MailMessage]] = {}
    for rec in RawRecord.objects.filter(
        source=source, metadata__thread_id__in=list(thread_ids)
    ).only("id", "metadata"):
        msg = MailMessage.from_metadata(rec.metadata, raw_record_id=rec.pk)
        by_thread.setdefault(msg.thread_id, []).append(msg)
    return by_thread


def _replay_view(source: Source, spec: LoopSpec) -> LoopView:
    """The view of a loop the detector would open on replay (id ``replay:<dedup>``;
    never stored, so no page slug and no fulfilment flag)."""
    person = counterparty_page(source_id=source.id, email=spec.counterparty_email)
    quote, link, ask = shown_evidence(spec.evidence)
    return LoopView(
        id=f"replay:{spec.dedup_key}",
        source_id=source.id,
        loop_type=spec.loop_type,
        status=LoopStatus.OPEN,
        summary=spec.summary,
        detector=Detector.DETERMINISTIC_THREAD,
        confidence=1.0,
        due_at=due_end_of_day(spec.due) if spec.due else None,
        opened_at=spec.opened_at,
        last_activity_at=spec.last_activity_at,
        counterparty_slug=person.slug if person else "",
        counterparty_page_id=person.pk if person else None,
        counterparty_email=spec.counterparty_email,
        counterparty_name=spec.counterparty_name,
        counterparty_title=person.title if person else "",
        page_slug="",
        quote=quote,
        link=link,
        fulfilment_suspected=False,
        thread_id=spec.thread_id,
        ask=ask,
    )


def _replay_stored(source: Source, as_of: datetime) -> list[OpenLoop]:
    """The stored extracted loops open at ``as_of``: opened by then, not closed
    before it (unless a machine closed them later), not stale by then."""
    return list(
        OpenLoop.objects.filter(source=source, opened_at__lte=as_of)
        .exclude(detector=Detector.DETERMINISTIC_THREAD)
        .filter(
            Q(status=LoopStatus.OPEN) | (Q(closed_at__gt=as_of) & ~closed_by_person())
        )
        .exclude(stale_at(as_of))
        .select_related("counterparty", "page")
    )


def _replay_source(source: Source, as_of: datetime) -> list[LoopView]:
    """``--as-of`` for a mailbox source (SPEC §5.2, §5.5): the loops a live import
    whose newest mail is at ``as_of`` would hold open, with only the mail up to
    then. The rules are the import's own (``loops.pipeline``): the deterministic
    detector on the threads active in the 90 days before ``as_of``, then the
    cross-thread passes ``process_threads`` runs after it (``settled_elsewhere``:
    answered in another thread, by a delegate, sent on), and for the stored
    extracted loops opened by then and not closed before it, the staleness rule
    (``stale_at``), fulfilment in their own thread (``kept_message`` over
    ``later_in_thread``) and in another (``sibling_kept``). A loop a person closed
    stays closed (``closed_by_person``). Writes nothing."""
    by_thread = _replay_threads(source, as_of)
    mutes = mutes_for(source_id=source.id)
    # Who the senders were and when we were last in touch, as of that day: later
    # mail must not settle (or hide) an earlier ask.
    kinds, contacts, people = replay_senders(
        source_id=source.id, owners=source.owner_addresses, until=as_of
    )
    coverage = mail_coverage(source_id=source.id, owners=source.owner_addresses)
    bounces = undeliverable(source_id=source.id, owners=source.owner_addresses)
    triaged = set(
        OpenLoop.objects.filter(closed_by_person(), source=source).values_list(
            "dedup_key", flat=True
        )
    )
    views: list[LoopView] = []
    specs: dict[str, LoopSpec] = {}
    # The senders' zones of every thread, read once and only if a deadline needs it.
    zones = SenderTimezones([m for ms in by_thread.values() for m in ms])
    for _thread_id, messages in sorted(by_thread.items()):
        verdict = source_thread_verdict(
            messages,
            source=source,
            mutes=mutes,
            now=as_of,
            kinds=kinds,
            contacts=contacts,
            coverage=coverage,
            bounces=bounces,
            timezones=zones,
        )
        for spec in verdict.open:
            if spec.dedup_key not in triaged:
                views.append(_replay_view(source, spec))
                specs[views[-1].id] = spec
    stored = _replay_stored(source, as_of)
    settled = _settle(source, views, stored, as_of, (people, contacts))
    return _replay_decided(source, as_of, settled, specs, stored)


def _replay_decided(
    source: Source,
    as_of: datetime,
    views: list[LoopView],
    specs: Mapping[str, LoopSpec],
    stored: Sequence[OpenLoop],
) -> list[LoopView]:
    """The replay's loops the learned decision keeps at ``as_of`` (SPEC §5.1b, as
    an import then would: ``replay_decide``), each with its probability as its
    ``confidence`` (what waiting ranks by); ``views`` unchanged when the decision
    is off. ``specs``: the replayed detector loops by view id; ``stored``: the
    stored extracted loops (view id: their pk)."""
    by_id = {str(loop.pk): loop for loop in stored}
    loops = [
        spec_loop(source=source, spec=specs[v.id]) if v.id in specs else by_id[v.id]
        for v in views
    ]
    decided = replay_decide(source=source, now=as_of, loops=loops)
    if decided is None:
        return views
    return [
        replace(view, confidence=probability)
        for view, (probability, kept) in zip(views, decided, strict=True)
        if kept
    ]


def _settle(
    source: Source,
    views: list[LoopView],
    stored: list[OpenLoop],
    as_of: datetime,
    known: tuple[Mapping[str, frozenset[str]], Mapping[str, Contact]],
) -> list[LoopView]:
    """The replay's cross-thread and fulfilment passes (see ``_replay_source``):
    ``views`` (replayed detector loops) less those ``settled_elsewhere`` closes,
    plus the ``stored`` extracted loops no fulfilment rule closes by ``as_of``.
    ``known``: the replay's people and contacts (``replay_senders``)."""
    thread_ids = sorted({v.thread_id for v in views} | {lp.thread_id for lp in stored})
    threads = {
        tid: [m for m in messages if m.date is not None and m.date <= as_of]
        for tid, messages in threads_messages(
            source_id=source.id, thread_ids=thread_ids
        ).items()
    }
    settled = {
        s.index
        for s in settled_elsewhere(
            source=source, loops=views, now=as_of, threads=threads, known=known
        )
    }
    owners = {a.lower() for a in source.owner_addresses}
    kept = {
        i
        for i, loop in enumerate(stored)
        if loop.loop_type in COMMITMENT_TYPES
        and kept_message(
            loop=loop,
            later=later_in_thread(loop, threads.get(loop.thread_id, [])),
            owners=owners,
        )
        is not None
    }
    kept |= {i for i, _ in sibling_kept(source=source, loops=stored, now=as_of)}
    return [v for i, v in enumerate(views) if i not in settled] + [
        loop_view(loop) for i, loop in enumerate(stored) if i not in kept
    ]


def _freshness(sources: Sequence[Source], now: datetime) -> dict[str, Any]:
    mail = [s for s in sources if s.kind in MAIL_KINDS]
    stale = [
        s
        for s in mail
        if s.kind in LIVE_KINDS
        and (s.last_success_at is None or s.last_success_at < now - STALE_AFTER)
    ]
    ages = {
        s.id: (
            round((now - s.last_success_at).total_seconds() / 3600, 1)
            if s.last_success_at
            else None
        )
        for s in mail
    }
    return {
        "mail_sources": [s.id for s in mail],
        "stale_sources": [s.id for s in stale],
        "stale": bool(mail) and len(stale) == len(mail),
        "sync_age_hours": ages,
    }


def _report_reference(
    src_rows: Sequence[Source],
    source_now: Mapping[str, datetime],
    as_of: datetime | None,
    wall: datetime,
) -> datetime:
    """The report's own "now" (SPEC §5.2): ``as_of`` when replaying; else, when
    every mail source is a mailbox, the newest of their clocks; else the wall."""
    if as_of is not None:
        return as_of
    only_mailboxes = bool(src_rows) and all(
        s.kind == Source.Kind.MAILBOX for s in src_rows if s.kind in MAIL_KINDS
    )
    mailbox_now = [source_now[s.id] for s in src_rows if s.kind == Source.Kind.MAILBOX]
    return max(mailbox_now) if only_mailboxes and mailbox_now else wall


def _source_views(
    source: Source, *, as_of: datetime | None, wall: datetime, trusted: bool
) -> list[LoopView]:
    """The loops of one source to show: a mailbox replayed at ``as_of``
    (``_replay_source``); else the stored open loops (opened by ``as_of``, or not
    snoozed past the wall clock: SPEC §5.5), at most 2,000."""
    if as_of is not None and source.kind == Source.Kind.MAILBOX:
        return _replay_source(source, as_of)
    qs = loop_list(scope=ReadScope(source_ids=(source.id,), include_private=trusted))
    if as_of is not None:
        qs = qs.filter(opened_at__lte=as_of)
    else:
        # A snoozed loop stays open but leaves waiting until its date (SPEC §5.5).
        qs = qs.exclude(snoozed_until__gt=wall)
    return [loop_view(loop) for loop in qs[:2000]]


def _hold_back(
    views: list[LoopView], sources: Collection[str]
) -> tuple[list[LoopView], list[LoopView]]:
    """(shown, held): reply-owed loops of mailboxes missing their sent mail are held
    back (SPEC §5.1b), the rest shown."""
    held = [
        v
        for v in views
        if v.source_id in sources and v.loop_type == "unanswered_inbound"
    ]
    return [v for v in views if v not in held], held


def _sort_views(
    views: list[LoopView], src_rows: Sequence[Source]
) -> tuple[list[LoopView], list[LoopView], list[LoopView]]:
    """(automated, people, no counterparty): loops whose counterparty is an
    automated sender never rank as people (SPEC §5.1a); loops without a
    counterparty go to ``no_counterparty`` (SPEC §5.5)."""
    automated = automated_senders(source_ids=[s.id for s in src_rows])
    machine: list[LoopView] = []
    people: list[LoopView] = []
    orphans: list[LoopView] = []
    for view in views:
        if (view.source_id, (view.counterparty_email or "").lower()) in automated:
            machine.append(view)
        elif view.counterparty_page_id or view.counterparty_email:
            people.append(view)
        else:
            orphans.append(view)
    return machine, people, orphans


def _first(values: Iterable[str | None]) -> str | None:
    return next((v for v in values if v), None)


def _ranked_group(
    key: str,
    loops: list[LoopView],
    *,
    now: datetime,
    backlinks: Mapping[int, int],
    trusted: bool,
) -> dict[str, Any]:
    """One counterparty's group as reported (SPEC §5.5): its score against its
    source's ``now``, and up to ``LOOPS_PER_GROUP`` entries, repeats collapsed, due
    soonest then most recent."""
    entries = _collapse_repeats(loops)
    nearest = min((v.due_at for v in loops if v.due_at), default=None)
    page_id = next(
        (v.counterparty_page_id for v in loops if v.counterparty_page_id), None
    )
    order = sorted(
        entries,
        key=lambda e: (
            e[0].due_at is None,
            e[0].due_at or now,
            -e[0].last_activity_at.timestamp(),
        ),
    )
    return {
        "counterparty": key,
        "counterparty_slug": _first(v.counterparty_slug for v in loops),
        "counterparty_email": _first(v.counterparty_email for v in loops),
        "counterparty_name": _first(v.counterparty_title for v in loops)
        or _first(v.counterparty_name for v in loops),
        "source_id": order[0][0].source_id,
        "as_of": now.isoformat(),
        "score": group_score(loops, nearest, now),
        "loop_count": len(loops),
        "entry_count": len(entries),
        "oldest_opened_at": _iso(min(v.opened_at for v in loops)),
        "nearest_due_at": _iso(nearest),
        "backlinks": backlinks.get(page_id, 0) if page_id else 0,
        "loops": [
            {**v.as_dict(trusted=trusted), "repeats": n}
            for v, n in order[:LOOPS_PER_GROUP]
        ],
        "loops_omitted": max(0, len(order) - LOOPS_PER_GROUP),
    }


def _report_warnings(
    fresh: Mapping[str, Any],
    clocks: Mapping[str, tuple[datetime, str]],
    notes: MailboxNotes,
) -> list[str]:
    """The report's warnings, in order: stale Google sources (some, not all), each
    source's clock warning, the mailbox notes, no mail source in scope."""
    warnings = []
    if fresh["stale_sources"] and not fresh["stale"]:
        warnings.append(
            f"Stale Google sources (no successful sync for 24 h): "
            f"{', '.join(fresh['stale_sources'])}."
        )
    warnings.extend(clock[1] for clock in clocks.values() if clock[1])
    warnings.extend(notes.warnings)
    if not fresh["mail_sources"]:
        warnings.append("No mail sources in scope: connect Google or import a mailbox.")
    return warnings


def _orphans_section(orphans: list[LoopView], *, trusted: bool) -> dict[str, Any]:
    """The ``no_counterparty`` part of the report: count, count by type, the first
    ``LOOPS_PER_GROUP`` loops."""
    by_type: dict[str, int] = {}
    for v in orphans:
        by_type[v.loop_type] = by_type.get(v.loop_type, 0) + 1
    return {
        "loop_count": len(orphans),
        "by_type": by_type,
        "loops": [v.as_dict(trusted=trusted) for v in orphans[:LOOPS_PER_GROUP]],
        "loops_omitted": max(0, len(orphans) - LOOPS_PER_GROUP),
    }


def _ranked_groups(
    people: list[LoopView],
    source_now: Mapping[str, datetime],
    reference: datetime,
    *,
    trusted: bool,
) -> list[dict[str, Any]]:
    """The person groups (``_person_groups``), each aged against the clock of the
    source of its oldest loop, ranked by score then counterparty (SPEC §5.5)."""
    backlinks = backlink_counts(
        {v.counterparty_page_id for v in people if v.counterparty_page_id}
    )
    ranked = [
        _ranked_group(
            key,
            loops,
            now=source_now.get(
                min(loops, key=lambda v: v.opened_at).source_id, reference
            ),
            backlinks=backlinks,
            trusted=trusted,
        )
        for key, loops in _person_groups(people).items()
    ]
    ranked.sort(key=lambda g: (-g["score"], g["counterparty"]))
    return ranked


def _automated_section(machine: list[LoopView], *, trusted: bool) -> dict[str, Any]:
    """The ``automated`` part of the report: the count, and for trusted callers the
    automated senders' addresses."""
    if not trusted:
        return {"loop_count": len(machine)}
    return {
        "loop_count": len(machine),
        "senders": sorted({v.counterparty_email for v in machine}),
    }


def waiting_report(
    *,
    caller: Caller,
    sources: Sequence[str] | None = None,
    as_of: datetime | None = None,
    top: int | None = None,
    loop_types: Collection[str] | None = None,
) -> dict[str, Any]:
    """Build the waiting view for ``caller`` (SPEC §5.5).

    ``loop_types`` (``LoopType`` values) keeps only those loops (the console's
    "what I owe" / "what they owe me"): the count, groups, scores, automated and
    no-counterparty lines and the digest are all built from the kept loops.

    Reads every source the caller may read (or the named ``sources``, which must be
    readable: ``ScopeDenied`` otherwise). ``as_of`` replays ranking (and, for mailbox
    sources, detection with the import's rules: ``_replay_source``) for that time;
    default now (mailbox sources: their newest message not dated after the wall
    clock, ``reference_clock``; each group is aged against its own source's clock,
    given as the group's ``as_of``). Returns ``{groups, no_counterparty, count,
    snoozed, stale, stale_sources, completeness, clean, redacted, as_of, sources,
    warnings, coverage, text?}`` (``snoozed``: ``snoozed_summary``, the snoozed
    loops left out; ``coverage``: ``source_coverage``, one entry per source at its
    own clock); remote callers get counts, counterparty, summary and due date only
    (no quotes, links or digest).
    """
    scope: ReadScope = (
        caller.read_scope(sources) if sources else caller.all_readable_scope()
    )
    trusted = caller.trusted
    src_rows = list(Source.objects.filter(id__in=scope.source_ids).order_by("id"))
    source_ids = [s.id for s in src_rows]
    wall = timezone.now()
    fresh = _freshness(src_rows, wall)
    # "Now" of each source (SPEC §5.2, one rule: ``reference_clock``): groups age
    # against their own source's clock (a 2002 mailbox does not age a 2001 one).
    clocks = {s.id: reference_clock(source=s, as_of=as_of) for s in src_rows}
    source_now = {sid: clock[0] for sid, clock in clocks.items()}
    reference = _report_reference(src_rows, source_now, as_of, wall)
    kept = None if loop_types is None else set(loop_types)
    views = [
        v
        for source in src_rows
        for v in _source_views(source, as_of=as_of, wall=wall, trusted=trusted)
        if kept is None or v.loop_type in kept
    ]
    notes = _mailbox_notes(src_rows, source_now)
    views, held = _hold_back(views, notes.held_inbound)
    machine, people, orphans = _sort_views(views, src_rows)
    ranked = _ranked_groups(people, source_now, reference, trusted=trusted)
    completeness = "partial" if fresh["stale_sources"] or notes.partial else "complete"
    count = len(views)
    report: dict[str, Any] = {
        "as_of": reference.isoformat(),
        "groups": ranked if top is None else ranked[:top],
        "no_counterparty": _orphans_section(orphans, trusted=trusted),
        "automated": _automated_section(machine, trusted=trusted),
        "count": count,
        "snoozed": snoozed_summary(
            source_ids=source_ids,
            loop_types=loop_types,
            now=wall if as_of is None else None,
        ),
        "sources": source_ids,
        "stale": fresh["stale"],
        "stale_sources": fresh["stale_sources"],
        "sync_age_hours": fresh["sync_age_hours"],
        "completeness": completeness,
        "clean": count == 0
        and bool(fresh["mail_sources"])
        and completeness == "complete",
        "redacted": not trusted,
        "held_back": {"loop_count": len(held), "sources": sorted(notes.held_inbound)},
        "not_kept": {"loop_count": not_kept_count(source_ids, clocks)},
        "coverage": source_coverage(src_rows, clocks, notes),
        "warnings": _report_warnings(fresh, clocks, notes),
    }
    if trusted:
        report["text"] = render_digest(report)
    return report


def not_kept_count(
    source_ids: Sequence[str], clocks: dict[str, tuple[datetime, str]]
) -> int:
    """Candidates the learned decision closed (``closed_by`` ``model``, SPEC §5.1b)
    whose last activity lies in the 90-day window of their source's clock, so a
    list emptied by the model never reads as a clean bill without saying so."""
    window = timedelta(days=MAILBOX_WINDOW_DAYS)
    q = Q()
    for sid in source_ids:
        now = clocks[sid][0]
        q |= Q(
            source_id=sid, last_activity_at__gt=now - window, last_activity_at__lte=now
        )
    if not source_ids:
        return 0
    return (
        OpenLoop.objects.filter(q, status=LoopStatus.DROPPED)
        .filter(closed_by__startswith=CLOSED_BY_MODEL)
        .count()
    )


@dataclass
class MailboxNotes:
    """What ``waiting`` must say about its mailbox sources: ``warnings``, whether
    coverage is ``partial``, and the sources whose reply-owed verdicts are held
    back (``held_inbound``: the window holds others' mail but hardly any of the
    owner's, SPEC §5.1b)."""

    warnings: list[str]
    partial: bool = False
    held_inbound: frozenset[str] = frozenset()
    #: Per mailbox source: ``{"messages", "in_window", "notes": [{code, text}]}``
    #: (codes ``no_own_mail`` | ``sent_missing`` | ``sliver``), for ``coverage``.
    by_source: dict[str, dict[str, Any]] = field(default_factory=dict)


def _mailbox_notes(
    src_rows: Sequence[Source], source_now: dict[str, datetime]
) -> MailboxNotes:
    """The coverage of each mailbox source's 90-day window (SPEC §5.2, §5.1b):
    none of it the owner's (nothing the owner asked or promised can be seen),
    the owner's sent mail missing beside others' (whether the owner answered
    cannot be seen: reply-owed loops are held back), or a sliver of the mailbox
    in the window (replay an earlier day)."""
    notes = MailboxNotes(warnings=[])
    held: set[str] = set()
    for source in src_rows:
        if source.kind != Source.Kind.MAILBOX:
            continue
        now = source_now[source.id]
        older, total = messages_outside_window(source_id=source.id, now=now)
        inside = total - older
        mine = mail_coverage(
            source_id=source.id, owners=source.owner_addresses
        ).mine_between(now - timedelta(days=MAILBOX_WINDOW_DAYS), now)
        window = f"the {MAILBOX_WINDOW_DAYS} days before {now:%Y-%m-%d}"
        seen = len(notes.warnings)
        codes: list[str] = []
        if inside and not mine:
            # A list archive, an inbox without its sent mail: what the owner
            # asked or promised cannot be seen, so no "you are clean".
            notes.partial = True
            codes.append("no_own_mail")
            notes.warnings.append(
                f"Source {source.id}: none of its {inside} messages in {window} is "
                "the owner's own: what the owner asked or promised cannot be "
                "seen (check the owner addresses, or import the sent folder)."
            )
        elif inside >= SENT_SCARCE_MIN and mine * SENT_SCARCE_RATIO < inside - mine:
            notes.partial = True
            held.add(source.id)
            codes.append("sent_missing")
            notes.warnings.append(
                f"Source {source.id}: {inside - mine} received and only {mine} sent "
                f"messages in {window}: whether the owner answered cannot be seen, "
                "so its reply-owed loops are held back (import the sent folder, or "
                "check the owner addresses)."
            )
        if inside < FEW_IN_WINDOW and older > inside:
            # Detection looked at a sliver of this mailbox: no "you are clean".
            notes.partial = True
            codes.append("sliver")
            notes.warnings.append(
                f"Source {source.id}: only {inside} of its {total} messages fall in "
                f"the {MAILBOX_WINDOW_DAYS} days before its newest message "
                f"({now:%Y-%m-%d}), the window loops are detected in; replay an "
                "earlier day with --as-of (API: as_of)."
            )
        notes.by_source[source.id] = {
            "messages": total,
            "in_window": inside,
            "notes": [
                {"code": code, "text": text}
                for code, text in zip(codes, notes.warnings[seen:], strict=True)
            ],
        }
    notes.held_inbound = frozenset(held)
    return notes


def aged_out_asks(
    source_ids: Sequence[str], clocks: dict[str, tuple[datetime, str]]
) -> dict[str, int]:
    """Per source, the unanswered asks (``unanswered_inbound``) the 90-day window
    left behind (SPEC §5.2, ``loops_window_sweep``: closed ``stale`` by staleness,
    last activity before the window of the source's clock), so an archive whose
    asks all aged out never reads as a bare "clean". Sources without any: absent."""
    window = timedelta(days=MAILBOX_WINDOW_DAYS)
    q = Q()
    for sid in source_ids:
        q |= Q(source_id=sid, last_activity_at__lt=clocks[sid][0] - window)
    if not source_ids:
        return {}
    rows = (
        OpenLoop.objects.filter(
            q,
            status=LoopStatus.STALE,
            closed_by=CLOSED_BY_STALENESS,
            loop_type=LoopType.UNANSWERED_INBOUND,
        )
        .values("source_id")
        .annotate(n=Count("id"))
    )
    return {row["source_id"]: row["n"] for row in rows}


def source_coverage(
    src_rows: Sequence[Source],
    clocks: dict[str, tuple[datetime, str]],
    notes: MailboxNotes,
) -> list[dict[str, Any]]:
    """One entry per mail source in scope (SPEC §5.2, §5.5), for a coverage line each:
    ``{source_id, name, kind, as_of (ISO 8601, the source's own clock), messages
    and in_window (mailbox sources, else None), notes: [{code, text}],
    aged_out_asks}`` (``aged_out_asks``: ``aged_out_asks``)."""
    mail = [s for s in src_rows if s.kind in MAIL_KINDS]
    aged = aged_out_asks([s.id for s in mail], clocks)
    out = []
    for source in mail:
        counts = notes.by_source.get(source.id, {})
        out.append(
            {
                "source_id": source.id,
                "name": source.name or source.id,
                "kind": source.kind,
                "as_of": clocks[source.id][0].isoformat(),
                "messages": counts.get("messages"),
                "in_window": counts.get("in_window"),
                "notes": counts.get("notes", []),
                "aged_out_asks": aged.get(source.id, 0),
            }
        )
    return out


#: A coverage note in a few words, for the one-line summary of a source.
COVERAGE_SHORT = {
    "no_own_mail": "none of the owner's own mail in the window",
    "sent_missing": "sent mail missing",
    "sliver": "little mail in the 90-day window",
}


def coverage_line(entry: Mapping[str, Any]) -> str:
    """A ``source_coverage`` entry as one line: "mailbox Work mail: 1,234 messages
    to 2001-12-03; sent mail missing" (a live source: "google Team mail: live, as
    of 2026-12-07")."""
    day = entry["as_of"][:10]
    head = f"{entry['kind']} {entry['name']}"
    if entry["messages"] is None:
        parts = [f"{head}: live, as of {day}"]
    else:
        parts = [f"{head}: {entry['messages']:,} messages to {day}"]
    parts += [COVERAGE_SHORT.get(n["code"], n["code"]) for n in entry["notes"]]
    if entry["aged_out_asks"]:
        parts.append(
            f"{entry['aged_out_asks']:,} unanswered ask(s) aged past the "
            f"{MAILBOX_WINDOW_DAYS}-day window"
        )
    return "; ".join(parts)


def snoozed_summary(
    *,
    source_ids: Sequence[str],
    loop_types: Collection[str] | None,
    now: datetime | None,
) -> dict[str, Any]:
    """The loops waiting leaves out because a curator snoozed them (SPEC §5.5):
    ``{loop_count, next_wake_at, last_wake_at}`` (ISO 8601 UTC or None), counted
    at ``now``; a replay (``now`` None) hides nothing, so it counts none."""
    if now is None:
        return {"loop_count": 0, "next_wake_at": None, "last_wake_at": None}
    agg = snoozed_loops(
        source_ids=source_ids, loop_types=loop_types, now=now
    ).aggregate(n=Count("id"), first=Min("snoozed_until"), last=Max("snoozed_until"))
    return {
        "loop_count": agg["n"],
        "next_wake_at": _utc(agg["first"]),
        "last_wake_at": _utc(agg["last"]),
    }


def snoozed_line(snoozed: Mapping[str, Any]) -> str:
    """``snoozed_summary`` as one line: "2 snoozed (until 2026-05-03)" or, when they
    wake on different days, "3 snoozed (until 2026-05-03 … 2026-05-10)", in the
    owner's days (``BRAIN_TIME_ZONE``)."""
    first, last = (_local_day(snoozed.get(k)) for k in ("next_wake_at", "last_wake_at"))
    until = first if first == last else f"{first} … {last}"
    return f"{snoozed['loop_count']} snoozed (until {until})"


def _local_day(iso: str | None) -> str:
    """The owner's calendar day (``BRAIN_TIME_ZONE``) of an ISO 8601 time, or ""."""
    if not iso:
        return ""
    when = datetime.fromisoformat(iso).astimezone(ZoneInfo(settings.BRAIN_TIME_ZONE))
    return when.date().isoformat()


_Key = tuple[str, str]


def _person_lookups(
    views: list[LoopView],
) -> tuple[dict[_Key, Page], dict[_Key, frozenset[str]], dict[_Key, str]]:
    """Per (source, lower-cased address) of the views' counterparties: the person
    page people resolution files an unpaged address on today, the other addresses
    of the same person among them (``same_person``), and the full name their
    profile knows (``full_names``)."""
    unpaged: dict[str, set[str]] = {}
    emails: dict[str, set[str]] = {}
    for v in views:
        if v.counterparty_email:
            emails.setdefault(v.source_id, set()).add(v.counterparty_email.lower())
            if not v.counterparty_page_id:
                unpaged.setdefault(v.source_id, set()).add(v.counterparty_email.lower())
    pages = {
        (source_id, email): page
        for source_id, addresses in sorted(unpaged.items())
        for email, page in counterparty_pages(
            source_id=source_id, emails=addresses
        ).items()
    }
    kin: dict[_Key, frozenset[str]] = {}
    named: dict[_Key, str] = {}
    for source_id, addresses in sorted(emails.items()):
        for address, same in same_person(
            source_id=source_id, addresses=addresses
        ).items():
            kin[(source_id, address)] = same & addresses
        for address, full in full_names(
            source_id=source_id, addresses=addresses
        ).items():
            named[(source_id, address)] = full
    return pages, kin, named


def _view_nodes(
    view: LoopView,
    pages: Mapping[_Key, Page],
    kin: Mapping[_Key, frozenset[str]],
    named: Mapping[_Key, str],
) -> tuple[list[str], str]:
    """(nodes, label) of one loop for grouping: its page, its address and the same
    person's other addresses, its normalised full name; the label is
    ``<source>:<page slug>`` or the address. Fills in the view's page found today
    and the full name its profile knows where the view lacks them."""
    email = (view.counterparty_email or "").lower()
    page = pages.get((view.source_id, email))
    slug = view.counterparty_slug if view.counterparty_page_id else ""
    if page is not None and not slug:
        slug = page.slug
        view.counterparty_page_id = page.pk
        view.counterparty_slug, view.counterparty_title = page.slug, page.title
    nodes = [f"page:{view.source_id}:{slug}"] if slug else []
    if email:
        nodes.append(f"mail:{email}")
        nodes += [
            f"mail:{other}"
            for other in sorted(kin.get((view.source_id, email), ()))
            if other != email
        ]
    name = person_name(view.counterparty_name or "")
    known = named.get((view.source_id, email))
    if not slug and known and (name is None or not name.full):
        view.counterparty_name = known
        name = person_name(known)
    if slug and known and "@" in (view.counterparty_title or ""):
        # A person page still titled with the address: the name is known.
        view.counterparty_title = known
    if name is not None and name.full:
        nodes.append(f"name:{view.source_id}:{name.key()}")
    return nodes, f"{view.source_id}:{slug}" if slug else email


def _person_groups(views: list[LoopView]) -> dict[str, list[LoopView]]:
    """One group per person: loops whose counterparties share a person page (the
    loop's own, or the page the people resolution files the address on today) or,
    within a source, the same normalised full display name ("Lee, Dana" and "Dana
    Lee" from a personal and a work address) or the same person by their sender
    profiles (``loops.selectors.same_person``: the name they sign with) fall
    together (SPEC §5.5). A counterparty without a page and known only by a
    surname or an address, or whose page is still titled with the address, is
    named by the full name its profile knows (``full_names``). Keyed by
    ``<source>:<page slug>`` when the group has a page, else by its smallest
    address."""
    pages, kin, named = _person_lookups(views)
    parent: dict[str, str] = {}

    def find(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    labels: list[tuple[LoopView, list[str], str]] = []
    for view in views:
        nodes, label = _view_nodes(view, pages, kin, named)
        for node in nodes[1:]:
            parent[find(node)] = find(nodes[0])
        labels.append((view, nodes, label))
    keys: dict[str, tuple[bool, str]] = {}
    for _view, nodes, label in labels:
        root = find(nodes[0])
        # A page label (it carries the source id) beats an address; then the
        # smallest, so the key does not depend on the loops' order.
        rank = (":" not in label, label)
        keys[root] = min(keys.get(root, rank), rank)
    out: dict[str, list[LoopView]] = {}
    for view, nodes, _label in labels:
        out.setdefault(keys[find(nodes[0])][1], []).append(view)
    return out


def _collapse_repeats(loops: list[LoopView]) -> list[tuple[LoopView, int]]:
    """One entry per (loop type, subject) of a group: the most recent loop and how
    many loops it stands for ("the same reminder 28 times" is one entry)."""
    buckets: dict[tuple[str, str], list[LoopView]] = {}
    for view in loops:
        subject = view.summary.split(":", 1)[-1]
        key = (view.loop_type, normalise_subject(subject.strip().strip('"')))
        buckets.setdefault(key, []).append(view)
    return [
        (max(group, key=lambda v: v.last_activity_at), len(group))
        for group in buckets.values()
    ]


def render_digest(report: dict[str, Any]) -> str:
    """A paste-ready plain-text digest (trusted callers only). Ages are rendered
    from each group's ``as_of`` (its source's clock) at read time; "You are clean" only when the report says so."""
    as_of = datetime.fromisoformat(report["as_of"])
    lines = [
        f"Waiting as of {as_of:%Y-%m-%d %H:%M %Z}: {report['count']} open loop(s)."
    ]
    if report["stale"]:
        lines.append(
            "WARNING: every mail source is stale; these results may be out of date."
        )
    lines.extend(f"Note: {warning}" for warning in report["warnings"])
    for n, group in enumerate(report["groups"], 1):
        who = (
            group["counterparty_name"]
            or group["counterparty_slug"]
            or group["counterparty_email"]
        )
        lines.append(
            f"{n}. {who} — {group['loop_count']} loop(s), score {group['score']}"
        )
        for loop in group["loops"]:
            now = datetime.fromisoformat(group.get("as_of") or report["as_of"])
            # Since when it waits (the ask, not a later chaser of mine).
            age = (now - datetime.fromisoformat(loop["opened_at"])).days
            last = (now - datetime.fromisoformat(loop["last_activity_at"])).days
            touched = f", last activity {last} d ago" if last < age else ""
            due = f", due {loop['due_at'][:10]}" if loop["due_at"] else ""
            times = f" ×{loop['repeats']}" if loop.get("repeats", 1) > 1 else ""
            lines.append(
                f"   - [{loop['loop_type']}] {loop['summary']}{times} "
                f"({age} d ago{touched}{due})"
            )
            if loop.get("ask") or loop.get("quote"):
                lines.append(f"     > {loop.get('ask') or loop['quote']}")
        if group["loops_omitted"]:
            lines.append(f"   … and {group['loops_omitted']} more")
    machine = report.get("automated") or {}
    if machine.get("loop_count"):
        lines.append(
            f"Automated senders (not ranked): {machine['loop_count']} loop(s) from "
            f"{len(machine.get('senders', []))} sender(s)."
        )
    orphans = report["no_counterparty"]
    if orphans["loop_count"]:
        lines.append(f"No counterparty: {orphans['loop_count']} loop(s).")
    snoozed = report.get("snoozed") or {}
    if snoozed.get("loop_count"):
        lines.append(f"{snoozed_line(snoozed)} (left out until then).")
    not_kept = (report.get("not_kept") or {}).get("loop_count", 0)
    if not_kept:
        lines.append(
            f"Judged not open by the learned decision: {not_kept} candidate(s) "
            "(closed by 'model'; reopen one from the console to keep it)."
        )
    aged = sum(c["aged_out_asks"] for c in report.get("coverage", []))
    if report["clean"]:
        lines.append("You are clean: nothing is waiting on you.")
    elif report["count"] == 0:
        lines.append(
            "No open loops found, but coverage is not complete: this is not a clean bill."
        )
    if aged:
        lines.append(
            f"{aged} unanswered ask(s) aged past the {MAILBOX_WINDOW_DAYS}-day "
            "window and went stale (not listed above)."
        )
    return "\n".join(lines)
