"""Mailbox import: mbox, maildir and .eml folders → raw records, thread pages,
person pages and loop detection (SPEC §6.2).

``mailbox_import`` is idempotent and resumable: the whole mailbox is parsed and
threaded in memory (deterministically), threads whose messages are all in the
ledger are skipped, the rest are written in batches: one transaction per batch
holding one ``pages_write`` for its thread pages (``threads_store``), one for the
new person pages (``people_store``) and ``loops.pipeline.process_threads`` on its
threads. A run killed halfway leaves complete threads only; the next run writes the
others.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from brain.exceptions import BrainError
from brain.models import RawRecord, Source
from brain.services.sources import source_ensure
from connectors.base import (
    ChangeBatch,
    Connector,
    ConnectorError,
    ProgressFn,
    SyncReport,
)
from connectors.mail.parsing import ParsedMail, parse_rfc822
from connectors.mail.render import display_names
from connectors.mail.store import (
    ThreadWork,
    bulk_transaction,
    people_store,
    threads_store,
    to_mail_message,
)
from connectors.mail.threading import (
    KnownMessage,
    bulk_labels,
    dedupe,
    folder_labels,
    sent_folder_senders,
    thread_messages,
)
from connectors.mailbox.client import MailboxEntry, iter_mailbox
from connectors.models import ImportedItem
from connectors.services import sync_run_finish, sync_run_start
from loops.definitions import is_mine
from loops.message import MailMessage
from loops.pipeline import process_threads
from loops.selectors import newest_message_at

if TYPE_CHECKING:
    from collections.abc import Iterator

BATCH_THREADS = 200
PARALLEL_PARSE_MIN = 400  # messages; below this a process pool costs more than it saves
PARALLEL_PARSE_MAX_WORKERS = 4
PARALLEL_PARSE_CHUNK = 50
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_entry(entry: MailboxEntry) -> ParsedMail | str:
    """Parse one mailbox entry and label it (folder labels, inferred bulk label;
    SPEC §6.2). Returns the ``ParsedMail`` or, for a file that is not mail, the
    skip reason."""
    try:
        msg = parse_rfc822(entry.data, folder=entry.folder)
    except ConnectorError as exc:
        return f"unparseable: {exc.message}"
    msg.labels = sorted(
        set(folder_labels(entry.folder))
        | set(bulk_labels(raw=msg.raw, text=msg.full_text))
    )
    return msg


def _exit_with_parent(parent: int) -> None:
    """Pool worker initializer: leave (``os._exit``) as soon as the importing
    process is gone, so a killed import (SIGTERM, SIGKILL) leaves no parser behind
    holding a copy of its database socket."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def parse_entries(entries: list[MailboxEntry]) -> Iterator[ParsedMail | str]:
    """``parse_entry`` over ``entries``, in order, on every core (SPEC §11 ingest
    rate: parsing is pure CPU work and needs no database).

    Mailboxes smaller than ``PARALLEL_PARSE_MIN`` messages, one-core machines,
    platforms without ``fork`` and daemonic processes (a django-q worker may not
    have children) parse in this process. The pool forks: children never touch
    the inherited database connection, leave through ``os._exit`` (so it stays
    the parent's) and exit when the parent dies.
    """
    workers = min(os.cpu_count() or 1, PARALLEL_PARSE_MAX_WORKERS)
    if (
        len(entries) < PARALLEL_PARSE_MIN
        or workers < 2
        or multiprocessing.current_process().daemon
        or "fork" not in multiprocessing.get_all_start_methods()
    ):
        yield from map(parse_entry, entries)
        return
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_exit_with_parent,
        initargs=(os.getpid(),),
    ) as pool:
        yield from pool.map(parse_entry, entries, chunksize=PARALLEL_PARSE_CHUNK)


def message_link(parsed: ParsedMail) -> str | None:
    """A link to the original message: ``mid:`` URL (RFC 2392) of its Message-ID."""
    return f"mid:{parsed.message_id}" if parsed.message_id else None


@dataclass
class _Prepared:
    works: list[ThreadWork] = field(default_factory=list)
    duplicates: list[tuple[ParsedMail, ParsedMail, str]] = field(default_factory=list)
    owners: set[str] = field(default_factory=set)


