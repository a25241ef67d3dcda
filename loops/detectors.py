"""The deterministic thread detector (SPEC §5.2): a pure function from a thread's
messages, the owner's addresses, the mutes and the reference time to a verdict.

No database, no LLM: ``loops.services.loop_apply_verdict`` applies a verdict, and
``waiting --as-of`` replays the same function for any day.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from loops.definitions import (
    asks_question,
    display_subject,
    in_bulk_category,
    is_acknowledgement_only,
    is_mine,
    is_substantive,
    quote_of,
)
from loops.models import LoopType

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from loops.message import MailMessage

INBOUND_GRACE = timedelta(hours=24)
OUTBOUND_GRACE = timedelta(hours=72)


@dataclass(frozen=True)
class LoopSpec:
    """A loop the detector wants open (times are aware UTC datetimes)."""

    loop_type: str
    thread_id: str
    counterparty_email: str
    counterparty_name: str
    summary: str
    opened_at: datetime
    last_activity_at: datetime
    evidence: list[dict[str, Any]]

    @property
    def dedup_key(self) -> str:
        """``thread:<thread_id>:<loop_type>`` (SPEC §5.2 rule 7)."""
        return f"thread:{self.thread_id}:{self.loop_type}"


@dataclass
class Verdict:
    """What to do with one thread: loops to open, loop types to close, when to
    re-check a thread still inside its grace window, and why nothing opened."""

    open: list[LoopSpec] = field(default_factory=list)
    close: list[str] = field(default_factory=list)
    recheck_at: datetime | None = None
    reason: str = ""


@dataclass(frozen=True)
class Mutes:
    """The source's mutes, lower-cased (SPEC §5: they gate new detection only)."""

    senders: frozenset[str] = frozenset()
    threads: frozenset[str] = frozenset()

    def sender_muted(self, address: str) -> bool:
        """True when ``address`` is a muted sender."""
        return (address or "").lower() in self.senders

    def thread_muted(self, thread_id: str) -> bool:
        """True when ``thread_id`` is muted."""
        return (thread_id or "").lower() in self.threads


def _participants(messages: Sequence[MailMessage], owners: Collection[str]) -> set[str]:
    """Every From/To/Cc address; the From of a message of mine counts as mine even
    when it is an address the owner list lacks (sent folder, SENT label)."""
    people: set[str] = set()
    for m in messages:
        senders = [] if is_mine(m, owners) else [m.from_addr]
        people.update(a.lower() for a in [*senders, *m.to, *m.cc] if a)
    return people


def _effective_turns(
    messages: Sequence[MailMessage], owners: Collection[str]
) -> list[MailMessage]:
    """Substantive messages minus replies of mine that only acknowledge a question
    ("Thanks!" after "Can you…?" is not an answer; SPEC §5.2 rule 2)."""
    turns: list[MailMessage] = []
    for m in messages:
        if (
            turns
            and is_mine(m, owners)
            and not is_mine(turns[-1], owners)
            and asks_question(turns[-1].body)
            and is_acknowledgement_only(m.body)
        ):
            continue
        turns.append(m)
    return turns


def detect_thread(
    messages: Sequence[MailMessage],
    *,
    owner_addresses: Collection[str],
    mutes: Mutes = Mutes(),
    now: datetime,
) -> Verdict:
    """Decide which deterministic loops of one thread open and close (SPEC §5.2).

    ``messages`` are one thread's messages in any order; messages dated after
    ``now`` are ignored (replay). Returns a ``Verdict``; never raises on odd mail.
    """
    owners = {a.lower() for a in owner_addresses}
    subs = sorted(
        (m for m in messages if is_substantive(m) and m.date and m.date <= now),
        key=lambda m: (m.date, m.message_id),
    )
    if not subs:
        return Verdict(reason="no_substantive_messages")
    if _participants(subs, owners) <= owners:
        return Verdict(reason="self_thread")

    turns = _effective_turns(subs, owners)
    last = turns[-1]
    mine = is_mine(last, owners)
    thread_id = last.thread_id
    subject = display_subject(last.subject or subs[0].subject)
    # The clock starts at the oldest message of the current turn, so a nudge
    # ("bumping this") does not restart it (rule 6).
    run: list[MailMessage] = []
    for m in reversed(turns):
        if is_mine(m, owners) != mine:
            break
        run.append(m)
    run.reverse()

    if mine:
        verdict = Verdict(close=[LoopType.UNANSWERED_INBOUND])
        questions = [m for m in run if asks_question(m.body)]
        if not questions:
            verdict.reason = "no_question"
            return verdict
        recipients = [a.lower() for a in last.to if a and a.lower() not in owners]
        if not recipients:
            verdict.reason = "no_recipients"
            return verdict
        counterparty = recipients[0]
        if mutes.thread_muted(thread_id) or mutes.sender_muted(counterparty):
            verdict.reason = "muted"
            return verdict
        started = questions[0].sent_at
        if now - started < OUTBOUND_GRACE:
            verdict.recheck_at = started + OUTBOUND_GRACE
            verdict.reason = "grace"
            return verdict
        verdict.open.append(
            LoopSpec(
                loop_type=LoopType.UNANSWERED_OUTBOUND,
                thread_id=thread_id,
                counterparty_email=counterparty,
                counterparty_name="",
                summary=f'Waiting on {counterparty}: "{subject}"',
                opened_at=started,
                last_activity_at=last.sent_at,
                evidence=[_evidence(last)],
            )
        )
        return verdict

    verdict = Verdict(close=[LoopType.UNANSWERED_OUTBOUND])
    sender = (last.from_addr or "").lower()
    if last.list_unsubscribe:
        verdict.reason = "list_mail"
    elif not owners & {a.lower() for a in last.to}:
        verdict.reason = "cc_only"
    elif mutes.thread_muted(thread_id) or mutes.sender_muted(sender):
        verdict.reason = "muted"
    elif in_bulk_category(subs) and not any(is_mine(m, owners) for m in subs):
        verdict.reason = "bulk_category"
    if verdict.reason:
        return verdict
    addressed = [m for m in run if owners & {a.lower() for a in m.to}]
    started = (addressed or run)[0].sent_at
    if now - started < INBOUND_GRACE:
        verdict.recheck_at = started + INBOUND_GRACE
        verdict.reason = "grace"
        return verdict
    verdict.open.append(
        LoopSpec(
            loop_type=LoopType.UNANSWERED_INBOUND,
            thread_id=thread_id,
            counterparty_email=sender,
            counterparty_name=last.from_name or "",
            summary=f'Reply owed to {sender}: "{subject}"',
            opened_at=started,
            last_activity_at=last.sent_at,
            evidence=[_evidence(last)],
        )
    )
    return verdict


def _evidence(message: MailMessage) -> dict[str, Any]:
    """Evidence item: message id, raw record id and the first 200 collapsed chars."""
    item: dict[str, Any] = {
        "message_id": message.message_id,
        "quote": quote_of(message.body),
    }
    if message.raw_record_id is not None:
        item["raw_record_id"] = message.raw_record_id
    if message.link:
        item["link"] = message.link
    return item
