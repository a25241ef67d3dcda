"""Mailbox import: mbox, maildir and .eml folders → raw records, thread pages,
person pages and loop detection (SPEC §6.2).

``mailbox_import`` is idempotent and resumable: the whole mailbox is parsed and
threaded in memory (deterministically), threads whose messages are all in the
ledger are skipped, the rest are written in batches: one transaction per batch
holding one ``pages_write`` for its thread pages (``threads_store``), one for the
new person pages (``people_store``) and ``loops.pipeline.process_threads`` on its
threads. A run killed halfway leaves complete threads only; the next run writes the
others.

Every item read is stored, a duplicate or held (SPEC §6 "Every importer", the rule
in ``connectors.mail.intake``): the report's ``items`` equals ``stored +
duplicates + held``. A batch the database refuses is retried thread by thread and
only the failing threads' messages are held; one bad message never aborts the
import. ``mail_entries_import`` runs the same pipeline on entries read elsewhere
(IMAP, the admin's "retry" of held items).
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.db import InterfaceError, OperationalError
from django.utils import timezone

from brain.exceptions import BrainError
from brain.models import RawRecord, Source
from brain.services.sources import source_ensure
from connectors.base import (
    ChangeBatch,
    Connector,
    ProgressFn,
    SyncReport,
)
from connectors.mail.intake import (
    TWIN_DEFECT,
    Hold,
    Tally,
    classify,
    hold_key,
    parse_entry,
)
from connectors.mail.parsing import ParsedMail
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
    owner_namesakes,
    sent_folder_senders,
    thread_messages,
)
from connectors.mailbox.client import MailboxEntry, MailboxReader
from connectors.models import HeldItem, ImportedItem
from connectors.services import (
    HeldInput,
    held_items_record,
    held_items_release,
    import_settle,
    source_cursor_save,
    sync_run_finish,
    sync_run_start,
)
from loops.definitions import is_mine, reply_text, reply_text_seed
from loops.message import MailMessage
from loops.pipeline import loops_coverage_sweep, loops_decide_source, process_threads
from loops.selectors import SourceScans, settled_clock, stored_message_dates
from loops.services_senders import sender_profiles_refresh

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

BATCH_THREADS = 200
PARALLEL_PARSE_MIN = 400  # messages; below this a process pool costs more than it saves
PARALLEL_PARSE_MAX_WORKERS = 4
PARALLEL_PARSE_CHUNK = 50
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _exit_with_parent(parent: int) -> None:
    """Pool worker initializer: leave (``os._exit``) as soon as the importing
    process is gone, so a killed import (SIGTERM, SIGKILL) leaves no parser behind
    holding a copy of its database socket."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def parse_entries(entries: list[MailboxEntry]) -> Iterator[ParsedMail | Hold]:
    """``parse_entry`` over ``entries``, in order, on every core (SPEC §11 ingest
    rate: parsing is pure CPU work and needs no database). In the pool each
    message's ``reply_text`` is cut too and handed to this process's cache
    (``reply_text_seed``), where sender profiles and loop detection read it.

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
        for result, reply in pool.map(
            _parse_with_reply, entries, chunksize=PARALLEL_PARSE_CHUNK
        ):
            if reply is not None and isinstance(result, ParsedMail):
                reply_text_seed(result.body, reply)
            yield result


def _parse_with_reply(entry: MailboxEntry) -> tuple[ParsedMail | Hold, str | None]:
    """Pool worker: ``parse_entry`` and the newest part of the parsed body
    (``loops.definitions.reply_text``, about a millisecond a message), cut here on
    every core instead of later in the importing process."""
    result = parse_entry(entry)
    if isinstance(result, Hold):
        return result, None
    return result, reply_text(result.body)


def message_link(parsed: ParsedMail) -> str | None:
    """A link to the original message: ``mid:`` URL (RFC 2392) of its Message-ID."""
    return f"mid:{parsed.message_id}" if parsed.message_id else None


@dataclass
class _Prepared:
    works: list[ThreadWork] = field(default_factory=list)
    duplicates: list[tuple[ParsedMail, ParsedMail, str]] = field(default_factory=list)
    owners: set[str] = field(default_factory=set)


class _ProgressStop(BaseException):
    """Carries an exception raised by the progress callback past the per-thread
    fallback (which must not hold threads because the import was stopped)."""

    def __init__(self, original: Exception) -> None:
        super().__init__(str(original))
        self.original = original


# Database errors that are about one item's data, not the connection: the batch is
# retried thread by thread and the failing thread's messages are held.
_TRANSIENT_DB_ERRORS = (OperationalError, InterfaceError)


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
        entries: Iterable[MailboxEntry] | None = None,
    ) -> None:
        self.source = source
        self.path = Path(path)
        self.owners = {o.lower() for o in owners}
        self.embed = embed
        self.progress = progress
        self.batch_threads = batch_threads
        self._given_entries = entries
        self.report = SyncReport(source_id=source.id, kind=self.kind)
        self.account = ", ".join(sorted(self.owners)) or str(self.path)
        self.tally = Tally()
        self.holds: list[Hold] = []
        self.metadata_files: list[str] = []
        self.not_mail_files: list[str] = []
        self._stored_hashes: list[str] = []
        self._held_keys: set[tuple[str, str]] = set()

    # --- fetch -------------------------------------------------------------------

    def entries(self) -> list[MailboxEntry]:
        """The items to import, in a stable order: the entries given (the admin's
        retry of held items), else every entry under the path (``MailboxReader``;
        mailbox-format metadata files are listed in ``metadata_files``). Messages at
        the top of the path belong to the folder the path names, so importing
        ``…/sent_items`` alone still marks them as sent (SPEC §6.2). The IMAP
        connector overrides this with the messages it fetched (SPEC §6.1a)."""
        if self._given_entries is not None:
            return list(self._given_entries)
        reader = MailboxReader(self.path)
        root = self.path.stem
        entries = [
            entry if entry.folder else replace(entry, folder=root) for entry in reader
        ]
        self.metadata_files = reader.metadata
        self.not_mail_files = reader.not_mail
        return entries

    def _parse_all(self) -> list[ParsedMail]:
        entries = self.entries()
        total = len(entries)
        parsed: list[ParsedMail] = []
        for index, (entry, result) in enumerate(
            zip(entries, parse_entries(entries), strict=True), 1
        ):
            if isinstance(result, Hold):
                self.holds.append(result)
            else:
                result.raw_bytes = entry.data
                result.location = entry.location
                parsed.append(result)
            if self.progress and (index % 200 == 0 or index == total):
                self.progress("parse", index, total)
        # Out of the collector's sight until the import ends (see fetch_changes).
        gc.freeze()
        self.report.counts["files"] = total
        self.tally.items = total
        if self.metadata_files:
            self.report.counts["metadata_files"] = len(self.metadata_files)
        if self.not_mail_files:
            self.report.counts["not_mail_files"] = len(self.not_mail_files)
            self.report.skipped["not mail (" + ", ".join(self.not_mail_files) + ")"] = (
                len(self.not_mail_files)
            )
        return parsed

    def _learn_owners(self, messages: list[ParsedMail]) -> None:
        """The regular senders of sent-folder messages are the owner (SPEC §6.2),
        and so are addresses that only ever send under the owner's own full name
        (``owner_namesakes``: "Pat Quill <pat@home.example>" forwarding to work)."""
        new = sorted(sent_folder_senders(messages) - self.owners)
        if new:
            self.owners |= set(new)
            self.report.warnings.append(
                "Owner addresses learned from sent folders: " + ", ".join(new)
            )
        named = sorted(owner_namesakes(messages, self.owners))
        if named:
            self.owners |= set(named)
            self.report.warnings.append(
                "Owner addresses learned from the owner's own name: " + ", ".join(named)
            )

    def prepare(self) -> _Prepared:
        """Parse, deduplicate and thread the mailbox; decide which threads have
        messages not yet in the ledger."""
        parsed = self._parse_all()
        self._learn_owners(parsed)
        self.names = display_names(parsed)
        decided = classify(source=self.source, messages=parsed)
        unique, duplicates = decided.unique, decided.copies
        if duplicates:
            self.report.skipped["duplicate copy"] += len(duplicates)
        twins = sum(1 for m in unique if TWIN_DEFECT in m.defects)
        if twins:
            self.report.counts["same_message_id_kept"] = twins
        self.tally.duplicates += len(duplicates) + len(decided.already)
        ledger = ImportedItem.objects.filter(source=self.source)
        keys = [m.key for m in unique]
        stored_by_key = decided.stored_threads
        already = decided.already
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
        """Yield batches of ``batch_threads`` threads with new messages (the items
        that could not be parsed are held first)."""
        prepared = self.prepare()
        # The parsed mailbox lives until the import ends: out of the collector's
        # sight, so each full collection during the batches does not walk it
        # again (about an eighth of the importing process's time in batches;
        # ``mailbox_import`` gives it back).
        gc.freeze()
        self._record_holds(self.holds)
        if self.owners - set(self.source.owner_addresses):
            # Detection reads the source's owners: addresses learned from sent
            # folders must count from the first batch on.
            self.source = source_ensure(
                source_id=self.source.id,
                kind=self.source.kind,
                owner_addresses=self.owners,
            )
        self.reference = self._reference_time(prepared)
        # The whole-source reads of detection, kept from batch to batch.
        self.scans = SourceScans(source_id=self.source.id)
        # Who expects a reply is judged over the whole source, this mailbox
        # included, before the first batch is detected (SPEC §5.1a).
        sender_profiles_refresh(
            source=self.source,
            pending=[m for work in prepared.works for m in work.messages],
        )
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
        the newest message of the source once this mailbox is in that is not an
        outlier (``loops.selectors.settled_clock``), leaving out dates after the
        wall clock (a wrong clock). Every batch uses it, so the loops
        found do not depend on the batch size or on where an import resumed.
        When every message is dated after the wall clock, the newest one is used
        and the report says so (the mailbox still gets its loops)."""
        wall = timezone.now()
        dated = [m.date for work in prepared.works for m in work.messages if m.date]
        dates = [d for d in dated if d <= wall]
        stored = stored_message_dates(source_id=self.source.id, until=wall, limit=4096)
        reference = settled_clock([*dates, *stored])
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
        stored thread without its detection (a re-run writes and detects it).

        When the database refuses the batch (bad data in one message), the batch
        is rolled back and written again thread by thread; a thread that still
        fails has its new messages held (``storage_error``) and the rest goes on.
        Connection errors (transient) propagate: the job retries."""
        works: list[ThreadWork] = list(batch.items)
        try:
            try:
                self._apply_works(works, report)
            except _TRANSIENT_DB_ERRORS:
                raise
            except Exception as exc:  # noqa: BLE001 - one bad thread never aborts
                for work in works:
                    try:
                        if len(works) == 1:
                            raise exc
                        self._apply_works([work], report)
                    except _TRANSIENT_DB_ERRORS:
                        raise
                    except Exception as one:  # noqa: BLE001
                        self._hold_work(work, HeldItem.Reason.STORAGE_ERROR, one)
                        self._advance(1)
        except _ProgressStop as stop:
            # The progress callback stopped the import (Ctrl-C, SIGTERM, a test):
            # the batch in flight rolled back whole.
            raise stop.original from None

    def _advance(self, threads: int) -> None:
        """Count ``threads`` done and call ``progress`` (inside the batch's
        transaction: an exception it raises rolls the batch back)."""
        self._done += threads
        if self.progress:
            try:
                self.progress("threads", self._done, self._total)
            except Exception as exc:
                raise _ProgressStop(exc) from exc

    def _apply_works(self, works: list[ThreadWork], report: SyncReport) -> None:
        scratch = SyncReport(source_id=self.source.id, kind=self.kind)
        stored: dict[str, list[MailMessage]] = {}
        refused: list[tuple[ThreadWork, BrainError]] = []
        written: list[ThreadWork] = []
        with bulk_transaction():
            outcome = threads_store(
                source=self.source,
                works=works,
                account=self.account,
                kind=RawRecord.Kind.RFC822,
                actor=f"connector:{self.kind}",
                embed=self.embed,
                report=scratch,
            )
            for work in works:
                result = outcome.get(work.thread_id)
                if isinstance(result, BrainError):
                    # Nothing of this thread was stored: its messages are held.
                    refused.append((work, result))
                    continue
                written.append(work)
                if result is not None:
                    stored[work.thread_id] = work.messages
            people_store(
                source=self.source,
                threads=stored,
                owner_addresses=self.owners,
                actor=f"connector:{self.kind}",
                embed=self.embed,
                report=scratch,
                names=getattr(self, "names", None),
            )
            if stored:
                reference = getattr(self, "reference", None)
                process_threads(
                    source_id=self.source.id,
                    thread_ids=list(stored),
                    now=reference,
                    source_newest=reference,
                    scans=getattr(self, "scans", None),
                )
            self._advance(len(works))
        report.merge(scratch)
        for work in written:
            new = [work.parsed[k] for k in work.new_keys if k in work.parsed]
            self.tally.stored += len(new)
            self._stored_hashes.extend(f"sha256:{m.raw_hash}" for m in new)
        for work, error in refused:
            self._hold_work(work, HeldItem.Reason.STORAGE_REFUSED, error)

    def _hold_work(self, work: ThreadWork, code: str, error: BaseException) -> None:
        """Hold the new messages of a thread that could not be stored."""
        message = (
            f"{error.code}: {error.message}"
            if isinstance(error, BrainError)
            else f"{type(error).__name__}: {error}"
        )
        holds = [
            Hold(
                MailboxEntry(
                    work.parsed[key].folder,
                    work.parsed[key].location,
                    work.parsed[key].raw_bytes or b"",
                ),
                str(code),
                message[:2000],
            )
            for key in sorted(work.new_keys)
            if key in work.parsed
        ]
        self._record_holds(holds)

    def _record_holds(self, holds: list[Hold]) -> None:
        """Hold these items (one row each); a byte-identical copy of an item held
        in this run is a duplicate of it, not a second row."""
        if not holds:
            return
        items: dict[tuple[str, str], HeldInput] = {}
        for h in holds:
            kind = "message" if h.entry.data else "file"
            key = (kind, hold_key(h.entry))
            if key in items or key in self._held_keys:
                self.tally.duplicates += 1
                self.report.skipped["copy of a held item"] += 1
                continue
            items[key] = HeldInput(
                kind=kind,
                external_id=key[1],
                code=h.code,
                message=h.message,
                location=h.entry.location,
                folder=h.entry.folder,
                raw=h.entry.data,
            )
        self._held_keys |= set(items)
        held_items_record(
            source=self.source, items=list(items.values()), report=self.report
        )
        self.tally.held += len(items)

    def finish(self) -> None:
        """Ledger the duplicate copies (after every thread is stored), release
        held items this run stored, re-judge the waiting loops against the whole
        mailbox now stored (``loops_coverage_sweep``, then the learned decision,
        ``loops.pipeline.loops_decide_source``), and put the accounting on
        the report."""
        reference = getattr(self, "reference", None)
        if reference is not None:
            dropped = loops_coverage_sweep(source=self.source, now=reference)
            if dropped:
                self.report.counts["loops_dropped_no_inbound_mail"] += dropped
            decided = loops_decide_source(source=self.source, now=reference)
            if decided["closed"]:
                self.report.counts["loops_not_kept_by_model"] += decided["closed"]
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
        if self._stored_hashes:
            released = held_items_release(
                source=self.source, external_ids=self._stored_hashes
            )
            if released:
                self.report.counts["released"] += released
        self.report.counts.update(self.tally.as_counts())
        if self.tally.lost:
            # A bug, never expected: say so loudly rather than report success.
            self.report.warnings.append(
                f"{self.tally.lost} items neither stored, duplicate nor held."
            )
        self.report.counts["lost"] = self.tally.lost


def mailbox_import(
    *,
    source_id: str,
    path: str | Path,
    owners: list[str] | tuple[str, ...] = (),
    progress: ProgressFn | None = None,
    embed: bool = False,
    actor: str = "cli",
    batch_threads: int = BATCH_THREADS,
    entries: Iterable[MailboxEntry] | None = None,
    kind: str = "import_mail",
) -> SyncReport:
    """Import a mailbox file or folder into the ``mailbox`` source ``source_id``
    (created when missing, SPEC §2.1, §6.2).

    Returns a ``SyncReport`` whose counts hold the accounting (``items`` read,
    ``stored``, ``duplicates``, ``held``, ``lost`` = 0) and the work done
    (messages on thread pages, threads, pages, people, noise, files); ``skipped``
    details duplicates (already imported, duplicate copy) and noise. Status is
    ``succeeded_with_holds`` when items were held. Idempotent: a second run stores
    nothing. Imports of one source are serialised (``sync_run_start`` takes the
    source's lock). Raises ``MailboxPathError`` (permanent) for a missing path or
    a FIFO/device and ``InvalidParams`` for a bad source id. Threads are committed
    in batches of ``batch_threads`` (one transaction each). ``progress(step,
    done, total)`` is called while parsing and after each batch; an exception it
    raises stops the import: the batch in flight rolls back whole, earlier batches
    stay, a re-run writes the rest.

    ``entries`` replaces reading ``path`` (IMAP, the admin's retry of held items):
    the same rule applies to them; ``path`` then only names the import and the
    source's stored path is left alone.
    """
    path = Path(path)
    source = source_ensure(
        source_id=source_id,
        kind=Source.Kind.MAILBOX,
        name=source_id,
        owner_addresses=owners,
    )
    if entries is None:
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
        entries=entries,
    )
    run = sync_run_start(source=source, kind=kind, actor=actor)
    report = connector.report
    report.run_id = run.pk
    try:
        connector.run(
            cursor=dict((source.cursor or {}).get("mailbox", {})),
            save_cursor=(lambda c: _save_cursor(source, c))
            if entries is None
            else (lambda c: None),
            report=report,
        )
        connector.finish()
    except BaseException as exc:
        report.status = "failed"
        sync_run_finish(run=run, report=report, error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        gc.unfreeze()
    sync_run_finish(run=run, report=report)
    import_settle()  # issue 48: the first search after an import at settled speed
    return report


def _save_cursor(source: Source, cursor: dict[str, Any]) -> None:
    source_cursor_save(source=source, key="mailbox", value=cursor)
