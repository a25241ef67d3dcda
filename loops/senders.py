"""Who expects a reply (SPEC §5.1a): classify each sender of a source as a
``person`` or ``automated`` from signals that survive exported mailboxes.

Pure functions over ``MailMessage`` lists (no database), so the same verdict is
computed at import, in a sync and in tests. ``loops.services.sender_profiles_refresh``
stores the verdicts (``SenderProfile``); an admin verdict always wins over these.

Signals, per sender address, over the whole source:
- noise markers (SPEC §5.1) and role-like local parts (``mailman``, ``webmaster``,
  ``update@``, ``edelivery@``, ``news@``, ``events@`` …), and display names that
  name a process, office or system ("Performance Evaluation Process");
- opt-out and footer wording, matched with all whitespace removed so that extra
  spaces and line breaks do not hide it ("to be  removed", "reply with remove",
  "click here to unsubscribe");
- volume with repetition: several messages whose digit-normalised subjects or
  body openings are the same, or whose subjects are numbered issues of one
  running title ("Viridian Note 00324: …", "Viridian Note 00326: …");
- recipient count: a sender that only ever writes to crowds;
- HTML-only mail (``MailMessage.html_only``) and marketing wording (a cold pitch:
  "register today", "early bird", "special offer");
- reciprocity: an owner address ever wrote to this address, or wrote in a thread
  this sender wrote in. Reciprocity keeps a sender a person against the weaker
  signals (volume, repetition, crowds, HTML); it never overrides a noise marker or
  opt-out wording in most of the sender's mail.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from difflib import SequenceMatcher
from typing import TYPE_CHECKING, Any, NamedTuple

from brain.people import person_name
from loops.definitions import (
    QuotedAuthor,
    is_mine,
    is_noise_sender,
    normalise_subject,
    replied_to_author,
    reply_text,
    sender_names,
    signed_name,
    unforwarded,
)

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable

    from loops.message import MailMessage

PERSON = "person"
AUTOMATED = "automated"

# Local-part tokens (split at . _ - +) that name a role or a system, not a person.
ROLE_TOKENS = frozenset(
    """mailman arsystem webmaster postmaster hostmaster update updates edelivery
    delivery delivers news newsletter newsletters events event info information
    promo promos promotion promotions marketing offers offer deals sales
    subscriptions subscription subscribe unsubscribe list lists listserv majordomo
    announce announcements alerts alert notify notifier notice notices mailer
    automailer autoreply bounce bounces daemon system reports report digest feeds feed rss
    rssfeeds showtimes gift gifts customerservice service services support help
    helpdesk billing invoice invoices orders order shipping account accounts
    admin administrator editor editors team contest prizes prize winners iwon
    survey surveys conference conferences seminar seminars webinar webinars
    registration register rsvp press media communications comms""".split()
)
# Display-name words that name an organisation's process, office or system, not
# a person ("Performance Evaluation Process", "Office of the Chairman", "IT Help
# Desk", "HR Department").
ROLE_NAME_WORDS = frozenset(
    """process system systems team department dept desk center centre program
    programme service services administration notification notifications alerts
    announcements newsletter mailer helpdesk support committee office""".split()
)
ROLE_PREFIXES = ("leave-", "bounce", "unsubscribe", "owner-", "return-", "reply-")
ROLE_SUFFIXES = ("-request", "-owner", "-bounces", "-admin")

# Opt-out / mass-mail footer wording, compared with all whitespace removed and
# lower-cased ("to be  removed" and "to be\nremoved" both match "toberemoved").
_OPT_OUT = re.compile(
    "|".join(
        [
            r"unsubscrib",
            r"toberemoved",
            r"toremoveyourself",
            r"replywith[\"']?remove",
            r"remove[\"']?(?:as|in)the(?:subject|subjectline)",
            r"withremove(?:as|in)",
            r"click(?:here|below)to(?:be)?remove",
            r"opt-?out",
            r"optin(?:network|list|mailing|subscriber)",
            r"(?:no|longer)wish(?:es)?toreceive",
            r"(?:donot|don't)(?:wish|want)toreceive",
            r"rathernotreceive",
            r"(?:update|manage|change)your(?:e-?mail)?(?:preferences|subscription)",
            r"youarereceivingthis",
            r"you(?:have)?receivedthis(?:e-?mail|message|newsletter)because",
            r"tostopreceiving(?:this|these|future|our)",
            r"this(?:e-?mail|message)(?:was|is|has been)sentto",
            r"(?:was|is)notsentunsolicited",
            r"senttoyouasamember",
            r"thisisanautomated",
            r"(?:please)?do(?:not|n't)replytothis(?:e-?mail|message)",
            r"automatednotification",
            r"ifyoucannotreadthis(?:e-?mail|message)",
            r"ifyoucan'tseethis",
            r"viewthis(?:e-?mail|message)inyourbrowser",
        ]
    )
)
# Marketing wording: two or more of these in one message from a sender nobody
# here ever wrote to is a cold pitch. Matched against lower-cased text (cheaper
# than a case-insensitive pattern, which folds case at every position).
_MARKETING = re.compile(
    r"\b(?:register (?:today|now|online)|early[- ]bird|special offer|limited[- ]time"
    r"|act now|order (?:your|today|now)|buy now|free (?:trial|shipping|gift|download)"
    r"|discount|% off|save (?:up to|\$|\d)|cordially invites?|don'?t miss|sign up"
    r"|for immediate release|click here|call now|while supplies last|best price"
    r"|newsletter|sponsored|subscribe)\b"
)
_WS = re.compile(r"\s+")
_DIGITS = re.compile(r"\d+")
# A running title of two or more words followed by an issue number.
_SERIAL = re.compile(r"^((?:[a-z][\w'&-]*[\s:,.-]+){2,}(?:no\.?\s*|#\s*|vol\.?\s*)?#)")

# Thresholds (messages, shares). A sender with fewer messages than REPEAT_MIN is
# never called repetitive; VOLUME_MIN messages with no reciprocity at all is volume.
REPEAT_MIN = 4
REPEAT_SHARE = 0.6
OPT_OUT_SHARE = 0.5
CROWD = 10  # recipients (To + Cc) at which a message is addressed to a crowd
CROWD_SHARE = 0.8
HTML_SHARE = 0.8


# A mailing list's posting address (``razor-users@``, ``dev-list@``,
# ``anything@lists.example.org``): an ask posted there is to the list's readers.
LIST_SUFFIXES = (
    "-users",
    "-user",
    "-devel",
    "-dev",
    "-discuss",
    "-discussion",
    "-list",
    "-talk",
    "-general",
    "-announce",
    "-l",
)
LIST_DOMAIN_PREFIXES = ("lists.", "list.", "groups.", "listserv.")


def is_list_address(address: str) -> bool:
    """True when ``address`` is a mailing list's posting address: its local part
    ends like a list (``-users``, ``-devel``, ``-list``, ``-l``…) or its domain is
    a list server's (``lists.``, ``groups.``, ``googlegroups.com``)."""
    local, _, domain = (address or "").lower().partition("@")
    if not local or not domain:
        return False
    return (
        local.endswith(LIST_SUFFIXES)
        or domain.startswith(LIST_DOMAIN_PREFIXES)
        or domain == "googlegroups.com"
    )


