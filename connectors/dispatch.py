"""The sync entry point every trigger calls (admin action, ``sync_source`` command,
API, jobs): one source, dispatched to its connector by kind (SPEC §6, §7)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from brain.exceptions import InvalidParams, NotFound
from brain.models import Source
from connectors.google.sync import google_sync
from connectors.imap.sync import imap_sync
from connectors.mailbox.sync import mailbox_import

if TYPE_CHECKING:
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
