"""People's names and addresses in every form mail and its exports write them
(SPEC §2.3 aliases, §6.2 people). Pure functions: no database, no network.

Forms read (each one an entry of an address header or a lookup string):

- RFC 5322: ``"Quinn Harlow" <qharlow@example.org>``, ``qharlow@example.org (Quinn
  Harlow)``;
- Exchange X.500: ``Harlow, Quinn </O=ORG/OU=NA/CN=RECIPIENTS/CN=QHARLOW>``;
- Lotus Notes: ``Ines Varga/HOU/CORP@CORP``;
- ``Last, First`` (with middle names, initials, titles and suffixes);
- gateway-wrapped: ``"Rowan Pike" <rpike@example.net>@ENRON <IMCEANOTES-…@ENRON.com>``
  and a bare ``IMCEANOTES-+22Rowan+20Pike+22+20+3Crpike+40example+2Enet+3E@…``.

Names are parsed by ``nameparser`` (order, titles, initials, suffixes) into a
``PersonName``; its ``keys()`` are the alias texts a person page carries and a lookup
tries, so every form of one name meets on the same keys.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from email.utils import getaddresses
from functools import lru_cache

from nameparser import HumanName

# Local parts that name a function, not a human (the part before "@", lower-cased,
# with digits, dots, dashes and underscores dropped for the comparison).
ROLE_LOCAL_PARTS = frozenset(
    """
    admin administrator accounts accounting announce announcements billing bookings
    careers contact contactus customerservice customercare editor editors enquiries
    events feedback finance frontdesk hello help helpdesk hr info information jobs
    legal list listserv mail mailerdaemon mailer marketing media members membership
    news newsletter noreply donotreply office operations orders owner payroll
    postmaster press reception recruiting registrar reservations root sales security
    service services staff subscriptions support team webmaster welcome
    """.split()
)

_X500 = re.compile(r"<\s*/\s*O=[^>]*>?", re.IGNORECASE)
_IMCEA_TOKEN = re.compile(r"IMCEA[A-Z]+-(?P<body>[^\s<>@]+)@[\w.-]+", re.IGNORECASE)
_IMCEA_WRAP = re.compile(r"<\s*IMCEA[A-Z]+-[^>]*>?", re.IGNORECASE)
_HEX_ESCAPE = re.compile(r"\+([0-9A-Fa-f]{2})")
# "... <addr>@ENRON" or "addr@x.com @ ENRON": a gateway's routing tail.
_GATEWAY_TAIL = re.compile(r"\s*@\s*[A-Za-z][\w-]*\s*$")
_NOTES = re.compile(r"^(?P<name>[^/@<>\"]+?)\s*/\s*[^@<>\"]+@\s*[\w.-]+$")
_NOTES_ROUTED = re.compile(
    r"^(?P<name>[^<>@]*?)\s*<(?P<inner>[^/@<>\"]+?)\s*/[^@<>]*@\s*[\w-]+>$"
)
_ANNOTATION = re.compile(r"\([^)]*\)|\[[^\]]*\]|\s+-\s+.*$")
_QUOTES = "\"'`"
_WS = re.compile(r"\s+")
_NOT_NAME = re.compile(r"[@<>/\\:;=|#$%&*+\[\]{}0-9_]")
_ROLE_SQUASH = re.compile(r"[\d._+-]+")
_LETTERS = re.compile(r"[^a-z]")
MAX_NAME_TOKENS = 5


def _clean(text: str) -> str:
    return _WS.sub(" ", unicodedata.normalize("NFKC", text or "")).strip()


def imcea_decode(text: str) -> str:
    """The original address text inside an ``IMCEANOTES-…@domain`` (or other
    ``IMCEA<type>-``) wrapper, with its ``+XX`` hex escapes decoded; ``text``
    unchanged when it is not such a wrapper."""
    match = _IMCEA_TOKEN.search(text or "")
    if not match:
        return text
    body = match.group("body")
    return _HEX_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), body)


@lru_cache(maxsize=8192)
def export_entry(text: str) -> tuple[str, str]:
    """``(display name, lower-cased address)`` of one address entry in any export
    form (see the module docstring); either part is '' when the entry lacks it.
    Cached: the same correspondents' entries come back in message after message.

    >>> export_entry('"Rowan Pike" <rpike@example.net>@ENRON <IMCEANOTES-x@ENRON.com>')
    ('Rowan Pike', 'rpike@example.net')
    >>> export_entry("Ines Varga/HOU/CORP@CORP")
    ('Ines Varga', '')
    """
    value = _clean(text)
    if not value:
        return "", ""
    if value.upper().startswith("IMCEA") or value.startswith("<IMCEA"):
        value = _clean(imcea_decode(value.strip("<>")))
    value = _clean(_IMCEA_WRAP.sub("", value))
    if len(value) > 2 and value[0] == value[-1] == "'":
        value = value[1:-1].strip()
    if _X500.search(value):
        return _clean(_X500.sub("", value)).strip(_QUOTES + " "), ""
    tail = _GATEWAY_TAIL.search(value)
    if tail and "@" in value[: tail.start()]:
        # "<addr>@ENRON", "addr@dom.com @ ENRON": the gateway's routing tail.
        value = value[: tail.start()].strip()
    notes = _NOTES.match(value)
    if notes:
        return notes.group("name").strip(), ""
    routed = _NOTES_ROUTED.match(value)
    if routed:
        # "Keith Holst <Keith Holst/HOU/ECT@ECT>": a Notes address in brackets.
        return (routed.group("name") or routed.group("inner")).strip(_QUOTES + " "), ""
    if "@" not in value:
        return value.strip(_QUOTES + " "), ""
    if "." not in value.rsplit("@", 1)[-1]:
        # "Some Name@ENRON": a Notes name routed through a gateway.
        return value.rsplit("@", 1)[0].strip(_QUOTES + " "), ""
    pairs = getaddresses([value])
    name, addr = pairs[0] if pairs else ("", "")
    addr = addr.strip().strip(_QUOTES + "<> ").lower()
    if "@" not in addr:
        return _clean(name).strip(_QUOTES + " "), ""
    return _clean(name).strip(_QUOTES + " "), addr


def split_export_list(value: str) -> list[str]:
    """Split an address-list header as exports write it (``X-To``, ``X-cc``, or an
    RFC 5322 list) into entries: commas inside quotes or ``<…>`` do not split, and an
    Exchange ``Last, First </O=…>`` stays one entry."""
    parts: list[str] = []
    buf: list[str] = []
    depth, quoted = 0, False
    for ch in value or "":
        if ch == '"':
            quoted = not quoted
        elif ch == "<" and not quoted:
            depth += 1
        elif ch == ">" and not quoted and depth:
            depth -= 1
        if ch == "," and not quoted and depth == 0:
            parts.append("".join(buf).strip())
            buf = []
            continue
        buf.append(ch)
    parts.append("".join(buf).strip())
    merged: list[str] = []
    for part in parts:
        if (
            merged
            and _X500.search(part)
            and not re.search(r"[<@/]", merged[-1])
            and not re.search(r",", part.split("<")[0])
        ):
            merged[-1] = f"{merged[-1]}, {part}"
        else:
            merged.append(part)
    return [p for p in merged if p]


@dataclass(frozen=True)
class PersonName:
    """A parsed human name: given, middle (names or initials), family and suffix,
    as written (case kept, dots dropped from initials)."""

    first: str
    middle: str
    last: str
    suffix: str = ""

    @property
    def display(self) -> str:
        """``First Middle Last Suffix`` for a page title."""
        return " ".join(
            p for p in (self.first, self.middle, self.last, self.suffix) if p
        )

    @property
    def full(self) -> bool:
        """True when the name has a given name (not an initial) and a family name."""
        return bool(self.last) and len(self.first.rstrip(".")) > 1

    def key(self) -> str:
        """``first last`` lower-cased: the key two forms of one name share."""
        return _key(f"{self.first} {self.last}")

    def keys(self) -> list[str]:
        """Alias keys: ``first middle last`` (when a middle is known) and
        ``first last``, lower-cased, dots dropped. A single-token name gives itself."""
        keys = [
            _key(
                self.display.replace(f" {self.suffix}", "")
                if self.suffix
                else self.display
            )
        ]
        short = self.key()
        if short and short not in keys:
            keys.append(short)
        return [k for k in keys if k]


def _key(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).replace(".", " ")
    return _WS.sub(" ", text).strip().lower()


def _titled(word: str) -> str:
    """Case for a title when the header wrote the name all lower or all upper."""
    if word.islower() or (word.isupper() and len(word) > 2):
        return "-".join(w[:1].upper() + w[1:].lower() for w in word.split("-"))
    return word


@lru_cache(maxsize=8192)
def person_name(text: str) -> PersonName | None:
    """Parse a display name in any form (``First M. Last``, ``Last, First``, X.500,
    Notes, gateway-wrapped) into a ``PersonName``; None when ``text`` is not a human
    name (empty, an address, digits or symbols, more than 5 words). Cached (the
    answer is immutable): a mail import resolves the same correspondents' names
    in every batch they write in, and nameparser takes about a millisecond."""
    name, _addr = export_entry(text)
    name = name.strip(_QUOTES + " ,")
    # "Name (Company)" and similar trailing remarks.
    name = _clean(_ANNOTATION.sub("", name)).strip(_QUOTES + " ,")
    if not name or _NOT_NAME.search(name) or len(name.split()) > MAX_NAME_TOKENS:
        return None
    if name.count(",") > 1:
        return None
    parsed = HumanName(name)
    first = parsed.first.strip()
    middle = " ".join(
        m.rstrip(".") if len(m.rstrip(".")) == 1 else m for m in parsed.middle.split()
    )
    last = parsed.last.strip()
    if not first and not last:
        return None
    if not first:
        first, last = last, ""
    first = first.rstrip(".") if len(first.rstrip(".")) == 1 else first
    return PersonName(
        first=_titled(first),
        middle=" ".join(_titled(m) for m in middle.split()),
        last=" ".join(_titled(w) for w in last.split()),
        suffix=parsed.suffix.strip(),
    )


def name_keys(text: str) -> list[str]:
    """The alias keys a lookup string may match, for any form: the parsed name's
    ``keys()`` (the short ``first last`` only when the middle is initials) and, when the string carries an address (RFC 5322, gateway-wrapped),
    that address. Empty when nothing in it is a name or an address."""
    name, addr = export_entry(text)
    keys: list[str] = []
    parsed = person_name(name) if name else None
    if parsed is not None:
        # The short "first last" key only when what it drops is initials: a
        # lookup "Project Alpha Beta Gamma" must not try "project gamma".
        initials = all(len(m) == 1 for m in parsed.middle.split())
        keys += parsed.keys() if initials else parsed.keys()[:1]
    if addr:
        keys.append(addr)
    return list(dict.fromkeys(keys))


def names_compatible(a: PersonName, b: PersonName) -> bool:
    """True when two names can be one person: same family name (or one lacks it) and
    given names equal, one the initial of the other, or one a 3+ letter short form
    of the other (``Tim`` / ``Timothy``); middles must agree where both have one."""
    if a.last and b.last and a.last.lower() != b.last.lower():
        return False
    fa, fb = a.first.lower().rstrip("."), b.first.lower().rstrip(".")
    short, long_ = sorted((fa, fb), key=len)
    # Equal, an initial ("T" / "Tova"), or a short form ("Tim" / "Timothy").
    if fa != fb and not (
        long_.startswith(short) and (len(short) == 1 or len(short) >= 3)
    ):
        return False
    ma, mb = a.middle.lower(), b.middle.lower()
    return not (ma and mb and ma[0] != mb[0])


def local_part(addr: str) -> str:
    """The part of ``addr`` before the last ``@``, lower-cased."""
    return addr.rsplit("@", 1)[0].lower()


def org_domain(addr: str) -> str:
    """The organisation part of an address's domain: its last two labels (three
    when the second-to-last is a short public suffix label such as ``co.uk``)."""
    labels = addr.rsplit("@", 1)[-1].lower().strip(".").split(".")
    if (
        len(labels) >= 3
        and len(labels[-1]) == 2
        and labels[-2] in ("co", "com", "ac", "org", "net", "gov", "edu")
    ):
        return ".".join(labels[-3:])
    return ".".join(labels[-2:])


def name_fits_address(name: PersonName, addr: str) -> bool:
    """True when the address's local part is built from the name: it contains the
    family name, or the given name (3+ letters), or starts with the given initial
    and then the family name's first letters (``pallen`` for Phillip Allen)."""
    local = _LETTERS.sub("", local_part(addr))
    first = _LETTERS.sub("", name.first.lower())
    last = _LETTERS.sub("", name.last.lower())
    if not local:
        return False
    if last and len(last) >= 3 and last in local:
        return True
    if first and len(first) >= 3 and first in local:
        return True
    return bool(first and last and local.startswith(first[0] + last[:4]))


_X500_MAILBOX = re.compile(r"/CN=([A-Za-z][A-Za-z0-9._-]{1,63})>?\s*$", re.IGNORECASE)


def exchange_mailbox(text: str) -> str:
    """The Exchange mailbox name an X.500 entry ends with, lower-cased
    (``Kaufman, Paul </O=ENRON/OU=NA/CN=RECIPIENTS/CN=PKAUFMA>`` -> ``pkaufma``);
    '' for other forms and for generated ids (``CN=NOTESADDR/CN=5836b2ad-…``)."""
    match = _X500_MAILBOX.search((text or "").strip())
    if not match or not _X500.search(text):
        return ""
    box = match.group(1).lower()
    return "" if box in ("recipients", "notesaddr") or re.search(r"\d{3}", box) else box


def is_role_address(addr: str) -> bool:
    """True when the address's local part names a function (``info@``, ``events@``,
    ``no-reply@``, ``support2@``): such an address is a role, never a human."""
    squashed = _ROLE_SQUASH.sub("", local_part(addr))
    return squashed in ROLE_LOCAL_PARTS
