"""Explicit features of an open-loop candidate, for the learned decisions (SPEC
§5.1b): the relationship between the owner and the counterparty, the text of the
ask or promise, the time since and what happened after, each a named float.

The detectors and extractors (SPEC §5.2, §5.3) propose candidates; ``loops.decide``
scores them with the shipped model over these features. ``MailboxIndex`` reads a
source's stored messages once and answers every per-loop question from memory,
so scoring a source's open loops costs one read of its mail.

Every feature is a number in a small range (counts through ``log1p``, flags 0/1),
named in ``FEATURES``; the model file records the names it was trained on, so a
feature added here never silently shifts a shipped model.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from brain.models import RawRecord, Source
from brain.people import org_domain
from loops.definitions import (
    URL_RE,
    collapse,
    is_mine,
    is_noise_sender,
    normalise_subject,
    reply_text,
    topic_subject,
)
from loops.message import MailMessage

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from loops.models import OpenLoop

LOOP_TYPES = (
    "unanswered_inbound",
    "unanswered_outbound",
    "commitment_owed_by_me",
    "commitment_owed_to_me",
)

_REQUEST = re.compile(
    r"\b(?:please|pls|could you|can you|would you|will you|let me know|need(?:s|ed)? "
    r"(?:you|your)|send me|call me|give me a call|advise|confirm|your thoughts|"
    r"any (?:thoughts|comments|questions))\b",
    re.I,
)
_DEADLINE = re.compile(
    r"\b(?:by|before|no later than|until)\s+(?:today|tomorrow|tonight|eod|cob|"
    r"end of (?:the )?(?:day|week|month)|monday|tuesday|wednesday|thursday|friday|"
    r"saturday|sunday|noon|\d{1,2}[/:]\d{1,2}|the \d{1,2}(?:st|nd|rd|th)?)\b|\basap\b",
    re.I,
)
_MOMENT = re.compile(
    r"\b(?:today|tonight|this (?:morning|afternoon|evening|week)|tomorrow|"
    r"meeting|lunch|dinner|breakfast|conference call|call at|party|reception|"
    r"seminar|conference|event|game|tickets?|rsvp)\b",
    re.I,
)
_FORWARD = re.compile(
    r"-{2,} ?(?:original message|forwarded by|forwarded message)|^\s*fwd?:", re.I | re.M
)
_DISCLAIMER = re.compile(
    r"\b(?:intended (?:only )?for the|confidential(?:ity)? notice|privileged|"
    r"if you (?:are not|have received)|unsubscribe|opt[ -]out|click here|"
    r"this (?:e-?mail|message) (?:and any|is intended))\b",
    re.I,
)
_CROWD = re.compile(
    r"^\s*(?:hi |hello |dear )?(?:all|everyone|team|folks|guys)\b", re.I
)
_THANKS = re.compile(r"^\s*(?:thanks|thank you|thx|great|ok|okay|sounds good)\b", re.I)
_PROMISE = re.compile(r"\b(?:i|we)(?:'ll| will| shall| am going to)\b", re.I)
_PAGER = re.compile(
    r"^\+?\d[\d.-]{5,}@|@(?:skytel|pagenet|arch|mobile\.att|vtext)", re.I
)

FEATURES: tuple[str, ...] = (
    *(f"type_{t}" for t in LOOP_TYPES),
    # relationship
    "owner_to_them_before",
    "them_to_owner_before",
    "owner_answer_rate",
    "first_contact",
    "stranger",
    "same_domain",
    "owner_in_to",
    "recipients",
    "their_volume",
    "they_are_owner_side",
    "pager_like",
    "noise_sender",
    "mailing_list",
    "owner_sent_share",
    "to_owner_alone",
    "owner_active_after",
    # text
    "questions",
    "request_cue",
    "deadline_cue",
    "moment_cue",
    "forwarded",
    "disclaimer",
    "crowd_greeting",
    "thanks_opening",
    "promise_cue",
    "words",
    "html_only",
    "ask_score",
    "second_person",
    "names_owner",
    "ends_with_question",
    # time
    "days_since",
    "days_since_ask",
    "recent_7d",
    "old_60d",
    "due_passed_days",
    "has_due",
    # after
    "later_in_thread",
    "later_owner_to_them",
    "later_them_to_owner",
    "later_sibling",
    "later_owner_topic",
    "later_them_topic",
    "thread_messages",
    "thread_people",
)


def _log(n: float) -> float:
    return math.log1p(max(0.0, n))


def _domain(address: str) -> str:
    """The organisation domain of an address (``brain.people.org_domain``), '' for
    a string without ``@``."""
    return org_domain(address) if "@" in address else ""


@dataclass
class MailboxIndex:
    """A source's stored messages, read once, indexed for the features: by thread,
    by sender and by the owner's recipients, with the owner's side (the owner's
    addresses plus everyone who writes from the owner's sent folders: assistants
    and office aliases, SPEC §5.1b) and the owner's domains."""

    source_id: str
    owners: frozenset[str]
    now: datetime
    threads: dict[str, list[MailMessage]] = field(default_factory=dict)
    by_id: dict[str, MailMessage] = field(default_factory=dict)
    owner_side: frozenset[str] = frozenset()
    owner_domains: frozenset[str] = frozenset()
    sent_by_owner: dict[str, list[datetime]] = field(default_factory=dict)
    received_from: dict[str, list[datetime]] = field(default_factory=dict)
    threads_from: dict[str, set[str]] = field(default_factory=dict)
    threads_owner_wrote: set[str] = field(default_factory=set)
    subjects: dict[str, list[MailMessage]] = field(default_factory=dict)
    owner_sent_share: float = 0.0
    owner_dates: list[datetime] = field(default_factory=list)
    owner_names: frozenset[str] = frozenset()
    domains_written: frozenset[str] = frozenset()
    _ordered: list[MailMessage] = field(default_factory=list, repr=False)
    _dates: list[datetime] = field(default_factory=list, repr=False)

    @classmethod
    def load(cls, *, source: Source, now: datetime) -> MailboxIndex:
        """Read every dated message of ``source`` (``RawRecord.metadata``) up to
        ``now`` and build the index. One query."""
        owners = frozenset(a.lower() for a in source.owner_addresses or ())
        rows = RawRecord.objects.filter(source_id=source.id).values_list(
            "id", "metadata"
        )
        messages = [
            MailMessage.from_metadata(meta, raw_record_id=pk)
            for pk, meta in rows
            if meta.get("message_id") and meta.get("date")
        ]
        return cls.build(source.id, owners, now, messages)

    @classmethod
    def build(
        cls,
        source_id: str,
        owners: frozenset[str],
        now: datetime,
        messages: Iterable[MailMessage],
    ) -> MailboxIndex:
        """The index over ``messages`` (those dated after ``now`` are left out)."""
        index = cls(source_id=source_id, owners=owners, now=now)
        kept = sorted(
            (m for m in messages if m.date and m.date <= now),
            key=lambda m: (m.sent_at, m.message_id),
        )
        side = set(owners)
        for m in kept:
            if is_mine(m, owners) and m.from_addr:
                side.add(m.from_addr.lower())
        index.owner_side = frozenset(side)
        index.owner_domains = frozenset(_domain(a) for a in owners if _domain(a))
        index.owner_names = frozenset(
            part
            for a in owners
            for part in re.split(r"[._-]+", a.split("@", 1)[0].lower())
            if len(part) > 2
        )
        sent: dict[str, list[datetime]] = defaultdict(list)
        received: dict[str, list[datetime]] = defaultdict(list)
        started: dict[str, set[str]] = defaultdict(set)
        subjects: dict[str, list[MailMessage]] = defaultdict(list)
        threads: dict[str, list[MailMessage]] = defaultdict(list)
        window = now - timedelta(days=90)
        mine_recent = total_recent = 0
        for m in kept:
            threads[m.thread_id].append(m)
            index.by_id[m.message_id] = m
            subjects[normalise_subject(m.subject)].append(m)
            ours = index.ours(m)
            if m.sent_at >= window:
                total_recent += 1
                mine_recent += ours
            if ours:
                index.owner_dates.append(m.sent_at)
                index.threads_owner_wrote.add(m.thread_id)
                for a in {*m.to, *m.cc}:
                    sent[a.lower()].append(m.sent_at)
            elif m.from_addr:
                received[m.from_addr.lower()].append(m.sent_at)
                started[m.from_addr.lower()].add(m.thread_id)
        index.threads, index.sent_by_owner, index.received_from = (
            dict(threads),
            dict(sent),
            dict(received),
        )
        index.threads_from, index.subjects = dict(started), dict(subjects)
        index.owner_sent_share = mine_recent / total_recent if total_recent else 0.0
        index.domains_written = frozenset(_domain(a) for a in sent if _domain(a))
        return index

    def after(self, moment: datetime) -> list[MailMessage]:
        """Every indexed message dated after ``moment``, oldest first."""
        if not self._ordered:
            self._ordered = sorted(self.by_id.values(), key=lambda x: x.sent_at)
            self._dates = [x.sent_at for x in self._ordered]
        return self._ordered[bisect_right(self._dates, moment) :]

    def ours(self, m: MailMessage) -> bool:
        """Whether ``m`` was written on the owner's side."""
        return is_mine(m, self.owners) or (m.from_addr or "").lower() in self.owner_side