def local_part_is_role(address: str) -> bool:
    """True when the address's local part names a role or a system
    (``webmaster@``, ``edelivery@``, ``enron_update@``, ``leave-news-123@``)."""
    local = (address or "").lower().split("@", 1)[0]
    if not local:
        return False
    if local.startswith(ROLE_PREFIXES) or local.endswith(ROLE_SUFFIXES):
        return True
    tokens = [t for t in re.split(r"[._+\-]", local) if t]
    return any(t in ROLE_TOKENS for t in tokens)


def name_is_role(name: str) -> bool:
    """True when a display name names a process, an office or a system
    (``ROLE_NAME_WORDS``: "Performance Evaluation Process", "Office of the
    Chairman") rather than a person."""
    words = re.findall(r"[a-z]+", (name or "").lower())
    return any(w in ROLE_NAME_WORDS for w in words)


def has_opt_out_wording(text: str) -> bool:
    """True when the text carries opt-out / mass-mail footer wording, robust to
    extra spaces and line breaks inside the phrase."""
    return bool(_OPT_OUT.search(_WS.sub("", (text or "").lower())))


def _opt_out_footer_or_header(body: str) -> bool:
    """Opt-out wording in the last 3,000 or the first 1,500 characters of ``body``;
    a body of at most 3,000 characters is read once (both ends are within it)."""
    if len(body) <= 3000:
        return has_opt_out_wording(body)
    return has_opt_out_wording(body[-3000:]) or has_opt_out_wording(body[:1500])


