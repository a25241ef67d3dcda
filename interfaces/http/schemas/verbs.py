"""Request and response schemas of the memory verbs v1 (SPEC §4).

Inputs mirror the MCP tool arguments; omitted optionals are ``None`` and echo as
``null``. Responses are the exact wire dicts built by ``brain.services.verbs``.
"""

from __future__ import annotations

from typing import Any, Literal

from ninja import Field, Schema

from interfaces.http.schemas import MAX_BUDGET_TOKENS, MAX_REQUESTED, RequestIn


class VerbIn(RequestIn):
    """Base of verb inputs: an unknown key is refused (``RequestIn``)."""


class RecallIn(VerbIn):
    query: str | None = None
    entity: str | None = None
    since: str | None = None
    limit: int | None = Field(
        None, ge=1, le=MAX_REQUESTED, description="Per arm; above 100 is capped."
    )
    budget_tokens: int | None = Field(None, ge=0, le=MAX_BUDGET_TOKENS)
    session_id: str | None = None
    source: str | list[str] | None = None


class RememberIn(VerbIn):
    fact: str
    provenance: str
    entity: str | None = None
    kind: str | None = None
    ttl: str | None = None
    visibility: Literal["world", "private"] | None = None
    # SPEC §2.4 (revised): the attribute slot and value when the caller knows them
    # (e.g. slot "employer", value "Acme"); else they are read from the text.
    slot: str | None = None
    value: str | None = None


class EntityIn(VerbIn):
    name: str
    source: str | list[str] | None = None


class SynthesizeIn(VerbIn):
    question: str = Field(..., min_length=1)
    since: str | None = None
    until: str | None = None
    source: str | list[str] | None = None


class ForgetIn(VerbIn):
    id: str | int
    reason: str | None = None


class ContextPackIn(VerbIn):
    entities: str | list[str] | None = None
    budget_tokens: int | None = Field(None, ge=0, le=MAX_BUDGET_TOKENS)
    since: str | None = None
    include_private: bool | None = None
    source: str | list[str] | None = None


class DeltaIn(VerbIn):
    since: str | None = None
    # next_cursor's slug: with ``since``, continue after that item.
    slug: str | None = Field(None, max_length=300)
    session_id: str | None = Field(None, max_length=200)
    entities: str | list[str] | None = None
    budget_tokens: int | None = Field(None, ge=0, le=MAX_BUDGET_TOKENS)
    source: str | list[str] | None = None


class FactOut(Schema):
    id: int
    fact_id: str
    fact: str
    kind: str
    entity_slug: str | None
    provenance: str
    valid_until: str | None
    visibility: str
    confidence: float
    created_at: str


class RecallResultOut(Schema):
    """One search-arm hit of ``recall``: provenance is a one-line string (SPEC §4)."""

    slug: str
    title: str
    source_id: str | None
    chunk: str | None
    score: float | None
    similarity: float | None
    evidence: str
    create_safety: str
    provenance: str


class HintOut(Schema):
    """Readable sources an unqualified read did not cover that also match."""

    sources: list[str]
    text: str


class RecallOut(Schema):
    protocol_version: int
    query: str | None
    entity: str | None
    since: str | None
    limit: int | None
    session_id: str | None
    facts: list[FactOut]
    results: list[RecallResultOut]
    total: int
    # Absent unless asked for or true (the routes use exclude_unset, SPEC §4).
    budget_tokens: int | None = None
    budget_used: int | None = None
    dropped_count: int | None = None
    search_degraded: str | None = None
    hint: HintOut | None = None


class RememberOut(Schema):
    protocol_version: int
    id: str
    status: str
    status_text: str
    entity_slug: str | None
    valid_until: str | None
    degraded_dedup: bool
    superseded_id: str | None
    kind: str
    visibility: str
    warnings: list[str] = []


class ForgetOut(Schema):
    protocol_version: int
    id: str
    expired: bool
    reason: str | None


class ThreadOut(Schema):
    kind: str
    text: str
    date: str | None
    due: str | None = None
    direction: str | None = None
    counterparty: str | None = None
    status: str | None = None
    loop_id: str | None = None
    fact_id: str | None = None
    entity_slug: str | None = None
    slug: str | None = None


class EdgeOut(Schema):
    type: str
    direction: str
    slug: str
    title: str
    context: str


class EntityRefOut(Schema):
    slug: str
    title: str
    type: str


class LastTouchedOut(Schema):
    updated_at: str | None
    last_retrieved_at: str | None
    last_timeline_date: str | None


class CardOut(Schema):
    entity: EntityRefOut
    source_id: str
    aka: list[str]
    summary: str
    last_touched: LastTouchedOut
    open_threads: list[ThreadOut]
    edges: list[EdgeOut]
    backlink_count: int
    active_fact_count: int


class SuggestionOut(Schema):
    slug: str
    title: str
    type: str
    create_safety: str
    similarity: float | None = None


class EntityOut(Schema):
    protocol_version: int
    name: str | None
    found: bool
    arm: str | None
    # A miss has no card key (SPEC §4); the route uses exclude_unset.
    card: CardOut | None = None
    suggestions: list[SuggestionOut]
    hint: HintOut | None = None
    latency_ms: int


class PackCardOut(Schema):
    slug: str
    title: str
    type: str
    summary: str
    active_fact_count: int
    open_threads: list[ThreadOut]


class PackThreadOut(ThreadOut):
    entity_slug: str


class ContextPackOut(Schema):
    protocol_version: int
    entities: list[str]
    budget_tokens: int | None
    since: str | None
    include_private: bool | None
    cards: list[PackCardOut]
    open_threads: list[PackThreadOut]
    facts: list[FactOut]
    missing: list[str]
    text: str
    budget_used: int
    dropped_count: int
    private_included: bool
    warnings: list[str]


class CursorOut(Schema):
    since: str
    slug: str


class DeltaPageOut(Schema):
    slug: str
    title: str
    type: str
    source_id: str
    updated_at: str | None
    deleted: bool
    change: str


class DeltaLoopOut(Schema):
    loop_id: str
    loop_type: str
    status: str
    summary: str
    due: str | None
    counterparty: str | None
    updated_at: str | None


class DeltaForgottenOut(Schema):
    fact_id: str
    at: str


class DeltaOut(Schema):
    protocol_version: int
    since: str | None
    session_id: str | None
    entities: list[str] | None
    budget_tokens: int | None
    pages: list[DeltaPageOut]
    facts: list[FactOut]
    loop_events: list[DeltaLoopOut]
    forgotten: list[DeltaForgottenOut] = []
    threads: list[ThreadOut]
    has_more: bool
    next_cursor: CursorOut
    budget_used: int | None
    dropped_count: int | None


class CostOut(Schema):
    model: str
    input_tokens: int
    output_tokens: int
    usd_estimate: float


class SynthesizeOut(Schema):
    protocol_version: int
    question: str | None
    since: str | None
    until: str | None
    answer: str
    sources: list[dict[str, Any]]
    gaps: list[str]
    cost: CostOut
    synthesis_status: str
    pages_gathered: int
    facts_gathered: int
    warnings: list[str]
