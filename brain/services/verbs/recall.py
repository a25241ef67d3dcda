"""The ``recall`` verb (SPEC §4)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from brain.access import Caller
from brain.exceptions import PROTOCOL_VERSION, InvalidParams
from brain.hints import unsearched_sources_hint
from brain.selectors_facts import fact_list_active, fact_rank
from brain.services.entities import (
    entity_resolve,
    iso_ms,
)
from brain.services.fact_search import fact_search
from brain.text import slugify_title

if TYPE_CHECKING:
    from collections.abc import Sequence

    from brain.models import Fact
from brain.services.verbs.common import (
    FACT_FETCH_CAP,
    RECALL_LIMIT_DEFAULT,
    RECALL_LIMIT_MAX,
    _budget,
    _pack,
    _sources,
    check_entity_name,
    fact_wire,
    parse_since,
    search_pages,
)

logger = logging.getLogger(__name__)

# --- recall ----------------------------------------------------------------------


def verb_recall(
    *,
    caller: Caller,
    query: str | None = None,
    entity: str | None = None,
    since: str | None = None,
    limit: int | None = None,
    budget_tokens: int | None = None,
    session_id: str | None = None,
    source: str | Sequence[str] | None = None,
) -> dict[str, Any]:
    """recall (SPEC §4): a facts arm and a search arm.

    Facts arm: active facts about ``entity`` (resolved like ``entity()``; an
    unresolved name matches facts filed under that reference), decay-ranked; else the
    facts answering ``query`` ranked by meaning (hybrid keyword + vector, a fact's
    entity name and aliases counting as its words: ``fact_search``); else the newest
    facts in scope, decay-ranked; ``since`` filters facts by record time. Search arm: hybrid page search for ``query``. ``limit`` (default 50,
    max 100) applies per arm. With ``budget_tokens`` facts are packed first, whole
    items only, ``budget_used ≤ budget_tokens``, and ``budget_tokens``,
    ``budget_used`` and ``dropped_count`` are returned (absent without a budget).
    ``search_degraded`` is present only when search is not whole (the reason, e.g.
    ``embeddings_pending: 12 of 2160``); ``hint`` only when readable sources the
    read did not cover also match (``brain.hints``). Empty brain → empty arrays.
    Raises ``InvalidParams`` (bad limit, since or budget), ``ScopeDenied``.
    """
    if limit is not None and limit < 1:
        raise InvalidParams(
            "limit must be at least 1.",
            suggestion=f"Send a limit between 1 and {RECALL_LIMIT_MAX}, or omit it.",
            detail={"field": "limit"},
        )
    check_entity_name(entity)
    arm_limit = min(limit or RECALL_LIMIT_DEFAULT, RECALL_LIMIT_MAX)
    budget = _budget(budget_tokens)
    since_at = parse_since(since)
    scope = caller.read_scope(_sources(source))
    query_text = (query or "").strip()
    facts: list[Fact] = []
    by_meaning: list[Fact] | None = None
    if entity and entity.strip():
        resolution = entity_resolve(scope=scope, name=entity)
        ids = [resolution.page.pk] if resolution.page is not None else []
        refs = {slugify_title(entity), entity.strip().lower()}
        facts = list(
            fact_list_active(
                scope=scope, entity_ids=ids, entity_refs=refs, since=since_at
            ).order_by("-created_at")[:FACT_FETCH_CAP]
        )
    elif query_text:
        # Ranked by meaning (keyword + vector), not by decay (SPEC §2.4).
        by_meaning = fact_search(scope=scope, query=query_text, since=since_at)
    else:
        facts = list(
            fact_list_active(scope=scope, since=since_at).order_by("-created_at")[
                :FACT_FETCH_CAP
            ]
        )
    ranked = by_meaning if by_meaning is not None else fact_rank(facts)
    fact_items = [fact_wire(f, caller=caller) for f in ranked[:arm_limit]]

    results: list[dict[str, Any]] = []
    degraded: str | None = None
    if query_text:
        results, degraded = search_pages(scope=scope, query=query_text, limit=arm_limit)

    packed, used, dropped = _pack(
        [("fact", f) for f in fact_items] + [("result", r) for r in results], budget
    )
    out_facts = [i for k, i in packed if k == "fact"]
    out_results = [i for k, i in packed if k == "result"]
    out: dict[str, Any] = {
        "protocol_version": PROTOCOL_VERSION,
        "query": query,
        "entity": entity,
        "since": iso_ms(since_at) if since_at else None,
        "limit": limit,
        "session_id": session_id,
        "facts": out_facts,
        "results": out_results,
        "total": len(out_facts) + len(out_results),
    }
    if budget is not None:
        out.update(budget_tokens=budget, budget_used=used, dropped_count=dropped)
    if degraded:
        out["search_degraded"] = degraded
    hint = unsearched_sources_hint(
        caller=caller, requested=_sources(source), query=query_text, entity=entity
    )
    if hint:
        out["hint"] = hint
    return out