@dataclass
class SenderStats:
    """Signals gathered for one sender address over a source (counts of its
    messages)."""

    address: str
    messages: int = 0
    subjects: Counter[str] = field(default_factory=Counter)
    # Subjects cut at their first number ("viridian note #", "weekly digest no #"):
    # an issue number under one running title is a serial publication.
    serials: Counter[str] = field(default_factory=Counter)
    openings: Counter[str] = field(default_factory=Counter)
    opt_out: int = 0
    crowd: int = 0
    html_only: int = 0
    marketing: int = 0
    noise: bool = False
    role: bool = False
    reciprocal: bool = False
    replied_in_thread: bool = False
    names: set[str] = field(default_factory=set)
    # Full names ("al pollard", ``brain.people.PersonName.key``) this address goes
    # by: its display names, a "first.last" local part, the name it signs with.
    full_names: Counter[str] = field(default_factory=Counter)
    last_from: datetime | None = None
    last_to: datetime | None = None
    last_reported: datetime | None = None

    def signals(self) -> dict[str, Any]:
        """JSON-safe summary stored with the profile (what the admin sees)."""
        top_subject = self.subjects.most_common(1)[0][1] if self.subjects else 0
        top_opening = self.openings.most_common(1)[0][1] if self.openings else 0
        return {
            "messages": self.messages,
            "repeated_subject": top_subject,
            "repeated_opening": top_opening,
            "opt_out": self.opt_out,
            "crowd": self.crowd,
            "html_only": self.html_only,
            "marketing_wording": self.marketing,
            "noise_marker": self.noise,
            "role_address": self.role,
            "reciprocal": self.reciprocal,
            "owner_replied_in_thread": self.replied_in_thread,
            "display_names": len(self.names),
            "full_names": [n for n, _ in self.full_names.most_common(FULL_NAMES_KEPT)],
            "last_from": self.last_from.isoformat() if self.last_from else None,
            "last_to": self.last_to.isoformat() if self.last_to else None,
            "last_reported": (
                self.last_reported.isoformat() if self.last_reported else None
            ),
        }


class Contact(NamedTuple):
    """The latest evidence of contact with one address over a source (aware
    datetimes or None): ``last_from`` their last message to me, ``last_to`` my last
    message to them, ``last_reported`` my last message to anyone that reports
    contact with them by name or address ("I spoke to Dana Reyes", "Dana Reyes is
    going to send it"; ``reported_contacts``)."""

    last_from: datetime | None = None
    last_to: datetime | None = None
    last_reported: datetime | None = None


# A person named in my text ("Dana Reyes", "Dana", "D. Reyes") or an address.
_NAME = (
    r"([A-Z][a-z'A-Z]+(?:\s+[A-Z]\.)?(?:\s+[A-Z][a-zA-Z'-]+)?|[\w.+-]+@[\w-]+\.[\w.-]+)"
)
# My report of contact with a person: I spoke/talked/met with them, heard from
# them, or they called, said, agreed, are going to act ("Dana is going to pull the
# files"): the contact happened, whatever I had asked them before.
_REPORTED = re.compile(
    r"\b(?:I|We|i|we)(?:'ve| have| had)?\s+(?:just\s+|already\s+|finally\s+|also\s+)?"
    r"(?:spoke|spoken|talked|talk|met|chatted|heard back|heard|got a call|caught up|"
    r"visited|checked)\s+(?:with|to|from)\s+"
    + _NAME
    + r"|"
    + _NAME
    + r"\s+(?:called|phoned|e-?mailed|wrote|said|says|told (?:me|us)|"
    r"confirmed|agreed|has agreed|is going to|will be sending|is sending|sent me|"
    r"got back to (?:me|us))\b"
)
# My report that I reached someone, named or not: "I spoke to Brent D.", "Left
# message and sent email", "I talked with him this morning".
_REACHED = re.compile(
    r"\b(?:I|We|i|we)(?:'ve| have| had)?\s+(?:just\s+|already\s+|finally\s+)?"
    r"(?:spoke|spoken|talked|met|chatted|got hold of|reached|left (?:a |him a |her a )?"
    r"(?:message|voice ?mail))\b|^\W*left (?:a )?(?:message|voice ?mail)\b"
)


