"""Write services of the connectors app: sync runs, held items and the sync entry
point every trigger calls (admin action, ``sync_source`` command, API, jobs)
(SPEC §6, §7; STYLE rule 3)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db.models import F
from django.utils import timezone

from brain.exceptions import InvalidParams, NotFound
from brain.models import Source
from connectors.models import HeldItem, SyncRun

if TYPE_CHECKING:
    from connectors.base import ConnectorError, ProgressFn, SyncReport


def sync_run_start(*, source: Source, kind: str, actor: str) -> SyncRun:
    """Open the audit row of a sync or import (status ``running``)."""
    return SyncRun.objects.create(source=source, kind=kind, actor=actor[:200])


def sync_run_finish(*, run: SyncRun, report: SyncReport, error: str = "") -> SyncRun:
    """Close ``run`` with the report's counts; stamp the source's sync state
    (``last_sync_at``; ``last_success_at`` and ``counts`` only without an error;
    ``last_error``). ``report.status`` becomes ``partial`` when items were held."""
    now = timezone.now()
    if error:
        status = SyncRun.Status.FAILED
    elif report.held:
        status = SyncRun.Status.PARTIAL
    else:
        status = SyncRun.Status.SUCCEEDED
    report.status = str(status)
    SyncRun.objects.filter(pk=run.pk).update(
        status=status, finished_at=now, counts=report.as_dict(), error=error[:5000]
    )
    updates: dict[str, Any] = {"last_sync_at": now, "last_error": error[:5000]}
    if not error:
        updates["last_success_at"] = now
        updates["counts"] = {k: int(v) for k, v in report.counts.items()}
    Source.objects.filter(pk=run.source_id).update(**updates)
    run.refresh_from_db()
    return run


def held_item_record(
    *,
    source: Source,
    kind: str,
    external_id: str,
    error: ConnectorError,
    report: SyncReport,
) -> HeldItem:
    """Hold an item that failed permanently (SPEC §6): one row per (source, kind,
    external_id), attempts counted, listed in ``report.held``. The sync goes on."""
    item, created = HeldItem.objects.get_or_create(
        source=source,
        kind=kind,
        external_id=external_id[:512],
        defaults={"error_code": error.code[:64], "message": error.message[:2000]},
    )
    if not created:
        HeldItem.objects.filter(pk=item.pk).update(
            attempts=F("attempts") + 1,
            last_failed_at=timezone.now(),
            error_code=error.code[:64],
            message=error.message[:2000],
            released_at=None,
        )
    report.held.append(
        {
            "kind": kind,
            "external_id": external_id,
            "code": error.code,
            "message": error.message,
        }
    )
    report.counts["held"] += 1
    return item


def held_item_release(*, source: Source, kind: str, external_id: str) -> int:
    """Mark a held item as released once a later sync stored it."""
    return HeldItem.objects.filter(
        source=source, kind=kind, external_id=external_id, released_at__isnull=True
    ).update(released_at=timezone.now())


def source_sync(
    *,
    source_id: str,
    progress: ProgressFn | None = None,
    actor: str = "cli",
    **options: Any,
) -> SyncReport:
    """Sync one source now (SPEC §6): a ``google`` source runs contacts → calendar →
    gmail from its stored cursor; a ``mailbox`` source re-imports its stored path
    (only new messages are written); an ``imap`` source reads the folders of its
    shared mailbox from the stored UIDVALIDITY + UID cursor (SPEC §6.1a). Idempotent and resumable from
    ``Source.cursor``; returns the ``SyncReport``.

    Raises ``NotFound`` for an unknown source and ``InvalidParams`` for a source
    kind without a connector (markdown has its own command) or a mailbox source
    without a stored path. ``options`` go to the Google sync (``http``, ``sleep``).
    """
    source = Source.objects.filter(pk=source_id).first()
    if source is None:
        raise NotFound(
            f"No source {source_id!r}.",
            suggestion="List sources in admin → Sources, or create one with import_mail.",
            detail={"source": source_id},
        )
    if source.kind == Source.Kind.GOOGLE:
        from connectors.google.sync import google_sync

        return google_sync(source=source, progress=progress, actor=actor, **options)
    if source.kind == Source.Kind.MAILBOX:
        path = (source.config or {}).get("path")
        if not path:
            raise InvalidParams(
                f"Mailbox source {source_id!r} has no stored path.",
                suggestion=f"Run: manage.py import_mail PATH --source {source_id}",
                detail={"source": source_id},
            )
        from connectors.mailbox.sync import mailbox_import

        return mailbox_import(
            source_id=source.id,
            path=path,
            owners=list(source.owner_addresses),
            progress=progress,
            actor=actor,
        )
    if source.kind == Source.Kind.IMAP:
        from connectors.imap.sync import imap_sync

        return imap_sync(source=source, progress=progress, actor=actor, **options)
    raise InvalidParams(
        f"Source {source_id!r} is a {source.kind!r} source; it has no sync connector.",
        suggestion="Markdown folders sync with import_markdown; manual sources need none.",
        detail={"source": source_id, "kind": source.kind},
    )
