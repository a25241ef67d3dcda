"""The sync entry point every trigger calls (admin action, ``sync_source`` command,
API, jobs): one source, dispatched to its connector by kind (SPEC §6, §7); and the
admin's retry of held items, which runs the held bytes through their importer."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain.exceptions import InvalidParams, NotFound
from brain.models import RawRecord, Source
from connectors.google.sync import google_sync
from connectors.imap.sync import imap_sync
from connectors.mailbox.client import MailboxEntry
from connectors.mailbox.sync import mailbox_import
from connectors.models import HeldItem
from connectors.services import held_items_release

if TYPE_CHECKING:
    from collections.abc import Sequence

    from connectors.base import ProgressFn, SyncReport


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
    shared mailbox from the stored UIDVALIDITY + UID cursor (SPEC §6.1a). Idempotent
    and resumable from ``Source.cursor``; returns the ``SyncReport``.

    Raises ``NotFound`` for an unknown source and ``InvalidParams`` for a source
    kind without a connector (markdown has its own command) or a mailbox source
    without a stored path. ``options`` go to the Google sync (``http``, ``sleep``)
    or the IMAP sync (``settings``, ``sleep``, ``chunk``…).
    """
    source = Source.objects.filter(pk=source_id).first()
    if source is None:
        raise NotFound(
            f"No source {source_id!r}.",
            suggestion="List sources in admin → Sources, or create one with import_mail.",
            detail={"source": source_id},
        )
    if source.kind == Source.Kind.GOOGLE:
        return google_sync(source=source, progress=progress, actor=actor, **options)
    if source.kind == Source.Kind.MAILBOX:
        path = (source.config or {}).get("path")
        if not path:
            raise InvalidParams(
                f"Mailbox source {source_id!r} has no stored path.",
                suggestion=f"Run: manage.py import_mail PATH --source {source_id}",
                detail={"source": source_id},
            )
        return mailbox_import(
            source_id=source.id,
            path=path,
            owners=list(source.owner_addresses),
            progress=progress,
            actor=actor,
        )
    if source.kind == Source.Kind.IMAP:
        return imap_sync(source=source, progress=progress, actor=actor, **options)
    raise InvalidParams(
        f"Source {source_id!r} is a {source.kind!r} source; it has no sync connector.",
        suggestion="Markdown folders sync with import_markdown; manual sources need none.",
        detail={"source": source_id, "kind": source.kind},
    )


def held_items_retry(*, held_ids: Sequence[int], actor: str) -> dict[str, int]:
    """Re-import the raw bytes of held mail items (the admin's "retry"): each
    source's items go through the mailbox pipeline as entries, so the same rule
    applies (stored and released, a duplicate and released, or held again with
    one more attempt). Items without bytes stay held. Returns counts ``retried``,
    ``released``, ``still_held``, ``no_bytes``."""
    counts = {"retried": 0, "released": 0, "still_held": 0, "no_bytes": 0}
    rows = list(
        HeldItem.objects.filter(pk__in=list(held_ids), released_at__isnull=True)
    )
    by_source: dict[str, list[HeldItem]] = {}
    for row in rows:
        if not row.raw or row.kind not in ("message", "file"):
            counts["no_bytes"] += 1
            continue
        by_source.setdefault(row.source_id, []).append(row)
    for source_id, items in sorted(by_source.items()):
        source = Source.objects.get(pk=source_id)
        entries = [
            MailboxEntry(
                folder=row.folder,
                location=row.location or row.external_id,
                data=bytes(row.raw or b""),
                mbox="#" in (row.location or ""),
            )
            for row in items
        ]
        mailbox_import(
            source_id=source_id,
            path=Path((source.config or {}).get("path") or source_id),
            owners=list(source.owner_addresses),
            actor=actor,
            entries=entries,
            kind="retry_held",
        )
        counts["retried"] += len(items)
        # Stored or recognised as a duplicate of stored content: released.
        stored = _released_by_content(source=source, rows=items)
        counts["released"] += stored
        counts["still_held"] += len(items) - stored
    return counts


def _released_by_content(*, source: Source, rows: Sequence[HeldItem]) -> int:
    """Release retried rows whose bytes are now stored (a raw record with the same
    content hash) and count the released ones."""
    ids = [row.external_id for row in rows]
    hashes = [i.removeprefix("sha256:") for i in ids if i.startswith("sha256:")]
    stored = set(
        RawRecord.objects.filter(source=source, content_hash__in=hashes).values_list(
            "content_hash", flat=True
        )
    )
    release = [f"sha256:{h}" for h in stored]
    held_items_release(source=source, external_ids=release)
    return HeldItem.objects.filter(
        pk__in=[row.pk for row in rows], released_at__isnull=False
    ).count()
