"""Write services of the connectors app: sync runs and held items (SPEC §6, §7;
STYLE rule 3). The sync entry point every trigger calls is
``connectors.dispatch.source_sync``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db.models import F
from django.utils import timezone

from brain.models import Source
from connectors.models import HeldItem, SyncRun

if TYPE_CHECKING:
    from collections.abc import Sequence

    from connectors.base import ConnectorError, SyncReport


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
