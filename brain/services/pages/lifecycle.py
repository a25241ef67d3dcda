"""Soft delete and restore of pages (SPEC §2.3)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from brain.access import Caller
from brain.models import (
    AuditEvent,
    Chunk,
    Page,
    PageRevision,
)
from brain.services.facts import facts_expire_for_page, facts_revive_for_page
from brain.services.pages.index import _embed_page, _rebuild_chunks

# --- soft delete and restore -----------------------------------------------------------


def page_soft_delete(*, page: Page, actor: Caller, reason: str = "") -> bool:
    """Soft-delete a page: set ``deleted_at``, drop its chunks (so no search arm can
    return it), expire its facts (reason ``page_deleted``), write a revision and an audit row. Idempotent: returns False when it
    was already deleted. Dream purges it after 72 h (SPEC §10)."""
    with transaction.atomic():
        locked = Page.objects.select_for_update().get(pk=page.pk)
        if locked.deleted_at is not None:
            return False
        locked.deleted_at = timezone.now()
        locked.indexed_hash = ""
        locked.save(update_fields=["deleted_at", "indexed_hash", "updated_at"])
        Chunk.objects.filter(page=locked).delete()
        # SPEC §2.4: its facts expire with it (no ghost pointing at a 404 slug).
        facts_expire_for_page(
            page=locked, actor=actor.actor[:200], now=locked.deleted_at
        )
        PageRevision.objects.create(
            page=locked,
            actor=actor.actor[:200],
            provenance={"reason": reason} if reason else {},
            operation="delete",
            previous_title=locked.title,
            previous_body=locked.body,
            previous_frontmatter=locked.frontmatter,
            content_hash=locked.content_hash,
        )
        AuditEvent.objects.create(
            actor=actor.actor[:200],
            action=AuditEvent.Action.PAGE_DELETED,
            source=locked.source,
            target_type="page",
            target_id=f"{locked.source_id}:{locked.slug}",
            extra_data={"reason": reason},
        )
    page.deleted_at, page.indexed_hash = locked.deleted_at, ""
    return True


def page_restore(*, page: Page, actor: Caller, embed: bool = True) -> bool:
    """Undo a soft delete: clear ``deleted_at``, bring back the facts the delete
    expired, rebuild chunks (embeddings after commit), audit it. Idempotent: returns False when the page was not deleted."""
    with transaction.atomic():
        locked = Page.objects.select_for_update().get(pk=page.pk)
        if locked.deleted_at is None:
            return False
        locked.deleted_at = None
        locked.save(update_fields=["deleted_at", "updated_at"])
        facts_revive_for_page(page=locked, actor=actor.actor[:200])
        if _rebuild_chunks(locked) == 0:
            Page.objects.filter(pk=locked.pk).update(indexed_hash=locked.content_hash)
        PageRevision.objects.create(
            page=locked,
            actor=actor.actor[:200],
            operation="restore",
            previous_title=locked.title,
            previous_body=locked.body,
            previous_frontmatter=locked.frontmatter,
            content_hash=locked.content_hash,
        )
        AuditEvent.objects.create(
            actor=actor.actor[:200],
            action=AuditEvent.Action.PAGE_RESTORED,
            source=locked.source,
            target_type="page",
            target_id=f"{locked.source_id}:{locked.slug}",
        )
    page.deleted_at = None
    if embed:
        transaction.on_commit(lambda: _embed_page(locked.pk, locked.content_hash))
    return True


def page_hard_delete(*, page: Page, actor: Caller) -> None:
    """Delete a page row for good (admin delete): its active facts expire first
    with reason ``page_deleted`` (they would otherwise live on without an entity),
    with an audit row. Relations, aliases, chunks and revisions go with the row."""
    with transaction.atomic():
        locked = Page.objects.select_for_update().filter(pk=page.pk).first()
        if locked is None:
            return
        facts_expire_for_page(page=locked, actor=actor.actor[:200], now=timezone.now())
        AuditEvent.objects.create(
            actor=actor.actor[:200],
            action=AuditEvent.Action.PAGE_DELETED,
            source=locked.source,
            target_type="page",
            target_id=f"{locked.source_id}:{locked.slug}",
            extra_data={"hard": True},
        )
        locked.delete()