def reports_reaching(text: str) -> bool:
    """True when my text reports that I reached, or tried to reach, a person
    ("I spoke to Brent D.", "Left message and sent email"): it answers an ask to
    contact someone (``loops.asks.asks_for_contact``)."""
    return bool(_REACHED.search(text or ""))


# Name tokens this short, or these words, identify nobody.
_NOT_NAME_TOKENS = frozenset(
    """the this that they there then please thanks thank also and but she he it
    we you our your his her their mr mrs ms dr jr sr""".split()
)
# Two spellings of one family name ("Gosset" / "gossett") at or above this
# similarity are one name.
NAME_SIMILARITY = 0.85


def _tokens(text: str) -> list[str]:
    return [
        t
        for t in re.split(r"[^a-z']+", (text or "").lower())
        if len(t) >= 2 and t not in _NOT_NAME_TOKENS
    ]


def _same_name(a: str, b: str) -> bool:
    if a == b:
        return True
    return (
        min(len(a), len(b)) >= 5
        and SequenceMatcher(None, a, b).ratio() >= NAME_SIMILARITY
    )


def reported_contacts(text: str, people: dict[str, set[str]]) -> set[str]:
    """The addresses of ``people`` (address → name tokens from its local part and
    display names) that ``text`` (my newest unquoted text) reports contact with
    (``_REPORTED``). A mention is an address, a full name (first name or initial
    and family name; a family name may be misspelt by a letter), or one token that
    names exactly one of ``people``; an ambiguous first name reports nobody."""
    found: set[str] = set()
    for match in _REPORTED.finditer(text or ""):
        mention = next(g for g in match.groups() if g)
        if "@" in mention:
            if mention.lower() in people:
                found.add(mention.lower())
            continue
        words = _tokens(mention.replace(".", " "))
        if not words:
            continue
        if len(words) >= 2:
            first, family = words[0], words[-1]
            hits = {
                a
                for a, names in people.items()
                if any(_same_name(family, n) for n in names if len(n) >= 4)
                and any(n == first or n.startswith(first[0]) for n in names)
            }
        else:
            hits = {
                a
                for a, names in people.items()
                if len(words[0]) >= 3 and words[0] in names
            }
        if len(hits) == 1:
            found |= hits
    return found


# My ask handed to a person I name by first name: "Please forward this email to
# Steve", "pass my questions on to Dana", "have Dana call me".
_HANDOFF = re.compile(
    r"\b(?:please\s+|pls\s+|kindly\s+|can you\s+|could you\s+)?(?:forward|pass|send|"
    r"give|show)\s+(?:this|it|these|them|my\s+\w+|the\s+\w+)(?:\s+(?:e-?mail|note|"
    r"message|request|questions?))?(?:\s+(?:along|on))?\s+to\s+([A-Z][a-z]{2,})\b"
    r"|\b(?:have|ask)\s+([A-Z][a-z]{2,})\s+(?:to\s+)?(?:call|contact|e-?mail|phone|"
    r"get back to)\s+me\b"
)
# A first name and the local-part token of its longer or shorter form ("steve" /
# "steven", "dan" / "daniel") share at least this many leading letters.
NICKNAME_PREFIX = 3


def handoff_names(text: str) -> list[str]:
    """First names my text hands its ask to ("Please forward this email to Steve"
    → ``["steve"]``), lower-cased, in order; [] when it hands nothing on."""
    names = []
    for match in _HANDOFF.finditer(text or ""):
        name = next(g for g in match.groups() if g).lower()
        if name not in _NOT_NAME_TOKENS and name not in names:
            names.append(name)
    return names


