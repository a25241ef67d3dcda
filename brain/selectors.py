"""Read selectors for pages (SPEC §4 page tools): every read takes a ``ReadScope``.

Selectors return querysets or rows and never write. Scoping is done only through
``brain.access.scope_queryset`` (sources + visibility, SPEC §8); soft-deleted pages
are never returned.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db.models import Count, QuerySet

from brain.access import ReadScope, page_not_found, scope_queryset
from brain.models import Page, Relation
from brain.precedence import slug_holder


def page_list(
    *,
    scope: ReadScope,
    types: Sequence[str] | None = None,
    prefix: str | None = None,
    tag: str | None = None,
) -> QuerySet[Page]:
    """Live pages readable in ``scope``, newest first (``-updated_at, slug``).

    Optional filters: ``types`` (type names), ``prefix`` (slug prefix such as
    ``people/``), ``tag``. The type is joined (``select_related``); the body is
    deferred, so listing stays one query per page of results.
    """
    qs = scope_queryset(Page.objects.filter(deleted_at__isnull=True), scope)
    if types:
        qs = qs.filter(type__name__in=list(types))
    if prefix:
        qs = qs.filter(slug__startswith=prefix)
    if tag:
        qs = qs.filter(tags__contains=[tag])
    return qs.select_related("type").defer("body").order_by("-updated_at", "slug")


def page_get(*, scope: ReadScope, slug: str, source: str | None = None) -> Page:
    """The live page ``slug`` in ``scope`` (narrowed to ``source`` when given).

    When several readable sources hold the slug, ``brain.precedence.slug_holder``
    picks: a page a trusted writer created before one a remote caller created, then
    the first holder (earliest created, then source id), never the most recently
    updated (SPEC §8). Raises ``NotFound`` (with a search suggestion) when no
    readable page matches; a private page is "not found" for a caller who may not
    read it.
    """
    qs = scope_queryset(Page.objects.filter(slug=slug, deleted_at__isnull=True), scope)
    if source:
        qs = qs.filter(source_id=source)
    page = slug_holder(qs.select_related("type"))
    if page is None:
        raise page_not_found(slug, source)
    return page


# --- backlinks (SPEC §2.3) -----------------------------------------------------------

# Relation types that never count as a backlink (SPEC §2.3: "Backlink counts exclude
# mentions"): an automatic mention is not an editor's link.
NON_BACKLINK_TYPES = ("mentions",)


def backlinks_sql(
    page_expr: str, *, source_param: str | None = None, vis_param: str | None = None
) -> str:
    """The one backlink definition as a SQL scalar subquery, for raw-SQL reads
    (search ranking, the entity card): the number of relations to the page
    ``page_expr`` (a SQL expression for its id) whose type is not in
    ``NON_BACKLINK_TYPES`` and whose from page is live (not soft-deleted).
    ``source_param`` / ``vis_param`` name query parameters that narrow it to one
    source and to from pages of the given visibilities (a caller's read scope)."""
    extra = ""
    if source_param:
        extra += f" AND r.source_id = %({source_param})s"
    if vis_param:
        extra += f" AND f.visibility = ANY(%({vis_param})s)"
    excluded = ", ".join(f"'{name}'" for name in NON_BACKLINK_TYPES)
    return (
        "(SELECT count(*) FROM brain_relation r"
        " JOIN brain_relationtype rt ON rt.id = r.relation_type_id"
        " JOIN brain_page f ON f.id = r.from_page_id"
        f" WHERE r.to_page_id = {page_expr} AND rt.name NOT IN ({excluded})"
        f" AND f.deleted_at IS NULL{extra})"
    )


def backlink_counts(page_ids: Iterable[int]) -> dict[int, int]:
    """Backlinks per page (``backlinks_sql``'s definition, every source), as
    ``{page_id: count}``; pages without backlinks are absent."""
    ids = list(page_ids)
    if not ids:
        return {}
    rows = (
        Relation.objects.filter(to_page_id__in=ids, from_page__deleted_at__isnull=True)
        .exclude(relation_type__name__in=NON_BACKLINK_TYPES)
        .values("to_page_id")
        .annotate(n=Count("id"))
        .values_list("to_page_id", "n")
    )
    return dict(rows)
