"""Promises kept later in the same thread (SPEC §5.4 fulfilment detection).

A promise is kept when a later message from whoever owes it says, in its newest
text, that the thing is done ("The call is confirmed", "I've sent the contract")
and shares a content word with the promise. Both conditions together are the
high-confidence case that closes a loop (closed_by ``fulfilled``); an attachment or
"Attached is…" only makes it suspected (``loops.pipeline.thread_follow_up``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from loops.definitions import reply_text

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

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
    promise: str, later: Iterable[MailMessage], by: Callable[[MailMessage], bool]
) -> MailMessage | None:
    """The first later message written by whoever owes the promise (``by`` tells
    which messages are theirs) whose newest text says the promised thing is done
    and shares a content word with ``promise``; None when there is none."""
    wanted = content_stems(promise)
    if not wanted:
        return None
    for m in later:
        if not by(m):
            continue
        text = reply_text(m.body)
        for sentence in re.split(r"(?<=[.!?])\s+|\n+", text):
            if DONE_RE.search(sentence) and wanted & content_stems(sentence):
                return m
    return None
