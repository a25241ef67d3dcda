"""Entry points of loop detection (SPEC §5.2-§5.4).

``process_threads`` is what connectors call after every import or sync: for each
touched thread it runs the deterministic detector, commitment extraction (the LLM
extractor queued as a job when a key is configured and extraction is enabled, else
the offline rule extractor inline), fulfilment detection and deadline corrections;
then the staleness pass. It never raises into the caller: a failure on one thread is
logged and the next thread goes on. ``loops_sweep`` is the hourly job: grace
re-checks and staleness, even with no new mail.
"""

from __future__ import annotations

import logging
import re
from bisect import bisect_right
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from brain.bulk import bulk_insert_objects
from brain.llm import anthropic_client
from brain.models import Page, Source
from loops.asks import asks_for_contact, is_fulfilment
from loops.decisions import loops_decide
from loops.definitions import (
    collapse,
    is_mine,
    is_substantive,
    normalise_subject,
    reply_text,
    same_topic_scores,
)
from loops.detectors import (
    CLOSED_BY_NOT_EXPECTED,
    Mutes,
    Verdict,
    detect_thread,
    posted_list,
    superseded_by_contact,
)
from loops.eligibility import (
    extraction_gate,
    revision_key,
)
from loops.extraction import extraction_enqueue
from loops.extractors.fulfilment import (
    FREE_MAIL,
    SIBLING_SHARED,
    arranged_in,
    content_stems,
    keeping_unseen,
    kept_in,
    party_marks,
    talked_in,
)
from loops.extractors.rules import (
    DEADLINE_RE,
    SenderTimezones,
    resolve_due,
    rule_extract,
    split_sentences,
)
from loops.models import (
    CLOSED_BY_REPLY,
    Detector,
    ExtractionRun,
    GraceHold,
    LoopEvent,
    LoopStatus,
    LoopType,
    OpenLoop,
)
from loops.selectors import (
    MAILBOX_WINDOW_DAYS,
    SourceScans,
    counterparty_messages,
    domain_people,
    mail_coverage,
    mutes_for,
    newest_message_at,
    people_contacts,
    reference_clock,
    reference_time,
    same_person,
    sender_contacts,
    sender_kinds,
    sender_threads,
    thread_messages,
    thread_page,
    threads_messages,
    threads_pages,
    undeliverable,
)
from loops.senders import (
    Contact,
    handoff_names,
    reports_reaching,
    resolve_first_name,
)
from loops.services import (
    CLOSED_BY_STALENESS,
    CommitmentInput,
    LoopBatch,
    due_end_of_day,
    loop_apply_verdict,
    loop_close,
    loop_confirm_fulfilment,
    loop_correct_due,
    loop_mark_fulfilment_suspected,
    loop_project_commitment,
    loop_reopen,
    loops_stale_sweep,
)
from loops.services_senders import sender_profile_decide, sender_profiles_refresh

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Sequence

    from loops.definitions import MailCoverage
    from loops.message import MailMessage

logger = logging.getLogger(__name__)

BATCH = 200
MAILBOX_WINDOW = timedelta(days=MAILBOX_WINDOW_DAYS)
COMMITMENT_TYPES = (LoopType.COMMITMENT_OWED_BY_ME, LoopType.COMMITMENT_OWED_TO_ME)
DELIVERY_RE = re.compile(
    r"\b(?:attached|attaching|enclosed|here is|here's|here are|please find|i(?:'ve| have)"
    r" (?:sent|attached|forwarded|put together|finished|completed|done)|sending you|"
    r"as promised|done\b)",
    re.I,
)
CORRECTION_RE = re.compile(
    r"\b(?:make it|move (?:it|this|that|the (?:deadline|date|call|meeting|due date))|"
    r"push (?:it|this|that|the (?:deadline|date))(?: back| out)?|postpone(?: it| this)?|"
    r"change (?:it|the (?:deadline|date|due date))|reschedule(?: it| this)?|"
    r"(?:new|revised) (?:deadline|due date) is)\b",
    re.I,
)
STOPWORDS = frozenset(
    """i ll will you your the a an to of for and or on by in at it this that me my we
    our be is are was with from send get give have can by monday tuesday wednesday
    thursday friday saturday sunday today tomorrow week next end day call back""".split()
)


def _content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]{3,}", text.lower()) if w not in STOPWORDS}


def _extraction_mode() -> str:
    """``llm`` when the kill switch is on and a key is configured, else ``rules``."""
    if (
        settings.LOOPS_EXTRACTION_ENABLED
        and anthropic_client(max_retries=0) is not None
    ):
        return "llm"
    return "rules"


def thread_rule_extract(
    *,
    source: Source,
    thread_id: str,
    messages: Sequence[MailMessage],
    page: Page | None,
    mutes: Mutes,
    source_newest: datetime,
    known_keys: set[str] | None = None,
    runs: list[ExtractionRun] | None = None,
    coverage: MailCoverage | None = None,
    timezones: Mapping[str, tzinfo] | None = None,
) -> dict[str, Any]:
    """Run the offline rule extractor on one thread revision (idempotent per
    revision) and project what it finds. Returns ``{status, reason, loops}``.
    A promise whose keeping the source cannot show (``keeping_unseen`` with
    ``coverage``, read at ``source_newest``) is not projected.

    The ``ExtractionRun`` row that makes it idempotent is saved at once, or, when
    a batch caller passes ``runs``, appended unsaved for it to insert in bulk.
    ``timezones``: the senders' zones (default ``SenderTimezones(messages)``)."""
    key = revision_key(
        extractor=Detector.RULE_EXTRACT,
        source_id=source.id,
        thread_id=thread_id,
        messages=messages,
    )
    if (
        (key in known_keys)
        if known_keys is not None
        else (ExtractionRun.objects.filter(idempotency_key=key).exists())
    ):
        return {"status": "noop", "reason": "same_revision", "loops": 0}
    eligible, reason = extraction_gate(
        messages,
        owner_addresses=source.owner_addresses,
        mutes=mutes,
        thread_id=thread_id,
        source_newest=source_newest,
    )
    loop_ids: list[int] = []
    # No savepoint of its own: ``process_threads`` runs each thread in one.
    with transaction.atomic(savepoint=False):
        if eligible:
            loop_ids = _project_rule_candidates(
                source=source,
                thread_id=thread_id,
                messages=messages,
                page=page,
                coverage=coverage,
                now=source_newest,
                timezones=timezones,
            )
        run = ExtractionRun(
            source=source,
            thread_id=thread_id,
            extractor=Detector.RULE_EXTRACT,
            idempotency_key=key,
            status=ExtractionRun.Status.EXTRACTED
            if eligible
            else ExtractionRun.Status.SKIPPED,
            reason="" if eligible else reason,
            result={"loop_ids": loop_ids},
        )
        if runs is None:
            run.save()
        else:
            runs.append(run)
    return {
        "status": "extracted" if eligible else "skipped",
        "reason": reason,
        "loops": len(loop_ids),
    }


def _project_rule_candidates(
    *,
    source: Source,
    thread_id: str,
    messages: Sequence[MailMessage],
    page: Page | None,
    coverage: MailCoverage | None,
    now: datetime,
    timezones: Mapping[str, tzinfo] | None = None,
) -> list[int]:
    """Project every ``rule_extract`` candidate of the thread (SPEC §5.3) but a
    promise whose keeping the source cannot show (``keeping_unseen``); returns
    the loop ids written."""
    owners = {a.lower() for a in source.owner_addresses}
    loop_ids: list[int] = []
    candidates = rule_extract(
        messages,
        owner_addresses=owners,
        timezones=timezones if timezones is not None else SenderTimezones(messages),
    )
    for c in candidates:
        if keeping_unseen(
            c.direction,
            c.quote or c.text,
            at=c.message.sent_at,
            coverage=coverage,
            now=now,
        ):
            continue
        loop, _ = loop_project_commitment(
            source=source,
            thread_id=thread_id,
            page=page,
            item=CommitmentInput(
                direction=c.direction,
                text=c.text,
                quote=c.quote,
                due=c.due,
                counterparty_email=c.counterparty_email,
                counterparty_name=c.counterparty_name,
                message_id=c.message.message_id,
                raw_record_id=c.message.raw_record_id,
                message_date=c.message.sent_at,
                confidence=c.confidence,
                link=c.message.link or "",
            ),
            detector=Detector.RULE_EXTRACT,
            actor="rule_extract",
        )
        loop_ids.append(loop.pk)
    return loop_ids


