"""HTTP endpoints: the page tools (SPEC §4): search, get_page, list_pages, add_page,
update_page. Handlers only parse input and call services and selectors; errors are
raised as ``BrainError`` and mapped to the SPEC §4 envelope in ``interfaces.http.api``.
"""

from typing import Any

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema, Status
from ninja.pagination import paginate

from brain.exceptions import PROTOCOL_VERSION, NotFound
from brain.search import MAX_LIMIT
from brain.selectors import page_get, page_list
from brain.services.pages import RelationInput, page_update
from interfaces.http.auth import request_caller
from interfaces.http.schemas import MAX_BUDGET_TOKENS, BoundedPagination
from interfaces.http.schemas.pages import (
    PageIn,
    PageOut,
    PageSummaryOut,
    PageUpdateIn,
    SearchOut,
    WriteOut,
)
from interfaces.operations import (
    op_search,
    page_out,
    refuse_update_elsewhere,
    write_out,
)
from interfaces.page_fields import page_add_from

router = Router(tags=["pages"])


def _sources(raw: str | None) -> list[str] | None:
    """``source`` query parameter: one id or a comma list."""
    if not raw:
        return None
    return [s.strip() for s in raw.split(",") if s.strip()] or None


class SearchQuery(Schema):
    query: str = Field(..., min_length=1)
    limit: int = Field(10, ge=1, le=MAX_LIMIT)
    source: str | None = None
    type: str | None = None
    budget_tokens: int | None = Field(None, ge=1, le=MAX_BUDGET_TOKENS)


@router.get("/search", response=SearchOut, exclude_unset=True)
def search(request: HttpRequest, params: Query[SearchQuery]) -> dict[str, Any]:
    """Hybrid search over pages (SPEC §3). ``source`` and ``type`` take one value or a
    comma list; no ``source`` means the federated sources the key may read."""
    return op_search(
        request_caller(request),
        query=params.query,
        sources=_sources(params.source),
        types=_sources(params.type),
        limit=params.limit,
        budget_tokens=params.budget_tokens,
    )


class ProtocolPagination(BoundedPagination):
    """limit/offset pagination whose output carries ``protocol_version``."""

    class Output(Schema):
        items: list[Any]
        count: int
        protocol_version: int = PROTOCOL_VERSION


class ListQuery(Schema):
    source: str | None = None
    type: str | None = None
    prefix: str | None = None
    tag: str | None = None


@router.get("/pages", response=list[PageSummaryOut])
@paginate(ProtocolPagination)
def list_pages(request: HttpRequest, filters: Query[ListQuery]) -> Any:
    """Every live page the key may read, newest first (exhaustive, unlike search)."""
    scope = request_caller(request).read_scope(_sources(filters.source))
    return page_list(
        scope=scope,
        types=_sources(filters.type),
        prefix=filters.prefix,
        tag=filters.tag,
    )


@router.get("/pages/{path:slug}", response=PageOut)
def get_page(
    request: HttpRequest, slug: str, source: str | None = None
) -> dict[str, Any]:
    """One page by slug, in the sources the key may read (``not_found`` otherwise)."""
    scope = request_caller(request).read_scope(_sources(source))
    return page_out(page_get(scope=scope, slug=slug))


@router.post("/pages", response={200: WriteOut, 201: WriteOut})
def add_page(request: HttpRequest, payload: PageIn) -> Status[dict[str, Any]]:
    """Create a page in the key's write source; an existing slug is refused with a
    pointer to update_page (SPEC §2.3)."""
    result = page_add_from(request_caller(request), payload)
    return Status(201, write_out(result))


@router.post("/pages/{path:slug}", response=WriteOut)
def update_page(
    request: HttpRequest, slug: str, payload: PageUpdateIn
) -> dict[str, Any]:
    """Append to (default) or replace a page's body, keeping its frontmatter; a
    missing page is ``not_found`` with a pointer to add_page (SPEC §2.3); a page the
    key can read only in another source is ``scope_denied`` (403) naming it; a
    ``base_revision`` that is not the page's current revision is ``conflict``
    (409) with the current revision and a diff (SPEC §4)."""
    caller = request_caller(request)
    source = caller.write_source(payload.source)
    try:
        result = page_update(
            mode=payload.mode,
            source=source,
            actor=caller,
            slug=slug,
            title=payload.title,
            body=payload.body,
            summary=payload.summary,
            tags=payload.tags,
            frontmatter=payload.frontmatter,
            visibility=payload.visibility,
            effective_date=payload.effective_date,
            allow_empty=payload.allow_empty,
            provenance=payload.provenance,
            base_revision=payload.base_revision,
            relations=[
                RelationInput(r.type, r.to, r.context) for r in payload.relations
            ],
        )
    except NotFound:
        refuse_update_elsewhere(caller, slug=slug, write_source_id=source.id)
        raise
    return write_out(result)