def _count(
    dates: Sequence[datetime],
    *,
    before: datetime | None = None,
    after: datetime | None = None,
) -> int:
    return sum(
        1
        for d in dates
        if (before is None or d < before) and (after is None or d > after)
    )


def evidence_message(loop: OpenLoop, index: MailboxIndex) -> MailMessage | None:
    """The message a loop's evidence names (its first evidence item), else the
    newest message of its thread."""
    for item in loop.evidence or []:
        found = index.by_id.get(str(item.get("message_id") or ""))
        if found is not None:
            return found
    thread = index.threads.get(loop.thread_id or "")
    return thread[-1] if thread else None


def loop_features(
    loop: OpenLoop, index: MailboxIndex, ask_score: float | None = None
) -> dict[str, float]:
    """The named features (``FEATURES``) of one loop at ``index.now``. ``ask_score``
    is the embedding classifier's probability for the loop's ask or promise
    sentence (``loops.extractors.classifier``), 0.5 when it cannot run."""
    m = evidence_message(loop, index)
    them = (loop.counterparty_email or "").lower()
    thread = index.threads.get(loop.thread_id or "", [])
    moment = m.sent_at if m is not None else loop.opened_at
    text = _loop_text(loop, m)
    out = {f"type_{t}": float(loop.loop_type == t) for t in LOOP_TYPES}
    out.update(_relationship(index, them, m, moment))
    out.update(_text_features(text, m, ask_score))
    out.update(_addressing(text, index.owner_names))
    out.update(_time_features(index.now, loop, moment))
    out["days_since_ask"] = _log(max(0.0, (index.now - moment).total_seconds() / 86400))
    out.update(_after_features(index, them, m, thread, moment))
    return out