def thread_follow_up(
    *,
    source: Source,
    thread_id: str,
    messages: Sequence[MailMessage],
    open_loops: list[OpenLoop] | None = None,
    timezones: Mapping[str, tzinfo] | None = None,
) -> dict[str, int]:
    """Fulfilment detection and deadline corrections for the thread's open
    commitment loops (SPEC §5.4): a promise kept later in the thread ("The call is
    confirmed") closes as ``fulfilled``; an attachment or delivery wording only
    marks it suspected; a new deadline is read in its writer's zone
    (``timezones``, default ``SenderTimezones(messages)``). Returns
    ``{fulfilled, fulfilment_suspected, corrected}``."""
    owners = {a.lower() for a in source.owner_addresses}
    counts = {"fulfilled": 0, "fulfilment_suspected": 0, "corrected": 0}
    if open_loops is None:
        open_loops = list(
            OpenLoop.objects.filter(
                source=source, thread_id=thread_id, status=LoopStatus.OPEN
            )
        )
    zones = timezones if timezones is not None else SenderTimezones(messages)
    for loop in [lp for lp in open_loops if lp.loop_type in COMMITMENT_TYPES]:
        later = later_in_thread(loop, messages)
        if _close_if_kept(loop=loop, later=later, owners=owners):
            counts["fulfilled"] += 1
            continue
        if (
            loop.loop_type == LoopType.COMMITMENT_OWED_BY_ME
            and loop.fulfilment_suspected_at is None
        ):
            counts["fulfilment_suspected"] += _suspect_fulfilment(loop, later, owners)
        if loop.due_at is not None:
            counts["corrected"] += _correct_due(loop, later, zones)
    return counts


def _suspect_fulfilment(
    loop: OpenLoop, later: Sequence[MailMessage], owners: set[str]
) -> int:
    """Mark my promise ``fulfilment_suspected`` (SPEC §5.4) on my first later
    message with an attachment or delivery wording sharing its content words;
    returns 1 when marked, else 0."""
    promise_words = _content_words(loop.summary.split(":", 1)[-1])
    for m in later:
        if not is_mine(m, owners):
            continue
        text = reply_text(m.body)
        reason = ""
        if m.attachments:
            reason = "attachment"
        elif DELIVERY_RE.search(text) and promise_words & _content_words(text):
            reason = "wording"
        if reason:
            evidence = _closing_evidence(m, reason)
            evidence["attachments"] = [a.get("filename", "") for a in m.attachments][:5]
            marked = loop_mark_fulfilment_suspected(loop=loop, evidence=evidence)
            return int(bool(marked))
    return 0


def _correct_due(
    loop: OpenLoop, later: Sequence[MailMessage], zones: Mapping[str, tzinfo]
) -> int:
    """Apply the deadline corrections of later messages ("let's make it Monday",
    SPEC §5.4) not applied yet (after the last ``due_corrected`` event's message),
    each read in its writer's zone (``zones``: message id → zone); returns how
    many changed the due date."""
    last = (
        LoopEvent.objects.filter(
            loop=loop, event_type=LoopEvent.EventType.DUE_CORRECTED
        )
        .order_by("-event_time")
        .first()
    )
    stamp = (
        (last.extra_data.get("evidence") or {}).get("message_date") if last else None
    )
    floor = datetime.fromisoformat(stamp) if stamp else loop.opened_at
    corrected = 0
    for m in later:
        if m.sent_at <= floor:
            continue
        for sentence in split_sentences(reply_text(m.body)):
            trigger = CORRECTION_RE.search(sentence)
            when = DEADLINE_RE.search(sentence, trigger.end()) if trigger else None
            if not when:
                continue
            day = resolve_due(when.group(0), m.sent_at, zones[m.message_id])
            if day is None:
                continue
            new_due = due_end_of_day(day)
            if new_due != loop.due_at:
                loop = loop_correct_due(
                    loop=loop,
                    due_at=new_due,
                    actor="detector",
                    evidence={
                        "message_id": m.message_id,
                        "raw_record_id": m.raw_record_id,
                        "quote": sentence[:200],
                        "message_date": m.sent_at.isoformat(),
                    },
                )
                corrected += 1
            floor = m.sent_at
    return corrected


class ReplyLoop(Protocol):
    """What the cross-thread reply rules read of a reply loop: a stored
    ``OpenLoop`` or a replayed ``loops.waiting.LoopView``."""

    @property
    def loop_type(self) -> str: ...
    @property
    def counterparty_email(self) -> str: ...
    @property
    def thread_id(self) -> str: ...
    @property
    def opened_at(self) -> datetime: ...


_L = TypeVar("_L", bound=ReplyLoop)


class CommitmentLoop(ReplyLoop, Protocol):
    """What the fulfilment rules read of a commitment loop (a stored
    ``OpenLoop``): a reply loop's fields, and these."""

    @property
    def counterparty_name(self) -> str: ...
    @property
    def summary(self) -> str: ...
    @property
    def evidence(self) -> list[dict[str, Any]]: ...


def kept_message(
    *,
    loop: CommitmentLoop,
    later: Sequence[MailMessage],
    owners: set[str],
    sibling: bool = False,
    parties: Collection[str] = (),
) -> MailMessage | None:
    """The later message of whoever owes ``loop`` that says it is done (SPEC §5.4,
    high confidence: done wording and a shared content word), or None. ``sibling``:
    ``later`` comes from other threads, so a done-message of mine must be addressed
    to the counterparty and share ``SIBLING_SHARED`` content words; a promise of
    mine to arrange a delivery is also kept by my asking anyone to deliver to the
    counterparty, named by organisation or family name (``arranged_in``). A
    promise of a conversation is kept by a later message between us reporting
    it (``talked_in``: "per our discussion"). ``parties``: the counterparty's
    other addresses (``loops.selectors.same_person``), which count as theirs.
    Reads and writes nothing: the rule ``_close_if_kept`` applies and a
    ``waiting --as-of`` replay runs."""
    promise = (loop.evidence[0].get("quote") if loop.evidence else "") or (
        loop.summary.split(":", 1)[-1]
    )
    party = (loop.counterparty_email or "").lower()
    theirs = ({party} if party else set()) | {a.lower() for a in parties}
    shared = SIBLING_SHARED if sibling else 1

    def to_them(m: MailMessage) -> bool:
        return bool(theirs & {a.lower() for a in (*m.to, *m.cc) if a})

    def from_them(m: MailMessage) -> bool:
        return m.from_addr.lower() in theirs

    def between(m: MailMessage) -> bool:
        return from_them(m) or (is_mine(m, owners) and to_them(m))

    if loop.loop_type == LoopType.COMMITMENT_OWED_BY_ME:
        kept = kept_in(
            promise,
            later,
            lambda m: is_mine(m, owners) and (not sibling or to_them(m)),
            min_shared=shared,
        )
        if kept is None and sibling:
            # "I will arrange for the copies to be mailed", kept by my asking a
            # third party to send them to the counterparty.
            kept = arranged_in(
                promise,
                later,
                lambda m: is_mine(m, owners),
                party_marks(party, loop.counterparty_name),
            )
    else:
        kept = kept_in(promise, later, from_them, min_shared=shared)
    if kept is None and theirs:
        # "I will follow up with a phone call", then "per our discussion".
        kept = talked_in(promise, later, between, promised_at=loop.opened_at)
    return kept


