"""The offline rule extractor (``rule_extract``, SPEC §5.3): first-person future
commitments ("I'll send…", "I will get back to you by…", "we will deliver…") and
requests made to me with a deadline, with deadlines resolved relative to the
message's sent date and timezone.

Zero cost, no network: it runs when the LLM extractor is off or unavailable, so the
product finds commitments with no API key. Date strings are parsed by ``dateparser``;
the weekday and "end of day/week/month" logic is ours.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from loops.definitions import collapse, is_mine, is_substantive, reply_text

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    from loops.message import MailMessage

RULE_CONFIDENCE_DATED = 0.6
RULE_CONFIDENCE_UNDATED = 0.5
OWED_BY_ME = "owed_by_me"
OWED_TO_ME = "owed_to_me"

WEEKDAYS = {
    "monday": 0, "mon": 0, "tuesday": 1, "tue": 1, "tues": 1, "wednesday": 2, "wed": 2,
    "thursday": 3, "thu": 3, "thur": 3, "thurs": 3, "friday": 4, "fri": 4,
    "saturday": 5, "sat": 5, "sunday": 6, "sun": 6,
}  # fmt: skip
_WD = r"(?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)(?:day|nesday|rsday|urday|sday)?\b\.?"
MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)

# "I'll", "I will", "we are going to", … followed by a verb; negations, hedges and
# states ("I will be out", "I will not return") are not promises.
COMMIT_RE = re.compile(
    r"\b(?:i|we)\s*(?:'ll|’ll|\s+will|\s+shall|'m going to|’m going to|\s+am going to|"
    r"'re going to|\s+are going to|\s+plan to|\s+intend to)\s+"
    r"(?!not\b|never\b|probably\b|maybe\b|perhaps\b|likely\b|"
    r"be\s+(?!\w+ing\b|sure\s+to\b|able\s+to\b|(?:in\s+)?touch\b)|"
    r"have\s+(?:a|an|the|to\s+be|no)\b|need\b|want\b|miss\b|let\s+you\s+know\s+if\b|"
    r"see\s+(?:if|what|whether)\b|assume\b|keep\s+(?:you|that|this|it)\s+in\s+mind\b)"
    r"(?:also\s+|definitely\s+|certainly\s+|then\s+|just\s+|gladly\s+)?"
    r"(?:be\s+(?:sure\s+to\s+|able\s+to\s+)?)?(?P<verb>[a-z]+)",
    re.I,
)
# "see you Monday", "we'll see you tomorrow": a meeting promise when a time is given.
SEE_YOU_RE = re.compile(r"^(?:(?:i|we)\s*(?:'ll|’ll|\s+will)\s+)?see you\b", re.I)
# Verbs that do not promise an action to someone.
NON_ACTION_VERBS = frozenset(
    """be been get? like love hope wonder think guess bet see appreciate remember
    understand know feel try look""".split()
)
REQUEST_RE = re.compile(
    r"(?:^|\b)(?:please|pls|kindly)\b|\b(?:can|could|would|will)\s+you\b|"
    r"\bi\s+(?:need|want|would like)\s+(?:you|your)\b|\blet\s+me\s+know\b|"
    r"\bmake\s+sure\s+(?:you|to)\b|\b(?:you|u)\s+(?:need|must|should)\s+to?\b|"
    r"\bwhy\s+don'?t\s+you\b|\bif\s+you\s+could\b|\b(?:if|whether)\s+we\s+(?:could|can)\b|"
    r"\b(?:i|we)(?:'d|\s+would)\s+like\s+to\s+(?:meet|discuss|talk|speak|get|have|see|review)\b|"
    r"\bwe\s+(?:need|must|should)\s+(?:to\s+)?(?:get|meet|talk|discuss|finali[sz]e)\b",
    re.I,
)
# A sentence that opens with a bare imperative ("Send me the draft by Friday").
IMPERATIVE_RE = re.compile(
    r"^(?:\w+,\s+)?(?:call|send|e-?mail|reply|respond|review|sign|submit|complete|return|"
    r"confirm|join|register|apply|place|open|check|forward|schedule|get|bring|provide|"
    r"fill|update|finish|fax|shop|book|order|pay|come|give|set up|let me know)\b",
    re.I,
)
DEADLINE_RE = re.compile(
    rf"\b(?:today|tonight|tomorrow|tmrw|eod|cob|eow|asap|end of (?:the )?(?:day|week|month)|"
    rf"close of business|this (?:morning|afternoon|evening|week)|next week|"
    rf"(?:(?:this|next|on|by|before|until|till)\s+)?{_WD}|"
    rf"(?:by|before|on|until|till|due|no later than)\s+\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?|"
    rf"{MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b|(?:mid|early|late|end of)[- ]{MONTH}|"
    rf"as soon as possible|"
    rf"\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{MONTH}|in\s+(?:\d+|a|one|two|three|a few)\s+"
    rf"(?:days?|weeks?)|within\s+(?:\d+|a|one|two|three)\s+(?:days?|weeks?|hours?))",
    re.I,
)
SENTENCE_SPLIT_RE = re.compile(
    r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\n\s*\n|\n(?=\s*[-*•]\s)"
)


@dataclass(frozen=True)
class RuleMatch:
    """One sentence that promises or requests something.

    ``kind`` is ``commitment`` (the writer promises) or ``request`` (the writer asks
    the reader, with a deadline). ``deadline`` is the matched date phrase or ''.
    """

    kind: str
    sentence: str
    deadline: str


@dataclass(frozen=True)
class RuleCandidate:
    """A commitment found in a thread: direction relative to the owner, text,
    verbatim quote (≤ 200 chars), due date (local calendar date) or None,
    counterparty, the message it came from, and a confidence below the LLM's."""

    direction: str
    text: str
    quote: str
    due: date | None
    counterparty_email: str
    counterparty_name: str
    message: MailMessage
    confidence: float