def _first_name_fits(name: str, token: str) -> bool:
    if name == token:
        return True
    short, long = sorted((name, token), key=len)
    return len(short) >= NICKNAME_PREFIX + 1 and long.startswith(short)


def resolve_first_name(name: str, addresses: Iterable[str]) -> str:
    """The one address of ``addresses`` whose local part opens with the first name
    ``name`` or a longer or shorter form of it ("steve" → steven.matthews@…), or ''
    when none or several do (an ambiguous name resolves to nobody)."""
    name = (name or "").lower()
    hits = {
        a.lower()
        for a in addresses
        if a
        and (tokens := _tokens(a.lower().split("@", 1)[0].replace(".", " ")))
        and _first_name_fits(name, tokens[0])
    }
    return hits.pop() if len(hits) == 1 else ""


OPENING_CHARS = 80


def _opening(text: str) -> str:
    """The first ``OPENING_CHARS`` characters of ``text`` with digit runs as "#"
    and whitespace collapsed (``strip``-ed). Read from a prefix first: both
    substitutions are local, so once the prefix gives more than
    ``OPENING_CHARS`` characters the whole text gives the same ones."""
    for head in (text[: OPENING_CHARS * 5], text):
        opening = _WS.sub(" ", _DIGITS.sub("#", head)).strip()
        if len(opening) > OPENING_CHARS or head is text:
            return opening[:OPENING_CHARS]
    return ""  # unreachable: the last head is the whole text


# Full names a profile keeps (most used first).
FULL_NAMES_KEPT = 3
# A quoted header dated this long before the reply (or later than it by more than
# a clock's slack) is not the message the reply answers: a quoted thread's oldest
# header, or a misread date.
QUOTED_REPLY_MAX_AGE = timedelta(days=60)
CLOCK_SLACK = timedelta(days=1)
# A local part that is a first and a family name, with a middle initial or not
# ("al.pollard", "dana_reyes", "mery.l.brown").
_LOCAL_FULL_NAME = re.compile(r"^([a-z]{2,})[._](?:[a-z][._])?([a-z]{2,})$")
_LOCAL_TOKENS = re.compile(r"[._+-]+")


def _role_words(name: str) -> bool:
    """True when a name key ("customer service", "accounts payable") holds a word
    that names a role or an office, not a person (``ROLE_TOKENS``,
    ``ROLE_NAME_WORDS``): no full name of a person."""
    return any(
        w in ROLE_TOKENS or w in ROLE_NAME_WORDS or w in _ROLE_EXTRA_WORDS
        for w in name.split()
    )


_ROLE_EXTRA_WORDS = frozenset("payable receivable payroll reception".split())


def _quoted_in_time(quoted: datetime, at: datetime | None) -> bool:
    """True when a quoted header's date can be the message a reply sent ``at``
    answers: at most ``QUOTED_REPLY_MAX_AGE`` before it, and not after it by more
    than ``CLOCK_SLACK``."""
    return at is not None and at - QUOTED_REPLY_MAX_AGE <= quoted <= at + CLOCK_SLACK


def is_my_address(
    author: QuotedAuthor, owners: Collection[str], my_names: Collection[str]
) -> bool:
    """True when a quoted header's author (``loops.definitions.QuotedAuthor``) is
    the owner: one of ``owners``; or an address at an owner address's domain whose
    local part has the same words of two letters or more, at least two
    (``phillip.k.allen@`` for ``phillip.allen@``); or, with no address, a full
    name among ``my_names`` (the keys of the names the owner's own mail is sent
    under)."""
    address = (author.address or "").lower()
    if address:
        if address in owners:
            return True
        local, _, domain = address.partition("@")
        words = {w for w in _LOCAL_TOKENS.split(local) if len(w) >= 2}
        return len(words) >= 2 and any(
            o.partition("@")[2] == domain
            and {w for w in _LOCAL_TOKENS.split(o.partition("@")[0]) if len(w) >= 2}
            == words
            for o in owners
        )
    parsed = person_name(author.name) if author.name else None
    return parsed is not None and parsed.full and parsed.key() in my_names