def _close_if_kept(
    *,
    loop: OpenLoop,
    later: Sequence[MailMessage],
    owners: set[str],
    sibling: bool = False,
) -> bool:
    """Close ``loop`` (done, closed_by ``fulfilled``, with the message as evidence)
    when ``kept_message`` finds the message that kept it. Returns True if closed."""
    kept = kept_message(loop=loop, later=later, owners=owners, sibling=sibling)
    if kept is None:
        return False
    reason = "kept_in_other_thread" if sibling else "kept_in_thread"
    return _close_fulfilled(loop, kept, reason)


def _closing_evidence(m: MailMessage, reason: str) -> dict[str, Any]:
    """Evidence of the message that settles a loop: ``{message_id, raw_record_id,
    quote (its collapsed reply text, ≤ 200 chars), reason}``."""
    return {
        "message_id": m.message_id,
        "raw_record_id": m.raw_record_id,
        "quote": collapse(reply_text(m.body))[:200],
        "reason": reason,
    }


def _close_fulfilled(loop: OpenLoop, kept: MailMessage, reason: str) -> bool:
    """Mark ``loop`` fulfilment-suspected by ``kept`` and confirm it at once (done,
    closed_by ``fulfilled``, SPEC §5.4 high confidence); True if it closed."""
    loop_mark_fulfilment_suspected(loop=loop, evidence=_closing_evidence(kept, reason))
    return bool(loop_confirm_fulfilment(loop=loop, actor="detector")["closed"])


def later_in_thread(
    loop: CommitmentLoop, messages: Sequence[MailMessage]
) -> list[MailMessage]:
    """The thread's substantive messages after ``loop`` opened that are not its
    own evidence, oldest first: what in-thread fulfilment (``thread_follow_up``)
    reads."""
    own = {e.get("message_id") for e in loop.evidence}
    return sorted(
        (
            m
            for m in messages
            if is_substantive(m)
            and m.sent_at > loop.opened_at
            and m.message_id not in own
        ),
        key=lambda m: m.sent_at,
    )


def loops_sibling_fulfilment(*, source: Source, now: datetime) -> int:
    """Promises kept in ANOTHER thread with the same counterparty (SPEC §5.4): an
    open commitment closes as ``fulfilled`` when ``sibling_kept`` finds the later
    message (up to ``now``) of whoever owes it, in another thread, that says the
    promised thing is done. Runs at the end of ``process_threads``; returns the
    number closed."""
    loops = list(
        OpenLoop.objects.filter(
            source=source, status=LoopStatus.OPEN, loop_type__in=COMMITMENT_TYPES
        ).exclude(counterparty_email="")
    )
    closed = 0
    for index, kept in sibling_kept(source=source, loops=loops, now=now):
        closed += _close_fulfilled(loops[index], kept, "kept_in_other_thread")
    return closed


def _with_counterparty(
    loops: Sequence[_L], types: Collection[str]
) -> list[tuple[int, _L]]:
    """``(index, loop)`` of the ``loops`` of one of ``types`` that name a
    counterparty address: the loops the cross-thread passes can settle."""
    return [
        (i, lp)
        for i, lp in enumerate(loops)
        if lp.loop_type in types and lp.counterparty_email
    ]


def sibling_kept(
    *, source: Source, loops: Sequence[CommitmentLoop], now: datetime
) -> list[tuple[int, MailMessage]]:
    """The rule of ``loops_sibling_fulfilment``, read-only: ``(index in loops,
    keeping message)`` for each open commitment of ``loops`` (other types and
    loops without a counterparty are skipped) kept in another thread by a
    message dated up to ``now`` (``kept_message`` with ``sibling``: "the copies
    were mailed" to the person I promised to mail them to; theirs must come from
    them). Writes nothing."""
    owners = {a.lower() for a in source.owner_addresses}
    candidates = _with_counterparty(loops, COMMITMENT_TYPES)
    if not candidates:
        return []
    people = same_person(
        source_id=source.id, addresses={lp.counterparty_email for _, lp in candidates}
    )
    messages = _substantive_exchanges(
        source,
        [lp for _, lp in candidates],
        owners=owners,
        now=now,
        extra=set().union(*people.values()),
    )
    sent = [m.sent_at for m in messages]
    out: list[tuple[int, MailMessage]] = []
    for i, loop in candidates:
        later = _later_elsewhere(messages, sent, loop.opened_at, loop.thread_id)
        kept = (
            kept_message(
                loop=loop,
                later=later,
                owners=owners,
                sibling=True,
                parties=people.get(loop.counterparty_email.lower(), ()),
            )
            if later
            else None
        )
        if kept is not None:
            out.append((i, kept))
    return out


# My draft sent on: the later message of mine carries at least this share of the
# asking message's content words, and the asking text has at least this many.
SENT_ON_SHARE = 0.8
SENT_ON_MIN_WORDS = 20
# A later post of mine to the list my unanswered list ask waits on, in another
# thread, this close in topic to the ask (``loops.definitions.same_topic_scores``,
# 0..1) settles it: I came back to the subject there (the answer came in that
# thread, I report it solved, or I asked again). On the labelled dev set
# (SpamAssassin list mail, issue 14) the asks so settled scored 0.13-0.28 against
# my closest later post and the asks still open at most 0.10 (14 asks with later
# posts of mine to their list).
SAME_TOPIC_SCORE = 0.12
CLOSED_BY_SENT_ON = "superseded: I sent the text on"


def _answered_in(
    ask_words: set[str],
    later: Sequence[MailMessage],
    owners: set[str],
) -> MailMessage | None:
    """The counterparty's later message to me (``later``: theirs, from any of
    their addresses) titled with the matter I asked about: its subject shares
    ``SIBLING_SHARED`` content words with my ask."""
    for m in later:
        if not owners & {a.lower() for a in (*m.to, *m.cc) if a}:
            continue
        if len(ask_words & content_stems(m.subject or "")) >= SIBLING_SHARED:
            return m
    return None


# My ask delivered in another thread this soon after I made it ("here is the CV
# you asked for", the next day under a new subject).
DELIVERED_WITHIN = timedelta(days=14)
# Their words pointing at my ask: "the CV you asked for", "as requested".
_ASKED_FOR = re.compile(
    r"\byou\s+(?:asked|requested|wanted|needed)\b|\bas\s+(?:you\s+)?requested\b|"
    r"\bper\s+your\s+request\b",
    re.I,
)


def _delivered_in(
    ask_words: set[str],
    later: Sequence[MailMessage],
    owners: set[str],
    asked_at: datetime,
) -> MailMessage | None:
    """The counterparty's later message to me (``later``: theirs, from any of
    their addresses, in other threads), within ``DELIVERED_WITHIN`` of my ask,
    that delivers (``loops.asks.is_fulfilment``: "Here is…", "Attached…") what I
    asked for: it shares a content word with my ask or points at it ("you asked
    for", ``_ASKED_FOR``). A prompt answer under a new subject (SPEC §5.1a "their
    'done / sent / attached' fulfils my outbound request")."""
    for m in later:
        if m.sent_at > asked_at + DELIVERED_WITHIN:
            break
        if not owners & {a.lower() for a in (*m.to, *m.cc) if a}:
            continue
        text = reply_text(m.body)
        said = content_stems(f"{m.subject or ''} {text}") - content_stems(
            f"{m.from_name} {m.from_addr.split('@')[0].replace('.', ' ')}"
        )
        if is_fulfilment(text) and (ask_words & said or _ASKED_FOR.search(text)):
            return m
    return None


def _sent_on(
    ask_words: set[str], later: Sequence[MailMessage], party: str, owners: set[str]
) -> MailMessage | None:
    """My later message to other people carrying the text I had asked the
    counterparty to look at ("Please review. <draft>", then the draft itself to
    its addressee): I went ahead, the ask is moot."""
    if len(ask_words) < SENT_ON_MIN_WORDS:
        return None
    for m in later:
        if not is_mine(m, owners):
            continue
        if party in {a.lower() for a in (*m.to, *m.cc) if a}:
            continue
        words = content_stems(reply_text(m.body))
        if len(ask_words & words) >= SENT_ON_SHARE * len(ask_words):
            return m
    return None


