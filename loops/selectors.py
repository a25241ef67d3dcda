"""Reads of the loops app (SPEC §5): thread messages, mutes, loops in a scope,
reference times and counterparty resolution. Writes live in ``loops.services``."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Count, Max, Q, QuerySet
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Substr
from django.utils import timezone

from brain.models import Alias, Page, RawRecord, Source
from brain.people import names_compatible, person_name
from loops.definitions import (
    BOUNCE_SENDERS,
    BOUNCE_SUBJECT,
    MailCoverage,
    bounced_recipients,
)
from loops.detectors import Mutes
from loops.message import MailMessage
from loops.models import (
    Detector,
    LoopEvent,
    LoopStatus,
    LoopSuppression,
    OpenLoop,
    SenderProfile,
)
from loops.senders import Contact, classify_senders

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from brain.access import ReadScope

logger = logging.getLogger(__name__)

MAILBOX_WINDOW_DAYS = 90


def thread_records(*, source_id: str, thread_id: str) -> QuerySet[RawRecord]:
    """Raw records of one thread (``metadata.thread_id``), oldest capture first."""
    return RawRecord.objects.filter(
        source_id=source_id, metadata__thread_id=thread_id
    ).order_by("captured_at", "id")


def thread_messages(*, source_id: str, thread_id: str) -> list[MailMessage]:
    """The thread's messages rebuilt from ``RawRecord.metadata`` (SPEC §5)."""
    return [
        MailMessage.from_metadata(r.metadata, raw_record_id=r.pk)
        for r in thread_records(source_id=source_id, thread_id=thread_id).only(
            "id", "metadata"
        )
    ]


def threads_messages(
    *, source_id: str, thread_ids: Sequence[str]
) -> dict[str, list[MailMessage]]:
    """Messages of many threads in one query: ``{thread_id: [MailMessage, ...]}``."""
    out: dict[str, list[MailMessage]] = {t: [] for t in thread_ids}
    records = (
        RawRecord.objects.filter(
            source_id=source_id, metadata__thread_id__in=list(thread_ids)
        )
        .order_by("captured_at", "id")
        .values_list("id", "metadata")
    )
    for pk, metadata in records:
        tid = metadata.get("thread_id")
        if tid in out:
            out[tid].append(MailMessage.from_metadata(metadata, raw_record_id=pk))
    return out


def threads_pages(*, source_id: str, thread_ids: Sequence[str]) -> dict[str, Page]:
    """The live ``email`` page of each thread (first by id), in one query. The
    body (the whole thread's text) is deferred: loops only point at the page."""
    pages: dict[str, Page] = {}
    for page in (
        Page.objects.filter(
            source_id=source_id,
            type__name="email",
            frontmatter__thread_id__in=list(thread_ids),
            deleted_at__isnull=True,
        )
        .only("id", "source_id", "slug", "title", "type_id", "frontmatter")
        .order_by("id")
    ):
        pages.setdefault(str(page.frontmatter.get("thread_id")), page)
    return pages


def thread_page(*, source_id: str, thread_id: str) -> Page | None:
    """The thread's live ``email`` page (frontmatter ``thread_id``), or None."""
    return (
        Page.objects.filter(
            source_id=source_id,
            type__name="email",
            frontmatter__thread_id=thread_id,
            deleted_at__isnull=True,
        )
        .order_by("id")
        .first()
    )


def mutes_for(*, source_id: str) -> Mutes:
    """The source's sender and thread mutes, lower-cased."""
    senders: set[str] = set()
    threads: set[str] = set()
    for kind, value in LoopSuppression.objects.filter(source_id=source_id).values_list(
        "kind", "value"
    ):
        (senders if kind == LoopSuppression.Kind.SENDER else threads).add(value)
    return Mutes(senders=frozenset(senders), threads=frozenset(threads))


