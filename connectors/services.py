"""Write services of the connectors app: sync runs (serialised per source by an
advisory lock, dead runs closed, source totals) and held items (SPEC §6, §7; STYLE
rule 3). The sync entry point every trigger calls is
``connectors.dispatch.source_sync``; the admin's retry of held items is
``connectors.dispatch.held_items_retry``."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import connection
from django.db.models import F
from django.utils import timezone

from brain.maintenance import PAGE_WRITE_MODELS, SettleReport, tables_settle
from brain.models import Page, RawRecord, Source
from connectors.models import HeldItem, ImportedItem, SyncRun
from loops.models import LoopEvent, OpenLoop, SenderProfile

if TYPE_CHECKING:
    from collections.abc import Sequence

    from connectors.base import ConnectorError, SyncReport


# --- runs: one at a time per source, killed runs closed, totals not last attempts --


def _lock_key(source_id: str) -> int:
    """The 64-bit PostgreSQL advisory-lock key of a source's imports."""
    digest = hashlib.sha256(f"connectors.sync:{source_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def source_lock_acquire(*, source_id: str) -> None:
    """Wait for the source's import lock (a session-level PostgreSQL advisory lock,
    re-entrant within one connection, released when the connection closes, so a
    killed process never leaves it held)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [_lock_key(source_id)])


def source_lock_release(*, source_id: str) -> None:
    """Release one hold of the source's import lock taken by this connection."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(%s)", [_lock_key(source_id)])


def _source_lock_try(source_id: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [_lock_key(source_id)])
        return bool(cursor.fetchone()[0])


def sync_run_start(*, source: Source, kind: str, actor: str) -> SyncRun:
    """Open the audit row of a sync or import (status ``running``), after taking
    the source's import lock: a second import of the same source waits for the
    first (SPEC §6: concurrent imports are serialised). Holding the lock proves no
    other run of the source is alive, so runs still marked ``running`` were killed
    and are closed as ``failed`` here (``sync_runs_reap`` does the same on a
    schedule). ``sync_run_finish`` releases the lock."""
    source_lock_acquire(source_id=source.id)
    try:
        _close_dead_runs(source_id=source.id, reason="found running by the next run")
        return SyncRun.objects.create(source=source, kind=kind, actor=actor[:200])
    except BaseException:
        source_lock_release(source_id=source.id)
        raise


def _close_dead_runs(*, source_id: str, reason: str) -> int:
    now = timezone.now()
    dead = SyncRun.objects.filter(source_id=source_id, status=SyncRun.Status.RUNNING)
    count = dead.update(
        status=SyncRun.Status.FAILED,
        finished_at=now,
        error=f"Killed: the process stopped without closing the run ({reason}).",
    )
    if count:
        Source.objects.filter(pk=source_id).update(
            last_error="The last import was killed before it finished; "
            "the next run resumes it."
        )
    return count


def sync_runs_reap() -> int:
    """Close runs left ``running`` by a killed process (SPEC §6): a run whose
    source lock nobody holds is dead. Returns the number of runs closed. Called by
    the jobs reaper every minute."""
    closed = 0
    sources = set(
        SyncRun.objects.filter(status=SyncRun.Status.RUNNING).values_list(
            "source_id", flat=True
        )
    )
    for source_id in sorted(sources):
        if not _source_lock_try(source_id):
            continue  # alive: its importer holds the lock
        try:
            closed += _close_dead_runs(source_id=source_id, reason="reaper")
        finally:
            source_lock_release(source_id=source_id)
    return closed


def source_totals(*, source_id: str) -> dict[str, int]:
    """What the source holds now (SPEC §2.1 counts): live pages, raw records,
    ledgered messages (stored, duplicate copies), open held items. Totals of what
    is stored, not of the last attempt."""
    ledger = ImportedItem.objects.filter(source_id=source_id)
    totals = {
        "pages": Page.objects.filter(
            source_id=source_id, deleted_at__isnull=True
        ).count(),
        "raw_records": RawRecord.objects.filter(source_id=source_id).count(),
        "imported": ledger.exclude(kind=ImportedItem.Kind.DUPLICATE).count(),
        "duplicates": ledger.filter(kind=ImportedItem.Kind.DUPLICATE).count(),
        "held": HeldItem.objects.filter(
            source_id=source_id, released_at__isnull=True
        ).count(),
    }
    return totals


def source_cursor_save(*, source: Source, key: str, value: Any) -> dict[str, Any]:
    """The one writer of ``Source.cursor`` (SPEC §6: syncs resume from it): set the
    connector's part ``key`` (``google``, ``imap``, ``mailbox``) to ``value`` (JSON),
    keeping the other parts as stored now. Updates ``source.cursor`` in memory too
    and returns the whole cursor."""
    stored = Source.objects.filter(pk=source.pk).values_list("cursor", flat=True)
    merged = {**(stored.first() or {}), key: value}
    Source.objects.filter(pk=source.pk).update(cursor=merged)
    source.cursor = merged
    return merged


def sync_run_finish(*, run: SyncRun, report: SyncReport, error: str = "") -> SyncRun:
    """Close ``run`` with the report's counts and release the source's import
    lock; stamp the source's sync state (``last_sync_at``; ``last_success_at``
    without an error; ``last_error``) and its ``counts``: the run's last counts
    under ``last_run`` beside the totals of what the source stores
    (``source_totals``). Status: ``failed`` with an error, ``partial`` when the
    report names what it left ``unfinished`` (SPEC §6: the next run goes on),
    ``succeeded_with_holds`` when items were held, else ``succeeded``."""
    now = timezone.now()
    if error:
        status = SyncRun.Status.FAILED
    elif report.unfinished:
        status = SyncRun.Status.PARTIAL
    elif report.held or report.counts.get("held"):
        status = SyncRun.Status.SUCCEEDED_WITH_HOLDS
    else:
        status = SyncRun.Status.SUCCEEDED
    report.status = str(status)
    try:
        SyncRun.objects.filter(pk=run.pk).update(
            status=status, finished_at=now, counts=report.as_dict(), error=error[:5000]
        )
        updates: dict[str, Any] = {"last_sync_at": now, "last_error": error[:5000]}
        if not error:
            updates["last_success_at"] = now
        updates["counts"] = {
            **source_totals(source_id=run.source_id),
            "last_run": {k: int(v) for k, v in report.counts.items()},
            "last_status": str(status),
        }
        Source.objects.filter(pk=run.source_id).update(**updates)
        run.refresh_from_db()
    finally:
        source_lock_release(source_id=run.source_id)
    return run


def import_settle() -> SettleReport:
    """The last step of every bulk write path of the connectors (markdown import,
    mail import, IMAP and Google sync; issue 48, SPEC §11): merge the GIN pending
    lists of the tables an import fills (pages, chunks, aliases, relations, raw
    records, facts, loops, held and imported items) and ``ANALYZE`` them
    (``brain.maintenance.tables_settle``), so the first search after the import
    runs at settled speed. Call it after the run's last commit. Returns the
    ``SettleReport``."""
    return tables_settle(
        [
            *PAGE_WRITE_MODELS,
            OpenLoop,
            LoopEvent,
            SenderProfile,
            HeldItem,
            ImportedItem,
        ]
    )


# --- held items ----------------------------------------------------------------------


@dataclass(frozen=True)
class HeldInput:
    """One item to hold: ``kind`` (message, file, gmail_message, calendar_event,
    markdown_file…), a stable ``external_id``, a ``HeldItem.Reason`` ``code``, a
    human ``message``, where it was read and its raw bytes (b'' when none)."""

    kind: str
    external_id: str
    code: str
    message: str
    location: str = ""
    folder: str = ""
    raw: bytes | None = None


def held_items_record(
    *, source: Source, items: Sequence[HeldInput], report: SyncReport
) -> int:
    """Hold items that failed permanently (SPEC §6 "Every importer"): one row per
    (source, kind, external_id) with the reason and the raw bytes; a row met again
    counts one more attempt and is re-opened. Each is listed in ``report.held``
    (the first 200) and counted ``held_rows``. Returns the number of items."""
    now = timezone.now()
    for item in items:
        external_id = item.external_id[:512]
        row, created = HeldItem.objects.get_or_create(
            source=source,
            kind=item.kind,
            external_id=external_id,
            defaults={
                "error_code": item.code[:64],
                "message": item.message[:2000],
                "location": item.location[:1000],
                "folder": item.folder[:300],
                "raw": item.raw,
            },
        )
        if not created:
            HeldItem.objects.filter(pk=row.pk).update(
                attempts=F("attempts") + 1,
                last_failed_at=now,
                error_code=item.code[:64],
                message=item.message[:2000],
                location=item.location[:1000],
                released_at=None,
            )
        if len(report.held) < 200:
            report.held.append(
                {
                    "kind": item.kind,
                    "external_id": external_id,
                    "code": item.code,
                    "message": item.message[:300],
                    "location": item.location,
                }
            )
    report.counts["held_rows"] += len(items)
    return len(items)


def held_item_record(
    *,
    source: Source,
    kind: str,
    external_id: str,
    error: ConnectorError,
    report: SyncReport,
    raw: bytes | None = None,
) -> HeldItem:
    """Hold one item that failed permanently (SPEC §6), from a ``ConnectorError``
    (Google connectors); counted ``held``. See ``held_items_record``."""
    held_items_record(
        source=source,
        items=[
            HeldInput(
                kind=kind,
                external_id=external_id,
                code=error.code,
                message=error.message,
                raw=raw,
            )
        ],
        report=report,
    )
    report.counts["held"] += 1
    return HeldItem.objects.get(source=source, kind=kind, external_id=external_id[:512])


def held_item_release(
    *, source: Source, kinds: Sequence[str], external_ids: Sequence[str]
) -> int:
    """Mark the held items of ``source`` with one of ``kinds`` and ``external_ids`` as
    released once a later sync stored them; returns how many were released."""
    return HeldItem.objects.filter(
        source=source,
        kind__in=list(kinds),
        external_id__in=list(external_ids),
        released_at__isnull=True,
    ).update(released_at=timezone.now())


def held_kind_release_except(*, source: Source, kind: str, keep: Sequence[str]) -> int:
    """Release the open held items of ``source`` of ``kind`` except those with an
    id in ``keep`` (a configured IMAP folder that is back, or no longer
    configured). Returns the number released."""
    return (
        HeldItem.objects.filter(source=source, kind=kind, released_at__isnull=True)
        .exclude(external_id__in=list(keep))
        .update(released_at=timezone.now())
    )


def held_items_release(*, source: Source, external_ids: Sequence[str]) -> int:
    """Release the open held items of ``source`` with these ids (any kind): a
    later run or a retry stored them. Returns the number released."""
    if not external_ids:
        return 0
    return HeldItem.objects.filter(
        source=source, external_id__in=list(external_ids), released_at__isnull=True
    ).update(released_at=timezone.now())
