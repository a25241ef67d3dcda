"""Storing threads and people through the one write function (SPEC §2.3, §6).

A batch of threads is written with ONE ``pages_write`` call (mode ``upsert``): the
thread pages, one raw record per new message and the page revisions commit
together, and the ledger rows of those messages join the same transaction, so a
crash never leaves half a thread and a re-run never stores a message twice.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db import connection, transaction

from brain.access import local_caller
from brain.bulk import bulk_insert
from brain.exceptions import BrainError
from brain.models import Page, RawRecord, Source
from brain.services.pages import (
    PageInput,
    RawInput,
    pages_write,
    raws_store,
)
from brain.services.people import people_resolve
from connectors.mail.render import (
    correspondents,
    is_noise_thread,
    render_thread,
)
from connectors.models import ImportedItem
from loops.definitions import is_noise_sender
from loops.message import MailMessage
from loops.selectors import threads_pages

if TYPE_CHECKING:
    from collections import Counter
    from collections.abc import Iterator, Sequence

    from connectors.base import SyncReport
    from connectors.mail.parsing import ParsedMail

logger = logging.getLogger(__name__)

NOISE_REASON = "noise-only thread"


@dataclass
class ThreadWork:
    """One thread to write: every message of it (oldest first, earlier imports
    included) and the keys of the messages not yet in the ledger."""

    thread_id: str
    # (ledger key, message) pairs, oldest first.
    entries: list[tuple[str, MailMessage]]
    parsed: dict[str, ParsedMail] = field(default_factory=dict)
    new_keys: set[str] = field(default_factory=set)

    @property
    def messages(self) -> list[MailMessage]:
        """The thread's messages, oldest first."""
        return [message for _key, message in self.entries]


@contextmanager
def bulk_transaction() -> Iterator[None]:
    """One transaction for a batch of threads, committed without waiting for the
    WAL flush (``synchronous_commit = off`` for this transaction only).

    A crash can lose the last batches acknowledged before it, never half of one:
    the ledger lost with them makes the next run write them again. Each thread
    inside is still its own savepoint, so one failing thread is rolled back alone.
    """
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
        yield


def to_mail_message(
    parsed: ParsedMail, *, thread_id: str, is_mine: bool, link: str | None
) -> MailMessage:
    """The loops contract (``loops.message.MailMessage``) for a parsed message."""
    return MailMessage(
        message_id=parsed.gmail_id or parsed.message_id or parsed.key,
        thread_id=thread_id,
        subject=parsed.subject,
        from_addr=parsed.from_addr,
        from_name=parsed.from_.name if parsed.from_ else "",
        to=[a.addr for a in parsed.to],
        cc=[a.addr for a in parsed.cc],
        bcc=[a.addr for a in parsed.bcc],
        date=parsed.date,
        is_mine=is_mine,
        labels=sorted(set(parsed.labels)),
        list_unsubscribe=parsed.list_unsubscribe,
        mailing_list=parsed.mailing_list,
        auto_submitted=parsed.auto_submitted,
        calendar_method=parsed.calendar_method,
        in_reply_to=parsed.in_reply_to,
        references=list(parsed.references),
        body=parsed.body,
        attachments=list(parsed.attachments),
        link=link,
        html_only=parsed.html_only,
        failed_recipients=list(parsed.failed_recipients),
        replied_to=(
            {
                "address": parsed.replied_to.address,
                "name": parsed.replied_to.name[:200],
                "date": (
                    parsed.replied_to.date.isoformat()
                    if parsed.replied_to.date
                    else None
                ),
            }
            if parsed.replied_to is not None
            else None
        ),
    )


def _raw_input(parsed: ParsedMail, message: MailMessage, *, kind: str) -> RawInput:
    metadata = message.to_metadata()
    metadata["ledger_key"] = parsed.key
    metadata["folder"] = parsed.folder
    if parsed.defects:
        metadata["defects"] = parsed.defects[:20]
    if kind == RawRecord.Kind.GMAIL_MESSAGE:
        return RawInput(
            external_id=parsed.key,
            kind=kind,
            content="",
            payload=parsed.gmail_payload,
            metadata=metadata,
        )
    return RawInput(
        external_id=parsed.key,
        kind=kind,
        content=parsed.raw,
        payload=None,
        metadata=metadata,
        data=parsed.raw_bytes,
    )