OUTLIER_GAP_DAYS = 30
"""A message with no other message in this many days before it is an outlier date
and never sets a mailbox's clock (SPEC §5.2)."""
OUTLIER_MIN_MESSAGES = 50
"""An outlier stands out against a bulk: below this many dated messages a gap is
the mail's own shape and the newest message sets the clock."""


def settled_clock(dates: Iterable[datetime]) -> datetime | None:
    """The newest of ``dates`` that is not an outlier (SPEC §5.2, revised turn 3):
    one with another, strictly older date in the ``OUTLIER_GAP_DAYS`` before it.
    None for no dates; the newest date when fewer than ``OUTLIER_MIN_MESSAGES``
    are given or every date is alone. The one home of the outlier rule."""
    ordered = sorted(set(dates), reverse=True)
    if len(ordered) < OUTLIER_MIN_MESSAGES:
        return ordered[0] if ordered else None
    gap = timedelta(days=OUTLIER_GAP_DAYS)
    for here, older in zip(ordered, ordered[1:], strict=False):
        if here - older <= gap:
            return here
    return ordered[0]


def stored_message_dates(
    *, source_id: str, until: datetime | None = None, limit: int | None = None
) -> list[datetime]:
    """Dates of the source's stored messages (metadata ``date``, UTC), newest first,
    up to ``until`` and at most ``limit`` of them."""
    qs = RawRecord.objects.filter(source_id=source_id).exclude(metadata__date=None)
    qs = qs.annotate(msg_date=KeyTextTransform("date", "metadata")).filter(
        msg_date__regex=r"^\d{4}-\d{2}-\d{2}T"
    )
    if until is not None:
        qs = qs.filter(msg_date__lte=until.astimezone(UTC).isoformat())
    values = qs.order_by("-msg_date").values_list("msg_date", flat=True)
    return [datetime.fromisoformat(d) for d in (values[:limit] if limit else values)]


def newest_message_at(
    *, source_id: str, until: datetime | None = None
) -> datetime | None:
    """Date of the newest message in the source (metadata ``date``, UTC, up to
    ``until``) that is not an outlier (``settled_clock``), or None. Reads the
    newest dates in growing slices, so a settled mailbox costs one small query."""
    limit = 256
    while True:
        dates = stored_message_dates(source_id=source_id, until=until, limit=limit)
        clock = settled_clock(dates)
        if len(dates) < limit or clock != dates[0] or _has_neighbour(dates):
            return clock
        limit *= 4


def _has_neighbour(dates: list[datetime]) -> bool:
    """Whether the newest of ``dates`` (newest first) is settled by a strictly older
    date within ``OUTLIER_GAP_DAYS``."""
    older = [d for d in dates[1:] if d < dates[0]]
    return bool(older) and dates[0] - older[0] <= timedelta(days=OUTLIER_GAP_DAYS)


def messages_outside_window(*, source_id: str, now: datetime) -> tuple[int, int]:
    """``(dated messages older than the mailbox window before now, dated messages
    up to now)`` of a source (SPEC §5.2: a mailbox source only considers threads
    active in the ``MAILBOX_WINDOW_DAYS`` before its reference time)."""
    floor = (now - timedelta(days=MAILBOX_WINDOW_DAYS)).astimezone(UTC).isoformat()
    qs = (
        RawRecord.objects.filter(source_id=source_id)
        .annotate(msg_date=KeyTextTransform("date", "metadata"))
        .filter(
            msg_date__regex=r"^\d{4}-\d{2}-\d{2}T",
            msg_date__lte=now.astimezone(UTC).isoformat(),
        )
    )
    counts = qs.aggregate(
        total=Count("pk"), older=Count("pk", filter=Q(msg_date__lt=floor))
    )
    return counts["older"], counts["total"]


def reference_time(*, source: Source, as_of: datetime | None = None) -> datetime:
    """ "Now" for loop detection (SPEC §5.2): ``as_of`` when replaying; the wall clock
    for live sources; the newest message in the source for mailbox sources, leaving
    out messages dated after the wall clock (one message with a wrong future date
    must not make every loop stale)."""
    return reference_clock(source=source, as_of=as_of)[0]