def _loop_text(loop: OpenLoop, m: MailMessage | None) -> str:
    """The newest words of the evidence message, else the loop's quote."""
    if m is not None:
        return collapse(reply_text(m.body))
    return " ".join(str(e.get("quote") or "") for e in loop.evidence or [])


def _relationship(
    index: MailboxIndex, them: str, m: MailMessage | None, moment: datetime
) -> dict[str, float]:
    sent = index.sent_by_owner.get(them, [])
    received = index.received_from.get(them, [])
    started = index.threads_from.get(them, set())
    answered = len(started & index.threads_owner_wrote)
    before_out, before_in = _count(sent, before=moment), _count(received, before=moment)
    recipients = {*m.to, *m.cc} if m is not None else set()
    return {
        "owner_to_them_before": _log(before_out),
        "them_to_owner_before": _log(before_in),
        "owner_answer_rate": answered / len(started) if started else 0.0,
        "first_contact": float(before_out + before_in == 0),
        # No exchange before, never written to by the owner, from a domain outside
        # the owner's that the owner never wrote to: a stranger's one-way mail
        # (LOOPS_LABELLING.md), in a single thread: not a correspondent who keeps
        # writing (a broker, a builder) nor a new contact at a known firm.
        "stranger": float(
            before_out + before_in == 0
            and not sent
            and _domain(them) not in index.owner_domains
            and _domain(them) not in index.domains_written
            and len(started) <= 1
        ),
        "same_domain": float(_domain(them) in index.owner_domains),
        "owner_in_to": float(
            m is not None and bool(index.owner_side & {a.lower() for a in m.to})
        ),
        "recipients": _log(len(recipients)),
        "their_volume": _log(len(received)),
        "they_are_owner_side": float(them in index.owner_side),
        "pager_like": float(bool(_PAGER.search(them))),
        "noise_sender": float(is_noise_sender(them)),
        "mailing_list": float(m is not None and (m.mailing_list or m.list_unsubscribe)),
        "owner_sent_share": index.owner_sent_share,
        "to_owner_alone": float(
            m is not None
            and not m.cc
            and bool(m.to)
            and {a.lower() for a in m.to} <= index.owner_side
        ),
        "owner_active_after": _log(_count(index.owner_dates, after=moment)),
    }


def _text_features(
    text: str, m: MailMessage | None, ask_score: float | None
) -> dict[str, float]:
    plain = URL_RE.sub(" ", text)
    body = m.body if m is not None else text
    subject = m.subject if m is not None else ""
    return {
        "questions": _log(plain.count("?")),
        "request_cue": float(bool(_REQUEST.search(plain))),
        "deadline_cue": float(bool(_DEADLINE.search(plain))),
        "moment_cue": float(bool(_MOMENT.search(plain) or _MOMENT.search(subject))),
        "forwarded": float(
            bool(_FORWARD.search(body)) or subject.lower().startswith(("fw", "fwd"))
        ),
        "disclaimer": float(bool(_DISCLAIMER.search(body))),
        "crowd_greeting": float(bool(_CROWD.search(plain))),
        "thanks_opening": float(bool(_THANKS.search(plain))),
        "promise_cue": float(bool(_PROMISE.search(plain))),
        "words": _log(len(plain.split())),
        "html_only": float(m is not None and m.html_only),
        "ask_score": 0.5 if ask_score is None else ask_score,
    }


