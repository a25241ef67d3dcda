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
from brain.extensions import merge_movers
from brain.models import (
    Alias,
    AuditEvent,
    Fact,
    MergeProposal,
    Page,
    PageMerge,
    RawRecord,
    Relation,
    TimelineEntry,
)
from brain.services.pages import page_restore, page_soft_delete
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


def _move_aliases(keep: Page, merge: Page, moved: dict[str, Any]) -> None:
    """Move the merged page's aliases (dropping those the kept page has), then add
    its title and slug as aliases of the kept page; ids recorded in ``moved``."""
    existing = set(Alias.objects.filter(page=keep).values_list("alias", flat=True))
    for alias in Alias.objects.filter(page=merge).order_by("pk"):
        if alias.alias in existing:
            moved["aliases_dropped"].append([alias.alias, alias.kind])
            alias.delete()
            continue
        Alias.objects.filter(pk=alias.pk).update(page=keep)
        existing.add(alias.alias)
        moved["aliases"].append(alias.pk)
    for text in (merge.title, merge.slug):
        value = normalize_alias(text)
        if value and value not in existing:
            added = Alias.objects.create(
                source_id=keep.source_id,
                page=keep,
                alias=value,
                kind=Alias.Kind.MANUAL,
            )
            existing.add(value)
            moved["aliases_added"].append(added.pk)


def _move_relations(keep: Page, merge: Page, moved: dict[str, Any], now: Any) -> None:
    """Repoint both ends of the merged page's relations; self-loops and duplicates
    are dropped (recorded as ``[from, to, type, context]`` to re-create on undo)."""
    for rel in Relation.objects.filter(Q(from_page=merge) | Q(to_page=merge)):
        new_from = keep.pk if rel.from_page_id == merge.pk else rel.from_page_id
        new_to = keep.pk if rel.to_page_id == merge.pk else rel.to_page_id
        duplicate = (
            Relation.objects.filter(
                from_page_id=new_from,
                to_page_id=new_to,
                relation_type=rel.relation_type_id,
            )
            .exclude(pk=rel.pk)
            .exists()
        )
        if new_from == new_to or duplicate:
            moved["relations_dropped"].append(
                [rel.from_page_id, rel.to_page_id, rel.relation_type_id, rel.context]
            )
            rel.delete()
            continue
        Relation.objects.filter(pk=rel.pk).update(
            from_page_id=new_from, to_page_id=new_to, updated_at=now
        )
        if rel.from_page_id == merge.pk:
            moved["relations_from"].append(rel.pk)
        if rel.to_page_id == merge.pk:
            moved["relations_to"].append(rel.pk)


def _move_rows(keep: Page, merge: Page, moved: dict[str, Any], now: Any) -> None:
    """Facts, raw records, timeline entries (duplicates of the kept page's dropped)
    and the rows of registered movers (open loops) go to the kept page."""
    moved["facts"] = list(
        Fact.objects.filter(entity=merge).values_list("pk", flat=True)
    )
    Fact.objects.filter(pk__in=moved["facts"]).update(entity=keep, updated_at=now)
    moved["raw_records"] = list(
        RawRecord.objects.filter(page=merge).values_list("pk", flat=True)
    )
    RawRecord.objects.filter(pk__in=moved["raw_records"]).update(page=keep)
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
        moved["timeline"].append(entry.pk)
    for mover in merge_movers().values():
        moved.update(mover.move(keep_id=keep.pk, merge_id=merge.pk))


def _check_mergeable(keep: Page, merge: Page) -> None:
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