def _replied_in(
    subject: str, later: Sequence[MailMessage], party: str, owners: set[str]
) -> MailMessage | None:
    """My later message to the asker in another thread on the same matter: its
    subject shares ``SIBLING_SHARED`` content words with the subject they asked
    under ("First Amendment to Contract - For Execution" answered under "RE:
    Blackline of First Amendment to Contract")."""
    wanted = content_stems(normalise_subject(subject))
    for m in later:
        if not is_mine(m, owners):
            continue
        if party not in {a.lower() for a in (*m.to, *m.cc) if a}:
            continue
        got = content_stems(normalise_subject(m.subject or ""))
        if len(wanted & got) >= SIBLING_SHARED:
            return m
    return None


def _delegate_of(*, source: Source, party: str, asking_text: str) -> str:
    """The colleague my ask was handed to: my asking text says "Please forward
    this email to Steve" and exactly one person at the counterparty's own domain
    (not a free-mail one) who wrote to me is a Steve (``resolve_first_name``);
    '' otherwise."""
    names = handoff_names(asking_text)
    domain = party.rsplit("@", 1)[-1] if "@" in party else ""
    if not names or not domain or domain.split(".", 1)[0] in FREE_MAIL:
        return ""
    colleagues = [
        a for a in domain_people(source_id=source.id, domain=domain) if a != party
    ]
    for name in names:
        delegate = resolve_first_name(name, colleagues)
        if delegate:
            return delegate
    return ""


def _delegate_answered(
    later: Sequence[MailMessage], delegate: str, owners: set[str]
) -> MailMessage | None:
    """The delegate's first later message to me, in any thread: the person I
    handed my ask to took it up."""
    for m in later:
        if (m.from_addr or "").lower() == delegate and owners & {
            a.lower() for a in (*m.to, *m.cc) if a
        }:
            return m
    return None


def _reported_reaching(
    later: Sequence[MailMessage], party: str, owners: set[str]
) -> MailMessage | None:
    """My later message to the asker, in any thread, reporting that I reached
    someone ("I spoke to Brent D."): the answer to their ask that I contact a
    person."""
    for m in later:
        to_them = party in {a.lower() for a in (*m.to, *m.cc) if a}
        if is_mine(m, owners) and to_them and reports_reaching(reply_text(m.body)):
            return m
    return None


def loops_settled_elsewhere(*, source: Source, now: datetime) -> int:
    """Close the open reply loops ``settled_elsewhere`` finds settled in ANOTHER
    thread by ``now`` (SPEC §5.1a), each with its ``Settled`` status, ``closed_by``
    and evidence: new mail in other threads settles loops of threads it did not
    touch (a live sync, a grown mailbox). Runs at the end of ``process_threads``;
    a ``waiting --as-of`` replay runs the rule itself. Returns the number closed."""
    # Only the columns the passes read: every batch of an import reads every open
    # reply loop again, and ``loop_close`` re-reads the one it closes.
    loops = list(
        OpenLoop.objects.filter(
            source=source,
            status=LoopStatus.OPEN,
            loop_type__in=[LoopType.UNANSWERED_OUTBOUND, LoopType.UNANSWERED_INBOUND],
        )
        .exclude(counterparty_email="")
        .only("id", "loop_type", "counterparty_email", "thread_id", "opened_at")
    )
    if not loops:
        return 0
    threads = threads_messages(
        source_id=source.id, thread_ids=sorted({lp.thread_id for lp in loops})
    )
    closed = 0
    for settled in settled_elsewhere(
        source=source, loops=loops, now=now, threads=threads
    ):
        result = loop_close(
            loop=loops[settled.index],
            status=settled.status,
            closed_by=settled.closed_by,
            actor="detector",
            at=now,
            evidence=settled.evidence,
        )
        closed += int(bool(result["closed"]))
    return closed


@dataclass(frozen=True)
class Settled:
    """A reply loop settled in another thread (``settled_elsewhere``): the index of
    the loop in the list given, its closing status and ``closed_by``, and the
    closing message's evidence ``{message_id, raw_record_id, quote, reason}``
    (``{reason}`` alone when later contact superseded it, ``closed_by``
    ``not_expected: <reason>``)."""

    index: int
    status: str
    closed_by: str
    evidence: dict[str, Any]


_Dated = tuple[list["MailMessage"], list[datetime]]


@dataclass
class _Exchanges:
    """The substantive exchanges the cross-thread passes read (oldest first), each
    list with its sent dates for bisection, indexed two ways so each loop reads one
    person's suffix instead of every later message (SPEC §11 loop-heavy ingest):
    my messages by recipient (To, Cc) and all messages by sender."""

    every: _Dated
    mine_to: dict[str, _Dated]
    by_sender: dict[str, _Dated]

    @classmethod
    def index(cls, messages: list[MailMessage], owners: set[str]) -> _Exchanges:
        """Index ``messages`` (oldest first) by my recipients and by sender."""
        mine_to: dict[str, list[MailMessage]] = {}
        by_sender: dict[str, list[MailMessage]] = {}
        for m in messages:
            if is_mine(m, owners):
                for address in {a.lower() for a in (*m.to, *m.cc) if a}:
                    mine_to.setdefault(address, []).append(m)
            by_sender.setdefault((m.from_addr or "").lower(), []).append(m)

        def dated(ms: list[MailMessage]) -> _Dated:
            return ms, [m.sent_at for m in ms]

        return cls(
            dated(messages),
            {a: dated(ms) for a, ms in mine_to.items()},
            {a: dated(ms) for a, ms in by_sender.items()},
        )

    def mine_to_after(
        self, party: str, moment: datetime, thread_id: str
    ) -> list[MailMessage]:
        """My messages to ``party`` after ``moment`` outside ``thread_id``."""
        return _later_elsewhere(*self.mine_to.get(party, ([], [])), moment, thread_id)

    def from_after(
        self, address: str, moment: datetime, thread_id: str
    ) -> list[MailMessage]:
        """Messages from ``address`` after ``moment`` outside ``thread_id``."""
        return _later_elsewhere(
            *self.by_sender.get(address, ([], [])), moment, thread_id
        )

    def all_after(self, moment: datetime, thread_id: str) -> list[MailMessage]:
        """Every exchange after ``moment`` outside ``thread_id``."""
        return _later_elsewhere(*self.every, moment, thread_id)


def _outbound_delegates(
    *,
    source: Source,
    candidates: Sequence[tuple[int, ReplyLoop]],
    threads: Mapping[str, Sequence[MailMessage]],
    owners: set[str],
    now: datetime,
) -> dict[int, str]:
    """Loop index → the colleague each outbound ask handed the matter to
    (``_delegate_of`` over my asking text since the loop opened)."""
    delegates: dict[int, str] = {}
    for i, loop in candidates:
        if loop.loop_type != LoopType.UNANSWERED_OUTBOUND:
            continue
        text = " ".join(
            reply_text(m.body)
            for m in threads.get(loop.thread_id, [])
            if is_mine(m, owners) and loop.opened_at <= m.sent_at <= now
        )
        delegate = _delegate_of(
            source=source, party=loop.counterparty_email.lower(), asking_text=text
        )
        if delegate:
            delegates[i] = delegate
    return delegates


_Settlement = tuple["MailMessage | None", "MailMessage | None", str]


def _inbound_settlement(
    loop: ReplyLoop,
    thread: Sequence[MailMessage],
    party: str,
    ex: _Exchanges,
    owners: set[str],
) -> _Settlement | None:
    """(answer, None, reason) for their ask: my reply in another thread on its
    subject, or my report that I reached whom they asked me to; None when they
    wrote nothing in the thread (the loop is skipped)."""
    theirs = [m for m in thread if (m.from_addr or "").lower() == party]
    if not theirs:
        return None
    asked = max(theirs, key=lambda m: m.sent_at)
    later = ex.mine_to_after(party, asked.sent_at, loop.thread_id)
    answer = _replied_in(asked.subject or "", later, party, owners)
    if answer is None and asks_for_contact(
        " ".join(reply_text(m.body) for m in theirs)
    ):
        return _reported_reaching(later, party, owners), None, "reported_reaching"
    return answer, None, "replied_in_other_thread"


