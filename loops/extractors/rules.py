"""The offline rule extractor (``rule_extract``, SPEC §5.3): first-person future
commitments ("I'll send…", "I will get back to you by…", "we will deliver…") in the
owner's and the counterparty's mail, with deadlines resolved relative to the
message's sent date and timezone.

Zero cost, no network: it runs when the LLM extractor is off or unavailable, so the
product finds commitments with no API key. The rules here gate the structure of a
sentence (a first-person subject, a future, a concrete action, an addressee, no
condition on the reader, the direction from who wrote it); the commitment classifier
(``loops.extractors.classifier``, logistic regression over the local MiniLM
embeddings) then scores whether the sentence is a real promise. Sentences are split
by pysbd (``loops.extractors.sentences``); date strings are parsed by ``dateparser``;
the weekday and "end of day/week/month" logic is ours.

Direction (SPEC §5.3, LOOPS_LABELLING.md): my sentences are ``owed_by_me``; a
counterparty's promise addressed to me is ``owed_to_me``; a request made to me is
not my promise unless I accepted it later in the thread ("Will do").
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from django.db.models.functions import Substr

from brain.models import RawRecord
from loops.definitions import collapse, is_mine, is_substantive, reply_text
from loops.extractors import classifier, fulfilment
from loops.extractors.sentences import split_sentences
from loops.message import BULK_CATEGORIES

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterator, Sequence

    from loops.message import MailMessage

__all__ = [
    "DEADLINE_RE",
    "OWED_BY_ME",
    "OWED_TO_ME",
    "RuleCandidate",
    "RuleMatch",
    "SenderTimezones",
    "classify_sentence",
    "resolve_due",
    "rule_extract",
    "sender_timezone",
    "split_sentences",
]

RULE_CONFIDENCE_DATED = 0.6
RULE_CONFIDENCE_UNDATED = 0.5
# Without the classifier (model not installed) the rules stand alone, less sure.
RULES_ONLY_PENALTY = 0.1
OWED_BY_ME = "owed_by_me"
OWED_TO_ME = "owed_to_me"
# A message to more people than this is an announcement: its "we will…" lines are
# plans, not promises to me (LOOPS_LABELLING.md).
MAX_RECIPIENTS_FOR_PROMISE_TO_ME = 5

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
# An explicit calendar date: "May 7", "7 May", "5/30", "2002-01-07".
EXPLICIT_DATE_RE = re.compile(
    rf"\b{MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}})?|"
    rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{MONTH}(?:\s+\d{{4}})?|"
    rf"\b\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?\b|\b\d{{4}}-\d{{2}}-\d{{2}}\b",
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

# A first-person subject with a future: "I'll", "I will", "we are going to", …
FUTURE_RE = re.compile(
    r"\b(?P<subj>i|we)\s*(?P<aux>'ll|’ll|\s+will|\s+shall|'m\s+going\s+to|’m\s+going\s+to|"
    r"\s+am\s+going\s+to|'re\s+going\s+to|’re\s+going\s+to|\s+are\s+going\s+to|"
    r"\s+plan\s+to|\s+intend\s+to)\b\s*",
    re.I,
)
# A reply's subject-less future: "Will fix.", "Right, will send it Monday."
SUBJECTLESS_FUTURE_RE = re.compile(
    r"^(?:(?:ok(?:ay)?|sure|right|yes|yep|thanks|good\s+point)[,.!]?\s+)?will\s+(?=[a-z])",
    re.I,
)
# Words right after the future that make it no promise: negation, hedges, offers,
# needs and obligations, states ("I will be out"), wishes.
NOT_A_PROMISE_RE = re.compile(
    r"(?:not|never|no\s+longer|probably|maybe|perhaps|likely|possibly|most\s+likely|"
    r"hopefully|try|attempt|gladly|happily|(?:be\s+)?(?:happy|glad|pleased|delighted)\s+to|"
    r"need|have\s+to|want|wish|would|like|love|hope|miss|assume|guess|bet|"
    r"have\s+(?:some|no|more|less|enough|little|much)\s+(?:free\s+)?(?:time|chance)|"
    r"look\s+forward|see\s+(?:if|what|whether|how)|keep\s+(?:you|that|this|it|them)\s+in\s+mind|"
    r"do\s+(?:my|our)\s+best|be\s+able|continue)\b",
    re.I,
)
# Verbs that state, feel or meet rather than do something for someone.
NON_ACTION_VERBS = frozenset(
    """be been like love hope wonder think guess bet see appreciate remember
    understand know feel meet attend go come stay sit wait leave take
    admit confess concede say""".split()
)
# Actions that hand something over or set something up: a promise even when the
# first verb is not one ("I'll look over the list and give you a call").
ACTION_VERBS = frozenset(
    """send give call email e-mail fax mail forward bring deliver provide get review
    sign write prepare set schedule arrange update confirm check follow pick drop
    return ship post share circulate draft finish complete fix book order pay put
    make have find read look compile pull run respond reply submit file execute
    overnight wire transfer handle process contact ask tell let introduce cover
    summarize summarise resend ring phone swing""".split()
)
# In a post a mailing list delivered, a promise must name one of these concrete
# deliverables ("I'll fix it", "I'll send you the logs", "I'll add that to the
# website", "I'll drop them a mail"). Two owner-blind reviews of list posters
# outside the dev set (issue 14, 36 owners) found the list promises that were real
# all named such a deliverable ("I'll fix it", "I'll open a bug", "I'll send you a
# copy of the logs"), and the others were idioms ("I'll bite", "I'll throw you a
# bone", "I'll stick with…", "I'll play with your perspective"), predictions,
# sarcasm and pasted text.
LIST_PROMISE_VERBS = (
    ACTION_VERBS
    # Too general to name a deliverable on their own: "I'll get there", "I'll
    # have a go", "I'll look at it some day", "I'll make do", "I'll let it be".
    - frozenset(
        """cover find follow get handle have let look make pick process pull put
        read run set swing""".split()
    )
) | frozenset(
    "add open investigate upload commit merge apply release publish push "
    "document".split()
)
# "-ing" forms that still promise a hand-over ("I will be sending it Friday").
TRANSFER_ING = frozenset(
    "sending calling emailing e-mailing faxing mailing forwarding bringing "
    "delivering providing shipping posting".split()
)
TRANSFER_VERBS = frozenset(
    "send fax email e-mail mail forward give bring deliver provide ship post get".split()
)
# "which we will use", "what I will do": a relative or interrogative clause.
RELATIVE_BEFORE_RE = re.compile(
    r"\b(?:which|that|who|whom|whose|what|whatever|where|how|whether|why)"
    r"(?:\s+[\w.'’-]+){0,2}?(?:\s+and)?\s*$",
    re.I,
)
# "I promise that I will…": "that" introduces the promise, not a relative clause.
PROMISE_THAT_RE = re.compile(
    r"\b(?:promise|assure\s+you|guarantee|confirm|agree|swear)\s+that\s*$", re.I
)
# A condition on the future: "if", "unless", "assuming this is true, I will…",
# "…, otherwise I will take a cab", "once you send it, I will…".
CONDITION_RE = re.compile(
    r"^\s*(?:should|were|had)\s+\w+|"
    r"\b(?:if|unless|assuming|provided|in\s+case|otherwise|or\s+else|should\s+you|"
    r"whether|depending|as\s+long\s+as|"
    r"(?:once|when|whenever|after|as\s+soon\s+as|until)\s+(?:you|u)\b)",
    re.I,
)
# A sentence that opens with an imperative to the reader, or with what the reader
# can do: what follows "and I will" waits on the reader ("Email me your number and
# I will call you", "You can fill in the amounts and I will input them").
IMPERATIVE_OPENING_RE = re.compile(
    r"^\s*(?:(?:you|u)\s+(?:can|could|may|might)\b|"
    r"(?:(?:please|pls|kindly|just|so)\s+)*(?:let|email|e-mail|send|call|give|have|"
    r"tell|fax|resend|overnight|forward|get|reply|write|ring|text|contact|mail|ask|"
    r"drop|return|sign|fill|check|read|review|look|bring|come|stop|swing|click|visit|"
    r"register|order|act|hurry|respond|subscribe|sign\s+up|join|enter|buy|try)\b)",
    re.I,
)
# The reader acts first: "I prefer that you elect me … and then I will sign".
READER_FIRST_RE = re.compile(r"\b(?:you|u)\s+(?!for\b)\w+.*\band\s+(?:then\s+)?$", re.I)
# Hedged or reported: "I think I will…", "a letter that indicates I will…".
HEDGED_PREFIX_RE = re.compile(
    r"\b(?:(?:i|we)\s+(?:think|guess|suppose|believe|expect|doubt|imagine|hope)|"
    r"indicates?|says?|said|states?|shows?|means?|"
    r"(?:i'?m|i\s+am|we'?re|we\s+are)\s+not\s+(?:sure|certain|convinced)|"
    r"(?:i|we)\s+(?:don'?t|do\s+not)\s+(?:know|think|expect|believe|see\s+how))"
    r"\s+(?:that\s+|if\s+|whether\s+)?$",
    re.I,
)
# A condition after the promise: "I will let you know next week if I need to…".
TRAILING_CONDITION_RE = re.compile(r"\b(?:if|whether|unless)\b", re.I)
# Vague follow-ups: promises only when they carry a deadline.
VAGUE_RE = re.compile(
    r"^(?:let\s+(?:you|u|everyone|everybody)(?:\s+(?:all|both|guys))?\s+know|"
    r"keep\s+(?:you|u|everyone|everybody)(?:\s+(?:all|both|guys))?\s+"
    r"(?:posted|informed|updated|advised|"
    r"in\s+the\s+loop)|get\s+back\s+to\s+(?:you|u)|be\s+in\s+touch|follow\s+up\b(?!\s+with)|"
    r"(?:also\s+)?tell\s+(?:you|u)\s+(?:which|what|who|how|whether|when|where|about))",
    re.I,
)
# Meetings and chat closings: "I'll see you Monday", "talk to you next week".
MEETING_RE = re.compile(
    r"^(?:see|talk\s+to|speak\s+(?:to|with)|meet)\s+(?:you|u)\b", re.I
)
# Form and boilerplate lines: blanks to fill in, RSVP choices, opt-out wording.
FORM_LINE_RE = re.compile(
    r"_{2,}|\[\s*\]|^\s*(?:yes|no)\s*[,:]\s*(?:i|we)\b|\bunsubscribe\b|\bopt[- ]?out\b|"
    r"\bremove\s+(?:your|you|my)\b|\b(?:mailing|distribution)\s+list\b|"
    r"\bno\s+longer\s+(?:wish\s+to\s+)?receive\b",
    re.I,
)
# Out-of-office replies: "I will respond to your message when I return."
AUTO_REPLY_RE = re.compile(
    r"\bout\s+of\s+(?:the\s+)?office\b.*\b(?:respond|reply|answer|return|get\s+back)\b|"
    r"\b(?:respond|reply|answer|return|get\s+back)\b.{0,60}\b(?:when|once|upon|after)\s+"
    r"(?:i\s+(?:return|get\s+back|am\s+back)|my\s+return)\b",
    re.I,
)
ADDRESSEE_RE = re.compile(r"\b(?:you|your|yours|u)\b", re.I)
REQUEST_RE = re.compile(
    r"(?:^|\b)(?:please|pls|kindly)\b|\b(?:can|could|would|will)\s+you\b|"
    r"\bi\s+(?:need|want|would like)\s+(?:you|your)\b|\blet\s+me\s+know\b|"
    r"\bmake\s+sure\s+(?:you|to)\b|\b(?:you|u)\s+(?:need|must|should)\s+to?\b|"
    r"\bwhy\s+don'?t\s+you\b|\bif\s+you\s+could\b",
    re.I,
)
# A sentence that opens with a bare imperative ("Send me the draft by Friday").
IMPERATIVE_RE = re.compile(
    r"^(?:\w+,\s+)?(?:call|send|e-?mail|reply|respond|review|sign|submit|complete|return|"
    r"confirm|forward|schedule|bring|provide|fill|update|finish|fax|set up|let me know)\b",
    re.I,
)
# My later reply that takes a request on ("Will do", "Sure, I'll handle it").
ACCEPTANCE_RE = re.compile(
    r"^\W*(?:(?:ok(?:ay)?|sure|yes|absolutely|no\s+problem)\b[\s,.!-]*)?"
    r"(?:will\s+do|on\s+it|consider\s+it\s+done|i(?:'ll|’ll|\s+will)\s+(?:do\s+it|do\s+that|"
    r"take\s+care\s+of\s+it|handle\s+it|get\s+it\s+done)|no\s+problem|sure\s+thing)\b",
    re.I,
)
_WORD_RE = re.compile(r"[a-z][a-z'’-]*", re.I)
# Cheap test before sentence splitting: a message without any of these has neither
# a promise nor a request (most mail; pysbd costs about a millisecond a paragraph).
TRIGGER_RE = re.compile(
    r"\b(?:will|shall|going\s+to|plan\s+to|intend\s+to|please|pls|kindly|can\s+you|"
    r"could\s+you|would\s+you|let\s+me\s+know|make\s+sure|need|must|should)\b|"
    r"[’']ll\b|" + IMPERATIVE_RE.pattern.replace("^", "(?m:^\\s*)", 1),
    re.I,
)


@dataclass(frozen=True)
class RuleMatch:
    """One sentence that promises or requests something.

    ``kind`` is ``commitment`` (the writer promises) or ``request`` (the writer asks
    the reader, with a deadline). ``deadline`` is the date phrase the due date is
    read from, or ''. ``person`` is ``i`` or ``we`` for commitments, '' for
    requests. ``verb`` is a commitment's first verb after the future ("send" in
    "I will also send you…"), lower-cased; '' for requests.
    """

    kind: str
    sentence: str
    deadline: str
    person: str = ""
    verb: str = ""


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


def find_deadline(text: str) -> str:
    """The deadline phrase of a sentence: an explicit calendar date wins over a
    weekday or a relative word ("by Wednesday, May 7" → "May 7"); else the first
    deadline phrase; '' when none."""
    explicit = EXPLICIT_DATE_RE.search(text)
    if explicit:
        return explicit.group(0)
    match = DEADLINE_RE.search(text)
    return match.group(0) if match else ""


def _words(text: str) -> list[str]:
    return [w.lower().replace("’", "'") for w in _WORD_RE.findall(text)]


def _promise_after(prefix: str, rest: str, person: str, *, plan: bool = False) -> bool:
    """Structural test of one first-person future: ``prefix`` is the sentence up to
    the subject, ``rest`` what follows the future auxiliary; ``plan`` when the
    future is "going to" / "plan to" / "intend to" rather than "will"."""
    if RELATIVE_BEFORE_RE.search(prefix) and not PROMISE_THAT_RE.search(prefix):
        # "the map which we will use" describes; "deals that I will fax to you"
        # still hands something over.
        words = _words(rest)[:2]
        if not (words and words[0] in TRANSFER_VERBS and ADDRESSEE_RE.search(rest)):
            return False
    if (
        CONDITION_RE.search(prefix)
        or HEDGED_PREFIX_RE.search(prefix)
        or READER_FIRST_RE.search(prefix)
        or (prefix.strip() and IMPERATIVE_OPENING_RE.match(prefix))
    ):
        return False
    rest = _strip_adverbs(rest)
    if rest.rstrip().endswith(":") and len(_words(rest)) <= 4:
        # "I'll start:", "I will explain:": what it announces follows at once, in
        # the same message; nothing is left to do.
        return False
    if NOT_A_PROMISE_RE.match(rest) or MEETING_RE.match(rest):
        return False
    if VAGUE_RE.match(rest):
        return bool(DEADLINE_RE.search(rest)) and not TRAILING_CONDITION_RE.search(rest)
    words = _words(rest)
    if not words:
        return False
    verb = words[0]
    if verb == "do" and len(words) <= 2:
        return False  # "Will do": an acceptance, nothing of its own to track
    if verb == "be":
        nxt = words[1] if len(words) > 1 else ""
        if nxt in TRANSFER_ING and (person == "i" or ADDRESSEE_RE.search(rest)):
            return True
        if nxt == "sure" and len(words) > 3 and words[2] == "to":
            return True
        # "I will be in the office tomorrow and send you the report".
        return _coordinated_action(words[1:])
    if verb in NON_ACTION_VERBS:
        return _coordinated_action(words[1:])
    if plan and verb not in TRANSFER_VERBS and not ADDRESSEE_RE.search(rest):
        # "I am going to use the proceeds…": a plan unless it hands something over.
        return False
    if person == "we" and not ADDRESSEE_RE.search(rest):
        # "we will be discussing…", "we will go over pipeline flows": a plan or an
        # agenda unless it is addressed to the reader.
        return False
    return True


def _strip_adverbs(rest: str) -> str:
    """What follows a future auxiliary without a leading aside or adverb
    ("I will, however, send…", "I'll also send…" → "send…")."""
    return re.sub(
        r"^(?:,?\s*(?:however|though|of\s+course|in\s+turn),\s*)?"
        r"(?:(?:also|definitely|certainly|then|just|now|personally|still|both|all)\s+)?",
        "",
        rest.strip(),
        flags=re.I,
    )


def _verb_after(rest: str) -> str:
    """The first word of ``rest`` (what follows the future) after
    ``_strip_adverbs``, lower-cased; '' when there is none."""
    words = _words(_strip_adverbs(rest))
    return words[0].lower() if words else ""


def _coordinated_action(words: list[str]) -> bool:
    """True when a later "and <action verb>" in the clause promises an action."""
    for i, word in enumerate(words[:-1]):
        if word == "but":
            return False
        if word == "and":
            nxt = words[i + 1]
            if nxt in {"then", "also"} and i + 2 < len(words):
                nxt = words[i + 2]
            if nxt in ACTION_VERBS:
                return True
    return False


def conditional_future(sentence: str) -> bool:
    """True when the sentence makes a future conditional ("If we could work on this
    basis, I will complete the design selections."): the promise-like sentences
    right after it belong to the same conditional offer."""
    text = collapse(sentence)
    return any(CONDITION_RE.search(text[: f.start()]) for f in FUTURE_RE.finditer(text))


def classify_sentence(sentence: str) -> RuleMatch | None:
    """Classify one sentence by structure: a first-person future commitment, a
    request to the reader with a deadline, or None.

    Not commitments: questions, form and opt-out lines, relative clauses ("the map
    which we will use"), futures conditional on something or on the reader ("If…",
    "Email me your number and I will call you", "otherwise I will take a cab"),
    hedges ("I'm not sure I'll get to it"), offers and states ("I will gladly…",
    "I will be out", "I will admit…"), meetings ("I'll see you Monday"), what the
    same message delivers at once ("I'll start:"), vague follow-ups without a
    deadline ("I'll keep you posted", "I'll keep you all posted"),
    and "we" plans not addressed to the reader ("At that meeting, we will be
    discussing…").
    """
    text = collapse(sentence)
    if (
        not text
        or len(text) > 400
        or FORM_LINE_RE.search(text)
        or AUTO_REPLY_RE.search(text)
    ):
        return None
    deadline = find_deadline(text)
    if not text.rstrip().endswith("?"):
        bare = SUBJECTLESS_FUTURE_RE.match(text)
        if bare and _promise_after("", text[bare.end() :], "i"):
            return RuleMatch(
                kind="commitment",
                sentence=text,
                deadline=deadline,
                person="i",
                verb=_verb_after(text[bare.end() :]),
            )
        for future in FUTURE_RE.finditer(text):
            person = future.group("subj").lower()
            prefix = text[: future.start()]
            # Only the clause the future sits in: "…; I will call you" stands alone.
            prefix = re.split(r";\s|:\s|\s(?:—|–|--)\s", prefix)[-1]
            plan = not re.search(r"will|shall|'ll|’ll", future.group("aux"), re.I)
            if _promise_after(prefix, text[future.end() :], person, plan=plan):
                return RuleMatch(
                    kind="commitment",
                    sentence=text,
                    deadline=deadline,
                    person=person,
                    verb=_verb_after(text[future.end() :]),
                )
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


class SenderTimezones(Mapping[str, tzinfo]):
    """Message id → the sender's timezone (``sender_timezone``) for one thread's
    messages, read from their raw records only when first looked up: the rule
    extractor needs it only for a sentence with a deadline, which most threads lack
    (SPEC §11 ingest rate). Every reader of a relative deadline ("by tomorrow")
    takes its zone from here: the rule extractor, the thread detector's due dates
    (``loops.detectors._deadline``), due corrections and the dates the LLM
    extractor is shown (issue 46: the writer's day, not UTC's)."""

    def __init__(self, messages: Sequence[MailMessage]) -> None:
        self._messages = messages
        self._zones: dict[str, tzinfo] | None = None

    def _load(self) -> dict[str, tzinfo]:
        if self._zones is None:
            ids = [m.raw_record_id for m in self._messages if m.raw_record_id]
            heads = dict(
                RawRecord.objects.filter(pk__in=ids).values_list(
                    "pk", Substr("content", 1, 8000)
                )
            )
            self._zones = {
                m.message_id: sender_timezone(m, heads.get(m.raw_record_id))
                for m in self._messages
            }
        return self._zones

    def __getitem__(self, message_id: str) -> tzinfo:
        return self._load()[message_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())


def _is_bulk(message: MailMessage) -> bool:
    """A mass mailing: List-Unsubscribe, or a bulk category (Gmail's, or the one the
    mailbox connector infers from list headers and opt-out wording)."""
    return message.list_unsubscribe or any(
        label in BULK_CATEGORIES for label in message.labels
    )


def _accepted_later(later: Sequence[MailMessage], owners: set[str]) -> bool:
    """True when a later message of mine in the thread takes the request on."""
    for m in later:
        if is_mine(m, owners) and ACCEPTANCE_RE.search(reply_text(m.body)):
            return True
    return False


def _writer(p: _Pending, owners: set[str]) -> Callable[[MailMessage], bool]:
    """Who can keep the promise: me for mine, the counterparty for theirs."""
    if p.direction == OWED_BY_ME:
        return lambda m: is_mine(m, owners)
    sender = (p.message.from_addr or "").lower()
    return lambda m: (m.from_addr or "").lower() == sender


@dataclass(frozen=True)
class _Pending:
    direction: str
    match: RuleMatch
    message: MailMessage
    counterparty: str
    name: str
    later: tuple[MailMessage, ...]
    accepted_request: bool


_PROMISE_STOP = frozenset(
    "i i'll ill we we'll will shall you your the a an to on by as said and of for "
    "is be it this that me my our us".split()
)


def _promise_words(sentence: str) -> set[str]:
    """A promise's content words (its verb and objects, not its grammar)."""
    return {
        w for w in re.findall(r"[a-z']+", sentence.lower()) if w not in _PROMISE_STOP
    }


def _same_promise(
    earlier: _Pending, direction: str, match: RuleMatch, message: MailMessage
) -> bool:
    """Whether ``match`` restates a promise already found in the same message
    ("I will send the contract by Friday. As I said, I'll send the contract on
    Friday."): same direction, same verb, half or more of the content words
    shared besides the verb ("send the contract" and "send the invoice" are two).
    One promise is one loop (issue 43, class 4)."""
    if earlier.message is not message or earlier.direction != direction:
        return False
    if match.kind != "commitment" or earlier.match.verb != match.verb:
        return False
    verb = {match.verb}
    a = _promise_words(earlier.match.sentence) - verb
    b = _promise_words(match.sentence) - verb
    return bool(a and b) and 2 * len(a & b) >= min(len(a), len(b))


def _message_party(
    m: MailMessage, owners: set[str], *, personal: bool
) -> tuple[str, str] | None:
    """(counterparty address, name) of promises in ``m``, or None when it can hold
    none: mine needs a recipient other than me (the first); theirs needs me in To
    and, unless ``personal`` (after I wrote in the thread a reply to me is
    personal even when a list delivered it), no mass mail."""
    if is_mine(m, owners):
        others = [a.lower() for a in [*m.to, *m.cc] if a and a.lower() not in owners]
        return (others[0], "") if others else None
    if not owners & {a.lower() for a in m.to} or (_is_bulk(m) and not personal):
        return None
    return (m.from_addr or "").lower(), m.from_name or ""


def _direction(
    match: RuleMatch,
    m: MailMessage,
    *,
    mine: bool,
    crowd: bool,
    later: Sequence[MailMessage],
    owners: set[str],
) -> tuple[str, bool] | None:
    """(direction, accepted request) of one matched sentence, or None when it opens
    nothing: their promise to a crowd; list talk without a work verb ("I'll bite");
    a request (the asker's loop) unless it is theirs and I took it on later."""
    if match.kind == "commitment":
        if not mine and crowd:
            return None
        if m.mailing_list and match.verb not in LIST_PROMISE_VERBS:
            return None
        return (OWED_BY_ME if mine else OWED_TO_ME), False
    if mine or not _accepted_later(later, owners):
        return None
    return OWED_BY_ME, True


def _thread_pending(subs: Sequence[MailMessage], owners: set[str]) -> list[_Pending]:
    """Every structural candidate of the thread (``subs`` substantive, oldest
    first): one per direction and lower-cased sentence, one per promise of a
    message (``_same_promise``); a commitment right after a conditional offer
    ("If you like, …") is none."""
    pending: list[_Pending] = []
    seen: set[tuple[str, str]] = set()
    first_mine = next((i for i, m in enumerate(subs) if is_mine(m, owners)), None)
    for index, m in enumerate(subs):
        personal = first_mine is not None and index >= first_mine
        party = _message_party(m, owners, personal=personal)
        text = reply_text(m.body)
        if party is None or not TRIGGER_RE.search(text):
            continue
        mine = is_mine(m, owners)
        crowd = len([a for a in [*m.to, *m.cc] if a]) > MAX_RECIPIENTS_FOR_PROMISE_TO_ME
        later = tuple(subs[index + 1 :])
        offer = False  # the previous sentence made a conditional offer
        for sentence in split_sentences(text):
            match = classify_sentence(sentence)
            follows_offer, offer = offer, conditional_future(sentence)
            if match is None or (follows_offer and match.kind == "commitment"):
                continue
            found = _direction(
                match, m, mine=mine, crowd=crowd, later=later, owners=owners
            )
            if found is None:
                continue
            direction, accepted = found
            key = (direction, match.sentence.lower())
            if key in seen or any(
                _same_promise(q, direction, match, m) for q in pending
            ):
                continue
            seen.add(key)
            pending.append(_Pending(direction, match, m, *party, later, accepted))
    return pending


def _candidate(
    p: _Pending,
    *,
    scored: bool,
    owners: set[str],
    timezones: Mapping[str, tzinfo] | None,
) -> RuleCandidate | None:
    """The candidate of one pending promise, or None when kept later in the thread
    (``fulfilment.kept_in``). Its due date resolves in the sender's timezone; its
    confidence is lower without a date and without the classifier."""
    if fulfilment.kept_in(p.match.sentence, p.later, _writer(p, owners)):
        return None
    due = None
    if p.match.deadline:
        # Looked up only here: reading a sender's timezone costs a query.
        tz = timezones.get(p.message.message_id) if timezones is not None else None
        due = resolve_due(p.match.deadline, p.message.sent_at, tz)
    confidence = RULE_CONFIDENCE_DATED if due else RULE_CONFIDENCE_UNDATED
    if not scored:
        confidence -= RULES_ONLY_PENALTY
    return RuleCandidate(
        direction=p.direction,
        text=p.match.sentence[:500],
        quote=p.match.sentence[:200],
        due=due,
        counterparty_email=p.counterparty,
        counterparty_name=p.name,
        message=p.message,
        confidence=round(confidence, 2),
    )


def rule_extract(
    messages: Sequence[MailMessage],
    *,
    owner_addresses: Collection[str],
    timezones: Mapping[str, tzinfo] | None = None,
    use_classifier: bool = True,
) -> list[RuleCandidate]:
    """Find commitments in a thread without any language model (SPEC §5.3 rule
    extractor).

    - My messages (to someone other than me): first-person future promises →
      ``owed_by_me``, counterparty = first To/Cc that is not me.
    - Their messages with me in To, not mass mail (list mail counts as personal
      once I wrote in the thread), to at most
      ``MAX_RECIPIENTS_FOR_PROMISE_TO_ME`` people: their promises → ``owed_to_me``,
      counterparty = the sender. A request with a deadline made to me becomes
      ``owed_by_me`` only when a later message of mine accepts it ("Will do").
    - Each structural candidate is scored by the commitment classifier when the
      local embedding model is available (``use_classifier``); below its threshold
      it is dropped. Without the model the rules stand alone, with lower confidence.
    - A promise kept later in the thread (``fulfilment.kept_in``: "The call is
      confirmed", "Attached is the report") opens nothing.

    ``timezones`` maps message id → the sender's tz for deadlines. Returns
    candidates oldest message first, one per direction and lower-cased text, and
    one per promise of a message (``_same_promise``).
    """
    owners = {a.lower() for a in owner_addresses}
    subs = sorted((m for m in messages if is_substantive(m)), key=lambda m: m.sent_at)
    pending = _thread_pending(subs, owners)
    if not pending:
        return []
    scores = (
        classifier.score([p.match.sentence for p in pending])
        if use_classifier
        else None
    )
    probabilities: list[float | None] = (
        list(scores) if scores else [None] * len(pending)
    )
    found: list[RuleCandidate] = []
    for p, probability in zip(pending, probabilities, strict=True):
        if (
            probability is not None
            and not p.accepted_request
            and probability < classifier.threshold()
        ):
            continue
        candidate = _candidate(
            p, scored=scores is not None, owners=owners, timezones=timezones
        )
        if candidate is not None:
            found.append(candidate)
    return found
