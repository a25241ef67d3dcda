"""The Schema gate (SPEC §2.2): every page and relation write is checked here.

An unknown page type or relation type, or a relation whose endpoints break the allowed
types, raises ``SchemaViolation`` whose message lists the allowed values and whose
suggestion says how to add one (admin → Schema). Schema rows are read fresh on each
call, so admin edits apply at once.
"""

from __future__ import annotations

from typing import NoReturn

from brain.exceptions import SchemaViolation
from brain.models import PageType, RelationType

HOW_TO_ADD = "An admin can add it in admin → Brain → {what}."


def schema_page_type(*, name: str) -> PageType:
    """Return the PageType called ``name``; raises ``SchemaViolation`` listing the
    allowed names when it is not in the Schema."""
    page_type = PageType.objects.filter(name=name).first()
    if page_type is None:
        allowed = sorted(PageType.objects.values_list("name", flat=True))
        raise SchemaViolation(
            f"Unknown page type {name!r}. Allowed: {', '.join(allowed)}.",
            suggestion="Use one of the allowed types. "
            + HOW_TO_ADD.format(what="Page types"),
            detail={"field": "type", "value": name, "allowed": allowed},
        )
    return page_type


def schema_page_type_for_slug(*, slug: str, default: str = "note") -> PageType:
    """Infer a page type from the slug's prefix (``people/`` → person); the longest
    matching prefix wins; no match gives ``default``."""
    best: tuple[int, PageType] | None = None
    for page_type in PageType.objects.exclude(path_prefixes=[]):
        for prefix in page_type.path_prefixes:
            if slug.startswith(prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), page_type)
    return best[1] if best else schema_page_type(name=default)


def schema_required_fields(*, page_type: PageType, frontmatter: dict) -> None:
    """Raise ``SchemaViolation`` when frontmatter lacks a field the type requires."""
    missing = [f for f in page_type.required_fields if f not in frontmatter]
    if missing:
        raise SchemaViolation(
            f"Pages of type {page_type.name!r} need frontmatter field(s): "
            f"{', '.join(missing)}.",
            suggestion="Add the missing fields to the frontmatter, or change the "
            "type's required fields in admin → Brain → Page types.",
            detail={"field": "frontmatter", "missing": missing},
        )


def schema_relation_type(
    *, name: str, from_type: PageType, to_type: PageType
) -> RelationType:
    """Return the RelationType ``name`` after checking both endpoint types.

    Raises ``SchemaViolation`` for an unknown name (listing the allowed names) or for
    an endpoint type the relation type does not allow (listing the allowed types).
    """
    relation_type = (
        RelationType.objects.filter(name=name)
        .prefetch_related("source_types", "target_types")
        .first()
    )
    if relation_type is None:
        _unknown_relation_type(name)
    schema_check_endpoints(
        relation_type=relation_type, from_type=from_type, to_type=to_type
    )
    return relation_type


def schema_relation_types() -> dict[str, RelationType]:
    """Every RelationType by name with its allowed endpoint types prefetched (three
    queries): what a batch write checks its many links against
    (``schema_check_endpoints``) instead of three queries per pair of types."""
    return {
        rt.name: rt
        for rt in RelationType.objects.prefetch_related("source_types", "target_types")
    }


def _unknown_relation_type(name: str) -> NoReturn:
    allowed = sorted(RelationType.objects.values_list("name", flat=True))
    raise SchemaViolation(
        f"Unknown relation type {name!r}. Allowed: {', '.join(allowed)}.",
        suggestion="Use one of the allowed relation types. "
        + HOW_TO_ADD.format(what="Relation types"),
        detail={"field": "relation_type", "value": name, "allowed": allowed},
    )


def schema_check_endpoints(
    *, relation_type: RelationType, from_type: PageType, to_type: PageType
) -> None:
    """Raise ``SchemaViolation`` when ``relation_type`` does not allow a
    ``from_type`` page at its start or a ``to_type`` page at its end (listing the
    allowed types); an empty allowed list allows any type. Reads the prefetched
    ``source_types`` and ``target_types`` when they are."""
    name = relation_type.name
    for end, page_type, allowed_qs in (
        ("from", from_type, relation_type.source_types.all()),
        ("to", to_type, relation_type.target_types.all()),
    ):
        allowed = sorted(t.name for t in allowed_qs)
        if allowed and page_type.name not in allowed:
            raise SchemaViolation(
                f"Relation {name!r} cannot go {end} a {page_type.name!r} page. "
                f"Allowed {end} types: {', '.join(allowed)}.",
                suggestion="Pick pages of the allowed types, or widen the relation "
                "type in admin → Brain → Relation types.",
                detail={
                    "field": f"{end}_page",
                    "value": page_type.name,
                    "allowed": allowed,
                },
            )