def _ask_words(
    asking: Sequence[MailMessage], kin: Collection[str], owners: set[str]
) -> set[str]:
    """Content stems of my asking text, without the names (theirs, mine): names are
    no matter asked about."""
    names = [
        *(a.split("@")[0].replace(".", " ") for a in kin),
        *(o.split("@")[0].replace(".", " ") for o in owners),
        asking[0].from_name,
    ]
    return content_stems(" ".join(reply_text(m.body) for m in asking)) - content_stems(
        " ".join(names)
    )


def _outbound_settlement(
    loop: ReplyLoop,
    thread: Sequence[MailMessage],
    party: str,
    *,
    ex: _Exchanges,
    owners: set[str],
    kin: Collection[str],
    delegate: str | None,
    now: datetime,
) -> _Settlement | None:
    """(answer, sent_on, reason) for my ask, the first pass that finds one: their
    answer elsewhere, their delivery, the delegate's answer, my text sent on, my
    later post to the list it waits on; None when I asked nothing in the thread
    since the loop opened (the loop is skipped)."""
    asking = [
        m for m in thread if is_mine(m, owners) and loop.opened_at <= m.sent_at <= now
    ]
    if not asking:
        return None
    words = _ask_words(asking, kin, owners)
    theirs = sorted(
        (
            m
            for address in sorted(kin)
            for m in ex.from_after(address, loop.opened_at, loop.thread_id)
        ),
        key=lambda m: m.sent_at,
    )
    answer = _answered_in(words, theirs, owners)
    if answer is not None:
        return answer, None, "answered_in_other_thread"
    answer = _delivered_in(words, theirs, owners, asking[-1].sent_at)
    if answer is not None:
        return answer, None, "delivered_in_other_thread"
    if delegate:
        later = ex.from_after(delegate, loop.opened_at, loop.thread_id)
        answer = _delegate_answered(later, delegate, owners)
        if answer is not None:
            return answer, None, "answered_by_delegate"
    if len(words) >= SENT_ON_MIN_WORDS:
        later = ex.all_after(loop.opened_at, loop.thread_id)
        sent_on = _sent_on(words, later, party, owners)
        if sent_on is not None:
            return None, sent_on, "sent_on"
    later = ex.mine_to_after(party, asking[-1].sent_at, loop.thread_id)
    return _settled_on_list(asking[-1], party, owners, later), None, "settled_on_list"


def _superseded(
    index: int,
    loop: ReplyLoop,
    thread: Sequence[MailMessage],
    party: str,
    *,
    contact: Contact,
    owners: set[str],
    now: datetime,
) -> Settled | None:
    """No answer elsewhere, but later contact with the person (any of their
    addresses): the rule the detector applies to the thread itself
    (``superseded_by_contact``), for loops whose thread the new mail did not touch.
    Drops as ``not_expected: <reason>``; None when still waiting."""
    mine_here = [m for m in thread if is_mine(m, owners)]
    if loop.loop_type == LoopType.UNANSWERED_OUTBOUND:
        asked = (m.sent_at for m in mine_here if m.sent_at >= loop.opened_at)
    else:
        asked = (m.sent_at for m in thread if (m.from_addr or "").lower() == party)
    why = superseded_by_contact(
        loop.loop_type,
        max(asked, default=None),
        contact,
        now,
        own={m.date for m in mine_here},
    )
    if not why:
        return None
    return Settled(
        index=index,
        status=LoopStatus.DROPPED,
        closed_by=f"{CLOSED_BY_NOT_EXPECTED}: {why}",
        evidence={"reason": why},
    )


def _settled_by(index: int, settlement: _Settlement) -> Settled | None:
    """The ``Settled`` for an answer (``done``, ``reply_detected``) or my text sent
    on (``dropped``, ``CLOSED_BY_SENT_ON``), with the closing message and the reason
    it closed as evidence (``_closing_evidence``); None when neither was found."""
    answer, sent_on, reason = settlement
    hit = answer or sent_on
    if hit is None:
        return None
    return Settled(
        index=index,
        status=LoopStatus.DONE if answer else LoopStatus.DROPPED,
        closed_by=CLOSED_BY_REPLY if answer else CLOSED_BY_SENT_ON,
        evidence=_closing_evidence(hit, reason),
    )


def settled_elsewhere(
    *,
    source: Source,
    loops: Sequence[ReplyLoop],
    now: datetime,
    threads: Mapping[str, Sequence[MailMessage]],
    known: tuple[Mapping[str, frozenset[str]], Mapping[str, Contact]] | None = None,
) -> list[Settled]:
    """Reply loops settled in ANOTHER thread by ``now`` (SPEC §5.1a), read-only:
    which of the open reply ``loops`` (others, and those without a counterparty,
    are skipped). ``threads`` maps each loop's thread id to its messages (a replay
    passes only those dated up to ``now``); the other threads' mail is read from
    the source up to ``now``; ``known`` (a replay's people and contacts,
    ``replay_senders``, default ``people_contacts``): mail from any address of
    the counterparty is theirs. Returns a ``Settled`` per loop that closes, in
    order. Writes nothing.

    Stages: delegates of my asks → people's addresses → the exchanges since the
    oldest loop, indexed → per loop, their ask or mine answered elsewhere
    (``_inbound_settlement``, ``_outbound_settlement``: ``_settled_by``), else
    later contact with them (``_superseded``: ``not_expected: <reason>``)."""
    owners = {a.lower() for a in source.owner_addresses}
    candidates = _with_counterparty(
        loops, (LoopType.UNANSWERED_OUTBOUND, LoopType.UNANSWERED_INBOUND)
    )
    if not candidates:
        return []
    delegates = _outbound_delegates(
        source=source, candidates=candidates, threads=threads, owners=owners, now=now
    )
    people, contacts = known or people_contacts(
        source_id=source.id,
        addresses={lp.counterparty_email for _, lp in candidates},
    )
    kin = {
        party: people.get(party, frozenset({party}))
        for party in (lp.counterparty_email.lower() for _, lp in candidates)
    }
    ex = _Exchanges.index(
        _substantive_exchanges(
            source,
            [lp for _, lp in candidates],
            owners=owners,
            now=now,
            extra=set(delegates.values()).union(*kin.values()),
        ),
        owners,
    )
    out: list[Settled] = []
    for i, loop in candidates:
        party = loop.counterparty_email.lower()
        thread = threads.get(loop.thread_id, [])
        if loop.loop_type == LoopType.UNANSWERED_INBOUND:
            settlement = _inbound_settlement(loop, thread, party, ex, owners)
        else:
            settlement = _outbound_settlement(
                loop,
                thread,
                party,
                ex=ex,
                owners=owners,
                kin=kin.get(party, {party}),
                delegate=delegates.get(i),
                now=now,
            )
        if settlement is None:
            continue
        settled = _settled_by(i, settlement) or _superseded(
            i,
            loop,
            thread,
            party,
            contact=contacts.get(party, Contact()),
            owners=owners,
            now=now,
        )
        if settled is not None:
            out.append(settled)
    return out


def _later_elsewhere(
    messages: Sequence[MailMessage],
    sent: Sequence[datetime],
    moment: datetime,
    thread_id: str,
) -> list[MailMessage]:
    """The messages of ``messages`` (oldest first, ``sent`` their dates) dated after
    ``moment`` and outside ``thread_id``, in order. They are a suffix of the list,
    found by bisection instead of a scan per loop (SPEC §11 loop-heavy ingest)."""
    return [
        m for m in messages[bisect_right(sent, moment) :] if m.thread_id != thread_id
    ]