def split_sentences(text: str) -> list[str]:
    """Split a message's newest text into collapsed sentences."""
    return [collapse(s) for s in SENTENCE_SPLIT_RE.split(text or "") if collapse(s)]


def classify_sentence(sentence: str) -> RuleMatch | None:
    """Classify one sentence: a first-person future commitment, a request with a
    deadline, or None. Questions are not commitments ("Will I…?")."""
    text = collapse(sentence)
    if not text or len(text) > 400:
        return None
    deadline_match = DEADLINE_RE.search(text)
    deadline = deadline_match.group(0) if deadline_match else ""
    commit = COMMIT_RE.search(text)
    if commit and not text.rstrip().endswith("?"):
        verb = commit.group("verb").lower()
        prefix = text[: commit.start()].lower()
        conditional = re.search(
            r"\b(?:if|unless|whether|when|once)\b[^,;]*$", prefix
        ) or (re.match(r"\s*(?:if|unless)\b", prefix))
        if verb not in NON_ACTION_VERBS and not conditional:
            return RuleMatch(kind="commitment", sentence=text, deadline=deadline)
    if deadline and SEE_YOU_RE.match(text):
        return RuleMatch(kind="commitment", sentence=text, deadline=deadline)
    if deadline and (REQUEST_RE.search(text) or IMPERATIVE_RE.match(text)):
        return RuleMatch(kind="request", sentence=text, deadline=deadline)
    return None


def _next_weekday(base: date, weekday: int, *, allow_today: bool) -> date:
    days = (weekday - base.weekday()) % 7
    if days == 0 and not allow_today:
        days = 7
    return base + timedelta(days=days)


def resolve_due(
    phrase: str, sent_at: datetime, tz: tzinfo | None = None
) -> date | None:
    """Resolve a deadline phrase to a calendar date relative to the sent date in the
    sender's timezone ``tz`` (default: ``sent_at``'s own).

    "by Friday" sent on a Wednesday is that Friday; a weekday equal to the sent day
    means the next week's ("on Monday" sent on a Monday is in 7 days); "next Monday"
    is the first Monday after the sent date; "today"/"end of day"/"EOD"/"COB" is the
    sent date; "tomorrow" the day after; "end of week" the week's Friday; "next
    week" next week's Friday; "5/30" (month/day, US order) the next such date on or
    after the sent date; other dates through ``dateparser``. Unknown → None.
    """
    local = sent_at.astimezone(tz) if tz else sent_at
    base = local.date()
    p = collapse(phrase).lower().rstrip(".")
    if not p or p == "asap":
        return None
    if re.search(
        r"\b(?:today|tonight|eod|cob|end of (?:the )?day|close of business|this "
        r"(?:morning|afternoon|evening))\b",
        p,
    ):
        return base
    if re.search(r"\b(?:tomorrow|tmrw)\b", p):
        return base + timedelta(days=1)
    if re.search(r"\b(?:eow|end of (?:the )?week|this week)\b", p):
        return base + timedelta(days=max(0, 4 - base.weekday()))
    if "next week" in p:
        return base + timedelta(days=7 - base.weekday() + 4)
    if re.search(r"end of (?:the )?month", p):
        return base.replace(day=calendar.monthrange(base.year, base.month)[1])
    wd = re.search(rf"\b(this\s+|next\s+)?(?P<d>{_WD})", p)
    if wd and not re.search(r"\d", p):
        name = re.sub(r"[^a-z]", "", wd.group("d"))
        weekday = WEEKDAYS.get(name) if name in WEEKDAYS else WEEKDAYS.get(name[:3])
        if weekday is not None:
            return _next_weekday(
                base, weekday, allow_today=bool(wd.group(1) and "this" in wd.group(1))
            )
    md = re.search(r"\b(\d{1,2})/(\d{1,2})(?:/(\d{2,4}))?\b", p)
    if md:
        month, day = int(md.group(1)), int(md.group(2))
        year = int(md.group(3)) if md.group(3) else base.year
        if year < 100:
            year += 2000 if year < 70 else 1900
        try:
            resolved = date(year, month, day)
        except ValueError:
            return None
        if not md.group(3) and resolved < base - timedelta(days=7):
            resolved = resolved.replace(year=year + 1)
        return resolved
    import dateparser

    text = re.sub(r"^(?:by|before|until|till|on|within)\s+", "", p)
    parsed = dateparser.parse(
        text,
        languages=["en"],
        settings={
            "RELATIVE_BASE": local.replace(tzinfo=None),
            "PREFER_DATES_FROM": "future",
            "DATE_ORDER": "MDY",
            "REQUIRE_PARTS": ["day"] if re.search(MONTH, text) else [],
        },
    )
    return parsed.date() if parsed else None


