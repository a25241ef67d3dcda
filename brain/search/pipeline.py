"""Page search, stage by stage (SPEC §3): validate, gather (terms, keyword arm,
vector arm, name hop, hydration), fuse, order with the rank guards, list results
(one per page, near-copies folded), fit the token budget. ``page_search`` is the
one entry point; see ``brain.search`` for the rules of each stage.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from pgvector import Vector

from brain.access import ReadScope
from brain.exceptions import InvalidParams
from brain.search.fold import FoldCandidate, fold_near_duplicates
from brain.search.fusion import (
    BACKLINK_FACTOR,
    GUARD_WINDOW,
    KEYWORD_EXACT,
    KEYWORD_LEAD_MARGIN,
    KEYWORD_WEIGHT,
    TITLE_BOOST,
    _PageRank,
    _recency_boost,
    calibrated_score,
    fused_key,
    keep_keyword_hits,
    keyword_lead,
    pending_key,
)
from brain.search.keyword import _keyword_arm, combine_page_scores
from brain.search.results import (
    ARM_CANDIDATES,
    EVIDENCE_SAFETY,
    MAX_CHUNKS_PER_PAGE,
    MAX_LIMIT,
    SearchResponse,
    SearchResult,
)
from brain.search.terms import _EXCLUDED, _query_terms, _Terms
from brain.search.vector import (
    HIGH_VECTOR_MATCH,
    _degradation,
    _hydrate,
    _query_vector,
    _Row,
    _vector_arm,
    vector_part,
)
from brain.text import bounded_query, estimate_tokens, normalize_alias


def _validated_query(query: str, limit: int, budget_tokens: int | None) -> str:
    """The stripped query. Raises ``InvalidParams`` for a blank query, a limit
    outside 1..``MAX_LIMIT`` or a budget below 1 token."""
    text = (query or "").strip()
    if not text:
        raise InvalidParams(
            "The query is empty.",
            suggestion="Pass a few words to search for, e.g. query='offsite budget'.",
            detail={"field": "query"},
        )
    if not 1 <= int(limit) <= MAX_LIMIT:
        raise InvalidParams(
            f"limit must be between 1 and {MAX_LIMIT}.",
            suggestion="Use a limit such as 10.",
            detail={"field": "limit", "value": limit},
        )
    if budget_tokens is not None and budget_tokens < 1:
        raise InvalidParams(
            "budget_tokens must be a positive number of tokens.",
            suggestion="Omit budget_tokens or pass e.g. 2000.",
            detail={"field": "budget_tokens", "value": budget_tokens},
        )
    return text


@dataclass
class _Search:
    """One query's state through the stages of ``page_search``: what it asked
    (``text``, ``norm_query``, ``limit``), where (``source_ids``,
    ``visibilities``, ``types``), the query vector as a pgvector literal (''
    when ``degraded``), then what the arms found: ``terms``, the pages in the
    fusion, each chunk's keyword score and page, each page's keyword score, the
    keyword arm's pages in rank order, the alias hits ``(chunk, page)`` and the
    hydrated ``rows``."""

    text: str
    norm_query: str
    limit: int
    source_ids: list[str]
    visibilities: list[str]
    types: list[str] | None
    literal: str
    degraded: bool
    terms: _Terms | None = None
    pages: dict[int, _PageRank] = field(default_factory=dict)
    keyword_score: dict[int, float] = field(default_factory=dict)
    chunk_page: dict[int, int] = field(default_factory=dict)
    page_keyword: dict[int, float] = field(default_factory=dict)
    keyword_pages: list[int] = field(default_factory=list)
    aliased: list[tuple[int, int]] = field(default_factory=list)
    rows: list[_Row] = field(default_factory=list)

    @property
    def query_terms(self) -> _Terms:
        """The query's terms (set by ``_gather``)."""
        assert self.terms is not None
        return self.terms

    def is_named(self, page_id: int, title: str) -> bool:
        """Whether the query names the page: an alias hit or its exact title."""
        return self.pages[page_id].named or normalize_alias(title) == self.norm_query


def _gather(search: _Search) -> None:
    """Stages 1-3 of the module docstring in one transaction (the vector arm's
    ``SET LOCAL`` knobs need one; keyword-only mode does not): the terms, the
    keyword arm, the vector arm, the name hop, then the found chunks hydrated
    into ``search.rows``."""
    txn = transaction.atomic() if not search.degraded else nullcontext()
    with txn, connection.cursor() as cursor:
        _keyword_stage(cursor, search)
        if not search.degraded:
            _vector_stage(cursor, search)
        # Name hop: a page whose alias (or title) equals the query joins as rank
        # 1 of a third arm.
        for chunk_id, page_id in search.aliased:
            search.chunk_page.setdefault(chunk_id, page_id)
            page = search.pages.setdefault(page_id, _PageRank(page_id))
            page.named = True
            if page.keyword_chunk is None and page.vector_chunk is None:
                page.vector_chunk = chunk_id
        if search.chunk_page:
            search.rows = _hydrate(
                cursor,
                chunk_ids=list(search.chunk_page),
                vector=search.literal,
                source_ids=search.source_ids,
                visibilities=search.visibilities,
                types=search.types,
                lexemes=search.query_terms.lexemes,
            )