def _settled_on_list(
    ask: MailMessage, party: str, owners: set[str], later: Sequence[MailMessage]
) -> MailMessage | None:
    """The first of ``later`` (my messages to ``party`` after ``ask``, in other
    threads, oldest first) on the topic of ``ask`` (``same_topic_scores`` at
    least ``SAME_TOPIC_SCORE``), when ``party`` is the mailing list ``ask`` was
    posted to (``posted_list``); None otherwise. My list ask no longer waits once I
    came back to its subject on the list (SPEC §5.1a; the list's analogue of a
    person's answer in another thread)."""
    if not later or posted_list(ask, owners) != party:
        return None
    mine = [m for m in later if is_mine(m, owners)]
    scores = same_topic_scores(ask, mine)
    return next(
        (m for m, s in zip(mine, scores, strict=True) if s >= SAME_TOPIC_SCORE), None
    )


def _substantive_exchanges(
    source: Source,
    loops: Sequence[ReplyLoop],
    *,
    owners: set[str],
    now: datetime,
    extra: set[str] | None = None,
) -> list[MailMessage]:
    """Substantive messages between the owner and the counterparties of ``loops``
    (and the ``extra`` addresses: colleagues asks were handed to) since the oldest
    of them opened, up to ``now`` (oldest first): the mail the cross-thread
    settling passes read."""
    return [
        m
        for m in counterparty_messages(
            source_id=source.id,
            addresses={lp.counterparty_email for lp in loops} | (extra or set()),
            owners=owners,
            after=min(lp.opened_at for lp in loops),
        )
        if m.sent_at <= now and is_substantive(m)
    ]


def loops_window_sweep(*, source: Source, now: datetime) -> int:
    """Mailbox sources only consider threads active in the 90 days before the
    reference time (SPEC §5.2): deterministic loops older than that go stale."""
    if source.kind != Source.Kind.MAILBOX:
        return 0
    count = 0
    for loop in OpenLoop.objects.filter(
        source=source,
        status=LoopStatus.OPEN,
        detector=Detector.DETERMINISTIC_THREAD,
        last_activity_at__lt=now - MAILBOX_WINDOW,
    ):
        count += int(
            loop_close(
                loop=loop,
                status=LoopStatus.STALE,
                closed_by=CLOSED_BY_STALENESS,
                actor="window",
                at=now,
            )["closed"]
        )
    return count


def loops_coverage_sweep(*, source: Source, now: datetime) -> int:
    """My open waiting loops (``unanswered_outbound``) whose last asking message
    falls in weeks the source, as it now stands, holds next to none of others'
    mail for (``MailCoverage.answers_visible`` over the whole source) drop as
    ``not_expected: no_inbound_mail``, the detector's own verdict for such
    weeks (SPEC §5.1a). An import runs it at its end: a batch detected before
    the rest of the mailbox was stored saw only part of it, and the loops it
    opened must not depend on the batch order. One query when nothing is open.
    Returns the number closed."""
    loops = list(
        OpenLoop.objects.filter(
            source=source,
            status=LoopStatus.OPEN,
            detector=Detector.DETERMINISTIC_THREAD,
            loop_type=LoopType.UNANSWERED_OUTBOUND,
        )
    )
    if not loops:
        return 0
    coverage = mail_coverage(source_id=source.id, owners=source.owner_addresses)
    closed = 0
    for loop in loops:
        if coverage.answers_visible(at=loop.last_activity_at, now=now):
            continue
        closed += int(
            bool(
                loop_close(
                    loop=loop,
                    status=LoopStatus.DROPPED,
                    closed_by=f"{CLOSED_BY_NOT_EXPECTED}: no_inbound_mail",
                    actor="detector",
                    at=now,
                )["closed"]
            )
        )
    return closed


@dataclass
class ChunkState:
    """What a batch of threads already has, loaded in a few queries: open loops by
    thread, threads with a grace hold, rule-extraction idempotency keys, the
    person/automated verdict of their senders (SPEC §5.1a), and their senders'
    zones (``SenderTimezones`` over the chunk's messages: one read for the chunk,
    made only when a deadline is met)."""

    open_loops: dict[str, list[OpenLoop]]
    held: set[str]
    rule_keys: set[str]
    kinds: dict[str, str] | None = None
    contacts: dict[str, Contact] | None = None
    coverage: MailCoverage | None = None
    undeliverable: dict[str, list[datetime]] | None = None
    timezones: Mapping[str, tzinfo] | None = None


def senders_kinds(*, source: Source, messages: Iterable[MailMessage]) -> dict[str, str]:
    """The person/automated verdict of every address in ``messages`` (From, To,
    Cc); senders without a stored profile get one computed first from the whole
    source (SPEC §5.1a)."""
    owners = {a.lower() for a in source.owner_addresses}
    messages = list(messages)
    addresses = {
        a.lower()
        for m in messages
        for a in (m.from_addr, *m.to, *m.cc)
        if a and a.lower() not in owners
    }
    kinds = sender_kinds(source_id=source.id, addresses=addresses)
    missing = {
        (m.from_addr or "").lower()
        for m in messages
        if m.from_addr
        and not is_mine(m, owners)
        and (m.from_addr or "").lower() not in kinds
    }
    if missing:
        sender_profiles_refresh(source=source, addresses=missing)
        kinds = sender_kinds(source_id=source.id, addresses=addresses)
    return kinds


def chunk_state(*, source: Source, thread_ids: Sequence[str]) -> ChunkState:
    """Preload the per-thread state of ``thread_ids`` (see ``ChunkState``)."""
    open_loops: dict[str, list[OpenLoop]] = {}
    for loop in OpenLoop.objects.filter(
        source=source, thread_id__in=thread_ids, status=LoopStatus.OPEN
    ):
        open_loops.setdefault(loop.thread_id, []).append(loop)
    held = set(
        GraceHold.objects.filter(source=source, thread_id__in=thread_ids).values_list(
            "thread_id", flat=True
        )
    )
    keys = set(
        ExtractionRun.objects.filter(
            source=source, thread_id__in=thread_ids, extractor=Detector.RULE_EXTRACT
        ).values_list("idempotency_key", flat=True)
    )
    return ChunkState(open_loops=open_loops, held=held, rule_keys=keys)


def _thread_senders(
    source: Source, messages: Sequence[MailMessage], preload: ChunkState | None
) -> tuple[dict[str, str], dict[str, Contact], MailCoverage, dict[str, list[datetime]]]:
    """What the detector reads beyond the thread (SPEC §5.1a): its addresses'
    person/automated kinds, their contacts, the source's mail coverage and the
    bounces; each from ``preload`` when the batch loaded it, else read now."""
    state = preload or ChunkState(open_loops={}, held=set(), rule_keys=set())
    owners = source.owner_addresses
    kinds = state.kinds
    if kinds is None:
        kinds = senders_kinds(source=source, messages=messages)
    contacts = state.contacts
    if contacts is None:
        contacts = sender_contacts(source_id=source.id, addresses=kinds)
    coverage = state.coverage
    if coverage is None:
        coverage = mail_coverage(source_id=source.id, owners=owners)
    bounces = state.undeliverable
    if bounces is None:
        bounces = undeliverable(source_id=source.id, owners=owners)
    return kinds, contacts, coverage, bounces


def source_thread_verdict(
    messages: Sequence[MailMessage],
    *,
    source: Source,
    mutes: Mutes,
    now: datetime,
    kinds: Mapping[str, str],
    contacts: Mapping[str, Contact],
    coverage: MailCoverage,
    bounces: Mapping[str, Sequence[datetime]],
    timezones: Mapping[str, tzinfo] | None = None,
) -> Verdict:
    """``detect_thread`` for one thread of ``source`` with the source's own
    settings, as an import and a ``waiting --as-of`` replay both run it (SPEC
    §5.2): its owner addresses, the coverage of its mail (whole and around each
    ask), its bounces, ``settings.LOOPS_LIST_ASKS`` and the senders' zones
    (``timezones``, for due dates)."""
    return detect_thread(
        messages,
        owner_addresses=source.owner_addresses,
        mutes=mutes,
        now=now,
        sender_kinds=kinds,
        contacts=contacts,
        answers_visible=coverage.whole,
        undeliverable=bounces,
        list_asks=settings.LOOPS_LIST_ASKS,
        coverage=coverage,
        timezones=timezones,
    )