class MailboxConnector(Connector):
    """Reads a mailbox path and writes its threads (SPEC §6.2).

    ``fetch_changes`` parses, deduplicates and threads the whole mailbox (no DB
    writes) and yields batches of threads with new messages; ``apply`` writes a
    batch, creates person pages for its correspondents and runs loop detection.
    """

    kind = "mailbox"

    def __init__(
        self,
        *,
        source: Source,
        path: str | Path,
        owners: set[str],
        embed: bool = False,
        progress: ProgressFn | None = None,
        batch_threads: int = BATCH_THREADS,
    ) -> None:
        self.source = source
        self.path = Path(path)
        self.owners = {o.lower() for o in owners}
        self.embed = embed
        self.progress = progress
        self.batch_threads = batch_threads
        self.report = SyncReport(source_id=source.id, kind=self.kind)
        self.account = ", ".join(sorted(self.owners)) or str(self.path)

    # --- fetch -------------------------------------------------------------------

    def entries(self) -> list[MailboxEntry]:
        """The raw messages to import, in a stable order. Messages at the top of
        the path belong to the folder the path names, so importing ``…/sent_items``
        alone still marks them as sent (SPEC §6.2). The IMAP connector overrides
        this with the messages it fetched (SPEC §6.1a)."""
        root = self.path.stem
        return [
            entry if entry.folder else replace(entry, folder=root)
            for entry in iter_mailbox(self.path)
        ]

    def _parse_all(self) -> list[ParsedMail]:
        entries = self.entries()
        total = len(entries)
        parsed: list[ParsedMail] = []
        for index, result in enumerate(parse_entries(entries), 1):
            if isinstance(result, str):
                self.report.skipped[result] += 1
            else:
                parsed.append(result)
            if self.progress and (index % 200 == 0 or index == total):
                self.progress("parse", index, total)
        self.report.counts["files"] = total
        return parsed

    def _learn_owners(self, messages: list[ParsedMail]) -> None:
        """The regular senders of sent-folder messages are the owner (SPEC §6.2)."""
        new = sorted(sent_folder_senders(messages) - self.owners)
        if new:
            self.owners |= set(new)
            self.report.warnings.append(
                "Owner addresses learned from sent folders: " + ", ".join(new)
            )

    def prepare(self) -> _Prepared:
        """Parse, deduplicate and thread the mailbox; decide which threads have
        messages not yet in the ledger."""
        parsed = self._parse_all()
        self._learn_owners(parsed)
        self.names = display_names(parsed)
        unique, duplicates = dedupe(parsed)
        if duplicates:
            self.report.skipped["duplicate copy"] += len(duplicates)

        ledger = ImportedItem.objects.filter(source=self.source)
        keys = [m.key for m in unique]
        hashes = [m.fingerprint for m in unique]
        stored_by_key: dict[str, str] = {}
        for key, tid in ledger.filter(external_id__in=keys).values_list(
            "external_id", "thread_id"
        ):
            stored_by_key[key] = tid
        stored_hashes: dict[str, str] = {}
        for content_hash, key in ledger.filter(content_hash__in=hashes).values_list(
            "content_hash", "external_id"
        ):
            stored_hashes[content_hash] = key
        # Messages already stored (by key, or as a copy with another Message-ID).
        already = {
            m.key
            for m in unique
            if m.key in stored_by_key
            or stored_hashes.get(m.fingerprint) not in (None, m.key)
        }
        subject_keys = {m.subject_key for m in unique if m.subject_key}
        known_rows = (
            ledger.filter(subject_key__in=list(subject_keys))
            .exclude(external_id__in=keys)
            .values_list("external_id", "thread_id", "subject_key", "participants")
        )
        known = [
            KnownMessage(key, tid, skey, tuple(parts or ()), None)
            for key, tid, skey, parts in known_rows
            if tid
        ]
        known += [
            KnownMessage(
                m.key,
                stored_by_key[m.key],
                m.subject_key,
                tuple(sorted(m.participants())),
                m.date,
            )
            for m in unique
            if m.key in stored_by_key and stored_by_key[m.key]
        ]
        fresh = [m for m in unique if m.key not in stored_by_key]
        threads = thread_messages(
            [*fresh, *(m for m in unique if m.key in stored_by_key)],
            owner_addresses=self.owners,
            known=known,
        )
        known_threads = {k.thread_id for k in known}
        prepared = _Prepared(owners=self.owners)
        for thread_id in sorted(
            threads, key=lambda t: (threads[t][0].date is None, threads[t][0].date, t)
        ):
            members = threads[thread_id]
            new_keys = {m.key for m in members if m.key not in already}
            if not new_keys:
                self.report.skipped["already imported"] += len(members)
                continue
            entries = [
                (
                    m.key,
                    to_mail_message(
                        m,
                        thread_id=thread_id,
                        is_mine=is_mine(m, self.owners),
                        link=message_link(m),
                    ),
                )
                for m in members
                if m.key not in already or m.key in stored_by_key
            ]
            if thread_id in known_threads:
                entries = self._with_stored_messages(thread_id, entries)
            prepared.works.append(
                ThreadWork(
                    thread_id=thread_id,
                    entries=entries,
                    parsed={m.key: m for m in members},
                    new_keys=new_keys,
                )
            )
        kept_thread = {m.key: tid for tid, members in threads.items() for m in members}
        for dup, kept in duplicates:
            if dup.key != kept.key:
                prepared.duplicates.append((dup, kept, kept_thread.get(kept.key, "")))
        return prepared

    def _with_stored_messages(
        self, thread_id: str, entries: list[tuple[str, MailMessage]]
    ) -> list[tuple[str, MailMessage]]:
        """Add messages of ``thread_id`` stored by earlier imports but absent from
        this mailbox, so the re-rendered page keeps them."""
        present = {key for key, _ in entries}
        rows = RawRecord.objects.filter(
            source=self.source, metadata__thread_id=thread_id
        ).values_list("id", "external_id", "metadata")
        merged = list(entries)
        for raw_id, external_id, metadata in rows:
            if external_id not in present:
                merged.append(
                    (
                        external_id,
                        MailMessage.from_metadata(metadata, raw_record_id=raw_id),
                    )
                )
        merged.sort(key=lambda item: (item[1].date or _EPOCH, item[0]))
        return merged

    def fetch_changes(self, cursor: dict[str, Any]) -> Iterator[ChangeBatch]:
        """Yield batches of ``batch_threads`` threads with new messages."""
        prepared = self.prepare()
        if self.owners - set(self.source.owner_addresses):
            # Detection reads the source's owners: addresses learned from sent
            # folders must count from the first batch on.
            self.source = source_ensure(
                source_id=self.source.id,
                kind=self.source.kind,
                owner_addresses=self.owners,
            )
        self.reference = self._reference_time(prepared)
        self._duplicates = prepared.duplicates
        self._total = len(prepared.works)
        self._done = 0
        for start in range(0, len(prepared.works), self.batch_threads):
            batch = prepared.works[start : start + self.batch_threads]
            yield ChangeBatch(
                stream="threads",
                items=batch,
                cursor={"path": str(self.path), "threads_done": start + len(batch)},
            )

    def _reference_time(self, prepared: _Prepared) -> datetime | None:
        """The import's "now" for loop detection (SPEC §5.2 mailbox reference time):
        the newest message of the source once this mailbox is in, leaving out dates
        after the wall clock (a wrong clock). Every batch uses it, so the loops
        found do not depend on the batch size or on where an import resumed.
        When every message is dated after the wall clock, the newest one is used
        and the report says so (the mailbox still gets its loops)."""
        wall = timezone.now()
        dated = [m.date for work in prepared.works for m in work.messages if m.date]
        dates = [d for d in dated if d <= wall]
        stored = newest_message_at(source_id=self.source.id, until=wall)
        reference = max([*dates, *([stored] if stored else [])], default=None)
        if reference is None and dated:
            reference = max(dated)
            self.report.warnings.append(
                f"Every message is dated after this machine's clock "
                f"({wall:%Y-%m-%d %H:%M} UTC); open loops are computed as of the "
                f"newest message ({reference:%Y-%m-%d %H:%M} UTC)."
            )
        return reference

    # --- apply -------------------------------------------------------------------

    def apply(self, batch: ChangeBatch, report: SyncReport) -> None:
        """Write the batch's threads and their person pages and run loop detection
        on them, in one transaction: an import killed at any point leaves no
        stored thread without its detection (a re-run writes and detects it)."""
        stored: dict[str, list[MailMessage]] = {}
        with bulk_transaction():
            self._apply_threads(batch, report, stored)
            people_store(
                source=self.source,
                threads=stored,
                owner_addresses=self.owners,
                actor=f"connector:{self.kind}",
                embed=self.embed,
                report=report,
                names=getattr(self, "names", None),
            )
            if stored:
                reference = getattr(self, "reference", None)
                process_threads(
                    source_id=self.source.id,
                    thread_ids=list(stored),
                    now=reference,
                    source_newest=reference,
                )

    def _apply_threads(
        self,
        batch: ChangeBatch,
        report: SyncReport,
        stored: dict[str, list[MailMessage]],
    ) -> None:
        outcome = threads_store(
            source=self.source,
            works=batch.items,
            account=self.account,
            kind=RawRecord.Kind.RFC822,
            actor=f"connector:{self.kind}",
            embed=self.embed,
            report=report,
        )
        for work in batch.items:
            result = outcome.get(work.thread_id)
            if isinstance(result, BrainError):
                # Nothing of this thread was stored; a re-run retries it.
                report.skipped[f"thread refused: {result.code}"] += len(work.new_keys)
            elif result is not None:
                stored[work.thread_id] = work.messages
        self._done += len(batch.items)
        if self.progress:
            self.progress("threads", self._done, self._total)

    def finish(self) -> None:
        """Ledger the duplicate copies (after every thread is stored)."""
        rows = [
            ImportedItem(
                source=self.source,
                external_id=dup.key,
                kind=ImportedItem.Kind.DUPLICATE,
                content_hash=dup.fingerprint,
                thread_id=thread_id,
                subject_key=dup.subject_key,
                outcome=ImportedItem.Outcome.SKIPPED,
                reason=f"copy of {kept.key}"[:200],
            )
            for dup, kept, thread_id in getattr(self, "_duplicates", [])
        ]
        ImportedItem.objects.bulk_create(rows, ignore_conflicts=True, batch_size=500)


