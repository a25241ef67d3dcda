"""The shared mail definitions of SPEC §5.1, as small pure functions over
``MailMessage``: mine, noise sender, calendar system mail, auto-submitted,
substantive, "asks a question", "only acknowledges", the latest-reply text.

The one home of the mail text rules (reply/forward prefixes, noise senders, mine,
reply-trimming languages): the connectors (``connectors.mail``) use these too.

Everything here is pure (no database), so the detector and the extractors can be
tested on message lists and replayed for any reference time.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from functools import lru_cache
from itertools import accumulate, chain
from typing import TYPE_CHECKING, Protocol

from dateutil import parser as dateutil_parser
from mailparser_reply import EmailReplyParser
from mailparser_reply.parser import EmailMessage

from brain.mailtext import (
    ATTRIBUTION,
    FORWARD_MARKERS,
    HISTORY_MARKER_ALTERNATIVES,
    QUOTED_LINE,
    header_block_start,
)
from brain.people import export_entry, person_name
from loops.message import BULK_CATEGORIES, SENT, MailMessage

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

NOISE_SENDER_MARKERS = (
    "noreply",
    "no-reply",
    "donotreply",
    "do-not-reply",
    "notifications@",
    "notification@",
    "mailer-daemon",
    "postmaster",
    "calendar-notification",
)
CALENDAR_METHODS = frozenset(
    {
        "REQUEST",
        "REPLY",
        "CANCEL",
        "PUBLISH",
        "COUNTER",
        "DECLINECOUNTER",
        "REFRESH",
        "ADD",
    }
)
CALENDAR_SUBJECT_PREFIXES = (
    "invitation:",
    "updated invitation:",
    "invitation with note:",
    "updated invitation with note:",
    "accepted:",
    "declined:",
    "tentative:",
    "canceled event:",
    "cancelled event:",
)
# Subjects mail servers give delivery-failure notices (RFC 3464 DSNs and the
# plain-text notices of older servers; Exchange: "Undeliverable: …"). Written so
# PostgreSQL's regex engine reads it the same (``loops.selectors`` prefilters on it).
BOUNCE_SUBJECT = (
    r"^\s*(?:undeliverable|undelivered mail|returned mail|mail delivery failed|"
    r"delivery status notification \(failure\)|delivery failure|failure notice|"
    r"delivery has failed|message could not be delivered|mail system error)"
)
BOUNCE_SUBJECT_RE = re.compile(BOUNCE_SUBJECT, re.I)
BOUNCE_SENDERS = ("mailer-daemon", "postmaster")
# Reply and forward prefixes in the languages mail arrives in: English (Re, Fw, Fwd),
# German (AW, WG), Scandinavian (SV, VS), Dutch (Antw), French (TR), Italian (R, Rif).
REPLY_PREFIX_RE = re.compile(
    r"^\s*(?:(?:re|fw|fwd|aw|wg|sv|vs|antw|tr|rif|r)\s*(?:\[\d+\])?\s*:\s*)+", re.I
)
# The subject prefix of a forward (not of a reply to one): English Fw/Fwd, German
# WG, Scandinavian VS, French TR.
FORWARD_PREFIX_RE = re.compile(r"^\s*(?:fw|fwd|wg|vs|tr)\s*(?:\[\d+\])?\s*:", re.I)
# Languages whose reply headers ("On … wrote:", "Am … schrieb:") cut a quoted tail.
REPLY_LANGUAGES = ("en", "de", "fr", "es")
URL_RE = re.compile(r"(?:https?://|ftp://|www\.|mailto:)\S+", re.I)
WS_RE = re.compile(r"\s+")
# The newest reply sits at the top; the parser never needs more than this.
REPLY_SCAN_CHARS = 4000

# Words a reply may consist of and still "only acknowledge" (SPEC §5.2 rule 2).
# "Will do", "sounds good" or any content word make it an answer.
ACK_WORDS = frozenset(
    """thanks thank you thx ty tks got it ok okay k great cool noted received many much
    so very appreciate appreciated cheers perfect awesome nice a lot for the this that
    update info information again all hi hello hey dear""".split()
)
GREETING_RE = re.compile(r"^(?:hi|hello|hey|dear)\b[\w .'-]{0,40}[,!:]?$", re.I)
SIGNATURE_RE = re.compile(r"^[-–—~ ]*(?:[A-Z][\w.'-]*)(?: [A-Z][\w.'-]*)?[.,]?$")


class Sent(Protocol):
    """Any message with labels and a From address (``MailMessage``, a connector's
    parsed mail)."""

    @property
    def labels(self) -> Collection[str]: ...

    @property
    def from_addr(self) -> str: ...


def is_mine(message: Sent, owner_addresses: Collection[str]) -> bool:
    """True when the message is the owner's: SENT label, sent folder (the connector
    sets ``is_mine`` on a ``MailMessage``), or a From among ``owner_addresses``
    (lower-case addresses; SPEC §5.1)."""
    return (
        bool(getattr(message, "is_mine", False))
        or SENT in message.labels
        or (message.from_addr or "").lower() in owner_addresses
    )


def is_noise_sender(address: str) -> bool:
    """True when the From address is a machine sender (SPEC §5.1)."""
    addr = (address or "").lower()
    return any(marker in addr for marker in NOISE_SENDER_MARKERS)


def bounced_recipients(message: MailMessage, owners: Collection[str]) -> list[str]:
    """The addresses a delivery-failure notice says my message did not reach
    (lower-cased, owners left out); empty when ``message`` is no such notice.

    A notice is a message naming failed recipients in its delivery-status report
    (``MailMessage.failed_recipients``, read by the connector with the ``email``
    package), or one from a mailer daemon / postmaster or with a bounce subject
    (``BOUNCE_SUBJECT``). Without a report, the failed recipients are its To/Cc
    addresses other than the owner's (an exported Exchange notice is addressed
    to the recipient that failed)."""
    mine = {o.lower() for o in owners}
    if message.failed_recipients:
        return [a.lower() for a in message.failed_recipients if a.lower() not in mine]
    sender = (message.from_addr or "").lower().split("@", 1)[0]
    if not (sender in BOUNCE_SENDERS or BOUNCE_SUBJECT_RE.match(message.subject or "")):
        return []
    return [
        a
        for a in dict.fromkeys(x.lower() for x in (*message.to, *message.cc) if x)
        if a not in mine
    ]


def is_calendar_mail(message: MailMessage) -> bool:
    """Calendar system mail: a text/calendar method, or (fallback, no method known) a
    Calendar subject prefix without a reply prefix (SPEC §5.1)."""
    if message.calendar_method:
        return message.calendar_method.upper() in CALENDAR_METHODS
    subject = (message.subject or "").strip()
    if REPLY_PREFIX_RE.match(subject):
        return False
    return subject.lower().startswith(CALENDAR_SUBJECT_PREFIXES)


def is_auto_submitted(message: MailMessage) -> bool:
    """An RFC 3834 ``Auto-Submitted`` header other than ``no`` (SPEC §5.1)."""
    value = (message.auto_submitted or "").strip().lower()
    return bool(value) and value != "no"


def is_substantive(message: MailMessage) -> bool:
    """Has a date, not a noise sender, not calendar mail, not auto-submitted."""
    return (
        message.date is not None
        and not is_noise_sender(message.from_addr)
        and not is_calendar_mail(message)
        and not is_auto_submitted(message)
    )


def in_bulk_category(messages: Collection[MailMessage]) -> bool:
    """True when any message carries a Gmail bulk category label (SPEC §5.2 rule 4)."""
    return any(label in BULK_CATEGORIES for m in messages for label in m.labels)


def normalise_subject(subject: str) -> str:
    """Subject without repeated Re:/Fwd:/Aw: prefixes, whitespace collapsed,
    lower-cased; ``(no subject)`` when empty."""
    stripped = REPLY_PREFIX_RE.sub("", subject or "").strip()
    return WS_RE.sub(" ", stripped).lower() or "(no subject)"


def display_subject(subject: str) -> str:
    """Subject without reply prefixes, for summaries; ``(no subject)`` when empty."""
    stripped = REPLY_PREFIX_RE.sub("", subject or "").strip()
    return WS_RE.sub(" ", stripped) or "(no subject)"


def collapse(text: str) -> str:
    """Collapse all whitespace runs to one space and strip."""
    return WS_RE.sub(" ", text or "").strip()


# A bracketed list tag at the head of a subject ("[ILUG] ", "[Gadget-users] ").
_LIST_TAG = re.compile(r"^\s*\[[^\]]{1,40}\]\s*")


def topic_subject(subject: str) -> str:
    """What a subject is about: reply prefixes and a leading list tag dropped
    (``"Re: [ILUG] Re: Modem"`` → ``"modem"``), whitespace collapsed,
    lower-cased; ``(no subject)`` when empty."""
    text, previous = subject or "", None
    while previous != text:
        previous = text
        text = _LIST_TAG.sub("", REPLY_PREFIX_RE.sub("", text).strip())
    return WS_RE.sub(" ", text).strip().lower() or "(no subject)"


def _topic_text(message: MailMessage) -> str:
    """Subject (reply prefixes and a list tag dropped) and newest own text of
    ``message``: what it is about, for ``same_topic_scores``."""
    subject = _LIST_TAG.sub("", display_subject(message.subject))
    return f"{subject}\n{reply_text(message.body)}"


def same_topic_scores(
    message: MailMessage, others: Sequence[MailMessage]
) -> list[float]:
    """How close each of ``others`` is in topic to ``message`` (cosine in 0..1 of
    TF-IDF vectors, scikit-learn's ``TfidfVectorizer`` with English stop words and
    sublinear term frequency, the idf fitted on these messages alone), one score
    per other message, in order. Lines the two texts share verbatim (a
    signature, a list's footer) are dropped from both first, so a writer's own
    boilerplate is not a topic. Read by the list-ask rule (SPEC §5.1a,
    ``loops.pipeline._settled_on_list``); empty when ``others`` is; never raises
    (a text of stop words alone scores 0)."""
    if not others:
        return []
    # Imported here: scikit-learn costs half a second to import, and only a list
    # ask with later posts of mine ever reaches this.
    from sklearn.feature_extraction.text import TfidfVectorizer

    mine = _topic_text(message)
    mine_lines = {ln.strip() for ln in mine.splitlines() if ln.strip()}
    docs: list[str] = []  # mine and theirs of each pair, shared lines dropped
    for other in others:
        theirs = _topic_text(other)
        shared = mine_lines & {ln.strip() for ln in theirs.splitlines()}
        docs += [
            "\n".join(ln for ln in t.splitlines() if ln.strip() not in shared)
            for t in (mine, theirs)
        ]
    vectorizer = TfidfVectorizer(stop_words="english", sublinear_tf=True)
    try:
        vectorizer.fit([mine, *docs[1::2]])
    except ValueError:  # nothing but stop words
        return [0.0] * len(others)
    x = vectorizer.transform(docs)  # rows are L2-normalised: a dot is the cosine
    return [float(v) for v in x[0::2].multiply(x[1::2]).sum(axis=1).A1]


@lru_cache(maxsize=1)
def reply_parser() -> EmailReplyParser:
    """The one mail-parser-reply parser, for ``REPLY_LANGUAGES`` (built once)."""
    return EmailReplyParser(languages=list(REPLY_LANGUAGES))


# ``EmailMessage`` adds English to the parser's languages.
_LANGUAGES = tuple(dict.fromkeys([*REPLY_LANGUAGES, "en"]))


@lru_cache(maxsize=4)
def _header_regex(languages: tuple[str, ...]) -> re.Pattern[str]:
    """mail-parser-reply's reply-header expression for ``languages`` (the library
    builds the pattern text again for every message)."""
    pattern: re.Pattern[str] = EmailMessage(
        text="", languages=list(languages)
    ).HEADER_REGEX
    return pattern


def findall_at_lines(pattern: re.Pattern[str], text: str) -> list[tuple[str, ...]]:
    """``pattern.findall(text)`` (groups, ``''`` for a group that did not take
    part) for a pattern of several groups whose every match starts at a line
    start (``^`` in MULTILINE mode) or at a newline character, and is never
    empty, with no lookbehind: mail-parser-reply's reply-header expression
    (``_header_regex``). ``findall`` tries the pattern at every character of
    the text; this tries it only where a match can start (the text's start, each
    newline and the position after it), in order, going on after each match as
    ``findall`` does: the same matches for about a third of the time (SPEC §11
    ingest rate: two scans per imported message)."""
    return [hit.groups("") for hit in finditer_at_lines(pattern, text)]


def finditer_at_lines(pattern: re.Pattern[str], text: str) -> list[re.Match[str]]:
    """The match objects ``findall_at_lines`` reads, in order (same pattern
    requirements)."""
    found: list[re.Match[str]] = []
    match = pattern.match
    end = 0
    starts = [0]
    newline = text.find("\n")
    while newline >= 0:
        starts += (newline, newline + 1)
        newline = text.find("\n", newline + 1)
    for start in starts:
        if start < end:
            continue
        hit = match(text, start)
        if hit is not None:
            found.append(hit)
            end = hit.end()
    return found


def latest_reply(text: str) -> str:
    """``reply_parser().parse_reply(text)``: the first non-empty fragment of
    ``text`` (normalised as the library does) before the next reply header, or
    the rest of it. The library's ``read`` also runs its signature and disclaimer
    expressions over every fragment, which ``parse_reply`` never reads, and
    builds its header expression again for every message: 23,013 texts of the
    shared corpora take 59 % of the library's time here, with the same answer for
    each, and an import asks twice per message (SPEC §11 ingest rate). This
    splits at the same headers, with the library's own header expression
    (``_header_regex``, tried only where a header can start:
    ``findall_at_lines``) and normalised text, and returns the same fragment."""
    parser = reply_parser()
    message = EmailMessage(text=text, languages=parser.languages)
    found = findall_at_lines(_header_regex(tuple(message.languages)), message.text)
    headers = [header for header in chain.from_iterable(found) if header]
    body = message.text
    current = 0
    for header in headers:
        position = body.find(header, current + 1 if current > 0 else current)
        content = body[current:position].strip()
        current = position if position >= 0 else 0
        if content:
            return content
    return body[current:].strip()


_QUOTE_MARKERS = re.compile(
    rf"^\s*(?:{HISTORY_MARKER_ALTERNATIVES}|On .{{0,200}} wrote:|From:\s.*@)",
    re.I | re.M,
)
_SIG_DELIMITER = re.compile(r"^--\s*$")
_BLANK_RUNS = re.compile(r"\n\s*\n(?:\s*\n)+")
# The first half of an attribution line wrapped in two ("On Mon, 3 Jun 2024, Ann
# Baker" / "<ann@example.org> wrote:"); one ending in "<" is always one.
_WRAPPED_ATTRIBUTION = re.compile(r"^\s*On\s|,\s*$", re.I)


@dataclass(frozen=True)
class Written:
    """A mail text cut by who wrote it (``written_text``): ``own`` is the writer's
    own lines wherever they sit around "> " quotes (quoted lines and the
    attribution line above each quote dropped, any quoted history below the
    writer's text cut); ``forwarded`` is the forwarded message below the writer's
    text, from its marker line on ('' unless the message forwards); both with
    their lines as mail-parser-reply normalises them (``_normalised_lines``).
    ``quoted`` is True when quoted or forwarded text was dropped or cut (more
    than 20 characters)."""

    own: str
    forwarded: str
    quoted: bool
    replied_to: QuotedAuthor | None = None


@dataclass(frozen=True)
class QuotedAuthor:
    """Who wrote the message a reply quotes (``written_text``), read from the
    header above the quoted text: Outlook's "From: … / Sent: …" block (Enron's
    gateway-wrapped and ``Last, First`` forms too) or an attribution "On <date>,
    Name <address> wrote:". ``address`` lower-cased ('' when the header names
    only a name), ``name`` as written ('' when it gives only an address),
    ``date`` an aware UTC datetime (a date without a zone read as UTC; None when
    the header has none or it is unreadable)."""

    address: str
    name: str
    date: datetime | None


def written_text(
    text: str, *, subject: str = "", zone: tzinfo | None = None
) -> Written:
    """``text`` (a message's plain text, ``\\n`` line ends) cut into the writer's
    own words and the message it forwards (SPEC §6.1 page text, §5.1a "newest
    text"). One rule for top-posted, bottom-posted and interleaved replies:

    - a quoted line (``brain.mailtext.QUOTED_LINE``: "> …", "JH> …") is not the
      writer's; nor is the line just above a quote block (blank lines between)
      that ends with ":" — its attribution in any form ("On … wrote:", "Ann
      wrote:", "Ann <a@x> writes:", "At 10:02 … you wrote:", "Quoting Ann:",
      "Le … a écrit :"), with its first half when it is wrapped over two lines;
    - quoted history starts at a reply header mail-parser-reply finds
      (``_header_regex``: "On … wrote:", Outlook's "From: … Sent: …" block,
      "-----Original Message-----") on an unquoted line and not followed by a
      quote block (its quoted message follows unmarked), or at a forward's marker
      line (``brain.mailtext.FORWARD_MARKERS``): nothing below it is the
      writer's;
    - the history is ``forwarded`` when it opens with a forward marker or the
      subject is a forward's (``FORWARD_PREFIX_RE``: "Fw:", "Fwd:", "WG:"…);
      a reply's quoted history is dropped.

    ``zone``: the message's own UTC offset, for a quoted date written without
    one (``quoted_author``).

    Pure; never raises (the library's expression is heuristic: on an error the
    header cut is skipped)."""
    lines = _normalised_lines(text)
    kept, cut, forward = _own_lines(lines)
    own = _BLANK_RUNS.sub("\n\n", "\n".join(lines[i] for i in kept)).strip()
    history = "\n".join(lines[cut:]).strip()
    forwarded = (
        history
        if history and (forward or FORWARD_PREFIX_RE.match(subject or ""))
        else ""
    )
    return Written(
        own=own,
        forwarded=forwarded,
        quoted=len(own) + 20 < len(text.strip()),
        replied_to=None if forwarded else quoted_author(lines, cut, zone=zone),
    )


# A header line of a quoted message's block ("From: …", "Sent: …", "Date: …").
_QUOTED_HEADER_LINE = re.compile(r"^[>\s]*(from|sent|date)\s*:\s*(.*?)\s*$", re.I)
# An attribution line: "On <date>, Name <address> wrote:" (the date and the name
# are told apart by ``_attribution``).
_ON_WROTE = re.compile(r"^[>\s]*On\s+(.{4,240}?)\s+wrote\s*:?\s*$", re.I)
_ADDRESS_IN = re.compile(r"<?([\w.+'-]+@[\w-]+(?:\.[\w-]+)+)>?")
# A date text names a year or a numeric day ("26/11/2001"): a bare weekday
# ("Mon") is no date of its own.
_DATED = re.compile(r"\b\d{4}\b|\b\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}\b")
# Lines below the history's start that may still belong to its header block.
QUOTED_HEADER_LINES = 12


def quoted_author(
    lines: Sequence[str], cut: int, *, zone: tzinfo | None = None
) -> QuotedAuthor | None:
    """The author of the message a reply quotes (``QuotedAuthor``), from
    ``lines`` (``_normalised_lines``) and the index where quoted history starts
    (``_own_lines``): the first attribution line ("On … wrote:") above that
    index, else the header block at it (Outlook's From and Sent or Date lines
    among its first ``QUOTED_HEADER_LINES`` lines). None when neither names a
    sender. A quoted date without a zone (Outlook's "Sent: Tuesday, October 03,
    2023 10:45 AM", in the quoting client's local time) is read in ``zone``, the
    quoting message's own offset (UTC when unknown). Pure; never raises."""
    for line in lines[:cut]:
        match = _ON_WROTE.match(line)
        if match:
            return _attribution(match.group(1), zone)
    fields: dict[str, str] = {}
    for line in lines[cut : cut + QUOTED_HEADER_LINES]:
        match = _QUOTED_HEADER_LINE.match(line)
        if match:
            fields.setdefault(match.group(1).lower(), match.group(2))
        elif on_wrote := _ON_WROTE.match(line):
            return _attribution(on_wrote.group(1), zone)
    sender = fields.get("from", "")
    if not sender:
        return None
    name, address = export_entry(sender)
    if not address:
        found = _ADDRESS_IN.search(sender)
        address = found.group(1).lower() if found else ""
        name = name if found is None else _ADDRESS_IN.sub("", name).strip(" \"',")
    if not (name or address):
        return None
    return QuotedAuthor(
        address=address,
        name=name.strip(),
        date=_header_date(fields.get("sent") or fields.get("date") or "", zone),
    )


def _attribution(inner: str, zone: tzinfo | None = None) -> QuotedAuthor | None:
    """``QuotedAuthor`` of an "On <inner> wrote:" line: the longest leading run of
    comma-separated parts that reads as a date is the date, the rest the writer."""
    parts = inner.split(",")
    date: datetime | None = None
    who = inner
    for k in range(len(parts) - 1, 0, -1):
        head = ",".join(parts[:k])
        when = _header_date(head, zone) if _DATED.search(head) else None
        if when is not None:
            date, who = when, ",".join(parts[k:])
            break
    found = _ADDRESS_IN.search(who)
    address = found.group(1).lower() if found else ""
    name = _ADDRESS_IN.sub("", who).strip(" \"'<>,")
    if date is None and _DATED.search(name) and not _either_way(name):
        # "On Mon, 26 Nov 2001 07:44:12 -0800 Dana Reyes wrote:": no comma
        # between the date and the name; the words the date parser skips are
        # the name.
        try:
            when, skipped = dateutil_parser.parse(
                name, fuzzy_with_tokens=True, tzinfos=_zone
            )
        except (ValueError, OverflowError, TypeError):
            pass
        else:
            date = _header_date(when.isoformat(), zone)
            name = " ".join(" ".join(skipped).replace(",", " ").split())
    if not (name or address):
        return None
    return QuotedAuthor(address=address, name=name, date=date)


# Zone abbreviations quoted headers write (hours east of UTC); an unknown one
# reads as UTC, a day's error at most for the rules that read these dates.
_ZONES = {
    "UT": 0, "UTC": 0, "GMT": 0, "Z": 0, "WET": 0, "BST": 1, "IST": 1, "CET": 1,
    "MET": 1, "CEST": 2, "MEST": 2, "EET": 2, "EEST": 3, "EST": -5, "EDT": -4,
    "CST": -6, "CDT": -5, "MST": -7, "MDT": -6, "PST": -8, "PDT": -7, "AKST": -9,
    "AKDT": -8, "HST": -10, "JST": 9, "AEST": 10, "AEDT": 11,
}  # fmt: skip


# A numeric date whose day and month can be read either way ("11/10/2024").
_NUMERIC_DATE = re.compile(r"\b(0?[1-9]|1[0-2])[/.-](0?[1-9]|1[0-2])[/.-]\d{2,4}\b")


def _either_way(text: str) -> bool:
    """True when ``text`` holds a numeric date whose day and month can be read
    either way ("11/10/2024": 10 November or 11 October, by the writer's locale):
    a wrong month would place contact weeks away, so such a date is unknown."""
    numeric = _NUMERIC_DATE.search(text or "")
    return numeric is not None and int(numeric.group(1)) != int(numeric.group(2))


def _zone(name: str | None, offset: int | None) -> int | None:
    """``dateutil``'s ``tzinfos`` callable: the written offset (seconds), else the
    abbreviation's, else None (the date stays naive, read as UTC)."""
    if offset is not None:
        return offset
    hours = _ZONES.get((name or "").upper())
    return None if hours is None else hours * 3600


def _header_date(text: str, zone: tzinfo | None = None) -> datetime | None:
    """A quoted header's date text as an aware UTC datetime (no zone or an unknown
    abbreviation: read in ``zone``, else UTC), or None when ``dateutil`` cannot read it, it names no year,
    or its numeric day and month could be read either way ("11/10/2024")."""
    if not text or not _DATED.search(text):
        return None
    if _either_way(text):
        return None
    try:
        when = dateutil_parser.parse(text, tzinfos=_zone)
    except (ValueError, OverflowError, TypeError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=zone or UTC)
    try:
        return when.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def _normalised_lines(text: str) -> list[str]:
    """The lines of ``text`` as mail-parser-reply normalises a body before it looks
    for reply headers (``EmailMessage``: each line stripped, an Outlook rule of
    underscores folded); each line only stripped when the library fails on the
    text (its expressions must never fail an import)."""
    try:
        normalised = EmailMessage(text=text, languages=list(_LANGUAGES)).text
    except Exception:
        return [line.strip() for line in text.split("\n")]
    return normalised.split("\n")


def unforwarded(body: str) -> str:
    """``body`` without the forwarded message a page keeps below the writer's own
    text (from its forward marker line on, ``brain.mailtext.FORWARD_MARKERS``):
    the part whose wording is the writer's mail (opt-out footers, marketing
    wording, ``loops.senders``). A bare forward leaves ''."""
    body = body or ""
    match = FORWARD_MARKERS.search(body)
    return body[: match.start()] if match else body


def _own_lines(lines: list[str]) -> tuple[list[int], int, bool]:
    """(indexes of the writer's own lines, index where history starts, whether it
    opens with a forward marker) of ``_normalised_lines``: the rule of
    ``written_text``."""
    quoted = [bool(QUOTED_LINE.match(line)) for line in lines]
    cut, forward = _history_start(lines, quoted)
    drop = quoted[:cut]
    for index in range(1, cut):
        if not quoted[index] or quoted[index - 1]:
            continue
        # The first line of a quote block: its attribution is the nearest line
        # above it with text, when that line is the writer's and ends with ":".
        probe = index - 1
        while probe >= 0 and not lines[probe].strip():
            probe -= 1
        if probe < 0 or quoted[probe] or not lines[probe].rstrip().endswith(":"):
            continue
        drop[probe] = True
        above = probe - 1
        if (
            above >= 0
            and not quoted[above]
            and lines[above].strip()
            and (
                lines[above].rstrip().endswith("<")
                or (
                    _WRAPPED_ATTRIBUTION.search(lines[above])
                    and ATTRIBUTION.match(f"{lines[above]} {lines[probe]}")
                )
            )
        ):
            drop[above] = True
    return [i for i in range(cut) if not drop[i]], cut, forward


def _history_start(lines: list[str], quoted: list[bool]) -> tuple[int, bool]:
    """(index of the first line of quoted or forwarded history, whether it opens
    with a forward marker); ``(len(lines), False)`` when there is none. See
    ``written_text``."""
    forward_at = next(
        (
            index
            for index, line in enumerate(lines)
            if not quoted[index] and FORWARD_MARKERS.match(line)
        ),
        len(lines),
    )
    normal = "\n".join(lines[:forward_at])
    offsets = [0]
    for line in lines[:forward_at]:
        offsets.append(offsets[-1] + len(line) + 1)
    try:
        hits = finditer_at_lines(_header_regex(_LANGUAGES), normal)
    except Exception:  # the library's expressions must never fail an import
        hits = []
    for hit in hits:
        start = hit.start()
        while start < hit.end() and normal[start] == "\n":
            start += 1
        first = bisect_right(offsets, start) - 1
        if first >= forward_at or quoted[first]:
            continue
        last = bisect_right(offsets, max(start, hit.end() - 1)) - 1
        following = next(
            (i for i in range(last + 1, len(lines)) if lines[i].strip()), None
        )
        if following is not None and quoted[following]:
            continue  # an attribution above a quote block, not a quoted tail
        return first, False
    return forward_at, forward_at < len(lines)


def _interleaved(text: str) -> str | None:
    """For a bottom-posted or interleaved reply (the writer's lines below or between
    "> " quoted lines), the writer's own lines (``written_text``), the signature
    cut. None when the text is not of that shape."""
    lines = _normalised_lines(text)
    first = next((i for i, line in enumerate(lines) if QUOTED_LINE.match(line)), None)
    if first is None:
        return None
    kept = _own_lines(lines)[0]
    own_after = [i for i in kept if i > first and lines[i].strip()]
    if not own_after or _SIG_DELIMITER.match(lines[own_after[0]]):
        return None
    out: list[str] = []
    for i in kept:
        if _SIG_DELIMITER.match(lines[i]):
            break
        out.append(lines[i])
    return "\n".join(out).strip()


# reply_text keeps the newest part of this many bodies (the detector and the
# extractors ask for the same bodies repeatedly).
REPLY_CACHE_SIZE = 8192
_reply_cache: OrderedDict[str, str] = OrderedDict()
_reply_cache_lock = threading.Lock()


def reply_text(body: str) -> str:
    """The newest part of a message body: the writer's own newest words, quoted
    tails and forwarded originals cut before any rule runs (SPEC §5.1a). A page
    body keeps a forward's forwarded message below its marker line
    (``connectors.mail.parsing.split_reply``); it is not the writer's, and ends
    the newest part here like the other history markers
    (``brain.mailtext.HISTORY_MARKERS``). Header blocks of quoted messages
    (Outlook "-----Original Message-----" / "From: … Sent: …", Notes "Name@ORG …
    To: … cc: … Subject:") end the newest part; a bottom-posted or interleaved
    reply keeps the writer's own lines around the "> " quotes (``written_text``),
    its signature cut; otherwise mail-parser-reply trims the tail. Cached for the last ``REPLY_CACHE_SIZE``
    bodies (thread-safe); an importer whose parse workers already cut a body hands
    the result over with ``reply_text_seed``."""
    body = body or ""
    with _reply_cache_lock:
        text = _reply_cache.get(body)
        if text is not None:
            _reply_cache.move_to_end(body)
            return text
    text = _reply_text(body)
    reply_text_seed(body, text)
    return text


def reply_text_seed(body: str, text: str) -> None:
    """Remember ``text`` as ``reply_text(body)``, computed by the same function in
    another process (the mailbox importer's parse workers, SPEC §11 ingest rate),
    so this process does not cut the body again."""
    with _reply_cache_lock:
        _reply_cache[body or ""] = text
        _reply_cache.move_to_end(body or "")
        while len(_reply_cache) > REPLY_CACHE_SIZE:
            _reply_cache.popitem(last=False)


def _reply_text(body: str) -> str:
    # Cutting at our own markers first keeps the (slow, regex-heavy) parser's input
    # to the newest part; connectors already trimmed most quoted tails.
    head = body[: REPLY_SCAN_CHARS * 2]
    block = header_block_start(head)
    if block is not None:
        head = head[:block]
    own = _interleaved(head)
    if own is not None:
        return own[:REPLY_SCAN_CHARS]
    match = _QUOTE_MARKERS.search(head)
    text = (head[: match.start()] if match else head)[:REPLY_SCAN_CHARS]
    try:
        text = latest_reply(text) or text
    except Exception:  # the parser is heuristic; our own cut stands
        text = head[: match.start()] if match else head
    lines = [line for line in text.splitlines() if not line.lstrip().startswith(">")]
    return "\n".join(lines).strip()


# The sender line of a quoted message's header block: Outlook's "From: Name
# [mailto:…]" or an attribution "On <date>, Name <address> wrote:".
_QUOTED_FROM = re.compile(r"^\W*From:\s*(.+)$|^\W*(.{0,240}\bwrote:)\s*$", re.I | re.M)


def quoted_messages(body: str) -> list[tuple[str, str]]:
    """The messages quoted in ``body`` under a header block (Outlook's
    "-----Original Message----- / From: … Sent: …", "On … wrote:"), newest first,
    as ``(sender line, text)``: the header's From or attribution line and the
    header block with the quoted text under it, "> " marks removed. The body's own newest text is not one of
    them; [] when nothing is quoted under a header. Parsed by mail-parser-reply
    (``reply_parser``); a body it cannot parse quotes nothing."""
    if not _QUOTE_MARKERS.search(body or ""):
        return []
    try:
        replies = reply_parser().read(text=body or "").replies
    except Exception:  # the parser is heuristic: no quoted message found
        return []
    out: list[tuple[str, str]] = []
    for reply in replies:
        match = _QUOTED_FROM.search(reply.headers or "")
        if match is None:
            continue
        sender = collapse(match.group(1) or match.group(2) or "")
        # The parser may leave the quoted text's first line ("Tim,") in the header.
        lines = f"{reply.headers or ''}\n{reply.full_body or ''}".splitlines()
        out.append((sender, "\n".join(line.lstrip("> ") for line in lines)))
    return out


# A closing word before the writer's name on a sign-off line ("Thanks, Dana").
_CLOSING = (
    r"(?:thanks|thank you|thx|cheers|regards|best|best regards|kind regards|later|"
    r"rgds|ta|yours|all the best|bye|ciao|love)"
)
_POSTSCRIPT = re.compile(r"^\s*p\.?\s?s\.?\b", re.I)
# A sign-off line holds at most the name and this many more words (a surname).
SIGN_OFF_EXTRA_WORDS = 1


def sender_names(from_name: str, from_addr: str) -> set[str]:
    """Lower-cased name tokens (two letters or more) a writer may sign with: the
    words of the From display name and of the address's local part
    (``dana.reyes@…`` → ``dana``, ``reyes``)."""
    local = (from_addr or "").lower().split("@", 1)[0]
    words = re.split(r"[\s._+\-,\"']+", f"{from_name or ''} {local}".lower())
    return {w for w in words if len(w) >= 2 and w.isalpha()}


@lru_cache(maxsize=4096)
def _sign_off_pattern(names: frozenset[str]) -> re.Pattern[str]:
    """The compiled sign-off line for one writer's ``names`` (cached: the same
    few writers sign most of a mailbox, and the text rules run per message)."""
    alternatives = "|".join(
        sorted((re.escape(n) for n in names), key=len, reverse=True)
    )
    return re.compile(
        rf"^\W*(?:{_CLOSING}\W+)?(?:{alternatives})\b(?:\W+\w+){{0,"
        rf"{SIGN_OFF_EXTRA_WORDS}}}\W*$",
        re.I,
    )


def before_sign_off(text: str, names: Collection[str]) -> str:
    """``text`` (a message's newest part, ``reply_text``) cut after the writer's
    sign-off: the first line, below at least one line of content, that is one of
    ``names`` alone ("- Matthew", "Paul...", "Thanks, Dana", "Kate", "Dana
    Reyes"). What follows it is the signature and what mail services append (a
    webmail advert: "Do You Yahoo!? … http://…"), not the writer's words; a "P.S."
    paragraph below it is kept. Without ``names`` or a sign-off, ``text`` is
    returned as is (SPEC §5.1a: only the writer's words can ask)."""
    if not names or not text:
        return text
    sign_off = _sign_off_pattern(frozenset(names))
    lines = text.splitlines()
    content = False
    for i, line in enumerate(lines):
        if content and len(line) <= 40 and sign_off.match(line):
            kept = lines[: i + 1]
            postscript = next(
                (j for j in range(i + 1, len(lines)) if _POSTSCRIPT.match(lines[j])),
                None,
            )
            if postscript is not None:
                end = next(
                    (j for j in range(postscript, len(lines)) if not lines[j].strip()),
                    len(lines),
                )
                kept += ["", *lines[postscript:end]]
            return "\n".join(kept).rstrip()
        content = content or bool(line.strip())
    return text


def asks_question(body: str) -> bool:
    """True when the newest part of the body has a ``?`` outside any URL
    (SPEC §5.2 rule 5: an FYI sharing a link with a query string asks nothing)."""
    return "?" in URL_RE.sub(" ", reply_text(body))


def is_acknowledgement_only(body: str) -> bool:
    """True when a reply only acknowledges ("Thanks!", "Got it, thanks"), which does
    not answer a question; "Will do" or any content word does (SPEC §5.2 rule 2).

    A greeting line and a one- or two-word capitalised signature line are ignored.
    """
    lines = [line.strip() for line in reply_text(body).splitlines() if line.strip()]
    if lines and GREETING_RE.match(lines[0]) and len(lines) > 1:
        lines = lines[1:]
    if len(lines) > 1 and SIGNATURE_RE.match(lines[-1]):
        lines = lines[:-1]
    words = re.findall(r"[a-z']+", " ".join(lines).lower())
    return bool(words) and all(word in ACK_WORDS for word in words)


# A sign-off line that is a full name, after an optional closing word ("Al
# Pollard", "Thanks, Dana M. Reyes"): capitalised words, two or three of them.
_SIGNED_FULL_NAME = re.compile(
    rf"^\W*(?:(?i:{_CLOSING})\W+)?"
    r"([A-Z][a-zA-Z'-]+(?:\s+[A-Z]\.?)?(?:\s+[A-Z][a-zA-Z'-]+){1,2})\W*$"
)


def signed_name(text: str, names: Collection[str]) -> str:
    """The full name (``brain.people.PersonName.key``: "al pollard") a writer signs
    ``text`` (a message's newest part, ``reply_text``) with: the first line, below
    a line of content and at most 40 characters long, that is a full name after
    an optional closing word and shares a word with ``names`` (``sender_names``:
    "pollard" from the display name signs "Al Pollard"), or, for a writer whose
    display name and address give no name at all (``ob1977@``), any such line
    that is no closing or greeting (``_NOT_SIGNATURE``); '' when there is none.
    A second address of the same person signs the same name (SPEC §5.1a "another
    address of the same person")."""
    if not text:
        return ""
    content = False
    for line in text.splitlines():
        if content and len(line) <= 40:
            match = _SIGNED_FULL_NAME.match(line)
            if match:
                words = {w.lower().rstrip(".") for w in match.group(1).split()}
                if (words & set(names)) if names else not words & _NOT_SIGNATURE:
                    parsed = person_name(match.group(1))
                    if parsed is not None and parsed.full:
                        return parsed.key()
        content = content or bool(line.strip())
    return ""


# Words of a closing or a greeting line, never of a name a writer signs with
# ("Best Regards", "Happy Holidays"): with no name of the writer's to check a
# sign-off against (``signed_name``), a line holding one is no name.
_NOT_SIGNATURE = frozenset(
    """thanks thank you regards best kind warm warmest cheers happy holidays
    sincerely yours cordially respectfully love later talk soon see all the
    merry christmas new year good luck take care have nice day weekend""".split()
)


def replied_to_author(message: MailMessage) -> QuotedAuthor | None:
    """``message.replied_to`` (stored with the message's metadata) as a
    ``QuotedAuthor``, or None when it quotes nobody's message under a header."""
    data = message.replied_to
    if not data:
        return None
    when = data.get("date")
    try:
        date = datetime.fromisoformat(when) if when else None
    except (TypeError, ValueError):
        date = None
    return QuotedAuthor(
        address=str(data.get("address") or "").lower(),
        name=str(data.get("name") or ""),
        date=date,
    )


def quote_of(body: str, limit: int = 200) -> str:
    """Evidence quote: the first ``limit`` chars of the collapsed newest reply."""
    return collapse(reply_text(body))[:limit]


# Whether a mailbox kept the mail others sent me is judged over this many days
# on each side of my ask (SPEC §5.1a "answers visible"): a mailbox that kept my
# sent mail of a period but not what others sent me then (an inbox emptied or
# archived elsewhere, a sent folder reaching back years) cannot show whether my
# asks of that period were answered. Kept inboxes are bursty (the Enron allen-p
# inbox holds weeks with nothing from others between busy ones), so the window
# is two months wide.
COVERAGE_WINDOW_DAYS = 30
# The window tells only when it holds at least this many messages (the bar of
# the source-level rule, ``loops.selectors.SENT_ONLY_MIN_MESSAGES``) ...
COVERAGE_MIN_MESSAGES = 50
# ... and the mailbox kept others' mail of the window when it holds at least this
# many of their messages per message of mine (a kept inbox receives several
# times what its owner sends: 2.9-4.5 per message in the months of the Enron
# allen-p inbox; 0.0-0.3 in its months of sent mail alone).
COVERAGE_OTHERS_PER_MINE = 0.5


@dataclass(frozen=True)
class MailCoverage:
    """Which days of a source hold the mail others sent me, from per-day counts
    (SPEC §5.1a: a source that cannot show answers opens no waiting loop).

    ``days`` are UTC ``YYYY-MM-DD`` strings, sorted; ``mine`` and ``others`` the
    running totals of my messages and of others' messages up to and including
    each day. ``whole`` is the source-level verdict (``loops.selectors
    .answers_visible``)."""

    days: tuple[str, ...] = ()
    mine: tuple[int, ...] = ()
    others: tuple[int, ...] = ()
    whole: bool = True

    @classmethod
    def from_days(
        cls, counts: Mapping[str, tuple[int, int]], *, whole: bool
    ) -> MailCoverage:
        """From ``{day: (my messages, others' messages)}``."""
        days = tuple(sorted(counts))
        mine = tuple(accumulate(counts[d][0] for d in days))
        others = tuple(accumulate(counts[d][1] for d in days))
        return cls(days, mine, others, whole)

    def _upto(self, day: str) -> tuple[int, int]:
        i = bisect_right(self.days, day)
        return (self.mine[i - 1], self.others[i - 1]) if i else (0, 0)

    def mine_between(self, start: datetime, end: datetime) -> int:
        """How many of my messages the source holds from ``start`` to ``end``
        (aware; whole UTC days)."""
        before = (start.astimezone(UTC) - timedelta(days=1)).strftime("%Y-%m-%d")
        return (
            self._upto(end.astimezone(UTC).strftime("%Y-%m-%d"))[0]
            - self._upto(before)[0]
        )

    def answers_visible(self, *, at: datetime, now: datetime) -> bool:
        """True when the source could show an answer to my message sent ``at``
        (aware): the whole source is no sent folder alone (``whole``) and, over
        the ``COVERAGE_WINDOW_DAYS`` on each side of ``at`` (to ``now`` at most),
        it holds fewer than ``COVERAGE_MIN_MESSAGES`` messages (too few to
        tell) or others' messages number at least ``COVERAGE_OTHERS_PER_MINE``
        per one of mine."""
        if not self.whole:
            return False
        if not self.days:
            return True
        at = at.astimezone(UTC)
        span = timedelta(days=COVERAGE_WINDOW_DAYS)
        end = min(at + span, now.astimezone(UTC))
        first = (at - span - timedelta(days=1)).strftime("%Y-%m-%d")
        mine_before, others_before = self._upto(first)
        mine_to, others_to = self._upto(end.strftime("%Y-%m-%d"))
        mine, others = mine_to - mine_before, others_to - others_before
        return (
            mine + others < COVERAGE_MIN_MESSAGES
            or others >= COVERAGE_OTHERS_PER_MINE * mine
        )
