"""Deduplication and threading of parsed mail (SPEC §5.2 last paragraph, §6.2).

Threads are rebuilt from Message-ID / In-Reply-To / References (every message that
shares an ancestor joins one thread, also through ancestors missing from the
mailbox). Messages without those headers (the Enron export has none) are threaded
by normalised subject plus participants plus quoted text: a header-less reply joins
the conversation with the same subject whose text it quotes, else the most recent
one that shares a participant other than the owner; a message that is neither a
reply nor quoting starts a new conversation, unless it follows a conversation with
the same subject and the same people within ``_FOLLOW_UP_GAP`` (a client that sends
no "Re:"). Subject-less messages thread the same way (by participants, within
``_NO_SUBJECT_DAYS``). A forward whose body opens with the forwarded header block
is matched from that block's date line on (its "From:" line fits every message of
that sender).

Pure functions over ``ParsedMail``; the ledger of earlier imports comes in as
``KnownMessage`` rows so a later import extends the threads of an earlier one.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from connectors.mail.parsing import copy_identity
from loops.definitions import is_noise_sender
from loops.message import SENT, SPAM, TRASH

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from connectors.mail.parsing import ParsedMail

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_QUOTE_NOISE = re.compile(r"[>\s]+")
# Characters of a message's own text that must reappear in a reply's quoted text for
# the quote to count as evidence (short openings such as "Thanks," match too much).
_SNIPPET_CHARS = 60
_SNIPPET_MIN = 24


@dataclass(frozen=True)
class KnownMessage:
    """A message stored by an earlier import: its ledger key, thread, normalised
    subject, participants and date (for header-less threading across imports)."""

    key: str
    thread_id: str
    subject_key: str
    participants: tuple[str, ...]
    date: datetime | None


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, node: str) -> str:
        parent = self.parent.setdefault(node, node)
        if parent != node:
            root = self.find(parent)
            self.parent[node] = root
            return root
        return node

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # Deterministic: the lexically smaller root wins.
            if rb < ra:
                ra, rb = rb, ra
            self.parent[rb] = ra


def dedupe(
    messages: Iterable[ParsedMail],
    *,
    rekey: Callable[[ParsedMail], None] | None = None,
) -> tuple[list[ParsedMail], list[tuple[ParsedMail, ParsedMail]]]:
    """Drop copies of one message: same Message-ID and same fingerprint, or same
    fingerprint (From, Date, subject, body, To/Cc set, attachments; issue 46)
    under another Message-ID, or same sender, subject, text, To/Cc set and
    attachments with clocks whole hours apart (``_clock_shifted``:
    different Message-IDs, dates in two time zones). The first copy (input order)
    is kept and gains the other copies' labels, so a copy in a sent folder makes
    the message mine.

    A message whose Message-ID is taken by different content is not a copy: with
    ``rekey`` given it is re-keyed (``rekey(msg)`` sets a new ``msg.key``) and
    kept (SPEC §6.2: both are kept); without, it counts as a copy (legacy callers).

    Returns (unique messages, [(duplicate, kept)]).
    """
    kept: list[ParsedMail] = []
    by_key: dict[str, ParsedMail] = {}
    by_fp: dict[str, ParsedMail] = {}
    by_text: dict[tuple[str, str, str], list[ParsedMail]] = defaultdict(list)
    duplicates: list[tuple[ParsedMail, ParsedMail]] = []
    for msg in messages:
        text_key = _copy_key(msg)
        original = by_fp.get(msg.fingerprint)
        same_key = by_key.get(msg.key)
        if original is None and same_key is not None:
            if rekey is None:
                original = same_key
            else:
                rekey(msg)
                original = by_key.get(msg.key)
        if original is None:
            original = next(
                (o for o in by_text.get(text_key, ()) if _clock_shifted(o, msg)),
                None,
            )
        if original is not None:
            for label in msg.labels:
                if label not in original.labels:
                    original.labels.append(label)
            duplicates.append((msg, original))
            by_key.setdefault(msg.key, original)
            continue
        by_key[msg.key] = msg
        by_fp[msg.fingerprint] = msg
        if text_key[2]:
            by_text[text_key].append(msg)
        kept.append(msg)
    return kept, duplicates


def _copy_key(msg: ParsedMail) -> tuple[str, str, str]:
    """Sender, normalised subject and a hash of the collapsed text, the To/Cc set
    and the attachments (``parsing.copy_identity``, issue 46): what two copies
    of one message share even when their Message-IDs and clocks differ. The
    digest is "" for a message without text (never matched)."""
    text = " ".join((msg.full_text or msg.body or "").split()).lower()
    if not text:
        return (msg.from_addr, msg.subject_key, "")
    basis = text + "\0" + copy_identity([*msg.to, *msg.cc], msg.attachments)
    digest = hashlib.sha256(basis.encode("utf-8", errors="surrogatepass"))
    return (msg.from_addr, msg.subject_key, digest.hexdigest()[:32])


def _clock_shifted(a: ParsedMail, b: ParsedMail) -> bool:
    """True when two messages' dates differ by whole (or half) hours, at most
    ``_COPY_SKEW``: one message stamped in two time zones (copies in two folders
    of an export), not the same text sent again a day later."""
    if a.date is None or b.date is None:
        return False
    seconds = abs((a.date - b.date).total_seconds())
    return 0 < seconds <= _COPY_SKEW.total_seconds() and seconds % 1800 == 0


def sent_folder_senders(messages: Iterable[ParsedMail]) -> set[str]:
    """From addresses that are the owner's by evidence of the sent folders: at least
    two sent messages and 5 % of them (a message sent on the owner's behalf, or a
    colleague's mail filed there, does not make its sender an owner address).
    Noise senders never count."""
    senders = Counter(
        m.from_addr
        for m in messages
        if SENT in m.labels and m.from_addr and not is_noise_sender(m.from_addr)
    )
    total = sum(senders.values())
    return {a for a, n in senders.items() if n >= 2 and n >= 0.05 * total}


def owner_namesakes(messages: Iterable[ParsedMail], owners: set[str]) -> set[str]:
    """From addresses, not yet ``owners``, every message of which carries the
    owner's own full name (the name ``owners`` go by in From, To and Cc, e.g. "Pat
    Quill <pat@home.example>" beside "Pat Quill <pat.quill@work.example>"): the
    owner's other addresses (SPEC §5.1 "mine"), never a correspondent owed a
    reply. Names that are not a full name (one word, a role) never count."""
    mine: set[str] = set()
    theirs: dict[str, set[str]] = {}
    for m in messages:
        # How the owner is named: on the owner's own mail, and by others who
        # write to the owner ("To: Pat Quill <pat.quill@work.example>").
        for address in (*([m.from_] if m.from_ else []), *m.to, *m.cc):
            if address.addr in owners and (name := _person_name(address.name)):
                mine.add(name)
        if not m.from_ or not m.from_.addr or m.from_.addr in owners:
            continue
        if not is_noise_sender(m.from_.addr):
            theirs.setdefault(m.from_.addr, set()).add(_person_name(m.from_.name))
    return {a for a, names in theirs.items() if mine and names <= mine}


def _person_name(name: str) -> str:
    """A display name as an identity: tokens lower-cased and sorted ("Thorse,
    Greg" and "Greg Thorse" agree); '' unless it has two or more words."""
    tokens = sorted(
        t for t in re.findall(r"[a-z]+", (name or "").lower()) if len(t) > 1
    )
    return " ".join(tokens) if len(tokens) >= 2 and "@" not in name else ""


def _people(msg: ParsedMail, owner_addresses: set[str]) -> set[str]:
    """The message's participants other than the owner, as addresses plus
    ``name:`` identities, so a reply from another address of the same person
    (same display name) still shares a participant with the conversation."""
    found: set[str] = set()
    for address in (*([msg.from_] if msg.from_ else []), *msg.to, *msg.cc):
        if not address.addr or address.addr in owner_addresses:
            continue
        found.add(address.addr)
        name = _person_name(address.name)
        if name:
            found.add(f"name:{name}")
    return found


def thread_id_for(root_key: str) -> str:
    """Stable thread id of a mailbox thread: ``m`` + 16 hex of its root's key."""
    return "m" + hashlib.sha256(root_key.encode("utf-8")).hexdigest()[:16]


def _quoted(msg: ParsedMail) -> str:
    if not msg.has_quote:
        return ""
    return _QUOTE_NOISE.sub(" ", msg.full_text or "").lower()


# A body that opens with a forwarded or quoted header block has no text of its own:
# its snippet starts at the block's date line, which names that one message.
_OPENS_WITH_HEADER = re.compile(
    r"^\s*(?:-{2,}\s*Original Message|-{3,}\s*Forwarded|Begin forwarded message|"
    r"From:\s)",
    re.I,
)
# Subject-less messages still thread by participants (SPEC §5.2 last paragraph).
_NO_SUBJECT = "(no subject)"
_NO_SUBJECT_DAYS = 30
# Two copies of one message: same sender, subject and text, clocks this far apart
# at most, by whole or half hours (a time-zone error).
_COPY_SKEW = timedelta(hours=14)
# A header-less new message joins the conversation with the same subject and the
# same people when it follows that conversation's last message within this gap.
_FOLLOW_UP_GAP = timedelta(days=7)


_SENT_LINE = re.compile(r"^\s*(?:Sent|Date):", re.I | re.M)


def _snippet(msg: ParsedMail) -> str:
    body = msg.body or ""
    if _OPENS_WITH_HEADER.match(body):
        # The forwarded message's own date line identifies it; its "From:" line
        # alone matches every message of that sender.
        sent = _SENT_LINE.search(body[:600])
        if not sent:
            return ""
        body = body[sent.start() :]
    return _QUOTE_NOISE.sub(" ", body).strip().lower()[:_SNIPPET_CHARS]


@dataclass
class _Conversation:
    node: str
    others: set[str]
    snippets: list[str]
    start: datetime
    last: datetime = _EPOCH

    def __post_init__(self) -> None:
        self.last = max(self.last, self.start)


def thread_messages(
    messages: list[ParsedMail],
    *,
    owner_addresses: set[str],
    known: Iterable[KnownMessage] = (),
) -> dict[str, list[ParsedMail]]:
    """Group ``messages`` (already deduplicated) into threads.

    Returns ``{thread_id: [messages oldest first]}``. A thread containing a message
    (or a header-less reply to a conversation) known from an earlier import keeps
    that import's thread id; a new thread's id is ``thread_id_for`` its oldest
    message. Spam and trash copies thread like any other message.
    """
    uf = _UnionFind()
    # The sender of a message in a sent folder is the owner, whatever address the
    # export shows (Enron's sent items say k..allen@, its owner is pallen@).
    owner_addresses = set(owner_addresses) | sent_folder_senders(messages)
    known = list(known)
    known_by_key = {k.key: k for k in known}
    for msg in messages:
        node = msg.key
        uf.find(node)
        for ref in [*msg.references, *([msg.in_reply_to] if msg.in_reply_to else [])]:
            uf.union(node, f"<{ref}>")
    for item in known:
        uf.union(item.key, f"thread:{item.thread_id}")

    # Header-less threading by subject, participants and quoted text.
    conversations: dict[str, list[_Conversation]] = defaultdict(list)
    for item in known:
        if item.subject_key:
            others = set(item.participants) - owner_addresses
            conversations[item.subject_key].append(
                _Conversation(
                    f"thread:{item.thread_id}", others, [], item.date or _EPOCH
                )
            )
    ordered = sorted(messages, key=lambda m: (m.date or _EPOCH, m.key))
    # Pass 1: conversation starters (header-threaded messages and originals that
    # neither reply nor quote). Pass 2: header-less replies, in date order, join the
    # conversation whose text they quote, else the latest one started no later than
    # them that shares a participant other than the owner (exported dates can be
    # skewed, so a reply stamped before its original still finds it by quote).
    replies: list[ParsedMail] = []
    present = {m.key for m in messages} | set(known_by_key)
    for msg in ordered:
        key = msg.subject_key or _NO_SUBJECT
        if msg.key in known_by_key:
            continue
        # Headers only thread a message when a referenced message is present
        # (in this import or an earlier one); otherwise, like a header-less reply,
        # it is matched by subject (JWZ's subject pass for missing parents).
        refs = [*msg.references, *([msg.in_reply_to] if msg.in_reply_to else [])]
        has_headers = any(f"<{ref}>" in present for ref in refs)
        if not has_headers and (msg.is_reply() or _quoted(msg)):
            replies.append(msg)
            continue
        others = _people(msg, owner_addresses)
        when = msg.date or _EPOCH
        follow = (
            None
            if has_headers or not others
            else next(
                (
                    c
                    for c in reversed(conversations[key])
                    if c.others == others
                    and timedelta(0) <= when - c.last <= _FOLLOW_UP_GAP
                ),
                None,
            )
        )
        if follow is not None:
            # A new message on the same subject between the same people within
            # days continues their conversation (a client that sends no "Re:").
            uf.union(msg.key, follow.node)
            follow.snippets.append(_snippet(msg))
            follow.last = when
            continue
        conversations[key].append(
            _Conversation(msg.key, others, [_snippet(msg)], msg.date or _EPOCH)
        )
    for msg in replies:
        key = msg.subject_key or _NO_SUBJECT
        others = _people(msg, owner_addresses)
        quoted = _quoted(msg)
        when = msg.date or _EPOCH
        candidates = conversations[key]
        if key == _NO_SUBJECT:
            # Without a subject only a recent conversation is a plausible parent.
            candidates = [
                c for c in candidates if abs((when - c.start).days) <= _NO_SUBJECT_DAYS
            ]
        target: _Conversation | None = None
        if quoted:
            for conv in reversed(candidates):
                if any(len(s) >= _SNIPPET_MIN and s in quoted for s in conv.snippets):
                    target = conv
                    break
        if target is None:
            overlapping = [
                conv
                for conv in candidates
                if (others & conv.others) or (not others and not conv.others)
            ]
            earlier = [conv for conv in overlapping if conv.start <= when]
            if earlier:
                target = max(earlier, key=lambda c: c.start)
            elif overlapping:
                target = min(overlapping, key=lambda c: c.start)
        if target is not None:
            uf.union(msg.key, target.node)
            target.others |= others
            target.snippets.append(_snippet(msg))
            target.last = max(target.last, when)
        else:
            conversations[key].append(
                _Conversation(msg.key, set(others), [_snippet(msg)], when)
            )

    groups: dict[str, list[ParsedMail]] = defaultdict(list)
    for msg in messages:
        groups[uf.find(msg.key)].append(msg)
    # Known thread ids per union-find root.
    known_ids: dict[str, str] = {}
    for node in list(uf.parent):
        if node.startswith("thread:"):
            root = uf.find(node)
            tid = node[len("thread:") :]
            if root not in known_ids or tid < known_ids[root]:
                known_ids[root] = tid
    threads: dict[str, list[ParsedMail]] = {}
    for root, members in groups.items():
        members.sort(key=lambda m: (m.date or _EPOCH, m.key))
        tid = known_ids.get(root) or thread_id_for(members[0].key)
        threads.setdefault(tid, []).extend(members)
    return threads


# Folder names by role, lower-case with runs of space/_/- as one space: English and
# the localised names of Outlook/Exchange, Gmail, Apple Mail and Thunderbird
# (issue 46: "Gesendete Elemente" was not known as sent). SPECIAL-USE (RFC 6154)
# comes first where the server has it; these names are the fallback.
FOLDER_ROLE_NAMES: dict[str, frozenset[str]] = {
    "sent": frozenset(
        {
            "sent",
            "sent items",
            "sent mail",
            "sent messages",
            "outbox",
            "gesendet",
            "gesendete elemente",
            "gesendete objekte",
            "envoyés",
            "éléments envoyés",
            "messages envoyés",
            "enviados",
            "elementos enviados",
            "itens enviados",
            "mensagens enviadas",
            "posta inviata",
            "inviati",
            "elementi inviati",
            "verzonden",
            "verzonden items",
            "verzonden berichten",
            "skickat",
            "skickade objekt",
            "sendt",
            "sendte elementer",
            "lähetetyt",
            "wysłane",
            "elementy wysłane",
            "odeslané",
            "отправленные",
            "已发送",
            "已发送邮件",
            "寄件備份",
            "보낸 편지함",
            "送信済みアイテム",
            "送信済み",
        }
    ),
    "drafts": frozenset(
        {
            "drafts",
            "draft",
            "entwürfe",
            "brouillons",
            "borradores",
            "rascunhos",
            "bozze",
            "concepten",
            "utkast",
            "kladder",
            "luonnokset",
            "kopie robocze",
            "koncepty",
            "черновики",
            "草稿",
            "草稿箱",
            "임시 보관함",
            "下書き",
        }
    ),
    "junk": frozenset({"spam", "junk", "junk e mail", "junk email", "bulk mail"}),
    "trash": frozenset({"trash", "bin", "deleted messages"}),
}


def _folder_segment(segment: str) -> str:
    name = re.sub(r"\.(mbox|mbx)$", "", segment.strip().lstrip(".")).strip()
    return re.sub(r"[\s_-]+", " ", name).strip()


def _segment_roles(folder: str) -> list[str]:
    """The role of each path segment of ``folder`` that has one, innermost first."""
    roles = []
    for segment in re.split(r"[\\/]", unicodedata.normalize("NFC", folder).lower()):
        name = _folder_segment(segment)
        roles += [role for role, names in FOLDER_ROLE_NAMES.items() if name in names]
    return roles[::-1]


def folder_role(folder: str) -> str:
    """The role a folder's name says: ``sent``, ``drafts``, ``junk``, ``trash`` or
    '' (case-insensitive; the innermost path segment with a role; localised names
    from ``FOLDER_ROLE_NAMES``). Outlook's "Deleted Items" is read mail put away,
    not trash, and gets no role."""
    roles = _segment_roles(folder)
    return roles[0] if roles else ""


def folder_labels(folder: str) -> list[str]:
    """Gmail-like labels implied by a mailbox folder name (``folder_role`` of each
    segment): sent folders → SENT, spam/junk → SPAM, trash/bin → TRASH (SPEC §5.1,
    §6.2)."""
    label = {"sent": SENT, "junk": SPAM, "trash": TRASH}
    return sorted({label[r] for r in _segment_roles(folder) if r in label})


# Bulk-mail signals for mailbox files, which carry no Gmail category labels: RFC 2076
# ``Precedence: bulk|junk|list``, an RFC 2919 ``List-Id``, or the unsubscribe /
# automated-notice wording that mass mailers put in the body (exports such as Enron's
# dropped the List-Unsubscribe headers but kept the text).
_PRECEDENCE_BULK = re.compile(r"^precedence:\s*(bulk|junk|list)\b", re.I | re.M)
_LIST_ID = re.compile(r"^list-id:", re.I | re.M)
_BULK_WORDING = re.compile(
    r"(click here to (be )?(unsubscribe|removed)"
    r"|\bunsubscribe\b"
    r"|(do not|no longer) wish to receive (future|further|these|our)"
    r"|to be removed from (our|this|the) (mailing |e-?mail |distribution )?list"
    r"|this (e-?mail|message) is (an )?automated (notification|message))",
    re.I,
)


def bulk_labels(*, raw: str, text: str) -> list[str]:
    """Return ``["CATEGORY_PROMOTIONS"]`` when a mailbox-file message looks like bulk
    mail, else ``[]``: the stand-in for Gmail's category labels so SPEC §5.2 rule 4
    (bulk category and I never wrote in it: no loop) works for exported mailboxes.

    ``raw`` is the message as text (only its header block is read); ``text`` the
    decoded body."""
    headers = raw.split("\n\n", 1)[0].replace("\r", "")
    if _PRECEDENCE_BULK.search(headers) or _LIST_ID.search(headers):
        return ["CATEGORY_PROMOTIONS"]
    if _BULK_WORDING.search(text or ""):
        return ["CATEGORY_PROMOTIONS"]
    return []
