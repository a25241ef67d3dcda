"""Promises kept later (SPEC §5.4 fulfilment detection), in the same thread or in
another thread with the same counterparty.

A promise is kept when a later message from whoever owes it says, in its newest
text, that the thing is done ("The call is confirmed", "I've sent the contract")
and shares a content word with the promise (two in another thread: "the copies
were mailed" keeps "I will arrange for the additional copies to be mailed"). Both conditions together are the
high-confidence case that closes a loop (closed_by ``fulfilled``); an attachment or
"Attached is…" only makes it suspected (``loops.pipeline.thread_follow_up``). A
promise of a conversation ("I will follow up with a phone call") is kept by a
later message between the two that reports the conversation ("per our discussion",
``talked_in``).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from loops.definitions import reply_text

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from loops.definitions import MailCoverage
    from loops.message import MailMessage

# Saying it is done: "The call is confirmed", "I've sent the contract", "Booked."
# (Delivering it in this very message, "Attached is the report", is weaker: the
# pipeline marks that suspected for a curator, SPEC §5.4.)
DONE_RE = re.compile(
    r"\b(?:is|are|has\s+been|have\s+been|was|were|'s|’s)\s+(?:now\s+|all\s+)?"
    r"(?:confirmed|done|sent|scheduled|booked|set\s+up|arranged|complete|completed|"
    r"finished|taken\s+care\s+of|mailed|faxed|signed|submitted|"
    r"on\s+(?:its|their|the)\s+way)\b|"
    r"\b(?:i|we)\s*(?:'ve|’ve|\s+have)?\s+(?:just\s+|already\s+|now\s+)?(?:sent|"
    r"faxed|mailed|forwarded|called|booked|scheduled|confirmed|signed|submitted|"
    r"finished|completed|set\s+up|arranged|e-?mailed|wired|delivered|spoke\s+(?:to|with)|"
    r"talked\s+to)\b",
    re.I,
)
# Content words a done-sentence in ANOTHER thread must share with the promise (the
# promise's object, "copies … mailed"): one shared word across threads is chance.
SIBLING_SHARED = 2
STOPWORDS = frozenset(
    """the a an and or to of for on by in at it its this that these those with from
    will shall would i i'll ill we we'll you your yours me my our us he she they them
    his her their be is are was were been have has had do does did can could just
    also then so as up out about over into onto today tomorrow tonight week next
    monday tuesday wednesday thursday friday saturday sunday morning afternoon
    evening end day time soon asap later please thanks thank get got going go make
    let know all any some more very now again back there here what when which who
    how sure ok okay well""".split()
)


def content_stems(text: str) -> set[str]:
    """Content words of ``text`` (3+ letters, no stopwords), cut to 5 letters so
    "report"/"reports" and "confirm"/"confirmed" meet."""
    words = re.findall(r"[a-z]{3,}", (text or "").lower())
    return {w[:5] for w in words if w not in STOPWORDS}


def kept_in(
    promise: str,
    later: Iterable[MailMessage],
    by: Callable[[MailMessage], bool],
    *,
    min_shared: int = 1,
) -> MailMessage | None:
    """The first later message written by whoever owes the promise (``by`` tells
    which messages are theirs) whose newest text says the promised thing is done
    in a sentence sharing ``min_shared`` or more content words with ``promise``
    (one in the promise's own thread; a message of another thread needs more,
    ``SIBLING_SHARED``); None when there is none."""
    wanted = content_stems(promise)
    if len(wanted) < min_shared or not wanted:
        return None
    for m in later:
        if not by(m):
            continue
        text = reply_text(m.body)
        for sentence in re.split(r"(?<=[.!?])\s+|\n+", text):
            if (
                DONE_RE.search(sentence)
                and len(wanted & content_stems(sentence)) >= min_shared
            ):
                return m
    return None


# A promise of a conversation with the person promised: "I will follow up with a
# phone call", "I'll give you a ring", "we will call", "I'll talk to you then"
# (not "I will send the lease once I talk to our lawyer": the promise there is
# the lease).
CONVERSATION_PROMISE_RE = re.compile(
    r"\b(?:I|we)\s*(?:'ll|’ll|\s+will|\s+shall|'m\s+going\s+to|\s+am\s+going\s+to)"
    r"\s+(?:(?:also|then|just|try\s+to|be\s+sure\s+to)\s+)?"
    r"(?:(?:give|make)\s+(?:you\s+)?a\s+(?:quick\s+)?(?:phone\s+)?(?:call|ring)"
    r"|call|phone|ring"
    r"|(?:talk|speak|meet)\s+(?:to|with)\s+you"
    r"|touch\s+base|get\s+in\s+touch|catch\s+up\s+with\s+you"
    r"|follow\s+up\s+(?:with|by)\s+(?:a\s+)?(?:(?:tele)?phone\s+)?call)\b",
    re.I,
)
# A message that reports the conversation took place ("per our discussion see
# attached", "as we discussed", "thanks for the call", "good talking to you"; not
# a bare "as discussed at the board meeting", which may be any conversation).
CONVERSATION_HELD_RE = re.compile(
    r"\b(?:per|as\s+per|following|further\s+to|pursuant\s+to|after)\s+"
    r"(?:our|my|your)\s+(?:recent\s+|earlier\s+|brief\s+|(?:tele)?phone\s+)?"
    r"(?:discussion|conversation|call|phone\s+call|talk|chat)s?\b|"
    r"\bas\s+we\s+(?:just\s+)?discussed\b|"
    r"\bthanks?\s+(?:you\s+)?for\s+(?:the|your)\s+(?:call|time\s+on\s+the\s+phone)\b|"
    r"\b(?:good|nice|great)\s+(?:talking|speaking|chatting)\s+(?:to|with)\s+you\b",
    re.I,
)
# The conversation a promise of a call is kept by is reported this soon after
# the promise; later talk is another conversation.
CONVERSATION_KEPT_WITHIN = timedelta(days=14)


def talked_in(
    promise: str,
    later: Iterable[MailMessage],
    between: Callable[[MailMessage], bool],
    *,
    promised_at: datetime,
) -> MailMessage | None:
    """For a promise of a conversation (``CONVERSATION_PROMISE_RE``: "I will
    follow up with a phone call"), the first later message between the two
    parties (``between``), at most ``CONVERSATION_KEPT_WITHIN`` after
    ``promised_at``, whose newest text reports that the conversation took place
    (``CONVERSATION_HELD_RE``: "per our discussion see attached", "as we
    discussed"); None otherwise or for any other promise."""
    if not CONVERSATION_PROMISE_RE.search(promise or ""):
        return None
    for m in later:
        if m.date is None or not promised_at < m.date <= (
            promised_at + CONVERSATION_KEPT_WITHIN
        ):
            continue
        if between(m) and CONVERSATION_HELD_RE.search(reply_text(m.body)):
            return m
    return None


def keeping_unseen(
    direction: str,
    promise: str,
    *,
    at: datetime,
    coverage: MailCoverage | None,
    now: datetime,
) -> bool:
    """True when only the other side's mail could show that ``promise`` (mine,
    ``direction`` ``owed_by_me``, made ``at``) was kept, because it promises a
    conversation (``CONVERSATION_PROMISE_RE``: "I will follow up with a phone
    call"), and ``coverage`` (``loops.selectors.mail_coverage``) says the source
    kept next to none of others' mail in the weeks around it (a sent folder
    alone): whether it was kept cannot be seen, so it is not listed, as an
    outbound ask of those weeks waits on nobody (SPEC §5.1a "answers
    visible")."""
    return (
        direction == "owed_by_me"
        and coverage is not None
        and bool(CONVERSATION_PROMISE_RE.search(promise or ""))
        and not coverage.answers_visible(at=at, now=now)
    )


# A promise to have someone else deliver ("I will arrange for the copies to be
# mailed", "I'll have my assistant send you the plans").
ARRANGE_RE = re.compile(
    r"\b(?:arrange|have\s+(?:\w+\s+){1,3}(?:send|mail|ship|fax|deliver|forward)|"
    r"get\s+(?:\w+\s+){1,3}to\s+(?:send|mail|ship|fax|deliver|forward))",
    re.I,
)
# Asking a third party to deliver to someone ("please send 5 full sets … to Dyal
# Roberts Custom Homes").
DELIVERY_REQUEST_RE = re.compile(
    r"\b(?:send|mail|ship|deliver|fax|forward|courier|overnight)\b[^.?!]{0,200}?\bto\b",
    re.I,
)


def party_marks(address: str, name: str = "") -> set[str]:
    """What names a counterparty in running text: their address's organisation
    label ("dyalroberts" for troberts@dyalroberts.com, not a free-mail host;
    matched with spaces removed, "Dyal Roberts") and, as whole words, the family
    name of a full display name ("lee" for "Dana Lee"; ``name:`` prefixed)."""
    marks: set[str] = set()
    domain = (address or "").lower().rpartition("@")[2]
    label = domain.split(".")[-2] if domain.count(".") >= 1 else ""
    if len(label) >= 5 and label not in FREE_MAIL:
        marks.add(label)
    words = re.findall(r"[a-z]{3,}", (name or "").lower())
    if len(words) >= 2:
        marks.add("name:" + words[-1])
    return marks


def _names_party(sentence: str, marks: set[str]) -> bool:
    squashed = re.sub(r"[^a-z]", "", sentence.lower())
    words = set(re.findall(r"[a-z]+", sentence.lower()))
    return any(
        (m[5:] in words) if m.startswith("name:") else (m in squashed) for m in marks
    )


FREE_MAIL = frozenset(
    """gmail yahoo hotmail aol msn outlook live icloud mail prodigy earthlink
    comcast swbell juno compuserve netscape excite""".split()
)


def arranged_in(
    promise: str,
    later: Iterable[MailMessage],
    by: Callable[[MailMessage], bool],
    marks: set[str],
) -> MailMessage | None:
    """For a promise to have someone else deliver (``ARRANGE_RE``): the first
    later message written by me (``by``) whose newest text asks for a delivery to
    the counterparty, naming them (``marks``, see ``party_marks``); None
    otherwise."""
    if not marks or not ARRANGE_RE.search(promise or ""):
        return None
    for m in later:
        if not by(m):
            continue
        text = reply_text(m.body)
        # Split at sentence ends only: an address block after "send … to" on
        # its own lines belongs to the request.
        for sentence in re.split(r"(?<=[.!?])\s+", text):
            if DELIVERY_REQUEST_RE.search(sentence) and _names_party(sentence, marks):
                return m
    return None