def page_merge(
    *, keep: Page, merge: Page, actor: str, proposal: MergeProposal | None = None
) -> dict[str, int]:
    """Merge page ``merge`` into ``keep`` (same source, both live); returns counts of
    what moved: ``{aliases, relations, facts, timeline, raw_records, merge_id}``
    (``merge_id``: the ``PageMerge`` row that ``page_merge_undo`` reverses).

    Duplicated rows (an alias or relation the kept page already has, a relation that
    would point at itself) are dropped rather than duplicated; the ids of every row
    that moved are recorded on the ``PageMerge``. Raises ``InvalidParams`` for pages
    of different sources or an already deleted page.
    """
    _check_mergeable(keep, merge)
    now = timezone.now()
    moved: dict[str, Any] = {kind: [] for kind in _LIST_KINDS}
    with transaction.atomic():
        _move_aliases(keep, merge, moved)
        _move_relations(keep, merge, moved, now)
        _move_rows(keep, merge, moved, now)
        # The redirect, then the ordinary soft delete (drops chunks, revision, audit).
        Page.objects.filter(pk=merge.pk).update(
            frontmatter={**(merge.frontmatter or {}), "merged_into": keep.slug}
        )
        page_soft_delete(
            page=merge,
            actor=local_caller(actor=actor),
            reason=f"merged into {keep.slug}",
        )
        record = PageMerge.objects.create(
            source_id=keep.source_id,
            keep_page=keep,
            merge_page=merge,
            proposal=proposal,
            moved=moved,
            merged_by=actor[:200],
        )
        counts = _counts(moved)
        AuditEvent.objects.create(
            actor=actor,
            action=AuditEvent.Action.PAGE_MERGED,
            source_id=keep.source_id,
            target_type="page",
            target_id=f"{keep.source_id}:{keep.slug}",
            extra_data={
                "merged": merge.pk,
                "merged_slug": merge.slug,
                "merge_id": record.pk,
                **counts,
            },
        )
    return {**counts, "merge_id": record.pk}


_LIST_KINDS = (
    "aliases",
    "aliases_added",
    "aliases_dropped",
    "relations_from",
    "relations_to",
    "relations_dropped",
    "timeline",
)


def _counts(moved: dict[str, Any]) -> dict[str, int]:
    """The audit counts of a ``PageMerge.moved`` record."""
    return {
        "aliases": len(moved["aliases"]) + len(moved["aliases_added"]),
        "relations": len(set(moved["relations_from"]) | set(moved["relations_to"])),
        "facts": len(moved["facts"]),
        "raw_records": len(moved["raw_records"]),
        "timeline": len(moved["timeline"]),
        "loops": len(
            set(moved.get("loops_counterparty") or [])
            | set(moved.get("loops_page") or [])
        ),
    }