_YOU = re.compile(r"\b(?:you|your|yours)\b", re.I)


def _addressing(text: str, owner_names: frozenset[str]) -> dict[str, float]:
    """Whether the words speak to the owner: second person, the owner's name in
    the greeting (first 40 characters), a closing question."""
    plain = URL_RE.sub(" ", text).strip()
    opening = set(re.findall(r"[a-z]+", plain[:40].lower()))
    last = re.split(r"(?<=[.!?])\s+", plain)[-1] if plain else ""
    return {
        "second_person": _log(len(_YOU.findall(plain))),
        "names_owner": float(bool(opening & owner_names)),
        "ends_with_question": float(last.rstrip().endswith("?")),
    }


def _time_features(now: datetime, loop: OpenLoop, moment: datetime) -> dict[str, float]:
    last = max(moment, loop.last_activity_at or moment)
    days = max(0.0, (now - last).total_seconds() / 86400)
    due = loop.due_at
    passed = max(0.0, (now - due).total_seconds() / 86400) if due else 0.0
    return {
        "days_since": _log(days),
        "recent_7d": float(days <= 7),
        "old_60d": float(days > 60),
        "due_passed_days": _log(passed),
        "has_due": float(due is not None),
    }


def _after_features(
    index: MailboxIndex,
    them: str,
    m: MailMessage | None,
    thread: list[MailMessage],
    moment: datetime,
) -> dict[str, float]:
    later = [x for x in thread if x.sent_at > moment]
    to_them = index.sent_by_owner.get(them, [])
    from_them = index.received_from.get(them, [])
    siblings = 0
    if m is not None:
        key = normalise_subject(m.subject)
        siblings = (
            sum(
                1
                for x in index.subjects.get(key, [])
                if x.thread_id != m.thread_id and x.sent_at > moment
            )
            if key
            else 0
        )
    people = {x.from_addr.lower() for x in thread if x.from_addr}
    owner_topic, them_topic = _later_on_topic(index, them, m, thread, moment)
    return {
        "later_owner_topic": _log(owner_topic),
        "later_them_topic": _log(them_topic),
        "later_in_thread": _log(len(later)),
        "later_owner_to_them": _log(_count(to_them, after=moment)),
        "later_them_to_owner": _log(_count(from_them, after=moment)),
        "later_sibling": _log(siblings),
        "thread_messages": _log(len(thread)),
        "thread_people": _log(len(people)),
    }


_STOP = frozenset(
    "subject re fw fwd the a an and or of to for in on at by with from is are be this that "
    "your my our you we i it as re: update meeting call question questions request".split()
)


def topic_words(subject: str) -> frozenset[str]:
    """The content words of a subject (``loops.definitions.topic_subject``: reply
    prefixes and a list tag dropped), three letters or more, common words and
    "(no subject)" left out."""
    words = re.findall(r"[a-z0-9]{3,}", topic_subject(subject))
    return frozenset(w for w in words if w not in _STOP)


def _later_on_topic(
    index: MailboxIndex,
    them: str,
    m: MailMessage | None,
    thread: list[MailMessage],
    moment: datetime,
) -> tuple[int, int]:
    """Messages after ``moment`` outside the thread on the loop's topic (subject
    content words overlapping by half or more): ``(the owner's to anyone of the
    thread, the counterparty's to the owner's side)``, what settles a matter
    elsewhere (SPEC §5.1b "what followed")."""
    if m is None:
        return 0, 0
    topic = topic_words(m.subject)
    if not topic:
        return 0, 0
    people = {a.lower() for x in thread for a in (x.from_addr, *x.to, *x.cc) if a}
    people -= index.owner_side
    inside = {x.message_id for x in thread}
    owner = them_count = 0
    for x in index.after(moment):
        if x.message_id in inside:
            continue
        words = topic_words(x.subject)
        if not words or len(words & topic) * 2 < min(len(words), len(topic)):
            continue
        if index.ours(x) and people & {a.lower() for a in (*x.to, *x.cc)}:
            owner += 1
        elif (x.from_addr or "").lower() == them:
            them_count += 1
    return owner, them_count


def ask_sentence(loop: OpenLoop) -> str:
    """The sentence a loop stands on, for the embedding classifier: the evidence's
    ``ask`` (reply loops) or the summary's promise, at most 300 characters."""
    for item in loop.evidence or []:
        if item.get("ask"):
            return str(item["ask"])[:300]
    return (loop.summary or "")[:300]


def vector(features: dict[str, float], names: Sequence[str]) -> list[float]:
    """``features`` as a list in the order of ``names`` (a missing name is 0)."""
    return [float(features.get(n, 0.0)) for n in names]
