"""Read selectors for pages (SPEC §4 page tools): every read takes a ``ReadScope``.

Selectors return querysets or rows and never write. Scoping is done only through
``brain.access.scope_queryset`` (sources + visibility, SPEC §8); soft-deleted pages
are never returned.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import QuerySet

from brain.access import ReadScope, scope_queryset
from brain.exceptions import NotFound
from brain.models import Page


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

    When several readable sources hold the slug, the most recently updated wins.
    Raises ``NotFound`` (with a search suggestion) when no readable page matches;
    a private page is "not found" for a caller who may not read it.
    """
    qs = scope_queryset(Page.objects.filter(slug=slug, deleted_at__isnull=True), scope)
    if source:
        qs = qs.filter(source_id=source)
    page = qs.select_related("type").order_by("-updated_at").first()
    if page is None:
        raise NotFound(
            f"No page {slug!r} in the sources you can read.",
            suggestion="Use search to find the right slug, or add_page to create it.",
            detail={"slug": slug, "source": source},
        )
    return page
