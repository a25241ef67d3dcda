"""Thread pages and person pages rendered from ``MailMessage`` lists (SPEC §6.1,
§6.2). Pure functions: no database, no network."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from brain.text import slugify_title
from connectors.mail.parsing import strip_reply_prefix
from loops.definitions import is_noise_sender

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import date, datetime

    from loops.message import MailMessage

SUBJECT_SLUG_CHARS = 48
NO_SUBJECT = "(no subject)"


@dataclass
class RenderedPage:
    """What a connector hands to ``page_write``: slug, title, frontmatter (JSON),
    markdown body, summary and the effective date."""

    slug: str
    title: str
    frontmatter: dict[str, Any]
    body: str
    summary: str
    effective_date: date | None


def short_hash(value: str) -> str:
    """First 8 hex characters of SHA-256 of ``value``."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest()[:8]


def thread_slug(*, first_date: datetime | None, subject: str, thread_id: str) -> str:
    """SPEC §6.1: ``emails/YYYY/MM/YYYY-MM-DD-<subject-slug>-<8 hex of thread id>``,
    keyed on the first message's date so it never moves (``emails/undated/…``
    when no message has a date)."""
    words = slugify_title(strip_reply_prefix(subject), max_length=SUBJECT_SLUG_CHARS)
    words = words or "no-subject"
    tail = f"{words}-{short_hash(thread_id)}"
    if first_date is None:
        return f"emails/undated/{tail}"
    return f"emails/{first_date:%Y/%m}/{first_date:%Y-%m-%d}-{tail}"


def is_noise_thread(messages: Iterable[MailMessage]) -> bool:
    """True when every message comes from a noise sender (SPEC §6.1: not rendered)."""
    items = list(messages)
    return bool(items) and all(is_noise_sender(m.from_addr) for m in items)


def _who(msg: MailMessage) -> str:
    if msg.from_name and msg.from_addr:
        return f"{msg.from_name} <{msg.from_addr}>"
    return msg.from_addr or msg.from_name or "(unknown sender)"


def _message_section(msg: MailMessage) -> str:
    mark = "→ " if msg.is_mine else ""
    when = f" · {msg.date:%Y-%m-%d %H:%M}" if msg.date else ""
    lines = [f"## {mark}{_who(msg)}{when}"]
    meta = []
    if msg.link:
        meta.append(f"[message]({msg.link})")
    if msg.to:
        meta.append("To: " + ", ".join(msg.to))
    if msg.cc:
        meta.append("Cc: " + ", ".join(msg.cc))
    if meta:
        lines.append(" · ".join(meta))
    if msg.attachments:
        names = ", ".join(
            a.get("filename") or a.get("mime_type", "") for a in msg.attachments
        )
        lines.append(f"Attachments: {names}")
    lines.append("")
    lines.append(msg.body.strip() or "(no text)")
    return "\n".join(lines)


def render_thread(
    *, thread_id: str, messages: list[MailMessage], account: str
) -> RenderedPage:
    """Render one thread page (SPEC §6.1). ``messages`` oldest first; the subject is
    the first message's; frontmatter ``from/to/cc/date`` describe the last message."""
    first, last = messages[0], messages[-1]
    subject = next((m.subject for m in messages if m.subject), "") or NO_SUBJECT
    dated = [m.date for m in messages if m.date]
    first_date = min(dated) if dated else None
    last_date = max(dated) if dated else None
    participants: set[str] = set()
    senders: set[str] = set()
    labels: set[str] = set()
    for msg in messages:
        if msg.from_addr:
            participants.add(msg.from_addr)
            senders.add(msg.from_addr)
        participants.update(msg.to)
        participants.update(msg.cc)
        labels.update(msg.labels)
    frontmatter: dict[str, Any] = {
        "thread_id": thread_id,
        "message_ids": [m.message_id for m in messages],
        "account": account,
        "from": last.from_addr,
        "to": list(last.to),
        "cc": list(last.cc),
        "date": last_date.isoformat() if last_date else None,
        "first_message_date": first_date.isoformat() if first_date else None,
        "message_count": len(messages),
        "participants": sorted(participants),
        "senders": sorted(senders),
        "labels": sorted(labels),
    }
    sections = [f"# {strip_reply_prefix(subject) or subject}"]
    sections += [_message_section(m) for m in messages]
    body = "\n\n".join(sections) + "\n"
    summary_source = next((m.body for m in messages if m.body.strip()), "")
    summary = " ".join(summary_source.split())[:200]
    return RenderedPage(
        slug=thread_slug(
            first_date=first_date, subject=first.subject or subject, thread_id=thread_id
        ),
        title=subject[:500],
        frontmatter=frontmatter,
        body=body,
        summary=summary,
        effective_date=first_date.date() if first_date else None,
    )


@dataclass
class Correspondent:
    """Someone the owner corresponded with: address, display names seen, threads."""

    addr: str
    names: Counter[str]
    thread_ids: set[str]

    @property
    def name(self) -> str:
        """The most frequent display name, else ''."""
        return self.names.most_common(1)[0][0] if self.names else ""


def display_names(messages: Iterable[Any]) -> dict[str, Counter[str]]:
    """Display names seen for each address in parsed messages (``ParsedMail``),
    counted, as written: every pair of ``ParsedMail.names`` (From, To, Cc,
    Reply-To, Sender and the export headers X-From, X-To, X-cc)."""
    names: dict[str, Counter[str]] = {}
    for msg in messages:
        for addr, name in msg.names:
            names.setdefault(addr, Counter())[name] += 1
    return names


def correspondents(
    threads: dict[str, list[MailMessage]],
    *,
    owner_addresses: set[str],
    names: dict[str, Counter[str]] | None = None,
) -> dict[str, Correspondent]:
    """SPEC §6.2: people the owner actually corresponded with: the To/Cc of the
    owner's messages (wrote to) and the senders of messages that follow one of the
    owner's in a thread (got a reply from). Someone who only wrote to the owner, or
    whose mail the owner only forwarded elsewhere, is not a correspondent. Owner
    addresses and noise senders are left out.

    Display names come from the messages the address sent, plus ``names`` (every
    From/To/Cc display name of the mailbox, see ``display_names``).
    """
    found: dict[str, Correspondent] = {}

    def add(addr: str, thread_id: str) -> None:
        if not addr or addr in owner_addresses or is_noise_sender(addr):
            return
        entry = found.setdefault(addr, Correspondent(addr, Counter(), set()))
        entry.thread_ids.add(thread_id)

    for thread_id, messages in threads.items():
        mine = [m for m in messages if m.is_mine]
        if not mine:
            continue
        for msg in mine:
            for addr in (*msg.to, *msg.cc):
                add(addr, thread_id)
        wrote = False
        for msg in messages:  # oldest first: a reply comes after a message of mine
            if msg.is_mine:
                wrote = True
            elif wrote:
                add(msg.from_addr, thread_id)
    for messages in threads.values():
        for msg in messages:
            if msg.from_addr in found and msg.from_name and "@" not in msg.from_name:
                found[msg.from_addr].names[msg.from_name] += 1
    for addr, entry in found.items():
        # Names from the whole mailbox: the first thread with someone may only
        # show their bare address.
        entry.names.update((names or {}).get(addr, Counter()))
    return found