def _keyword_stage(cursor: Any, search: _Search) -> None:
    """The terms and the keyword arm, within PostgreSQL's full-text bounds
    (``bounded_query``: 256 words, none over 500 characters). Each page's best
    keyword chunk joins the fusion; its second best only for the first
    ``limit`` pages (a second chunk is shown only when pages run short). Pages
    are ranked by their keyword score (``combine_page_scores``), ties in their
    best chunks' order."""
    keyword_text = bounded_query(search.text)
    search.terms = terms = _query_terms(
        cursor,
        text=keyword_text,
        source_ids=search.source_ids,
        visibilities=search.visibilities,
    )
    keyword, search.aliased, page_hits = _keyword_arm(
        cursor,
        text=keyword_text,
        terms=terms,
        alias=search.norm_query,
        source_ids=search.source_ids,
        visibilities=search.visibilities,
    )
    search.page_keyword = combine_page_scores(keyword, page_hits, terms.idf)
    rank_of = {
        page_id: rank
        for rank, page_id in enumerate(
            sorted(search.page_keyword, key=lambda p: -search.page_keyword[p]),
            start=1,
        )
    }
    kept_chunks: dict[int, int] = defaultdict(int)
    for hit in sorted(keyword, key=lambda h: rank_of[h.page_id]):
        rank = rank_of[hit.page_id]
        wanted = MAX_CHUNKS_PER_PAGE if rank <= search.limit else 1
        if rank > ARM_CANDIDATES or kept_chunks[hit.page_id] >= wanted:
            continue
        kept_chunks[hit.page_id] += 1
        page = search.pages.setdefault(hit.page_id, _PageRank(hit.page_id, rank))
        if page.keyword_chunk is None:
            page.keyword_chunk = hit.chunk_id
        search.keyword_score[hit.chunk_id] = hit.score
        search.chunk_page[hit.chunk_id] = hit.page_id
    search.keyword_pages = list(search.pages)


def _vector_stage(cursor: Any, search: _Search) -> None:
    """The vector arm: each page's nearest chunk joins the fusion with its rank."""
    nearest = _vector_arm(
        cursor,
        vector=search.literal,
        excluded=search.query_terms.excluded,
        source_ids=search.source_ids,
        visibilities=search.visibilities,
    )
    for rank, (chunk_id, page_id, _sim) in enumerate(nearest, start=1):
        search.chunk_page[chunk_id] = page_id
        page = search.pages.setdefault(page_id, _PageRank(page_id))
        page.vector_rank = rank
        page.vector_chunk = chunk_id


def _fuse(search: _Search, page_rows: dict[int, _Row]) -> None:
    """Stage 4's key of every hydrated page (``fused_key`` of its keyword share
    and its best vector evidence, or ``pending_key`` while it has no embedding),
    then the name, backlink and recency boosts."""
    now = timezone.now()
    best_keyword = max(search.page_keyword.values(), default=0.0)
    # Each page's best vector evidence: the chunk with the largest ``vector_part``.
    best_vector: dict[int, _Row] = {}
    for row in search.rows:
        if row.similarity is None:
            continue
        held = best_vector.get(row.page_id)
        part = vector_part(row.similarity, secondary=row.secondary)
        if held is None or part > vector_part(
            held.similarity, secondary=held.secondary
        ):
            best_vector[row.page_id] = row
    for page in search.pages.values():
        page_row = page_rows.get(page.page_id)
        if page_row is None:
            continue
        share = (
            search.page_keyword[page.page_id] / best_keyword
            if page.keyword_chunk is not None and best_keyword > 0
            else 0.0
        )
        vector_row = best_vector.get(page.page_id)
        if vector_row is None and not search.degraded:
            # None of its chunks has an embedding yet (a page just written, its
            # embedding pending): the vector arm has not judged it, so the keyword
            # arm's evidence stands for both instead of a vector part of 0.
            key = pending_key(share)
        elif vector_row is None:
            key = fused_key(share, None)
        else:
            key = fused_key(
                share, vector_row.similarity, secondary=vector_row.secondary
            )
        if search.is_named(page.page_id, page_row.title):
            key += KEYWORD_WEIGHT
            key *= TITLE_BOOST
        key *= 1 + BACKLINK_FACTOR * math.log1p(page_row.backlinks)
        key *= _recency_boost(
            page_row.type_name, page_row.effective_date or page_row.updated_at, now
        )
        page.key = key