def _stats_for(stats: dict[str, SenderStats], address: str) -> SenderStats:
    """The ``SenderStats`` of ``address`` in ``stats``, added when missing."""
    s = stats.get(address)
    if s is None:
        s = stats[address] = SenderStats(
            address=address,
            noise=is_noise_sender(address),
            role=local_part_is_role(address),
        )
    return s


def _later(a: datetime | None, b: datetime) -> datetime:
    """The later of ``a`` (None: never) and ``b``."""
    return b if a is None or b > a else a


@dataclass
class _Tally:
    """What ``sender_stats`` gathers in one pass over a source: the stats per
    sender, who I wrote to (and when, personally), the threads I wrote in and
    their senders, my messages, and the quoted headers to judge once my own names
    are known: (their address, when, the quoted author) of the messages their
    replies quote, and (their address, when, their name) of their messages the
    source lacks but my reply quotes."""

    owners: set[str]
    stats: dict[str, SenderStats] = field(default_factory=dict)
    written_to: set[str] = field(default_factory=set)
    last_to: dict[str, datetime] = field(default_factory=dict)
    threads_mine: set[str] = field(default_factory=set)
    senders_by_thread: dict[str, set[str]] = field(
        default_factory=lambda: defaultdict(set)
    )
    mine: list[MailMessage] = field(default_factory=list)
    quoted_mine: list[tuple[str, datetime, QuotedAuthor]] = field(default_factory=list)
    quoted_theirs: list[tuple[str, datetime, str]] = field(default_factory=list)

    def wrote_to(self, address: str, when: datetime) -> None:
        """I wrote to ``address`` personally at ``when``."""
        self.written_to.add(address)
        self.last_to[address] = _later(self.last_to.get(address), when)


def _tally_mine(tally: _Tally, m: MailMessage) -> None:
    """Count one message of mine: whom I wrote to (my mailing to a crowd, "Happy
    spring!" to 29, is no contact with each of them: SPEC §5.1a supersede), the
    thread, and the header of their message my reply quotes."""
    owners = tally.owners
    tally.mine.append(m)
    author = replied_to_author(m)
    if (
        author is not None
        and author.address
        and author.address not in owners
        and author.date is not None
        and _quoted_in_time(author.date, m.date)
    ):
        tally.quoted_theirs.append((author.address, author.date, author.name))
    personal = len({*m.to, *m.cc, *m.bcc}) < CROWD
    for a in (*m.to, *m.cc, *m.bcc):
        if not a:
            continue
        if personal and m.date:
            tally.wrote_to(a.lower(), m.date)
        else:
            tally.written_to.add(a.lower())
    tally.threads_mine.add(m.thread_id)


def _tally_theirs(tally: _Tally, m: MailMessage, address: str) -> None:
    """Count one message from ``address``: volume, direct contact with me (not an
    announcement to a crowd or a list I read), the names it goes by, the quoted
    header of my message it replies to, and its wording (``_tally_wording``)."""
    owners = tally.owners
    s = _stats_for(tally.stats, address)
    s.messages += 1
    recipients = {a.lower() for a in (*m.to, *m.cc) if a}
    direct = (
        bool(owners & recipients)
        and len(recipients) < CROWD
        and not m.list_unsubscribe
        and not m.mailing_list
        and not any(is_list_address(a) for a in recipients)
    )
    if m.date and direct:
        s.last_from = _later(s.last_from, m.date)
    if m.from_name:
        s.names.add(m.from_name.strip().lower())
        display = person_name(m.from_name)
        if display is not None and display.full and not _role_words(display.key()):
            s.full_names[display.key()] += 1
    signed = signed_name(reply_text(m.body), sender_names(m.from_name, address))
    if signed and not _role_words(signed):
        s.full_names[signed] += 1
    author = replied_to_author(m)
    if (
        direct
        and author is not None
        and author.date is not None
        and _quoted_in_time(author.date, m.date)
    ):
        # Only a reply to me: their list reply quoting my list post is no
        # contact with me.
        tally.quoted_mine.append((address, author.date, author))
    tally.senders_by_thread[m.thread_id].add(address)
    _tally_wording(s, m)