def _thread_detect(
    *,
    source: Source,
    thread_id: str,
    messages: list[MailMessage],
    now: datetime,
    mutes: Mutes,
    page: Page | None,
    preload: ChunkState | None,
    batch: LoopBatch | None,
    zones: Mapping[str, tzinfo],
) -> tuple[dict[str, int], str, bool, MailCoverage]:
    """The deterministic detector on one thread and its verdict applied (SPEC
    §5.2): (counts, the verdict's reason, whether the thread's stored loops
    changed, the coverage read). Loops queued in ``batch`` are new detector
    loops, which follow-up (commitments) never reads: they change nothing."""
    kinds, contacts, coverage, bounces = _thread_senders(source, messages, preload)
    verdict = source_thread_verdict(
        messages,
        source=source,
        mutes=mutes,
        now=now,
        kinds=kinds,
        contacts=contacts,
        coverage=coverage,
        bounces=bounces,
        timezones=zones,
    )
    queued = len(batch.pending) if batch is not None else 0
    counts = loop_apply_verdict(
        source=source,
        thread_id=thread_id,
        verdict=verdict,
        page=page,
        open_loops=preload.open_loops.get(thread_id, []) if preload else None,
        has_hold=(thread_id in preload.held) if preload else None,
        batch=batch,
    )
    queued = (len(batch.pending) if batch is not None else 0) - queued
    changed = bool(counts["closed"]) or counts["opened"] > queued
    return counts, verdict.reason, changed, coverage


def thread_process(
    *,
    source: Source,
    thread_id: str,
    now: datetime,
    mutes: Mutes,
    source_newest: datetime,
    mode: str,
    messages: list[MailMessage] | None = None,
    page: Page | None | bool = False,
    preload: ChunkState | None = None,
    runs: list[ExtractionRun] | None = None,
    batch: LoopBatch | None = None,
) -> dict[str, Any]:
    """Detector, extraction and follow-up for one thread (one transaction for the
    detector's writes). ``messages``/``page`` may be preloaded (``page=False``: look
    it up); ``runs`` collects the unsaved extraction runs and ``batch`` the new
    detector loops for a batch caller, which writes them. Returns a per-thread
    report ``{thread_id, detector, reason?, extraction?, follow_up?}``."""
    if messages is None:
        messages = thread_messages(source_id=source.id, thread_id=thread_id)
    subs = [m for m in messages if is_substantive(m) and m.sent_at <= now]
    report: dict[str, Any] = {"thread_id": thread_id}
    if not subs:
        report["detector"] = "no_substantive_messages"
        return report
    newest = max(m.sent_at for m in subs)
    if source.kind == Source.Kind.MAILBOX and newest < now - MAILBOX_WINDOW:
        report["detector"] = "outside_90_day_window"
        return report
    if page is False:
        page = thread_page(source_id=source.id, thread_id=thread_id)
    assert page is None or isinstance(page, Page)
    zones = preload.timezones if preload is not None else None
    zones = zones if zones is not None else SenderTimezones(messages)
    counts, reason, changed, coverage = _thread_detect(
        source=source,
        thread_id=thread_id,
        messages=messages,
        now=now,
        mutes=mutes,
        page=page,
        preload=preload,
        batch=batch,
        zones=zones,
    )
    report["detector"], report["reason"] = counts, reason
    # Changed loops: let follow-up re-read them.
    open_loops = (
        None if changed or not preload else preload.open_loops.get(thread_id, [])
    )
    visible = [m for m in messages if m.date is None or m.date <= now]
    if mode == "llm":
        extraction_enqueue(source_id=source.id, thread_id=thread_id)
        report["extraction"] = "queued"
    else:
        report["extraction"] = thread_rule_extract(
            source=source,
            thread_id=thread_id,
            messages=visible,
            page=page,
            mutes=mutes,
            source_newest=source_newest,
            known_keys=preload.rule_keys if preload else None,
            runs=runs,
            coverage=coverage,
            timezones=zones,
        )
        if report["extraction"]["loops"]:
            open_loops = None
    report["follow_up"] = thread_follow_up(
        source=source,
        thread_id=thread_id,
        messages=visible,
        open_loops=open_loops,
        timezones=zones,
    )
    return report


_Preload = tuple[
    dict[str, list["MailMessage"]],
    dict[str, Page],
    ChunkState,
    "LoopBatch | None",
]


def _chunk_preload(
    *, source: Source, thread_ids: list[str], scans: SourceScans | None, isolate: bool
) -> _Preload:
    """Load a chunk's messages, pages and ``ChunkState`` in a few queries (the
    whole-source reads from ``scans`` when an import passes it), and the
    ``LoopBatch`` its new detector loops are written with together at the end
    (one savepoint-free chunk only: a retry thread by thread writes them one by
    one)."""
    messages = threads_messages(source_id=source.id, thread_ids=thread_ids)
    pages = threads_pages(source_id=source.id, thread_ids=thread_ids)
    state = chunk_state(source=source, thread_ids=thread_ids)
    state.kinds = senders_kinds(
        source=source, messages=(m for ms in messages.values() for m in ms)
    )
    state.timezones = SenderTimezones([m for ms in messages.values() for m in ms])
    state.contacts = sender_contacts(source_id=source.id, addresses=state.kinds)
    owners = source.owner_addresses
    if scans is not None:
        scans.refresh(owners)
        state.coverage = scans.coverage()
        state.undeliverable = scans.undeliverable()
    else:
        state.coverage = mail_coverage(source_id=source.id, owners=owners)
        state.undeliverable = undeliverable(source_id=source.id, owners=owners)
    if isolate:
        return messages, pages, state, None
    known = OpenLoop.objects.filter(source=source, thread_id__in=thread_ids)
    batch = LoopBatch(
        source=source, known=set(known.values_list("dedup_key", flat=True))
    )
    return messages, pages, state, batch


def _chunk_process(
    *,
    source: Source,
    thread_ids: list[str],
    now: datetime,
    mutes: Mutes,
    source_newest: datetime,
    mode: str,
    isolate: bool,
    scans: SourceScans | None = None,
) -> list[dict[str, Any] | None]:
    """``thread_process`` for a chunk of threads inside the caller's transaction,
    with their messages, pages and state loaded in a few queries
    (``_chunk_preload``), and their extraction runs and new detector loops
    inserted a few statements per chunk. Returns one report per thread.

    ``isolate=False``: the first failing thread raises (the caller rolls the
    chunk back). ``isolate=True``: each thread runs in its own savepoint; a
    failing one is logged, rolled back alone and reported as ``None``.
    """
    preloaded = True
    try:
        messages, pages, state, batch = _chunk_preload(
            source=source, thread_ids=thread_ids, scans=scans, isolate=isolate
        )
    except Exception:
        if not isolate:
            raise
        # One malformed record must not sink the batch: load thread by thread.
        logger.warning("loops: batch load failed for %s; per thread", source.id)
        preloaded, messages, pages, batch = False, {}, {}, None
    runs: list[ExtractionRun] = []
    outcomes: list[dict[str, Any] | None] = []
    for thread_id in thread_ids:
        thread_runs: list[ExtractionRun] = []
        try:
            with transaction.atomic() if isolate else nullcontext():
                result = thread_process(
                    source=source,
                    thread_id=thread_id,
                    now=now,
                    mutes=mutes,
                    source_newest=source_newest,
                    mode=mode,
                    messages=messages.get(thread_id, []) if preloaded else None,
                    page=pages.get(thread_id) if preloaded else False,
                    preload=state if preloaded else None,
                    runs=thread_runs,
                    batch=batch,
                )
        except Exception:
            if not isolate:
                raise
            logger.exception("loops: thread %s/%s failed", source.id, thread_id)
            outcomes.append(None)
            continue
        runs += thread_runs
        outcomes.append(result)
    if batch is not None:
        batch.flush()
    bulk_insert_objects(runs, conflict=["idempotency_key"])
    return outcomes