def sender_timezone(message: MailMessage, raw_content: str | None = None) -> tzinfo:
    """The sender's UTC offset from the raw RFC 822 Date header when available,
    else the brain's timezone (``settings.BRAIN_TIME_ZONE``)."""
    if raw_content:
        import email.utils

        header = re.search(r"^Date:\s*(.+)$", raw_content[:8000], re.M | re.I)
        if header:
            try:
                parsed = email.utils.parsedate_to_datetime(header.group(1).strip())
            except (TypeError, ValueError):
                parsed = None
            if parsed is not None and parsed.tzinfo is not None:
                return parsed.tzinfo
    from django.conf import settings

    return ZoneInfo(settings.BRAIN_TIME_ZONE)


def rule_extract(
    messages: Sequence[MailMessage],
    *,
    owner_addresses: Collection[str],
    timezones: Mapping[str, tzinfo] | None = None,
) -> list[RuleCandidate]:
    """Find commitments in a thread without any model (SPEC §5.3 rule extractor).

    Messages of mine: first-person future sentences → ``owed_by_me`` (counterparty =
    first To that is not me). Messages of theirs addressed to me: first-person future
    sentences → ``owed_to_me``; requests with a deadline → ``owed_by_me``
    (counterparty = the sender). ``timezones`` maps message id → sender tz.
    Returns candidates oldest message first, one per distinct lower-cased text.
    """
    owners = {a.lower() for a in owner_addresses}
    found: list[RuleCandidate] = []
    seen: set[tuple[str, str]] = set()
    for m in sorted((m for m in messages if is_substantive(m)), key=lambda m: m.date):  # type: ignore[arg-type,return-value]
        mine = is_mine(m, owners)
        if mine:
            others = [
                a.lower() for a in [*m.to, *m.cc] if a and a.lower() not in owners
            ]
            if not others:
                continue
            counterparty, name = others[0], ""
        else:
            if m.list_unsubscribe or not owners & {a.lower() for a in m.to}:
                continue
            counterparty, name = (m.from_addr or "").lower(), m.from_name or ""
        for sentence in split_sentences(reply_text(m.body)):
            match = classify_sentence(sentence)
            if match is None or (match.kind == "request" and mine):
                continue
            if match.kind == "commitment":
                direction = OWED_BY_ME if mine else OWED_TO_ME
            else:
                direction = OWED_BY_ME
            due = None
            if match.deadline:
                # Looked up only here: reading a sender's timezone costs a query.
                tz = timezones.get(m.message_id) if timezones is not None else None
                due = resolve_due(match.deadline, m.date, tz)  # type: ignore[arg-type]
            key = (direction, match.sentence.lower())
            if key in seen:
                continue
            seen.add(key)
            found.append(
                RuleCandidate(
                    direction=direction,
                    text=match.sentence[:500],
                    quote=match.sentence[:200],
                    due=due,
                    counterparty_email=counterparty,
                    counterparty_name=name,
                    message=m,
                    confidence=RULE_CONFIDENCE_DATED
                    if due
                    else RULE_CONFIDENCE_UNDATED,
                )
            )
    return found
