"""Read-only queries of the connectors app (STYLE rule 3)."""

from __future__ import annotations

from typing import Any

from django.db.models import OuterRef, Subquery

from brain.models import Source
from connectors.models import HeldItem, SyncRun


def imports_health() -> dict[str, Any]:
    """The importers' part of ``/api/health`` (SPEC §6 "Every importer"): counts
    only, no ids or content (the endpoint answers without a key).

    ``status``: ``failed`` when the latest run of some source failed, ``held``
    when items are held (open), else ``ok``; ``sources_failed``,
    ``sources_with_holds`` (latest run ``succeeded_with_holds``), ``running``
    runs and ``held`` open held items.
    """
    latest = SyncRun.objects.filter(source=OuterRef("pk")).order_by(
        "-started_at", "-id"
    )
    statuses = list(
        Source.objects.annotate(last=Subquery(latest.values("status")[:1]))
        .exclude(last=None)
        .values_list("last", flat=True)
    )
    failed = statuses.count(SyncRun.Status.FAILED)
    with_holds = statuses.count(SyncRun.Status.SUCCEEDED_WITH_HOLDS)
    held = HeldItem.objects.filter(released_at__isnull=True).count()
    if failed:
        status = "failed"
    elif held:
        status = "held"
    else:
        status = "ok"
    return {
        "status": status,
        "sources_failed": failed,
        "sources_with_holds": with_holds,
        "running": statuses.count(SyncRun.Status.RUNNING),
        "held": held,
    }