def _process_start(
    *, source_id: str, now: datetime | None, source_newest: datetime | None
) -> tuple[Source, datetime, str, datetime, Mutes, str]:
    """What every chunk of ``process_threads`` shares: (source, reference time,
    its warning or "", the newest message date the extraction window counts
    from, mutes, extraction mode). A message dated in the future is a wrong
    clock, not the present: the newest message is read up to the wall clock."""
    source = Source.objects.get(id=source_id)
    ref, warning = reference_clock(source=source, as_of=now)
    if source_newest is None:
        wall = max(ref, timezone.now())
        source_newest = newest_message_at(source_id=source.id, until=wall) or ref
    mutes = mutes_for(source_id=source.id)
    return source, ref, warning, source_newest, mutes, _extraction_mode()


def _after_passes(source: Source, ref: datetime, report: dict[str, Any]) -> None:
    """The source-wide passes after the threads (SPEC §5.4, §5.1a): staleness and
    the 90-day window, then fulfilment in sibling threads and reply loops settled
    elsewhere; each failure is logged and counted in ``report``."""
    try:
        report["stale"] = loops_stale_sweep(
            source=source, now=ref
        ) + loops_window_sweep(source=source, now=ref)
    except Exception:
        logger.exception("loops: staleness pass failed for %s", source.id)
        report["failed"] += 1
    try:
        report["closed"] += loops_sibling_fulfilment(source=source, now=ref)
        report["closed"] += loops_settled_elsewhere(source=source, now=ref)
    except Exception:
        logger.exception("loops: sibling fulfilment pass failed for %s", source.id)
        report["failed"] += 1


def process_threads(
    *,
    source_id: str,
    thread_ids: Iterable[str],
    now: datetime | None = None,
    source_newest: datetime | None = None,
    scans: SourceScans | None = None,
) -> dict[str, Any]:
    """Run loop detection for ``thread_ids`` of ``source_id`` (SPEC §5.2-§5.4).

    ``now`` overrides the reference time (default: wall clock for live sources,
    newest message for mailbox sources, never later than the wall clock).
    ``source_newest`` overrides the newest message date the 30-day extraction
    window is measured from (an import passes the newest date of the whole
    mailbox, so results do not depend on its batch size). ``scans``: an
    importer's ``loops.selectors.SourceScans`` for ``source_id``, kept from batch
    to batch so each reads only the records added since (default: read the whole
    source). Returns ``{threads, failed, opened, closed, stale}`` plus
    ``warnings`` (a list of strings) when the reference time needed one (a
    mailbox dated wholly after the wall clock). Never raises: failures are
    logged and counted.
    """
    report: dict[str, Any] = dict.fromkeys(
        ("threads", "failed", "opened", "closed", "stale"), 0
    )
    try:
        source, ref, warning, source_newest, mutes, mode = _process_start(
            source_id=source_id, now=now, source_newest=source_newest
        )
    except Exception:
        logger.exception("loops: cannot start processing for source %s", source_id)
        report["failed"] += 1
        return report
    if warning:
        report["warnings"] = [warning]
    wanted = list(dict.fromkeys(t for t in thread_ids if t))
    if source.kind == Source.Kind.MAILBOX:
        # An import moves the reference time forward: threads held in grace by an
        # earlier batch are re-checked now rather than at the next sweep.
        held = GraceHold.objects.filter(source=source, recheck_at__lte=ref)
        wanted += [
            t for t in held.values_list("thread_id", flat=True) if t not in wanted
        ]
    for start in range(0, len(wanted), BATCH):
        run = partial(
            _chunk_process,
            source=source,
            thread_ids=wanted[start : start + BATCH],
            now=ref,
            mutes=mutes,
            source_newest=source_newest,
            mode=mode,
            scans=scans,
        )
        try:
            # One transaction per chunk with no savepoint per thread: an import's
            # detection costs one commit per chunk (SPEC §11 ingest rate).
            with transaction.atomic():
                outcomes = run(isolate=False)
        except Exception:
            # A thread failed: the chunk rolled back whole. Run it again with a
            # savepoint per thread, so the failure stays with that thread.
            with transaction.atomic():
                outcomes = run(isolate=True)
        for result in outcomes:
            report["threads"] += 1
            if result is None:
                report["failed"] += 1
                continue
            counts = result.get("detector")
            if isinstance(counts, dict):
                report["opened"] += counts["opened"] + counts["reopened"]
                report["closed"] += counts["closed"]
    _after_passes(source, ref, report)
    return report


def loops_decide_source(*, source: Source, now: datetime) -> dict[str, int]:
    """The learned decision pass over ``source``'s open candidates (SPEC §5.1b,
    ``loops.decisions.loops_decide``) unless ``LOOPS_DECISIONS_ENABLED`` is off.
    Returns ``{scored, closed}``; never raises (a failure is logged, nothing
    closes)."""
    if not settings.LOOPS_DECISIONS_ENABLED:
        return {"scored": 0, "closed": 0}
    try:
        with transaction.atomic():
            return loops_decide(source=source, now=now)
    except Exception:
        logger.exception("loops: decision pass failed for %s", source.id)
        return {"scored": 0, "closed": 0}


def loops_sweep(
    *, source_ids: Sequence[str] | None = None, now: datetime | None = None
) -> dict[str, Any]:
    """The hourly sweep (SPEC §5.2 rule 8, §5.4): re-check threads whose grace
    window ended (even with no new mail) and mark stale commitments. Returns
    ``{sources, rechecked, opened, stale, failed, not_kept}`` (``not_kept``: loops
    the learned decision closed, ``loops_decide_source``). Never raises."""
    out: dict[str, Any] = {
        "sources": 0,
        "rechecked": 0,
        "opened": 0,
        "stale": 0,
        "failed": 0,
        "not_kept": 0,
    }
    sources = Source.objects.all()
    if source_ids:
        sources = sources.filter(id__in=source_ids)
    for source in sources:
        ref = reference_time(source=source, as_of=now)
        due = list(
            GraceHold.objects.filter(source=source, recheck_at__lte=ref).values_list(
                "thread_id", flat=True
            )
        )
        out["sources"] += 1
        if due:
            report = process_threads(source_id=source.id, thread_ids=due, now=ref)
            out["rechecked"] += report["threads"]
            out["opened"] += report["opened"]
            out["stale"] += report["stale"]
            out["failed"] += report["failed"]
        else:
            try:
                out["stale"] += loops_stale_sweep(
                    source=source, now=ref
                ) + loops_window_sweep(source=source, now=ref)
            except Exception:
                logger.exception("loops: staleness pass failed for %s", source.id)
                out["failed"] += 1
        out["not_kept"] += loops_decide_source(source=source, now=ref)["closed"]
    return out


def sender_mark(
    *, source: Source, address: str, kind: str, actor: str
) -> dict[str, Any]:
    """A curator's verdict on a sender (SPEC §5.1a): record it and re-evaluate that
    sender's threads. Marked automated, its open reply-owed loops close (dropped,
    ``not_expected: automated_sender``); marked a person, loops it had lost that
    way reopen and its threads are detected again. Every change writes a
    ``LoopEvent``. Returns ``{address, kind, changed, threads, closed, opened,
    reopened}``. Raises ``InvalidParams`` for a bad kind or address."""
    profile, changed = sender_profile_decide(
        source=source, address=address, kind=kind, actor=actor
    )
    out: dict[str, Any] = {
        "address": profile.address,
        "kind": profile.kind,
        "changed": changed,
        "threads": 0,
        "closed": 0,
        "opened": 0,
        "reopened": 0,
    }
    if kind == "person":
        for loop in OpenLoop.objects.filter(
            source=source,
            counterparty_email=profile.address,
            status=LoopStatus.DROPPED,
            closed_by__startswith="not_expected: automated",
        ):
            loop_reopen(loop=loop, actor=actor, note="sender marked a person")
            out["reopened"] += 1
    threads = sender_threads(source_id=source.id, address=profile.address)
    if threads:
        report = process_threads(source_id=source.id, thread_ids=threads)
        out["threads"] = report["threads"]
        out["closed"] = report["closed"]
        out["opened"] = report["opened"]
    return out