def reference_clock(
    *, source: Source, as_of: datetime | None = None
) -> tuple[datetime, str]:
    """``(reference time, warning)`` (see ``reference_time``); the warning is ''
    unless every dated message of a mailbox source lies after the wall clock: then
    the newest message is the reference time (the mailbox still gets its loops)
    and the warning says the clock and the mail disagree."""
    if as_of is not None:
        return as_of, ""
    wall = timezone.now()
    if source.kind != Source.Kind.MAILBOX:
        return wall, ""
    newest = newest_message_at(source_id=source.id, until=wall)
    if newest is not None:
        return newest, ""
    future = newest_message_at(source_id=source.id)
    if future is None:
        return wall, ""
    warning = (
        f"every message of source {source.id} is dated after the wall clock "
        f"({wall:%Y-%m-%d %H:%M} UTC); its newest message ({future:%Y-%m-%d %H:%M}"
        " UTC) is used as the reference time"
    )
    logger.warning("loops: %s", warning)
    return future, warning


def counterparty_page(*, source_id: str, email: str) -> Page | None:
    """The person page whose email alias is ``email`` in the same source, only when
    exactly one live person page has it (ambiguous means no pick; never a guess)."""
    return counterparty_pages(source_id=source_id, emails={email}).get(
        (email or "").lower()
    )


def counterparty_pages(*, source_id: str, emails: Iterable[str]) -> dict[str, Page]:
    """``counterparty_page`` for many addresses in two queries: ``{email (lower):
    page}`` for each address exactly one live person page of the source has."""
    wanted = {e.lower() for e in emails if e}
    if not wanted:
        return {}
    # Page ids through the (source, alias) index first; DISTINCT over whole page
    # rows (bodies included) cost milliseconds per call.
    owners: dict[str, set[int]] = {}
    for alias, page_id in Alias.objects.filter(
        source_id=source_id,
        alias__in=wanted,
        page__type__name="person",
        page__deleted_at__isnull=True,
    ).values_list("alias", "page_id"):
        owners.setdefault(alias, set()).add(page_id)
    single = {alias: ids.pop() for alias, ids in owners.items() if len(ids) == 1}
    pages = Page.objects.in_bulk(set(single.values()))
    return {alias: pages[pk] for alias, pk in single.items() if pk in pages}


def loop_list(
    *,
    scope: ReadScope,
    status: str | None = LoopStatus.OPEN,
    loop_type: str | None = None,
    counterparty: str | None = None,
) -> QuerySet[OpenLoop]:
    """Loops in the scope's sources (loops have no visibility tier; redaction is the
    caller's job), newest activity first, with counterparty and page joined."""
    qs = OpenLoop.objects.filter(source_id__in=scope.source_ids)
    if status:
        qs = qs.filter(status=status)
    if loop_type:
        qs = qs.filter(loop_type=loop_type)
    if counterparty:
        value = counterparty.lower()
        qs = qs.filter(Q(counterparty_email=value) | Q(counterparty__slug=counterparty))
    return qs.select_related("counterparty", "page", "source").order_by(
        "-last_activity_at", "-id"
    )


def snoozed_loops(
    *,
    source_ids: Iterable[str],
    loop_types: Iterable[str] | None = None,
    now: datetime | None = None,
) -> QuerySet[OpenLoop]:
    """Open loops of ``source_ids`` a curator snoozed past ``now`` (default the wall
    clock; SPEC §5.5: they stay open but waiting and ``open_loops`` leave them out
    until then), optionally only ``loop_types``; the soonest to wake first, with
    counterparty and page joined."""
    qs = OpenLoop.objects.filter(
        source_id__in=list(source_ids),
        status=LoopStatus.OPEN,
        snoozed_until__gt=now or timezone.now(),
    )
    if loop_types is not None:
        qs = qs.filter(loop_type__in=list(loop_types))
    return qs.select_related("counterparty", "page", "source").order_by(
        "snoozed_until", "id"
    )