def threads_store(
    *,
    source: Source,
    works: Sequence[ThreadWork],
    account: str,
    kind: str,
    actor: str,
    embed: bool,
    report: SyncReport,
) -> dict[str, Page | BrainError | None]:
    """Write a batch of threads in one transaction: their pages (one
    ``pages_write`` call), the raw records of their new messages and the ledger
    rows, with a constant number of statements per batch (SPEC §11 ingest rate).

    Threads whose every message is from a noise sender are not rendered: their
    messages are stored as raw records without a page and ledgered with the
    reason ``noise-only thread`` (counted ``noise``). Returns, per thread id, the
    page, ``None`` (noise) or the ``BrainError`` that refused the thread's page;
    nothing of a refused thread is stored (no raw record, no ledger row): the
    caller holds its messages.
    """
    outcome: dict[str, Page | BrainError | None] = {}
    rows: list[dict[str, Any]] = []
    writing: list[ThreadWork] = []
    items: list[PageInput] = []
    noise: list[ThreadWork] = []
    with transaction.atomic():
        pages = threads_pages(
            source_id=source.id, thread_ids=[w.thread_id for w in works]
        )
        for work in works:
            new_count = len(work.new_keys & set(work.parsed))
            if is_noise_thread(work.messages):
                noise.append(work)
                report.skipped[NOISE_REASON] += new_count
                report.counts["noise"] += new_count
                outcome[work.thread_id] = None
                continue
            rendered = render_thread(
                thread_id=work.thread_id, messages=work.messages, account=account
            )
            items.append(
                PageInput(
                    mode="upsert",
                    # The page a thread already has keeps its slug, even when an
                    # older message arrives later (SPEC §6.1: the slug never moves).
                    slug=(
                        pages[work.thread_id].slug
                        if work.thread_id in pages
                        else rendered.slug
                    ),
                    title=rendered.title,
                    body=rendered.body,
                    type_name="email",
                    summary=rendered.summary,
                    frontmatter=rendered.frontmatter,
                    effective_date=rendered.effective_date,
                    raws=[
                        _raw_input(work.parsed[k], m, kind=kind)
                        for k, m in work.entries
                        if k in work.new_keys and k in work.parsed
                    ],
                    provenance={"connector": kind, "thread_id": work.thread_id},
                )
            )
            writing.append(work)
        noise_raws = raws_store(
            source=source,
            raws=[
                _raw_input(work.parsed[k], m, kind=kind)
                for work in noise
                for k, m in work.entries
                if k in work.new_keys and k in work.parsed
            ],
        )
        for work in noise:
            rows += _ledger_rows(
                source=source,
                work=work,
                page=None,
                outcome=ImportedItem.Outcome.SKIPPED,
                raw_ids={key: r.pk for key, r in noise_raws.items()},
            )
        results = pages_write(
            source=source,
            actor=local_caller(actor=actor),
            items=items,
            embed=embed,
            errors="collect",
        )
        for work, result in zip(writing, results, strict=True):
            if isinstance(result, BrainError):
                outcome[work.thread_id] = result
                continue
            rows += _ledger_rows(
                source=source,
                work=work,
                page=result.page,
                outcome=ImportedItem.Outcome.STORED,
                raw_ids={r.external_id: r.pk for r in result.raw_records},
            )
            outcome[work.thread_id] = result.page
            report.counts["messages"] += len(work.new_keys & set(work.parsed))
            report.counts["threads"] += 1
            report.counts["pages"] += 1
            report.thread_ids.append(work.thread_id)
        _ledger_save(rows)
    return outcome


def _ledger_rows(
    *,
    source: Source,
    work: ThreadWork,
    page: Page | None,
    outcome: str,
    raw_ids: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """The ledger rows of ``work``'s new messages, as ``ImportedItem`` column
    values (attnames) for ``bulk_insert``."""
    rows = []
    raw_ids = raw_ids or {}
    reason = "" if outcome == ImportedItem.Outcome.STORED else NOISE_REASON
    page_id = page.pk if page is not None else None
    for key in work.new_keys:
        parsed = work.parsed.get(key)
        if parsed is None:
            continue
        rows.append(
            {
                "source_id": source.pk,
                "external_id": key,
                "kind": ImportedItem.Kind.MESSAGE,
                "content_hash": parsed.fingerprint,
                "thread_id": work.thread_id,
                "subject_key": parsed.subject_key,
                "participants": sorted(parsed.participants()),
                "outcome": outcome,
                "reason": reason,
                "raw_record_id": raw_ids.get(key),
                "page_id": page_id,
            }
        )
    return rows


def _ledger_save(rows: list[dict[str, Any]]) -> None:
    """Insert ledger rows in one statement; a re-written message (Gmail label
    change) updates its row in place."""
    unique = {row["external_id"]: row for row in rows}  # one row per key and statement
    bulk_insert(
        ImportedItem,
        list(unique.values()),
        conflict=["source", "external_id"],
        update=["content_hash", "thread_id", "page", "raw_record", "outcome", "reason"],
    )


def people_store(
    *,
    source: Source,
    threads: dict[str, list[MailMessage]],
    owner_addresses: set[str],
    actor: str,
    embed: bool,
    report: SyncReport,
    names: dict[str, Counter[str]] | None = None,
) -> int:
    """Resolve the people of ``threads`` through ``brain.services.people`` (SPEC
    §6.2, issue 25): correspondents (``correspondents``) may get a new person page;
    every address of the threads that already has one gains the names seen with
    it (``names``: every header of the mailbox, ``display_names``). Owner addresses
    learned from names (the owner's personal mailbox) join ``owner_addresses``.
    Returns pages created (also counted in ``report.counts["people"]``)."""
    found = correspondents(threads, owner_addresses=owner_addresses, names=names)
    seen: set[str] = set(found)
    for messages in threads.values():
        for msg in messages:
            seen.update(a for a in (msg.from_addr, *msg.to, *msg.cc) if a)
    sightings = {addr: dict((names or {}).get(addr, {})) for addr in seen}
    for addr in owner_addresses:
        sightings.setdefault(addr, dict((names or {}).get(addr, {})))
    for addr, person in found.items():
        for name, count in person.names.items():
            sightings[addr][name] = max(sightings[addr].get(name, 0), count)
    outcome = people_resolve(
        source=source,
        sightings=sightings,
        create=[a for a in found if not is_noise_sender(a)],
        owner_addresses=owner_addresses,
        actor=actor,
        embed=embed,
        origin="mail",
    )
    if outcome.owner_addresses - owner_addresses:
        owner_addresses |= outcome.owner_addresses
    report.counts["people"] += outcome.created
    if outcome.updated:
        report.counts["people_updated"] += outcome.updated
    return outcome.created
