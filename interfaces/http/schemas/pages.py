"""Schemas of the page tools (SPEC §4): search, get_page, list_pages, add_page,
update_page. Every response carries ``protocol_version: 1``; omitted optional inputs
echo as ``null``."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from ninja import Field, Schema

from brain.exceptions import PROTOCOL_VERSION
from interfaces.http.schemas import RequestIn
from interfaces.page_fields import PageFields, RelationIn


class SearchResultOut(Schema):
    """One hit: a chunk of a page with its evidence (SPEC §3)."""

    slug: str
    title: str
    source_id: str
    type: str
    chunk: str
    score: float = Field(
        description=(
            "Calibrated relevance 0..1, comparable across queries: a noisy OR of the "
            "share of the query's term weight the chunk holds and its cosine "
            "(results are ordered by the fused rank)."
        )
    )
    similarity: float | None = Field(None, description="Raw query↔chunk cosine.")
    matched_terms: list[str] = Field(
        default_factory=list,
        description="The query's meaningful words that the chunk holds (stems matched).",
    )
    evidence: Literal[
        "alias_hit",
        "exact_title_match",
        "high_vector_match",
        "keyword_exact",
        "weak_semantic",
    ]
    create_safety: Literal["exists", "probable", "unknown"]
    provenance: dict[str, Any] = Field(default_factory=dict)
    duplicates: list[str] = Field(
        default_factory=list,
        description=(
            "Slugs of pages whose best chunk is a near-copy of this one (a message "
            "sent twice, forwarded, or quoted whole), folded into this result."
        ),
    )


class SearchOut(Schema):
    query: str
    results: list[SearchResultOut]
    search_degraded: str | None = None
    hint: dict[str, Any] | None = None
    budget_tokens: int | None = None
    budget_used: int | None = None
    dropped_count: int | None = None
    protocol_version: int = PROTOCOL_VERSION


class PageSummaryOut(Schema):
    """A page in a listing (no body)."""

    slug: str
    source_id: str
    type: str
    title: str
    summary: str
    tags: list[str]
    visibility: str
    updated_at: datetime

    @staticmethod
    def resolve_type(obj: Any) -> str:
        """A Page row gives its PageType; a dict already holds the name."""
        value = obj["type"] if isinstance(obj, dict) else obj.type
        return value if isinstance(value, str) else value.name


class PageOut(PageSummaryOut):
    """A whole page."""

    frontmatter: dict[str, Any]
    body: str
    effective_date: date | None = None
    created_at: datetime
    content_hash: str
    revision: str = Field(
        ...,
        description=(
            "The page's current revision: send it back as base_revision when you "
            "update the page from what you read (a stale one answers 409 conflict)."
        ),
    )
    index_current: bool
    protocol_version: int = PROTOCOL_VERSION


class PageIn(RequestIn, PageFields):
    """add_page input (SPEC §2.3 Add): exactly MCP ``brain_add``'s arguments
    (``interfaces.page_fields.PageFields``), an unknown key refused."""


class PageUpdateIn(RequestIn):
    """update_page input (SPEC §2.3 Update)."""

    mode: Literal["append", "replace"] = "append"
    body: str | None = None
    title: str | None = Field(None, max_length=500)
    summary: str | None = None
    tags: list[str] | None = None
    frontmatter: dict[str, Any] | None = None
    visibility: Literal["world", "private"] | None = None
    effective_date: date | None = None
    allow_empty: bool = False
    provenance: dict[str, Any] | None = None
    relations: list[RelationIn] = Field(default_factory=list)
    source: str | None = None
    base_revision: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        description=(
            "The page's revision you read (get_page's revision): if the page "
            "changed since, nothing is written and the answer is 409 conflict "
            "naming the current revision with a diff. Omit it for an append "
            "that does not depend on what is there."
        ),
    )


class WriteOut(Schema):
    """Where a write went and whether the index is current (SPEC §2.3)."""

    slug: str
    source_id: str
    created: bool
    changed: bool
    index_current: bool
    operation: str
    page: PageOut
    protocol_version: int = PROTOCOL_VERSION