def _ordered_pages(search: _Search, page_rows: dict[int, _Row]) -> list[int]:
    """The hydrated pages in fused order, then the two rank guards of stage 4:
    ``keyword_lead`` (on idf-weighted query coverage; a page the query names
    counts as covered in full) and ``keep_keyword_hits``. With the vector arm
    off the keyword order stands unguarded."""
    terms = search.query_terms
    ordered = [
        p.page_id
        for p in sorted(
            (p for p in search.pages.values() if p.page_id in page_rows),
            key=lambda p: (*p.order(), page_rows[p.page_id].slug),
        )
    ]
    if search.degraded:
        return ordered
    leads = [pid for pid in search.keyword_pages if pid in page_rows]
    if sum(terms.idf.get(lx, 0.0) for lx in terms.base):
        page_lexemes: dict[int, set[str]] = defaultdict(set)
        for row in search.rows:
            page_lexemes[row.page_id].update(row.matched)
        coverage = {
            pid: 1.0
            if search.is_named(pid, page_rows[pid].title)
            else terms.coverage(page_lexemes[pid])
            for pid in ordered
        }
        if leads:
            ordered = keyword_lead(ordered, leads[0], coverage, KEYWORD_LEAD_MARGIN)
    return keep_keyword_hits(ordered, leads, min(search.limit, GUARD_WINDOW))


class _Results:
    """Stage 5: ``SearchResult`` rows of the ordered pages, one evidence chunk
    per page (and a second one while pages run short), near-copies folded."""

    def __init__(self, search: _Search) -> None:
        self.search = search
        self.hydrated = {row.chunk_id: row for row in search.rows}
        self.keyword_chunks: dict[int, list[int]] = defaultdict(list)
        for chunk_id, page_id in search.chunk_page.items():
            if chunk_id in search.keyword_score:
                self.keyword_chunks[page_id].append(chunk_id)
        self.page_chunks: dict[int, list[int]] = {}

    def result(self, page: _PageRank, chunk_id: int) -> SearchResult:
        """The result for ``page`` shown by its chunk ``chunk_id``: calibrated
        score, matched words, evidence kind and create safety."""
        terms, row = self.search.query_terms, self.hydrated[chunk_id]
        matched = terms.covered(row.matched)
        coverage = terms.coverage(matched)
        title_match = normalize_alias(row.title) == self.search.norm_query
        if page.named and not title_match:
            evidence = "alias_hit"
        elif title_match:
            evidence = "exact_title_match"
        elif row.similarity is not None and row.similarity >= HIGH_VECTOR_MATCH:
            evidence = "high_vector_match"
        elif page.keyword_rank is not None and coverage >= KEYWORD_EXACT:
            evidence = "keyword_exact"
        else:
            evidence = "weak_semantic"
        score = 1.0 if evidence in ("alias_hit", "exact_title_match") else 0.0
        return SearchResult(
            slug=row.slug,
            title=row.title,
            source_id=row.source_id,
            type=row.type_name,
            chunk=row.text,
            score=max(score, calibrated_score(coverage, row.similarity)),
            similarity=row.similarity,
            evidence=evidence,
            create_safety=EVIDENCE_SAFETY[evidence],
            page_id=row.page_id,
            chunk_ordinal=row.ordinal,
            keyword_hit=page.keyword_rank is not None,
            matched_terms=[
                word
                for word, lexemes in terms.words.items()
                if matched.intersection(lexemes)
            ],
            provenance=row.provenance if isinstance(row.provenance, dict) else {},
        )

    def evidence_chunks(self, page: _PageRank) -> list[int]:
        """The page's chunks, best first: the chunk of the arm ranking it higher
        (a tie goes to the keyword arm), then the other arm's, then the keyword
        arm's other chunks of the page."""
        first, second = page.keyword_chunk, page.vector_chunk
        if page.keyword_rank is None or (
            page.vector_rank is not None and page.vector_rank < page.keyword_rank
        ):
            first, second = second, first
        score = self.search.keyword_score
        more = sorted(
            self.keyword_chunks.get(page.page_id, ()), key=lambda c: -score[c]
        )
        out: list[int] = []
        for chunk_id in (first, second, *more):
            if (
                chunk_id is not None
                and chunk_id in self.hydrated
                and chunk_id not in out
            ):
                out.append(chunk_id)
        return out

    def candidates(self, ordered: list[int]) -> Iterator[FoldCandidate]:
        """``ordered``'s pages as fold candidates (their results built lazily)."""
        for pid in ordered:
            self.page_chunks[pid] = self.evidence_chunks(self.search.pages[pid])
            row = self.hydrated[self.page_chunks[pid][0]]

            def build(
                page: _PageRank = self.search.pages[pid], chunk_id: int = row.chunk_id
            ) -> SearchResult | None:
                first = self.result(page, chunk_id)
                # Neither arm vouches for a page scoring 0 (no query term, cosine
                # at or below COSINE_FLOOR): one of the k nearest neighbours the
                # vector arm returns however unrelated they are. Left out rather
                # than sent with score 0.
                return first if first.score > 0.0 else None

            yield FoldCandidate(row.slug, row.title, row.text, row.secondary, build)

    def listed(self, ordered: list[int]) -> list[SearchResult]:
        """At most ``limit`` results: one per page after folding, then each
        page's second chunk while fewer than ``limit`` pages matched."""
        limit = self.search.limit
        firsts = fold_near_duplicates(self.candidates(ordered), limit=limit)
        spare = limit - len(firsts)
        results: list[SearchResult] = []
        for first in firsts:
            results.append(first)
            chunks = self.page_chunks[first.page_id]
            if spare > 0 and len(chunks) > 1 and MAX_CHUNKS_PER_PAGE > 1:
                results.append(self.result(self.search.pages[first.page_id], chunks[1]))
                spare -= 1
        return results