def profile_messages(
    *, source_id: str, addresses: set[str] | None = None
) -> list[MailMessage]:
    """Messages a sender profile is computed from (SPEC §5.1a): every message of
    the source, or with ``addresses`` those senders' messages plus the owner's own
    (for reciprocity)."""
    qs = RawRecord.objects.filter(source_id=source_id).exclude(
        metadata__message_id=None
    )
    if addresses is not None:
        qs = qs.filter(
            Q(metadata__from_addr__in=sorted(addresses))
            | Q(metadata__is_mine=True)
            | Q(metadata__labels__contains=["SENT"])
        )
    return [
        MailMessage.from_metadata(metadata, raw_record_id=pk)
        for pk, metadata in qs.values_list("id", "metadata")
        if metadata.get("message_id") and metadata.get("thread_id") is not None
    ]


def counterparty_messages(
    *, source_id: str, addresses: Iterable[str], owners: Iterable[str], after: datetime
) -> list[MailMessage]:
    """Messages of the source dated after ``after`` that ``addresses`` sent, plus
    the owner's own messages (From among ``owners``, sent folder or SENT label: to
    them, or to a third party who delivers for me),
    oldest first: where a promise to or from one of them may have been kept in
    another thread (SPEC §5.4). One query."""
    wanted = sorted({(a or "").lower() for a in addresses if a})
    if not wanted:
        return []
    match = (
        Q(metadata__from_addr__in=[*wanted, *sorted(owners)])
        | Q(metadata__is_mine=True)
        | Q(metadata__labels__contains=["SENT"])
    )
    out = [
        MailMessage.from_metadata(metadata, raw_record_id=pk)
        for pk, metadata in RawRecord.objects.filter(
            match, source_id=source_id
        ).values_list("id", "metadata")
        if metadata.get("message_id") and metadata.get("date")
    ]
    return sorted(
        (m for m in out if m.date and m.date > after),
        key=lambda m: (m.sent_at, m.message_id),
    )


def domain_people(*, source_id: str, domain: str) -> list[str]:
    """The addresses at ``domain`` (lower-cased, exact domain) whose stored sender
    profile in the source is a person: the counterparty's colleagues who wrote to
    the owner (SPEC §5.1a hand-offs). One query."""
    domain = (domain or "").lower().strip()
    if not domain:
        return []
    return sorted(
        SenderProfile.objects.filter(
            source_id=source_id,
            address__endswith=f"@{domain}",
            kind=SenderProfile.Kind.PERSON,
        ).values_list("address", flat=True)
    )


def sender_kinds(*, source_id: str, addresses: Iterable[str]) -> dict[str, str]:
    """``{address: person | automated}`` for the stored profiles among
    ``addresses`` (lower-cased); senders without a profile are absent."""
    wanted = sorted({(a or "").lower() for a in addresses if a})
    if not wanted:
        return {}
    return dict(
        SenderProfile.objects.filter(
            source_id=source_id, address__in=wanted
        ).values_list("address", "kind")
    )


def automated_senders(*, source_ids: Iterable[str]) -> set[tuple[str, str]]:
    """``{(source_id, address)}`` of every sender whose verdict is automated."""
    return set(
        SenderProfile.objects.filter(
            source_id__in=list(source_ids), kind=SenderProfile.Kind.AUTOMATED
        ).values_list("source_id", "address")
    )


def sender_threads(*, source_id: str, address: str) -> list[str]:
    """Thread ids of the source in which ``address`` sent a message."""
    return sorted(
        {
            t
            for t in RawRecord.objects.filter(
                source_id=source_id, metadata__from_addr=address.lower()
            ).values_list("metadata__thread_id", flat=True)
            if t
        }
    )


# A source of at least this many messages of which fewer than this share come
# from anyone else holds only my sent mail (an exported sent folder).
SENT_ONLY_MIN_MESSAGES = 50
SENT_ONLY_INBOUND_SHARE = 0.02