def _tally_wording(s: SenderStats, m: MailMessage) -> None:
    """Count the bulk-mail signals of one message (SPEC §5.1a sender class):
    numbered and serial subjects, repeated openings, opt-out wording, marketing
    words, crowds of recipients, HTML-only bodies."""
    subject = normalise_subject(m.subject)
    if subject != "(no subject)":
        numbered = _DIGITS.sub("#", subject)
        s.subjects[numbered] += 1
        serial = _SERIAL.match(numbered)
        if serial:
            s.serials[serial.group(1)] += 1
    opening = _opening(reply_text(m.body))
    if len(opening) >= 20:
        s.openings[opening.lower()] += 1
    # A mailing list's footer is the list's wording, not the sender's: list
    # traffic (List-Unsubscribe) is judged by the other signals. A message
    # someone forwards is its writer's wording, not theirs (``unforwarded``).
    written = unforwarded(m.body)
    if not m.list_unsubscribe and _opt_out_footer_or_header(written):
        s.opt_out += 1
    if len(set(_MARKETING.findall(written[:6000].lower()))) >= 2:
        s.marketing += 1
    if len({*m.to, *m.cc}) >= CROWD:
        s.crowd += 1
    if getattr(m, "html_only", False):
        s.html_only += 1


def _tally_quotes(tally: _Tally, my_names: set[str]) -> None:
    """Judge the quoted headers: their reply quoting a message of mine the source
    lacks (sent from another client, an export without it) means I wrote to them
    then; my reply quoting their message the source lacks means they wrote to me
    then."""
    for address, when, author in tally.quoted_mine:
        if is_my_address(author, tally.owners, my_names):
            tally.wrote_to(address, when)
    for address, when, name in tally.quoted_theirs:
        s = _stats_for(tally.stats, address)
        s.last_from = _later(s.last_from, when)
        if name:
            s.names.add(name.strip().lower())
        tally.written_to.add(address)


def _tally_names(tally: _Tally, my_names: set[str]) -> None:
    """Per sender: reciprocity, when I last wrote, the full name of a
    "first.last" local part; the owner's own names dropped (the owner on another
    address is the owner, not a correspondent to merge with)."""
    for address, s in tally.stats.items():
        s.reciprocal = address in tally.written_to
        s.last_to = tally.last_to.get(address)
        local = _LOCAL_FULL_NAME.match(address.split("@", 1)[0])
        if local and not s.role:
            parsed = person_name(f"{local.group(1)} {local.group(2)}")
            if parsed is not None and parsed.full and not _role_words(parsed.key()):
                s.full_names[parsed.key()] += 1
        for name in my_names:
            s.full_names.pop(name, None)


def _tally_reports(tally: _Tally) -> None:
    """When my own mail last reported contact with each person
    (``reported_contacts``: "I spoke to Dana"), and which senders wrote in a
    thread I wrote in."""
    stats = tally.stats
    people = {
        address: {
            *_tokens(address.split("@", 1)[0]),
            *(t for name in s.names for t in _tokens(name)),
        }
        for address, s in stats.items()
        if not s.noise and not s.role
    }
    for m in tally.mine:
        if not m.date:
            continue
        for address in reported_contacts(reply_text(m.body), people):
            stats[address].last_reported = _later(stats[address].last_reported, m.date)
    for thread_id in tally.threads_mine:
        for address in tally.senders_by_thread.get(thread_id, ()):
            stats[address].replied_in_thread = True


def sender_stats(
    messages: Iterable[MailMessage], *, owner_addresses: Collection[str]
) -> dict[str, SenderStats]:
    """Gather ``SenderStats`` for every non-owner From address of ``messages``
    (the whole source: every thread, any order; SPEC §5.1a sender class).

    Stages: one pass counting my messages and theirs → the owner's own names →
    quoted headers → names and reciprocity → reported contact."""
    tally = _Tally(owners={a.lower() for a in owner_addresses})
    for m in messages:
        if is_mine(m, tally.owners):
            _tally_mine(tally, m)
        elif address := (m.from_addr or "").lower():
            _tally_theirs(tally, m, address)
    my_names = {
        parsed.key()
        for m in tally.mine
        if m.from_name
        and (parsed := person_name(m.from_name)) is not None
        and parsed.full
    }
    _tally_quotes(tally, my_names)
    _tally_names(tally, my_names)
    _tally_reports(tally)
    return tally.stats


