"""MIME parsing: RFC 822 bytes and Gmail ``format=full`` JSON → ``ParsedMail``
(SPEC §6.1, §6.2).

Libraries do the work: the stdlib ``email`` package (structure, transfer encodings,
RFC 2047 words, address lists, dates), ``html2text`` (HTML → text) and
``mail-parser-reply`` (quoted reply tails). The ``compat32`` policy is used for
structure because the header registry of ``policy.default`` costs ~2.5 ms a message
(ingestion must reach 300 messages/s, SPEC §11); headers are decoded explicitly.

Parsing never raises on malformed mail: broken charsets are decoded with
replacement, NUL characters are removed from every derived string (PostgreSQL text
cannot hold them; the raw bytes keep them), a date that cannot be read or lies
outside 1970-01-01 .. now + 1 day is kept as written and flagged (never shifted: a
year written ``0001``, which the stdlib reads as 2001, becomes ``None``), MIME nested deeper than the stdlib parser's recursion
allows is read for its headers only, and every such repair is listed in
``ParsedMail.defects``. Only input that is not mail at all raises ``MailParseError``.
"""

from __future__ import annotations

import base64
import email
import email.parser
import email.policy
import functools
import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from email.header import Header, decode_header, make_header
from email.message import Message
from email.utils import getaddresses, parsedate_to_datetime
from typing import TYPE_CHECKING, Any

import html2text