def _mine(owners: Iterable[str]) -> Q:
    """My messages: the sent folder, a SENT label or an owner address."""
    return (
        Q(metadata__is_mine=True)
        | Q(metadata__labels__contains=["SENT"])
        | Q(metadata__from_addr__in=sorted({(o or "").lower() for o in owners}))
    )


def _answers_seen(total: int, mine: int) -> bool:
    """The rule of ``answers_visible`` over the counts of a source's messages."""
    if total < SENT_ONLY_MIN_MESSAGES:
        return True
    return (total - mine) >= SENT_ONLY_INBOUND_SHARE * total


def _day_counts(
    records: QuerySet[RawRecord], owners: Iterable[str]
) -> tuple[dict[str, tuple[int, int]], int, int, int | None]:
    """Per UTC day of ``records`` (mail only) ``{day: (mine, others)}``, with the
    totals (undated messages included) and the highest id read, in one grouped
    statement."""
    rows = (
        records.filter(kind=RawRecord.Kind.RFC822)
        .annotate(day=Substr(KeyTextTransform("date", "metadata"), 1, 10))
        .values("day")
        .annotate(
            total=Count("id"), mine=Count("id", filter=_mine(owners)), top=Max("id")
        )
    )
    days: dict[str, tuple[int, int]] = {}
    total = mine = 0
    top: int | None = None
    for row in rows:
        total, mine = total + row["total"], mine + row["mine"]
        top = max(top or 0, row["top"])
        if row["day"]:
            days[row["day"]] = (row["mine"], row["total"] - row["mine"])
    return days, total, mine, top


def mail_coverage(*, source_id: str, owners: Iterable[str]) -> MailCoverage:
    """Which days of the source hold others' mail, beside the source-level
    ``answers_visible`` (``loops.definitions.MailCoverage``; SPEC §5.1a). One
    grouped statement."""
    days, total, mine, _top = _day_counts(
        RawRecord.objects.filter(source_id=source_id), owners
    )
    return MailCoverage.from_days(days, whole=_answers_seen(total, mine))


def answers_visible(*, source_id: str, owners: Iterable[str]) -> bool:
    """False when the source holds (almost) only my own mail: at least
    ``SENT_ONLY_MIN_MESSAGES`` messages and under ``SENT_ONLY_INBOUND_SHARE`` of
    them from others (sent folder or SENT label or an owner address is mine). Such
    a source cannot show whether anyone answered my asks (SPEC §5.1a). One query
    (both counts in one scan: every batch of an import asks again; an import
    reads only its new records, ``SourceScans``)."""
    counts = RawRecord.objects.filter(
        source_id=source_id, kind=RawRecord.Kind.RFC822
    ).aggregate(total=Count("id"), mine=Count("id", filter=_mine(owners)))
    return _answers_seen(counts["total"], counts["mine"])


def _bounce_notices() -> Q:
    """The prefilter of ``undeliverable``: a notice's report, sender or subject."""
    senders = Q()
    for local in BOUNCE_SENDERS:
        senders |= Q(metadata__from_addr__istartswith=f"{local}@")
    return (
        Q(metadata__failed_recipients__0__isnull=False)
        | senders
        | Q(metadata__subject__iregex=BOUNCE_SUBJECT)
    )


def _add_bounces(
    out: dict[str, list[datetime]], records: Iterable[dict[str, Any]], owned: set[str]
) -> None:
    """Add the bounced recipients of the notices' metadata ``records`` to ``out``."""
    for data in records:
        message = MailMessage.from_metadata(data)
        if message.date is None:
            continue
        for address in bounced_recipients(message, owned):
            out.setdefault(address, []).append(message.date)


