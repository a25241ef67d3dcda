"""The relation writer (SPEC §2.3): typed links between pages, checked against the
Schema and audited. ``relation_ensure`` writes one edge (loops' commitment links, the
calendar's attendees); ``relations_reconcile_links`` stores the ``[[wiki-links]]`` of
a batch of page writes in bulk (called by ``brain.services.pages``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from brain.bulk import bulk_insert
from brain.models import AuditEvent, Page, Relation, RelationType
from brain.services.schema import schema_relation_type


def relation_ensure(
    *,
    from_page: Page,
    to_page: Page,
    type_name: str,
    source_id: str,
    context: str = "",
    provenance: dict[str, Any] | None = None,
    created_by: str,
) -> tuple[Relation, bool]:
    """Return the relation ``from_page -type_name-> to_page``, creating it when
    missing (unique on from, to and type; ``context`` cut to 200 characters) with a
    ``relation_added`` audit row. Raises ``SchemaViolation`` for an unknown type or an
    endpoint page type the relation type does not allow. Returns
    ``(relation, created)``."""
    relation_type = schema_relation_type(
        name=type_name, from_type=from_page.type, to_type=to_page.type
    )
    relation, created = Relation.objects.get_or_create(
        from_page=from_page,
        to_page=to_page,
        relation_type=relation_type,
        defaults={
            "source_id": source_id,
            "context": context[:200],
            "provenance": provenance or {},
            "created_by": created_by[:200],
        },
    )
    if created:
        AuditEvent.objects.create(
            actor=created_by[:200],
            action=AuditEvent.Action.RELATION_ADDED,
            source_id=source_id,
            target_type="relation",
            target_id=str(relation.pk),
            extra_data={
                "from": from_page.slug,
                "to": to_page.slug,
                "type": type_name,
            },
        )
    return relation, created


# ``Relation.provenance["link_source"]`` of edges owned by body wiki-links: only
# these are removed when a link disappears from its page (GBrain's ``markdown``).
LINK_SOURCE = "wikilink"


def relations_reconcile_links(
    *,
    source_id: str,
    from_page_ids: Sequence[int],
    wanted: Mapping[int, Sequence[tuple[int, RelationType, str]]],
    provenance: Mapping[int, dict[str, Any]],
    created_by: str,
) -> tuple[int, int]:
    """Make the wiki-link relations of the pages ``from_page_ids`` exactly
    ``wanted[page_id]`` = ``[(to_page_id, relation_type, context), …]`` (types
    already checked against the Schema by the caller): stale link-owned edges
    (``provenance.link_source == LINK_SOURCE``) are deleted, missing ones inserted
    (an identical edge written otherwise is kept and left alone), each change
    audited. Three statements plus one audit insert, whatever the batch size.
    Returns ``(added, removed)``."""
    if not from_page_ids:
        return 0, 0
    desired: dict[tuple[int, int, int], tuple[RelationType, str]] = {}
    for from_id in from_page_ids:
        for to_id, relation_type, context in wanted.get(from_id, ()):
            if to_id != from_id:
                desired.setdefault(
                    (from_id, to_id, relation_type.pk), (relation_type, context)
                )
    existing = list(
        Relation.objects.filter(
            from_page_id__in=list(from_page_ids),
            provenance__link_source=LINK_SOURCE,
        ).values_list("id", "from_page_id", "to_page_id", "relation_type_id")
    )
    have = {(f, t, rt) for _, f, t, rt in existing}
    stale = [row for row in existing if tuple(row[1:]) not in desired]
    if stale:
        Relation.objects.filter(pk__in=[row[0] for row in stale]).delete()
    added = bulk_insert(
        Relation,
        [
            {
                "source_id": source_id,
                "from_page_id": f,
                "to_page_id": t,
                "relation_type_id": rt,
                "context": context[:200],
                "provenance": {**provenance.get(f, {}), "link_source": LINK_SOURCE},
                "created_by": created_by[:200],
            }
            for (f, t, rt), (_, context) in desired.items()
            if (f, t, rt) not in have
        ],
        conflict=["from_page", "to_page", "relation_type"],
        returning=["id", "from_page_id", "to_page_id", "relation_type_id"],
    )
    names = {rt.pk: rt.name for rt, _ in desired.values()}
    if stale:
        names.update(
            RelationType.objects.filter(
                pk__in={row[3] for row in stale} - set(names)
            ).values_list("pk", "name")
        )
    events = [
        {
            "actor": created_by[:200],
            "action": action,
            "source_id": source_id,
            "target_type": "relation",
            "target_id": str(pk),
            "extra_data": {"from_page": f, "to_page": t, "type": names.get(rt, "")},
        }
        for action, rows in (
            (AuditEvent.Action.RELATION_ADDED, added),
            (AuditEvent.Action.RELATION_REMOVED, stale),
        )
        for pk, f, t, rt in rows
    ]
    bulk_insert(AuditEvent, events)
    return len(added), len(stale)