from brain.people import (
    exchange_mailbox,
    export_entry,
    name_fits_address,
    person_name,
    split_export_list,
)
from connectors.base import PermanentError
from loops.definitions import (
    CALENDAR_METHODS,
    REPLY_PREFIX_RE,
    QuotedAuthor,
    written_text,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

# SPEC §6.1: at most 8,000 characters of body per message on a thread page.
MAX_BODY_CHARS = 8000
TRUNCATED_MARK = "\n[truncated]"
_CORE_HEADERS = ("from", "to", "date", "subject", "message-id")
# A message carrying any of these came through a mailing-list server (RFC 2919
# List-Id, RFC 2369 List-Post, Mailman's X-BeenThere and version, ezmlm's and
# older managers' Mailing-List): older Mailman lists send no List-Unsubscribe.
LIST_HEADERS = (
    "list-id",
    "list-post",
    "x-beenthere",
    "x-mailman-version",
    "mailing-list",
    "x-mailing-list",
)
# SPEC §5.1 mail text rules (reply prefixes, noise senders, reply languages) live in
# loops.definitions; parsing only applies them.
_REPLY_PREFIX = REPLY_PREFIX_RE
_LIST_TAG = re.compile(r"^\[[^\]]{1,40}\]\s*")
# A chase of an earlier message keeps its subject behind a chase prefix ("Follow
# up: Budget", "Reminder: Budget", "2nd request: Budget"): it belongs to that
# conversation, not a new one.
_CHASE_PREFIX = re.compile(
    r"^\s*(?:follow[- ]?up|reminder|gentle reminder|(?:2nd|second|3rd|third|final) "
    r"request|resend|resent|re-?sending)\s*:\s*",
    re.I,
)
_WS = re.compile(r"\s+")
_BLANK_RUNS = re.compile(r"\n{3,}")
_MSGID = re.compile(r"<([^<>\s]+)>")
# The reply is at the top and at most 8,000 chars are kept: the quoted history
# further down need not be scanned.
_REPLY_SCAN_CHARS = 12000


class MailParseError(PermanentError):
    """The input is not a mail message (empty, or no header at all)."""

    code = "unparseable_message"


@dataclass
class Address:
    """A lower-cased bare address with its decoded display name ('' when none)."""

    addr: str
    name: str = ""

    def display(self) -> str:
        """``Name <addr>`` or the bare address."""
        return f"{self.name} <{self.addr}>" if self.name else self.addr


@dataclass
class ParsedMail:
    """One parsed message, before threading.

    ``key`` is the ledger key: ``<message-id>`` (``sha256-id:<hex>`` when longer
    than 512 characters) or ``sha256:<hex>`` of the raw bytes when the message has
    no Message-ID. ``fingerprint`` hashes From, Date, normalised
    subject, collapsed body text, the To/Cc set and the attachments (name, size,
    sha256; issue 46): copies of one message in several folders share it even
    when their Message-IDs differ (as in Enron exports), while one text sent
    separately to two people, or with other attachments, does not. ``date`` is aware UTC
    or None. ``body`` is the page text (``split_reply``: the writer's own words
    around quotes, a forward's forwarded message) capped at 8,000 chars;
    ``full_text`` keeps the untrimmed text for quoted-text threading.
    """

    key: str
    message_id: str
    subject: str
    from_: Address | None
    to: list[Address]
    cc: list[Address]
    bcc: list[Address]
    date: datetime | None
    in_reply_to: str | None
    references: list[str]
    body: str
    full_text: str
    fingerprint: str
    # The pre-issue-46 fingerprint (From, Date, subject, body only): recognises
    # ledger rows written before recipients and attachments counted.
    body_fingerprint: str = ""
    raw: str = ""
    # sha256 of the bytes exactly as read; the bytes themselves are attached by
    # the importer (``raw_bytes``), not carried through the parse pool.
    raw_hash: str = ""
    raw_bytes: bytes | None = None
    location: str = ""
    has_quote: bool = False
    # Who wrote the message this one quotes as a reply (its quoted header).
    replied_to: QuotedAuthor | None = None
    html_only: bool = False
    list_unsubscribe: bool = False
    # Delivered by a mailing-list server: RFC 2369/2919 list headers or a list
    # manager's own (``LIST_HEADERS``), with or without List-Unsubscribe.
    mailing_list: bool = False
    auto_submitted: str | None = None
    calendar_method: str | None = None
    # A delivery-failure notice's failed recipients (``failed_recipients``).
    failed_recipients: list[str] = field(default_factory=list)
    attachments: list[dict[str, Any]] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    folder: str = ""
    # (address, display name as written) from From, To, Cc, Reply-To, Sender and
    # the export headers X-From, X-To, X-cc (see ``header_names``).
    names: list[tuple[str, str]] = field(default_factory=list)
    defects: list[str] = field(default_factory=list)
    # Gmail only: message id, thread id, internal date (ms) and history id.
    gmail_id: str = ""
    gmail_thread_id: str = ""
    gmail_history_id: str = ""
    gmail_payload: dict[str, Any] | None = None

    @property
    def subject_key(self) -> str:
        """Normalised subject: reply/forward prefixes stripped, lower-cased."""
        return subject_key(self.subject)

    @property
    def from_addr(self) -> str:
        """Lower-cased From address or ''."""
        return self.from_.addr if self.from_ else ""

    def participants(self) -> set[str]:
        """Every From/To/Cc address of the message."""
        found = {a.addr for a in (*self.to, *self.cc)}
        if self.from_:
            found.add(self.from_.addr)
        return found

    def is_reply(self) -> bool:
        """True for a reply or forward: a prefix on the subject, or headers."""
        return bool(
            self.in_reply_to
            or self.references
            or _REPLY_PREFIX.match(self.subject or "")
        )


@functools.lru_cache(maxsize=8192)
def subject_key(subject: str) -> str:
    """Normalise a subject for threading: repeated ``Re:``/``Fw:``/``Fwd:``/``Aw:``…
    prefixes, chase prefixes (``Follow up:``, ``Reminder:``, ``2nd request:``) and
    mailing-list tags (``[ILUG]``) stripped, whitespace collapsed, lower-cased.
    Cached: an import asks for each message's key several times (dedup, threading,
    ledger) and the answer depends on the subject alone."""
    text = _WS.sub(" ", subject or "").strip()
    previous = None
    while previous != text:
        previous = text
        text = _REPLY_PREFIX.sub("", text)
        text = _LIST_TAG.sub("", _CHASE_PREFIX.sub("", text)).strip()
    return text.lower()[:300]


def strip_reply_prefix(subject: str) -> str:
    """The subject without its reply/forward prefixes (original case kept)."""
    return _REPLY_PREFIX.sub("", _WS.sub(" ", subject or "").strip()).strip()


# --- decoding helpers ----------------------------------------------------------------


def decode_bytes(data: bytes, charset: str | None) -> tuple[str, bool]:
    """Decode ``data`` with its declared charset; on a missing, unknown or wrong
    charset try UTF-8, then Windows-1252 with replacement. Returns (text, clean)."""
    tried: list[str] = []
    declared = (charset or "").strip().strip('"').lower()
    if declared and declared not in ("unknown-8bit", "x-unknown", "us-ascii", "ascii"):
        tried.append(declared)
    tried += ["utf-8"]
    for codec in tried:
        try:
            return data.decode(codec), codec == tried[0]
        except (LookupError, UnicodeDecodeError, ValueError):
            # ValueError: a charset name no codec lookup accepts (a NUL inside it).
            continue
    return data.decode("cp1252", errors="replace"), False


def decode_header_value(value: Any) -> str:
    """Decode a header (RFC 2047 encoded words, raw 8-bit bytes) to one line.
    A header given as text is decoded once per distinct value (``_decode_text``):
    the same list and correspondent headers come back in message after message."""
    if value is None:
        return ""
    if isinstance(value, str):
        return _decode_text(value)
    return _decode_header(value)


@functools.lru_cache(maxsize=8192)
def _decode_text(value: str) -> str:
    """``decode_header_value`` of a header given as text."""
    return _decode_header(value)


def _decode_header(value: Any) -> str:
    try:
        chunks = decode_header(value if isinstance(value, Header) else str(value))
    except Exception:  # email.errors.HeaderParseError and malformed words
        return _WS.sub(" ", str(value)).strip()
    try:
        if any(charset == "unknown-8bit" for _chunk, charset in chunks):
            raise LookupError("raw 8-bit header")
        text = str(make_header(chunks))
    except Exception:  # unknown charset in an encoded word, raw 8-bit bytes
        parts = []
        for chunk, charset in chunks:
            parts.append(
                decode_bytes(chunk, charset)[0] if isinstance(chunk, bytes) else chunk
            )
        text = "".join(parts)
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):
        # compat32 carries undecodable header bytes as surrogates.
        raw = text.encode("utf-8", errors="surrogateescape")
        text = decode_bytes(raw, None)[0]
        text = text.encode("utf-8", errors="replace").decode("utf-8")
    return _WS.sub(" ", clean_text(text)).strip()


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` without the characters PostgreSQL text refuses (NUL, lone
    surrogates): derived text only, the raw bytes keep them."""
    if "\x00" not in text and not _UNSTORABLE.search(text):
        return text
    return _UNSTORABLE.sub("", text)


def parse_addresses(values: list[Any]) -> list[Address]:
    """Parse address headers into ``Address`` rows (lower-cased, deduplicated,
    entries without ``@`` dropped)."""
    raw = []
    for value in values:
        if value is None:
            continue
        if isinstance(value, Header):
            # compat32 wraps headers with raw 8-bit bytes in Header objects.
            text = decode_header_value(value)
        else:
            text = str(value)
        raw.append(text)
    found: list[Address] = []
    seen: set[str] = set()
    for name, addr in getaddresses(raw):
        addr = clean_text(addr.strip().strip("<>").lower())
        if "@" not in addr or addr in seen:
            continue
        seen.add(addr)
        found.append(Address(addr=addr, name=decode_header_value(name).strip("'\" ")))
    return found


# Address headers and the export header that carries their names (Enron/Exchange/
# Notes exports write names in X-From/X-To/X-cc, in the same order as the addresses).
_NAMED_HEADERS = (
    ("from", "x-from"),
    ("to", "x-to"),
    ("cc", "x-cc"),
    ("reply-to", None),
    ("sender", None),
)


def header_names(headers: Callable[[str], list[Any]]) -> list[tuple[str, str]]:
    """Every (lower-cased address, display name as written) pair the headers give:
    names written beside their address in any form (RFC 5322, gateway-wrapped,
    IMCEANOTES), and names of export headers (``X-To: Harlow, Quinn </O=…>``,
    ``Ines Varga/HOU/CORP@CORP``) paired with the address at the same position of
    the matching address header when both lists have the same length and the name
    fits the address (or the list has one entry); an X.500 entry is given whole,
    since its Exchange mailbox name is evidence (``brain.people.exchange_mailbox``).
    Names that are addresses are left out. Pure; never raises."""
    found: list[tuple[str, str]] = []
    for field_name, export in _NAMED_HEADERS:
        entries = [
            export_entry(entry)
            for value in headers(field_name)
            for entry in split_export_list(decode_header_value(value))
        ]
        found += [
            (addr, name) for name, addr in entries if addr and name and "@" not in name
        ]
        if export is None:
            continue
        raw_entries = [
            entry
            for value in headers(export)
            for entry in split_export_list(decode_header_value(value))
        ]
        exported = [export_entry(entry) for entry in raw_entries]
        aligned = len(exported) == len(entries)
        for index, (name, addr) in enumerate(exported):
            if not name or "@" in name:
                continue
            if exchange_mailbox(raw_entries[index]):
                # The X.500 form is kept whole: its mailbox name is evidence.
                name = raw_entries[index]
            if addr:
                found.append((addr, name))
                continue
            target = entries[index][1] if aligned else ""
            parsed = person_name(name)
            if (
                target
                and parsed is not None
                and (len(entries) == 1 or name_fits_address(parsed, target))
            ):
                found.append((target, name))
    return [(clean_text(addr), clean_text(name)) for addr, name in found]


def normalize_message_id(value: Any) -> str:
    """The first ``<...>`` token of a Message-ID header, without brackets ('' if
    none); a bare token without brackets is accepted."""
    text = str(value or "").strip()
    match = _MSGID.search(text)
    if match:
        return match.group(1)
    return text.split()[0] if text and "@" in text and " " not in text.strip() else ""


def parse_references(value: Any) -> list[str]:
    """All message ids in a References or In-Reply-To header, in order. A token
    without "@" is no message id (RFC 5322: id-left "@" id-right) and is left out:
    real lkml mail carries ``In-Reply-To: <yes>`` (git send-email's prompt answered
    "yes"), and that phantom parent would join every series that carries it."""
    return [m.group(1) for m in _MSGID.finditer(str(value or "")) if "@" in m.group(1)]


def in_reply_to_id(
    value: Any, *, participants: Iterable[str], references: Sequence[str]
) -> str | None:
    """The parent's message id in an In-Reply-To header, or None.

    RFC 822 let In-Reply-To carry a phrase, and MH/nmh and exmh still write one
    naming the author of the message answered: ``Message from "Craig"
    <craig@example.org> of "Mon, 02 Sep 2002 22:37:10 PDT."
    <312D1C89@example.org>``. The first ``<...>`` token is then an address, and
    taking it as the parent would join every reply to that person into one
    thread. A token that is the address of one of the message's own
    ``participants`` (From, To, Cc, Reply-To) is no message id and is skipped; of
    the ids left, the one that also closes ``references`` (the parent, RFC 5322
    §3.6.4) wins, else the last (the phrase precedes the id). A header holding
    one bare id without brackets is read as that id."""
    people = {a.lower() for a in participants if a}
    # A bare id without angle brackets ("In-Reply-To: m3@example.org"), as some
    # scripts write it, is the parent too.
    found = parse_references(value) or [normalize_message_id(value)]
    ids = [i for i in found if "@" in i and i.lower() not in people]
    if not ids:
        return None
    if len(ids) > 1:
        for ref in reversed(references):
            if ref in ids:
                return ref
    return ids[-1]


def parse_date(value: Any) -> datetime | None:
    """RFC 5322 date → aware UTC datetime; naive dates are taken as UTC; None when
    missing, unparseable or misread (``date_problem`` says why). A date outside
    1970 .. now + 1 day is returned as written and flagged."""
    return _parse_date(value)[0]


# SPEC §6 "Every importer": dates outside 1970 .. now + 1 day are flagged, never
# shifted; the loops' reference time leaves out dates after the wall clock.
EARLIEST_DATE = datetime(1970, 1, 1, tzinfo=UTC)
FUTURE_SLACK = timedelta(days=1)
_YEAR = re.compile(r"(?<![\d:])(\d{4})(?![\d:])")


def date_problem(value: Any) -> str:
    """What is wrong with the Date header ``value``: '' (fine or absent),
    ``unparseable``, ``misread_year`` (a four-digit year the stdlib reads as
    another one, ``0001`` → 2001: no date is better than a shifted one; the raw
    bytes keep it) or ``out_of_range`` (before 1970 or after now + 1 day: the
    date is kept as written and flagged)."""
    return _parse_date(value)[1]


def _date_zone(value: Any) -> tzinfo | None:
    """The UTC offset a Date header is written in ("-0700"), or None: the zone a
    quoted header's bare time ("Sent: … 10:45 AM") is most likely in."""
    try:
        parsed = parsedate_to_datetime(str(value)) if value else None
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return parsed.tzinfo if parsed is not None else None


def _parse_date(value: Any) -> tuple[datetime | None, str]:
    if not value:
        return None, ""
    text = str(value)
    try:
        parsed = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None, "unparseable"
    if parsed is None:
        return None, "unparseable"
    years = _YEAR.findall(text)
    if years and int(years[0]) != parsed.year:
        # parsedate maps years < 100 to 19xx/20xx, also when written with 4 digits.
        return None, "misread_year"
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        parsed = parsed.astimezone(UTC)
    except (OverflowError, ValueError):
        return None, "out_of_range"
    if parsed < EARLIEST_DATE or parsed > datetime.now(UTC) + FUTURE_SLACK:
        return parsed, "out_of_range"
    return parsed, ""


def html_to_text(html: str) -> str:
    """HTML → readable text with html2text (links kept, images dropped, no wrap)."""
    converter = html2text.HTML2Text()
    converter.body_width = 0
    converter.ignore_images = True
    converter.ignore_emphasis = True
    converter.unicode_snob = True
    try:
        return converter.handle(html)
    except Exception:  # html2text can trip on pathological markup
        return re.sub(r"<[^>]+>", " ", html)


def trim_reply(text: str, *, subject: str = "") -> str:
    """The page text of a message (``split_reply``)."""
    return split_reply(text, subject=subject)[0]


def split_reply(
    text: str, *, subject: str = "", zone: tzinfo | None = None
) -> tuple[str, bool, QuotedAuthor | None]:
    """(the page text of a message, whether quoted text was dropped or cut or the
    whole text is a quote, who wrote the message it quotes as a reply:
    ``loops.definitions.QuotedAuthor`` or None), from its plain ``text`` and
    ``subject`` (SPEC §6.1).

    The page keeps the writer's own words wherever they sit around "> " quotes
    (above, between and below them; attribution lines dropped) and, below them,
    the message a forward forwards (from its marker line on); a reply's quoted
    history is cut. ``loops.definitions.written_text`` is the rule (one home,
    mail-parser-reply finds the reply headers); the loop rules read the same
    body through ``loops.definitions.reply_text``, which leaves the forwarded
    part out. A text that is nothing but a quote or a forward without own words
    is kept whole. Only the first ``_REPLY_SCAN_CHARS`` characters are read:
    the body is capped at 8,000."""
    if not text.strip():
        return "", False, None
    head = text[:_REPLY_SCAN_CHARS]
    written = written_text(head, subject=subject, zone=zone)
    if not written.own:
        return head.strip(), True, None
    if written.forwarded:
        return f"{written.own}\n\n{written.forwarded}", written.quoted, None
    return written.own, written.quoted, written.replied_to


def cap_body(text: str, limit: int = MAX_BODY_CHARS) -> str:
    """At most ``limit`` characters, ``[truncated]`` marked."""
    text = _BLANK_RUNS.sub(
        "\n\n", text.replace("\r\n", "\n").replace("\r", "\n")
    ).strip()
    if len(text) <= limit:
        return text
    return text[: limit - len(TRUNCATED_MARK)].rstrip() + TRUNCATED_MARK


def fingerprint(
    from_addr: str,
    date: datetime | None,
    subject: str,
    text: str,
    *,
    recipients: Iterable[Address] | None = None,
    attachments: Iterable[dict[str, Any]] | None = None,
) -> str:
    """Hash identifying one message across folders (SPEC §6.2): From + Date +
    subject + body, and (issue 46) the To/Cc address set (``copy_identity``)
    and the attachments (name, size, sha256). With ``recipients`` and
    ``attachments`` both None it is the body fingerprint written to the ledger
    before issue 46 (``ParsedMail.body_fingerprint``)."""
    parts = [
        from_addr,
        date.isoformat() if date else "",
        subject_key(subject),
        _WS.sub(" ", text).strip()[:20000],
    ]
    if recipients is not None or attachments is not None:
        parts.append(copy_identity(recipients or (), attachments or ()))
    basis = "\0".join(parts)
    return hashlib.sha256(basis.encode("utf-8", errors="surrogatepass")).hexdigest()


def copy_identity(
    recipients: Iterable[Address], attachments: Iterable[dict[str, Any]]
) -> str:
    """What two copies of one message share besides sender, date, subject and
    body (issue 46, SPEC §6.2): the To/Cc set (lower-cased addresses, sorted, no
    repeats) and the attachments (``name:size:sha256`` each, sorted), as one
    string ``"to,cc…\x1fatt|att…"``. Order and display names do not count."""
    addrs = sorted({a.addr.strip().lower() for a in recipients if a.addr.strip()})
    files = sorted(
        f"{a.get('filename', '')}:{a.get('size', 0)}:{a.get('sha256', '')}"
        for a in attachments
    )
    return ",".join(addrs) + "\x1f" + "|".join(files)


# --- body extraction over a part tree ------------------------------------------------


@dataclass
class _Part:
    content_type: str
    disposition: str | None
    filename: str | None
    charset: str | None
    method: str | None
    size: int
    payload: Callable[[], bytes]
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Body:
    plain: str | None = None
    html: str | None = None
    calendar_method: str | None = None
    attachments: list[dict[str, Any]] = field(default_factory=list)
    defects: list[str] = field(default_factory=list)


def _content_hash(part: _Part) -> dict[str, str]:
    """``{"sha256": hex}`` of an attachment's decoded bytes, or ``{}`` when they
    are not at hand (a Gmail attachment fetched by id) or cannot be decoded."""
    if part.extra.get("attachment_id"):
        return {}
    try:
        data = part.payload()
    except Exception:  # broken base64/quoted-printable: size and name still count
        return {}
    return {"sha256": hashlib.sha256(data).hexdigest()}


def _extract(parts: Iterator[_Part]) -> _Body:
    out = _Body()
    for part in parts:
        ctype = part.content_type
        if ctype in ("text/calendar", "application/ics") and part.method:
            method = part.method.strip().upper()
            if method in CALENDAR_METHODS:
                out.calendar_method = out.calendar_method or method
        is_attachment = part.disposition == "attachment" or (
            bool(part.filename) and ctype not in ("text/plain", "text/html")
        )
        if is_attachment or not ctype.startswith("text/"):
            if part.filename or is_attachment:
                out.attachments.append(
                    {
                        "filename": decode_header_value(part.filename or ""),
                        "mime_type": ctype,
                        "size": part.size,
                        **_content_hash(part),
                        **part.extra,
                    }
                )
            continue
        if ctype not in ("text/plain", "text/html"):
            continue
        if (ctype == "text/plain" and out.plain is not None) or (
            ctype == "text/html" and out.html is not None
        ):
            continue
        try:
            data = part.payload()
        except Exception as exc:  # broken base64/quoted-printable
            out.defects.append(f"payload: {type(exc).__name__}")
            continue
        text, clean = decode_bytes(data, part.charset)
        if not text.strip():
            # An empty alternative: keep looking for one with text.
            continue
        if not clean:
            out.defects.append(f"charset: {part.charset or 'none'}")
        if ctype == "text/plain":
            out.plain = text
        else:
            out.html = text
    return out


def _walk(msg: Message) -> Iterator[Message]:
    """``Message.walk`` without recursion (a deeply nested multipart would raise
    ``RecursionError``): the leaf parts, depth first, in order."""
    stack = [msg]
    while stack:
        part = stack.pop()
        if part.is_multipart():
            children = part.get_payload()
            if isinstance(children, list):
                stack.extend(c for c in reversed(children) if not isinstance(c, str))
            continue
        yield part


def _rfc822_parts(msg: Message) -> Iterator[_Part]:
    for part in _walk(msg):
        raw_payload = part.get_payload()
        method = part.get_param("method")
        yield _Part(
            content_type=part.get_content_type(),
            disposition=part.get_content_disposition(),
            filename=part.get_filename(),
            charset=part.get_content_charset(),
            method=method if isinstance(method, str) else None,
            size=len(raw_payload) if isinstance(raw_payload, str) else 0,
            payload=functools.partial(_decoded_payload, part),
        )


def failed_recipients(msg: Message) -> list[str]:
    """The recipients a delivery-failure notice reports as failed (RFC 3464): the
    ``Final-Recipient`` (else ``Original-Recipient``) of each per-recipient block
    whose ``Action`` is ``failed`` in a ``multipart/report;
    report-type=delivery-status`` message, plus any ``X-Failed-Recipients``
    header. Lower-cased bare addresses, in order; empty for any other message."""
    found: list[str] = []
    for value in msg.get_all("x-failed-recipients") or []:
        found += [a.addr for a in parse_addresses([value])]
    if (
        msg.get_content_type() == "multipart/report"
        and (msg.get_param("report-type") or "") == "delivery-status"
    ):
        for part in msg.walk():
            if part.get_content_type() != "message/delivery-status":
                continue
            # The stdlib parses the status part into header blocks: the first is
            # per-message, the rest per-recipient.
            blocks = part.get_payload()
            for block in blocks[1:] if isinstance(blocks, list) else []:
                if not isinstance(block, Message):
                    continue
                if str(block.get("action", "")).strip().lower() != "failed":
                    continue
                field_ = block.get("final-recipient") or block.get("original-recipient")
                address = str(field_ or "").split(";", 1)[-1].strip()
                found += [a.addr for a in parse_addresses([address])]
    return list(dict.fromkeys(found))


def _decoded_payload(part: Message) -> bytes:
    """The transfer-decoded bytes of a MIME leaf (empty when it has none)."""
    data = part.get_payload(decode=True)
    return data if isinstance(data, bytes) else b""


def _gmail_payload(body: dict[str, Any]) -> bytes:
    """The bytes of a Gmail API part body (``data`` is base64url; empty without)."""
    return _b64url(body["data"]) if body.get("data") else b""


def _b64url(data: str) -> bytes:
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


def _gmail_parts(part: dict[str, Any]) -> Iterator[_Part]:
    children = part.get("parts") or []
    if children:
        for child in children:
            yield from _gmail_parts(child)
        return
    headers = {h["name"].lower(): h["value"] for h in part.get("headers") or []}
    probe = Message()
    if "content-type" in headers:
        probe["Content-Type"] = headers["content-type"]
    if "content-disposition" in headers:
        probe["Content-Disposition"] = headers["content-disposition"]
    body = part.get("body") or {}
    method = probe.get_param("method")
    extra = {"attachment_id": body["attachmentId"]} if body.get("attachmentId") else {}
    yield _Part(
        content_type=(part.get("mimeType") or "text/plain").lower(),
        disposition=probe.get_content_disposition(),
        filename=part.get("filename") or None,
        charset=probe.get_content_charset() or "utf-8",
        method=method if isinstance(method, str) else None,
        size=int(body.get("size") or 0),
        payload=functools.partial(_gmail_payload, body),
        extra=extra,
    )


# --- public entry points -------------------------------------------------------------


def _finish(
    *,
    headers: Callable[[str], list[Any]],
    body: _Body,
    raw: str,
    raw_hash: str,
    folder: str,
    defects: list[str],
    failed: list[str] | None = None,
) -> ParsedMail:
    def one(name: str) -> Any:
        values = headers(name)
        return values[0] if values else None

    subject = decode_header_value(one("subject"))
    from_list = parse_addresses(headers("from"))
    from_ = from_list[0] if from_list else None
    names = header_names(headers)
    if from_ and not from_.name:
        written = next((n for a, n in names if a == from_.addr), "")
        parsed_name = person_name(written) if written else None
        from_.name = parsed_name.display if parsed_name is not None else written
    date, problem = _parse_date(one("date"))
    if problem == "unparseable":
        defects.append("date: unparseable")
    elif problem:
        defects.append(f"date: {problem}: {clean_text(str(one('date')))[:80]}")
    message_id = clean_text(normalize_message_id(one("message-id")))
    refs = parse_references(clean_text(" ".join(str(v) for v in headers("references"))))
    to, cc = parse_addresses(headers("to")), parse_addresses(headers("cc"))
    in_reply = in_reply_to_id(
        clean_text(str(one("in-reply-to") or "")),
        participants=[
            a.addr
            for a in (*from_list, *to, *cc, *parse_addresses(headers("reply-to")))
        ],
        references=refs,
    )
    if body.plain is not None and body.plain.strip():
        text = body.plain
    elif body.html is not None:
        text = html_to_text(body.html)
    else:
        text = body.plain or ""
    text = clean_text(text.replace("\r\n", "\n"))
    reply, has_quote, replied_to = split_reply(
        text, subject=subject, zone=_date_zone(one("date"))
    )
    auto = one("auto-submitted")
    key = f"<{message_id}>" if message_id else f"sha256:{raw_hash}"
    if len(key) > MAX_KEY_CHARS:
        # The ledger and raw-record ids hold 512 characters; a longer Message-ID
        # is kept whole in ``message_id`` and keyed by its hash.
        key = "sha256-id:" + hashlib.sha256(message_id.encode()).hexdigest()
    return ParsedMail(
        key=key,
        message_id=message_id,
        subject=subject,
        from_=from_,
        to=to,
        cc=cc,
        bcc=parse_addresses(headers("bcc")),
        date=date,
        in_reply_to=in_reply,
        references=refs,
        body=cap_body(reply),
        has_quote=has_quote,
        replied_to=replied_to,
        html_only=not (body.plain and body.plain.strip()) and body.html is not None,
        full_text=text,
        fingerprint=fingerprint(
            from_.addr if from_ else "",
            date,
            subject,
            text,
            recipients=[*to, *cc],
            attachments=body.attachments,
        ),
        body_fingerprint=fingerprint(from_.addr if from_ else "", date, subject, text),
        raw=clean_text(raw),
        raw_hash=raw_hash,
        list_unsubscribe=bool(one("list-unsubscribe")),
        mailing_list=any(one(name) for name in LIST_HEADERS),
        auto_submitted=str(auto).strip().lower() if auto else None,
        calendar_method=body.calendar_method,
        failed_recipients=failed or [],
        attachments=body.attachments,
        folder=folder,
        defects=defects + body.defects,
        names=names,
    )


MAX_KEY_CHARS = 512  # ImportedItem.external_id and RawRecord.external_id


def parse_rfc822(data: bytes, *, folder: str = "") -> ParsedMail:
    """Parse one RFC 822 message (bytes, any line endings, an mbox ``From `` line
    allowed). Raises ``MailParseError`` for empty input or input without headers."""
    if not data or not data.strip():
        raise MailParseError("Empty message.", detail={"folder": folder})
    if data.startswith(b"From "):
        # An mbox envelope line is not a header.
        data = data.split(b"\n", 1)[1] if b"\n" in data else b""
    nul_removed = b"\x00" in data
    if nul_removed:
        # PostgreSQL text cannot hold NUL; an 8-bit UTF-16 part is the usual cause.
        data = data.replace(b"\x00", b"")
    too_deep = False
    try:
        msg = email.message_from_bytes(data, policy=email.policy.compat32)
    except RecursionError:
        # MIME nested deeper than the stdlib parser recurses: headers only.
        msg = email.parser.BytesParser(policy=email.policy.compat32).parsebytes(
            data, headersonly=True
        )
        too_deep = True
    if not msg.keys():
        raise MailParseError("No mail headers found.", detail={"folder": folder})
    if not any(msg.get(name) for name in _CORE_HEADERS):
        # "key: value" lines parse as headers (a passwd file, a YAML note); a message
        # has at least one of these.
        raise MailParseError(
            "Not a mail message: it has none of From, To, Date, Subject, Message-ID.",
            detail={"folder": folder},
        )
    defects = [type(d).__name__ for d in msg.defects]
    if nul_removed:
        defects.append("NUL bytes removed")
    if too_deep:
        defects.append("MIME nesting too deep: body parts not read")
        body = _Body()
    else:
        body = _extract(_rfc822_parts(msg))
    raw = data.decode("utf-8", errors="replace")
    return _finish(
        headers=_header_index(msg),
        body=body,
        raw=raw,
        raw_hash=hashlib.sha256(data).hexdigest(),
        folder=folder,
        defects=defects,
        failed=failed_recipients(msg),
    )


def _header_index(msg: Message) -> Callable[[str], list[Any]]:
    """``msg.get_all(name) or []`` for any name, from one pass over the headers
    (``get_all`` scans them all again for each of the twenty names ``_finish``
    reads); each call answers a new list."""
    index: dict[str, list[Any]] = {}
    for name, value in msg.items():
        index.setdefault(name.lower(), []).append(value)
    return lambda name: list(index.get(name.lower(), ()))


def parse_gmail_message(payload: dict[str, Any]) -> ParsedMail:
    """Parse a Gmail ``users.messages.get`` / ``threads.get`` message in
    ``format=full`` (base64url part bodies, header list, labelIds).

    Raises ``MailParseError`` when the message carries no payload headers.
    """
    part = payload.get("payload") or {}
    header_rows = part.get("headers") or []
    if not header_rows:
        raise MailParseError(
            "Gmail message without headers.", detail={"gmail_id": payload.get("id")}
        )
    by_name: dict[str, list[str]] = {}
    for row in header_rows:
        by_name.setdefault(str(row.get("name", "")).lower(), []).append(
            row.get("value", "")
        )
    raw = json.dumps(payload, sort_keys=True)
    parsed = _finish(
        headers=lambda name: by_name.get(name, []),
        body=_extract(_gmail_parts(part)),
        raw="",
        raw_hash=hashlib.sha256(raw.encode()).hexdigest(),
        folder="",
        defects=[],
    )
    if parsed.date is None and payload.get("internalDate"):
        parsed.date = datetime.fromtimestamp(
            int(payload["internalDate"]) / 1000, tz=UTC
        )
    parsed.labels = list(payload.get("labelIds") or [])
    parsed.gmail_id = str(payload.get("id") or "")
    parsed.gmail_thread_id = str(payload.get("threadId") or "")
    parsed.gmail_history_id = str(payload.get("historyId") or "")
    parsed.gmail_payload = payload
    parsed.key = parsed.gmail_id or parsed.key
    return parsed