def undeliverable(
    *, source_id: str, owners: Iterable[str]
) -> dict[str, list[datetime]]:
    """``{address: [when a delivery-failure notice for it arrived, …]}`` over the
    whole source (``loops.definitions.bounced_recipients``): mail to that address
    at about that time never reached it (SPEC §5.1a). One query, prefiltered on
    the notice's report, sender or subject (an import reads only its new records,
    ``SourceScans``)."""
    owned = {(o or "").lower() for o in owners}
    out: dict[str, list[datetime]] = {}
    _add_bounces(
        out,
        RawRecord.objects.filter(_bounce_notices(), source_id=source_id).values_list(
            "metadata", flat=True
        ),
        owned,
    )
    return out


@dataclass
class SourceScans:
    """The whole-source reads every batch of an import asks again
    (``answers_visible``, ``mail_coverage``, ``undeliverable``, SPEC §5.1a),
    kept for the import:
    each ``refresh`` reads only the raw records written since the last committed
    one (by id) and answers from the committed counts and notices plus those, so
    a batch costs its own new records instead of the whole source again (SPEC §11
    ingest rate; the same two statements per batch). What a refresh read joins
    the kept state when its transaction commits (``on_commit``): a batch rolled
    back is read again, never counted twice. The answers equal a fresh read of
    the source as long as records are only added while the import runs (imports
    of one source are serialised). Other owner addresses start over."""

    source_id: str
    owners: frozenset[str] = frozenset()
    seen_id: int = 0
    total: int = 0
    mine: int = 0
    bounces: dict[str, list[datetime]] = field(default_factory=dict)
    days: dict[str, tuple[int, int]] = field(default_factory=dict)
    _view: tuple[int, int, dict[str, list[datetime]]] = (0, 0, {})
    _days_view: dict[str, tuple[int, int]] = field(default_factory=dict)

    def refresh(self, owners: Iterable[str]) -> None:
        """Read the records added since the last committed refresh (all of them
        the first time, or when ``owners`` changed)."""
        owned = frozenset((o or "").lower() for o in owners)
        if owned != self.owners:
            self.owners, self.seen_id, self.total, self.mine = owned, 0, 0, 0
            self.bounces, self.days = {}, {}
        new = RawRecord.objects.filter(source_id=self.source_id, id__gt=self.seen_id)
        new_days, new_total, new_mine, top = _day_counts(new, owned)
        found: dict[str, list[datetime]] = {}
        if top is not None:
            _add_bounces(
                found,
                new.filter(_bounce_notices(), id__lte=top).values_list(
                    "metadata", flat=True
                ),
                set(owned),
            )
        merged = {address: list(when) for address, when in self.bounces.items()}
        for address, when in found.items():
            merged.setdefault(address, []).extend(when)
        days = dict(self.days)
        for day, (mine, others) in new_days.items():
            had = days.get(day, (0, 0))
            days[day] = (had[0] + mine, had[1] + others)
        self._view = (self.total + new_total, self.mine + new_mine, merged)
        self._days_view = days
        if top is None:
            return
        seen, view = self.seen_id, self._view

        def keep() -> None:
            if self.owners == owned and self.seen_id == seen:
                self.total, self.mine, self.bounces = view
                self.days = days
                self.seen_id = top

        transaction.on_commit(keep)

    def answers_visible(self) -> bool:
        """``answers_visible`` of the source as of the last ``refresh``."""
        return _answers_seen(self._view[0], self._view[1])

    def coverage(self) -> MailCoverage:
        """``mail_coverage`` of the source as of the last ``refresh``."""
        return MailCoverage.from_days(self._days_view, whole=self.answers_visible())

    def undeliverable(self) -> dict[str, list[datetime]]:
        """``undeliverable`` of the source as of the last ``refresh`` (a copy)."""
        return {address: list(when) for address, when in self._view[2].items()}


# A full name more addresses than this go by names several people, or a shared
# relay: it joins none of them.
SAME_PERSON_MAX_ADDRESSES = 4