def merge_proposal_accept(*, proposal_id: int, actor: str) -> dict[str, Any]:
    """Accept a pending proposal: merge its ``merge_page`` into its ``keep_page``.

    Returns the counts of ``page_merge``. Raises ``NotFound`` or ``InvalidParams``
    (not pending, or a page was deleted meanwhile).
    """
    with transaction.atomic():
        proposal = _proposal(proposal_id)
        counts = page_merge(
            keep=proposal.keep_page,
            merge=proposal.merge_page,
            actor=actor,
            proposal=proposal,
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


def _restore_aliases(keep: Page, merge: Page, moved: dict[str, Any]) -> int:
    """Aliases back: moved ones return, added ones go, dropped ones are re-created."""
    back = Alias.objects.filter(pk__in=moved["aliases"], page=keep).update(page=merge)
    Alias.objects.filter(pk__in=moved["aliases_added"], page=keep).delete()
    for alias, kind in moved["aliases_dropped"]:
        _, created = Alias.objects.get_or_create(
            source_id=merge.source_id, page=merge, alias=alias, defaults={"kind": kind}
        )
        back += int(created)
    return back


def _restore_relations(keep: Page, merge: Page, moved: dict[str, Any]) -> int:
    """Relation ends back on the merged page; dropped relations re-created."""
    now = timezone.now()
    back = 0
    for field, ids in (("from_page", "relations_from"), ("to_page", "relations_to")):
        back += Relation.objects.filter(pk__in=moved[ids], **{field: keep}).update(
            **{field: merge}, updated_at=now
        )
    for from_id, to_id, type_id, context in moved["relations_dropped"]:
        _, created = Relation.objects.get_or_create(
            source_id=merge.source_id,
            from_page_id=from_id,
            to_page_id=to_id,
            relation_type_id=type_id,
            defaults={"context": context or ""},
        )
        back += int(created)
    return back


def _restore_rows(keep: Page, merge: Page, moved: dict[str, Any]) -> dict[str, int]:
    """Facts, raw records, timeline and mover rows still on the kept page go back."""
    now = timezone.now()
    back = {
        "facts": Fact.objects.filter(pk__in=moved["facts"], entity=keep).update(
            entity=merge, updated_at=now
        ),
        "raw_records": RawRecord.objects.filter(
            pk__in=moved["raw_records"], page=keep
        ).update(page=merge),
        "timeline": TimelineEntry.objects.filter(
            pk__in=moved["timeline"], page=keep
        ).update(page=merge),
        "loops": 0,
    }
    for mover in merge_movers().values():
        back["loops"] += mover.restore(keep_id=keep.pk, merge_id=merge.pk, moved=moved)
    return back


def _refuse_pair(record: PageMerge, actor: str) -> None:
    """An undone merge refuses its pair for good: its proposal (or a new one) is
    ``rejected``, so dream never proposes the pair again."""
    now = timezone.now()
    pair = Q(keep_page=record.keep_page_id, merge_page=record.merge_page_id) | Q(
        keep_page=record.merge_page_id, merge_page=record.keep_page_id
    )
    updated = MergeProposal.objects.filter(pair).update(
        status=MergeProposal.Status.REJECTED, decided_at=now, decided_by=actor[:200]
    )
    if not updated:
        MergeProposal.objects.create(
            source_id=record.source_id,
            keep_page_id=record.keep_page_id,
            merge_page_id=record.merge_page_id,
            reason=MergeProposal.Reason.PEOPLE_EVIDENCE,
            score=0.0,
            evidence={"undone_merge": record.pk},
            status=MergeProposal.Status.REJECTED,
            created_by=actor[:200],
            decided_at=now,
            decided_by=actor[:200],
        )


def page_merge_undo(*, merge_id: int, actor: str) -> dict[str, int]:
    """Undo the ``PageMerge`` ``merge_id`` in one transaction: restore the merged
    page (redirect removed), move back exactly the rows the merge moved (rows
    since moved elsewhere stay), re-create dropped duplicates, refuse the pair for
    good and write a ``page_merge_undone`` audit row. Returns counts per kind.
    Raises ``NotFound`` (no such merge, or its page was purged) or
    ``InvalidParams`` (already undone)."""
    with transaction.atomic():
        record = (
            PageMerge.objects.select_for_update()
            .select_related("keep_page", "merge_page")
            .filter(pk=merge_id)
            .first()
        )
        if record is None:
            raise NotFound(
                f"Merge {merge_id} does not exist (or its page was purged).",
                suggestion="Open admin → Page merges to find undoable merges.",
                detail={"merge_id": merge_id},
            )
        if record.undone_at is not None:
            raise InvalidParams(
                f"Merge {merge_id} was already undone.",
                suggestion="Nothing to do.",
                detail={"merge_id": merge_id},
            )
        keep, merge = record.keep_page, record.merge_page
        page_restore(page=merge, actor=local_caller(actor=actor))
        frontmatter = dict(Page.objects.get(pk=merge.pk).frontmatter or {})
        frontmatter.pop("merged_into", None)
        Page.objects.filter(pk=merge.pk).update(frontmatter=frontmatter)
        counts = {
            "aliases": _restore_aliases(keep, merge, record.moved),
            "relations": _restore_relations(keep, merge, record.moved),
            **_restore_rows(keep, merge, record.moved),
        }
        record.undone_at = timezone.now()
        record.undone_by = actor[:200]
        record.save(update_fields=["undone_at", "undone_by"])
        _refuse_pair(record, actor)
        AuditEvent.objects.create(
            actor=actor[:200],
            action=AuditEvent.Action.PAGE_MERGE_UNDONE,
            source_id=keep.source_id,
            target_type="page",
            target_id=f"{merge.source_id}:{merge.slug}",
            extra_data={"merge_id": record.pk, "kept": keep.pk, **counts},
        )
    return counts


def page_merge_for(page: Page) -> PageMerge | None:
    """The not yet undone merge that soft-deleted ``page``, if any (the admin's
    Restore undoes it instead of leaving an empty page)."""
    return (
        PageMerge.objects.filter(merge_page=page, undone_at__isnull=True)
        .order_by("-merged_at", "-id")
        .first()
    )