def mailbox_import(
    *,
    source_id: str,
    path: str | Path,
    owners: list[str] | tuple[str, ...] = (),
    progress: ProgressFn | None = None,
    embed: bool = False,
    actor: str = "cli",
    batch_threads: int = BATCH_THREADS,
) -> SyncReport:
    """Import a mailbox file or folder into the ``mailbox`` source ``source_id``
    (created when missing, SPEC §2.1, §6.2).

    Returns a ``SyncReport`` with counts messages, threads, pages, people, files
    and skipped reasons (already imported, duplicate copy, noise-only thread,
    unparseable). Idempotent: a second run stores nothing. Raises
    ``MailboxPathError`` (permanent) for a missing path and ``InvalidParams`` for a
    bad source id. Threads are committed in batches of ``batch_threads`` (one
    transaction each). ``progress(step, done, total)`` is called while parsing and
    after each batch; an exception it raises stops the import: the batch in
    flight rolls back whole, earlier batches stay, a re-run writes the rest.
    """
    path = Path(path)
    source = source_ensure(
        source_id=source_id,
        kind=Source.Kind.MAILBOX,
        name=source_id,
        owner_addresses=owners,
    )
    # The stored path lets ``sync_source`` re-run the import (new mail appended).
    config = dict(source.config or {})
    if config.get("path") != str(path.resolve()):
        config["path"] = str(path.resolve())
        Source.objects.filter(pk=source.pk).update(config=config)
    connector = MailboxConnector(
        source=source,
        path=path,
        owners=set(source.owner_addresses) | {o.lower() for o in owners},
        embed=embed,
        progress=progress,
        batch_threads=batch_threads,
    )
    run = sync_run_start(source=source, kind="import_mail", actor=actor)
    report = connector.report
    report.run_id = run.pk
    try:
        connector.run(
            cursor=dict((source.cursor or {}).get("mailbox", {})),
            save_cursor=lambda c: _save_cursor(source, c),
            report=report,
        )
        connector.finish()
    except BaseException as exc:
        report.status = "failed"
        sync_run_finish(run=run, report=report, error=f"{type(exc).__name__}: {exc}")
        raise
    sync_run_finish(run=run, report=report)
    return report


def _save_cursor(source: Source, cursor: dict[str, Any]) -> None:
    merged = {**(source.cursor or {}), "mailbox": cursor}
    source.cursor = merged
    Source.objects.filter(pk=source.pk).update(cursor=merged)