# What each reason code of ``classify_sender`` means, for the curator's console.
REASON_TEXT = {
    "noise_marker": "a system address (noreply, notifications, mailer-daemon…)",
    "opt_out_wording": "most of its mail has unsubscribe or opt-out wording",
    "role_address": "a role address (news@, webmaster@, mailman…)",
    "role_name": "its name is a process, office or system, not a person",
    "repetition": "sends the same subject or opening again and again",
    "always_to_crowds": "writes to crowds of recipients",
    "html_only": "sends HTML-only mail",
    "marketing_wording": "marketing wording in most of its mail",
    "reciprocal": "the owner wrote to this address or in its threads",
}


def reason_text(reasons: Iterable[str]) -> str:
    """``classify_sender``'s reason codes as one line a curator reads, e.g.
    ``"the owner wrote to this address or in its threads; weak sign: sends HTML-only
    mail"``; ``""`` for none. Unknown codes are shown as they are."""
    out = []
    for code in reasons:
        weak = code.startswith("weak:")
        text = REASON_TEXT.get(code.removeprefix("weak:"), code)
        out.append(f"weak sign: {text}" if weak else text)
    return "; ".join(out)


def classify_sender(stats: SenderStats) -> tuple[str, list[str]]:
    """``(person | automated, reasons)`` for one sender (SPEC §5.1a).

    Strong signals (a noise marker, opt-out wording in most of its mail, a role
    address that also repeats itself) decide alone. Weak ones (a role address, a
    role name, repetition, crowds, HTML-only) decide only when no owner address ever wrote to
    the sender or in its threads. Volume alone is not a signal: a busy colleague or
    a list regular writes a lot; repetition is (the same subject or opening again
    and again, digits ignored), and counts only from ``REPEAT_MIN`` messages and
    only when one display name sends it (a shared relay address carries many
    people's different mail)."""
    reasons: list[str] = []
    n = max(stats.messages, 1)
    if stats.noise:
        reasons.append("noise_marker")
    if stats.opt_out and stats.opt_out / n >= OPT_OUT_SHARE:
        reasons.append("opt_out_wording")
    if reasons:
        return AUTOMATED, reasons
    engaged = stats.reciprocal or stats.replied_in_thread
    weak: list[str] = []
    if stats.role:
        weak.append("role_address")
    if stats.names and all(name_is_role(n) for n in stats.names):
        weak.append("role_name")
    if stats.messages >= REPEAT_MIN:
        top_subject = max(
            stats.subjects.most_common(1)[0][1] if stats.subjects else 0,
            stats.serials.most_common(1)[0][1] if stats.serials else 0,
        )
        top_opening = stats.openings.most_common(1)[0][1] if stats.openings else 0
        if max(top_subject, top_opening) / n >= REPEAT_SHARE and len(stats.names) <= 2:
            weak.append("repetition")
    if stats.crowd and stats.crowd / n >= CROWD_SHARE and stats.messages >= 2:
        weak.append("always_to_crowds")
    if stats.html_only and stats.html_only / n >= HTML_SHARE:
        weak.append("html_only")
    if stats.marketing and stats.marketing / n >= OPT_OUT_SHARE:
        weak.append("marketing_wording")
    if weak and not engaged:
        return AUTOMATED, weak
    if "role_address" in weak and "repetition" in weak:
        # A system the owner once answered (an approval reply) is still a system.
        return AUTOMATED, weak
    return PERSON, (["reciprocal"] if engaged else []) + [f"weak:{w}" for w in weak]


def classify_senders(
    messages: Iterable[MailMessage], *, owner_addresses: Collection[str]
) -> dict[str, tuple[str, list[str], dict[str, Any]]]:
    """Verdict per sender address: ``{address: (kind, reasons, signals)}``."""
    out = {}
    for address, s in sender_stats(messages, owner_addresses=owner_addresses).items():
        kind, reasons = classify_sender(s)
        out[address] = (kind, reasons, s.signals())
    return out