def _person_rows(
    source_id: str, wanted: Sequence[str]
) -> tuple[dict[str, tuple[str, dict[str, Any]]], dict[str, frozenset[str]]]:
    """``({address: (kind, signals)} of the ``wanted`` profiles and their
    namesakes, {wanted address: the addresses of the same person, itself
    included})`` from the stored profiles (``_same_person_groups``). Two queries
    (one when no wanted profile has a full name)."""
    rows = {
        address: (kind, signals or {})
        for address, kind, signals in SenderProfile.objects.filter(
            source_id=source_id, address__in=wanted
        ).values_list("address", "kind", "signals")
    }
    names = sorted(
        {
            name
            for kind, signals in rows.values()
            if kind == SenderProfile.Kind.PERSON
            for name in signals.get("full_names") or ()
        }
    )
    if names:
        for address, kind, signals in SenderProfile.objects.filter(
            source_id=source_id,
            kind=SenderProfile.Kind.PERSON,
            signals__full_names__has_any_keys=names,
        ).values_list("address", "kind", "signals"):
            rows.setdefault(address, (kind, signals or {}))
    return rows, _same_person_groups(rows, wanted)


def _same_person_groups(
    rows: Mapping[str, tuple[str, dict[str, Any]]], wanted: Iterable[str]
) -> dict[str, frozenset[str]]:
    """``{wanted address: the addresses of the same person, itself included}``
    among ``rows`` (``{address: (kind, signals)}``): addresses whose profiles
    are persons sharing a full name (``SenderStats.full_names``: a display name,
    a "first.last" local part, the name they sign with) are one person, unless
    more than ``SAME_PERSON_MAX_ADDRESSES`` addresses share it or the address
    goes by two people's names (``_shared``: an office or relay address). A
    wanted address without a row is its own person. Pure."""
    by_name: dict[str, set[str]] = {}
    for address, (kind, signals) in rows.items():
        if kind == SenderProfile.Kind.PERSON and not _shared(signals):
            for name in signals.get("full_names") or ():
                by_name.setdefault(name, set()).add(address)
    groups: dict[str, frozenset[str]] = {}
    for address in wanted:
        same = {address}
        kind, signals = rows.get(address, ("", {}))
        if kind == SenderProfile.Kind.PERSON and not _shared(signals):
            for name in signals.get("full_names") or ():
                group = by_name.get(name, set())
                if len(group) <= SAME_PERSON_MAX_ADDRESSES:
                    same |= group
        groups[address] = frozenset(same)
    return groups


def _pooled_contacts(
    rows: Mapping[str, tuple[str, dict[str, Any]]],
    groups: Mapping[str, frozenset[str]],
) -> dict[str, Contact]:
    """``{address: Contact}`` for each address of ``groups`` that has a row: the
    latest times over every address of its person (``groups``). Pure."""
    own = {address: _contact(signals) for address, (_kind, signals) in rows.items()}
    return {
        address: Contact(
            *(
                max((t for t in times if t is not None), default=None)
                for times in zip(
                    *(own[a] for a in sorted(same) if a in own), strict=True
                )
            )
        )
        for address, same in groups.items()
        if address in rows
    }


def _shared(signals: dict[str, Any]) -> bool:
    """True when a profile's full names are two people's ("dana reyes" and "anna
    lee" from one office@ address; ``brain.people.names_compatible``): a shared or
    relay address, which joins nobody to anybody."""
    names = [person_name(n) for n in signals.get("full_names") or ()]
    parsed = [n for n in names if n is not None]
    return any(
        not names_compatible(a, b)
        for i, a in enumerate(parsed)
        for b in parsed[i + 1 :]
    )


def same_person(
    *, source_id: str, addresses: Iterable[str]
) -> dict[str, frozenset[str]]:
    """``{address: every address of the same person, itself included}`` for
    ``addresses`` (lower-cased), from the stored sender profiles (SPEC §5.1a "a
    reply from another address of the same person"; see ``_person_rows``). Two
    queries."""
    wanted = sorted({(a or "").lower() for a in addresses if a})
    return _person_rows(source_id, wanted)[1] if wanted else {}


