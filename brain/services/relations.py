"""The relation writer for every app above brain (SPEC §2.3): typed links between
pages, checked against the Schema and audited. Page writes' own ``[[links]]`` are
stored in bulk by ``brain.services.pages``; everything else (loops' commitment links,
the calendar's attendees) comes through ``relation_ensure``."""

from __future__ import annotations

from typing import Any

from brain.models import AuditEvent, Page, Relation
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
