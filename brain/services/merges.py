"""Curator decisions on dream's merge proposals (SPEC §0 "merge duplicates", §10).

Merging moves everything that points at ``merge_page`` to ``keep_page`` (aliases,
relations, facts, timeline, raw records), keeps the merged page's title and slug as
aliases of the kept page, and soft-deletes the merged page with
``frontmatter.merged_into`` naming the kept slug (the redirect). Nothing is lost: the
merged page stays readable until dream purges it 72 h later, and an audit row records
what moved.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from brain.access import local_caller
from brain.exceptions import InvalidParams, NotFound
from brain.models import (
    Alias,
    AuditEvent,
    Fact,
    MergeProposal,
    Page,
    RawRecord,
    Relation,
    TimelineEntry,
)
from brain.services.pages import page_soft_delete
from brain.text import normalize_alias


def _proposal(proposal_id: int) -> MergeProposal:
    proposal = (
        MergeProposal.objects.select_for_update()
        .select_related("keep_page", "merge_page")
        .filter(pk=proposal_id)
        .first()
    )
    if proposal is None:
        raise NotFound(
            f"Merge proposal {proposal_id} does not exist.",
            suggestion="Open admin → Merge proposals to find pending ones.",
            detail={"proposal_id": proposal_id},
        )
    if proposal.status != MergeProposal.Status.PENDING:
        raise InvalidParams(
            f"Merge proposal {proposal_id} is already {proposal.status}.",
            suggestion="Only pending proposals can be merged or rejected.",
            detail={"proposal_id": proposal_id, "status": proposal.status},
        )
    return proposal


def page_merge(*, keep: Page, merge: Page, actor: str) -> dict[str, int]:
    """Merge page ``merge`` into ``keep`` (same source, both live); returns counts of
    what moved: ``{aliases, relations, facts, timeline, raw_records}``.

    Duplicated rows (an alias or relation the kept page already has, a relation that
    would point at itself) are dropped rather than duplicated. Raises
    ``InvalidParams`` for pages of different sources or an already deleted page.
    """
    if keep.source_id != merge.source_id:
        raise InvalidParams(
            "Pages of different sources cannot be merged.",
            suggestion="Merge pages within one source only.",
            detail={"keep": keep.pk, "merge": merge.pk},
        )
    if keep.deleted_at or merge.deleted_at:
        raise InvalidParams(
            "A deleted page cannot be merged.",
            suggestion="Restore the page first, or reject the proposal.",
            detail={"keep": keep.pk, "merge": merge.pk},
        )
    now = timezone.now()
    counts: dict[str, int] = {}
    with transaction.atomic():
        # Aliases: move, then add the merged page's title and slug as aliases.
        existing = set(Alias.objects.filter(page=keep).values_list("alias", flat=True))
        moved = 0
        for alias in Alias.objects.filter(page=merge):
            if alias.alias in existing:
                alias.delete()
                continue
            Alias.objects.filter(pk=alias.pk).update(page=keep)
            existing.add(alias.alias)
            moved += 1
        for text in (merge.title, merge.slug):
            value = normalize_alias(text)
            if value and value not in existing:
                Alias.objects.create(
                    source_id=keep.source_id,
                    page=keep,
                    alias=value,
                    kind=Alias.Kind.MANUAL,
                )
                existing.add(value)
                moved += 1
        counts["aliases"] = moved

        # Relations: repoint both ends; drop self-loops and duplicates.
        relations = 0
        for rel in Relation.objects.filter(Q(from_page=merge) | Q(to_page=merge)):
            new_from = keep if rel.from_page_id == merge.pk else rel.from_page
            new_to = keep if rel.to_page_id == merge.pk else rel.to_page
            duplicate = (
                Relation.objects.filter(
                    from_page=new_from,
                    to_page=new_to,
                    relation_type=rel.relation_type_id,
                )
                .exclude(pk=rel.pk)
                .exists()
            )
            if new_from.pk == new_to.pk or duplicate:
                rel.delete()
                continue
            Relation.objects.filter(pk=rel.pk).update(
                from_page=new_from, to_page=new_to, updated_at=now
            )
            relations += 1
        counts["relations"] = relations

        counts["facts"] = Fact.objects.filter(entity=merge).update(
            entity=keep, updated_at=now
        )
        counts["raw_records"] = RawRecord.objects.filter(page=merge).update(page=keep)
        timeline = 0
        for entry in TimelineEntry.objects.filter(page=merge):
            if TimelineEntry.objects.filter(
                page=keep,
                date=entry.date,
                summary_hash=entry.summary_hash,
                source_ref=entry.source_ref,
            ).exists():
                entry.delete()
                continue
            TimelineEntry.objects.filter(pk=entry.pk).update(page=keep)
            timeline += 1
        counts["timeline"] = timeline

        # The redirect, then the ordinary soft delete (drops chunks, revision, audit).
        Page.objects.filter(pk=merge.pk).update(
            frontmatter={**(merge.frontmatter or {}), "merged_into": keep.slug}
        )
        page_soft_delete(
            page=merge,
            actor=local_caller(actor=actor),
            reason=f"merged into {keep.slug}",
        )
        AuditEvent.objects.create(
            actor=actor,
            action=AuditEvent.Action.PAGE_MERGED,
            source_id=keep.source_id,
            target_type="page",
            target_id=f"{keep.source_id}:{keep.slug}",
            extra_data={"merged": merge.pk, "merged_slug": merge.slug, **counts},
        )
    return counts


def merge_proposal_accept(*, proposal_id: int, actor: str) -> dict[str, Any]:
    """Accept a pending proposal: merge its ``merge_page`` into its ``keep_page``.

    Returns the counts of ``page_merge``. Raises ``NotFound`` or ``InvalidParams``
    (not pending, or a page was deleted meanwhile).
    """
    with transaction.atomic():
        proposal = _proposal(proposal_id)
        counts = page_merge(
            keep=proposal.keep_page, merge=proposal.merge_page, actor=actor
        )
        proposal.status = MergeProposal.Status.MERGED
        proposal.decided_at = timezone.now()
        proposal.decided_by = actor[:200]
        proposal.save(update_fields=["status", "decided_at", "decided_by"])
    return counts


def merge_proposal_reject(*, proposal_id: int, actor: str) -> MergeProposal:
    """Reject a pending proposal; the pair is never proposed again."""
    with transaction.atomic():
        proposal = _proposal(proposal_id)
        proposal.status = MergeProposal.Status.REJECTED
        proposal.decided_at = timezone.now()
        proposal.decided_by = actor[:200]
        proposal.save(update_fields=["status", "decided_at", "decided_by"])
    return proposal