def full_names(*, source_id: str, addresses: Iterable[str]) -> dict[str, str]:
    """``{address: the full name it goes by most, title-cased ("Al Pollard")}`` for
    those of ``addresses`` whose stored sender profile knows one (display names,
    a "first.last" local part, the name they sign with): how ``waiting`` names a
    person whose mail shows only a surname or an address. One query."""
    wanted = sorted({(a or "").lower() for a in addresses if a})
    out: dict[str, str] = {}
    for address, names in SenderProfile.objects.filter(
        source_id=source_id, address__in=wanted
    ).values_list("address", KeyTransform("full_names", "signals")):
        if names:
            out[address] = " ".join(
                w[:1].upper() + w[1:] for w in str(names[0]).split()
            )
    return out


def people_contacts(
    *, source_id: str, addresses: Iterable[str]
) -> tuple[dict[str, frozenset[str]], dict[str, Contact]]:
    """``(same_person, sender_contacts)`` of ``addresses`` in the same two
    queries: each address's person (every address of theirs) and the contact
    pooled over it."""
    wanted = sorted({(a or "").lower() for a in addresses if a})
    rows, groups = _person_rows(source_id, wanted)
    return groups, _pooled_contacts(rows, groups)


def sender_contacts(*, source_id: str, addresses: Iterable[str]) -> dict[str, Contact]:
    """``{address: Contact(their last message to me, my last message to them, my
    last report of contact with them)}`` from the stored sender profiles (SPEC
    §5.1a): later contact supersedes an old unanswered ask. Contact with another
    address of the same person counts (``same_person``): the addresses of one
    person pool their latest times. Addresses without a profile are left out.
    Two queries."""
    return people_contacts(source_id=source_id, addresses=addresses)[1]


def replay_senders(
    *, source_id: str, owners: Iterable[str], until: datetime
) -> tuple[dict[str, str], dict[str, Contact], dict[str, frozenset[str]]]:
    """``(kinds, contacts, people)`` of every sender of the source as they stood at
    ``until`` (a ``waiting --as-of`` replay, SPEC §5.5): computed from the
    source's messages dated up to then, as an import taken that day would
    (``loops.senders.classify_senders``; later mail must not settle or hide an
    earlier ask), a curator's verdict kept. ``kinds`` maps addresses to person
    or automated (``sender_kinds``'s shape), ``contacts`` as
    ``sender_contacts``, ``people`` as ``same_person``. Two queries; reads the
    whole source."""
    messages = [
        m
        for m in profile_messages(source_id=source_id)
        if m.date is not None and m.date <= until
    ]
    verdicts = classify_senders(messages, owner_addresses=list(owners))
    decided = dict(
        SenderProfile.objects.filter(source_id=source_id)
        .exclude(admin_kind="")
        .values_list("address", "admin_kind")
    )
    rows = {
        address: (decided.get(address, kind), signals)
        for address, (kind, _reasons, signals) in verdicts.items()
    }
    kinds = {address: kind for address, (kind, _signals) in rows.items()} | decided
    people = _same_person_groups(rows, sorted(rows))
    return kinds, _pooled_contacts(rows, people), people


def _contact(signals: dict[str, Any]) -> Contact:
    return Contact(
        _when(signals.get("last_from")),
        _when(signals.get("last_to")),
        _when(signals.get("last_reported")),
    )


def _when(value: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


def open_candidates(*, source_id: str) -> list[OpenLoop]:
    """The source's open loops a detector or extractor proposed and no person has
    vouched for (SPEC §5.1b): not manual, never reopened by hand (a
    ``reopened`` event by anyone but the detector). Ordered by id."""
    vouched = LoopEvent.objects.filter(
        source_id=source_id, event_type=LoopEvent.EventType.REOPENED
    ).exclude(actor="detector")
    return list(
        OpenLoop.objects.filter(source_id=source_id, status=LoopStatus.OPEN)
        .exclude(detector=Detector.MANUAL)
        .exclude(pk__in=vouched.values("loop_id"))
        .order_by("pk")
    )