def _within_budget(response: SearchResponse, budget_tokens: int) -> SearchResponse:
    """Keep whole results, best first, while their chunk and title fit in
    ``budget_tokens`` (chars/4); record what was used and dropped."""
    kept: list[SearchResult] = []
    used = 0
    for item in response.results:
        cost = estimate_tokens(item.chunk) + estimate_tokens(item.title)
        if used + cost <= budget_tokens:
            kept.append(item)
            used += cost
    response.dropped_count = len(response.results) - len(kept)
    response.results = kept
    response.budget_tokens = budget_tokens
    response.budget_used = used
    return response


def page_search(
    *,
    scope: ReadScope,
    query: str,
    limit: int = 10,
    sources: Sequence[str] | None = None,
    budget_tokens: int | None = None,
    types: Sequence[str] | None = None,
    query_embedding: Sequence[float] | None = None,
) -> SearchResponse:
    """Hybrid search over page chunks (SPEC §3, issue 26); see the module docstring.

    ``scope`` decides the readable sources and visibilities; ``sources`` can only
    narrow it. ``types`` keeps pages of those type names. ``limit`` 1..100 results:
    one per page, best page first; a page's second chunk is added only when fewer
    than ``limit`` pages matched (at most 2 per page). ``budget_tokens`` (chars/4)
    keeps whole results, best first, while they fit. ``query_embedding`` skips
    embedding the query (benchmarks; the SPEC §11 latency excludes it). Raises
    ``InvalidParams`` for a blank query or a bad limit or budget. Returns a
    ``SearchResponse``.
    """
    text = _validated_query(query, limit, budget_tokens)
    source_ids = list(scope.source_ids)
    if sources:
        source_ids = [s for s in source_ids if s in set(sources)]
    empty = SearchResponse(
        query=text,
        results=[],
        search_degraded=None,
        budget_tokens=budget_tokens,
        budget_used=0 if budget_tokens is not None else None,
        dropped_count=0 if budget_tokens is not None else None,
    )
    # The query's meaning is embedded without its ``-word`` exclusions: "harbour
    # -zephyr" must not pull the vector arm toward Zephyr.
    positive = _EXCLUDED.sub(" ", text).strip()
    if not source_ids or not positive:
        return empty  # nothing readable, or only exclusions: nothing asked for
    vector = (
        list(query_embedding)
        if query_embedding is not None
        else _query_vector(positive)
    )
    reason = _degradation(
        source_ids, list(scope.visibilities), vector_ok=vector is not None
    )
    empty.search_degraded = reason
    search = _Search(
        text=text,
        norm_query=normalize_alias(text),
        limit=limit,
        source_ids=source_ids,
        visibilities=list(scope.visibilities),
        types=list(types) if types else None,
        literal=Vector(vector).to_text() if vector is not None else "",
        degraded=vector is None,
    )
    _gather(search)
    if not search.rows:
        return empty
    page_rows: dict[int, _Row] = {}
    for row in search.rows:
        page_rows.setdefault(row.page_id, row)
    _fuse(search, page_rows)
    ordered = _ordered_pages(search, page_rows)
    response = SearchResponse(
        query=text,
        results=_Results(search).listed(ordered),
        search_degraded=reason,
    )
    if budget_tokens is not None:
        return _within_budget(response, budget_tokens)
    return response
