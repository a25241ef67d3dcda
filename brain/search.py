"""Hybrid page search (SPEC §3): a keyword arm and a vector arm fused by RRF.

Pipeline, for one query inside one ``ReadScope`` (the only scoping input, SPEC §8):

1. keyword arm: ``websearch_to_tsquery(BRAIN_FTS_LANGUAGE, q)`` over ``Chunk.tsv``; the
   matching chunks are capped at ``KEYWORD_MATCH_CAP`` (500) before ranking (ranking every
   match of a very common word is what costs, SPEC §11), then the best
   ``ARM_CANDIDATES`` (≥ 50) by ``ts_rank``;
2. vector arm: HNSW cosine (``<=>``) with iterative scans, ``VECTOR_CHUNK_POOL``
   nearest chunks, collapsed to the best chunk per page, then the best
   ``ARM_CANDIDATES`` pages;
3. reciprocal rank fusion, k = 60, normalised by its maximum; blended score
   0.7 × normalised RRF + 0.3 × raw cosine (keyword-only mode: normalised RRF);
4. multiplicative boosts: exact title or alias ×1.25, backlinks
   ×(1 + 0.05·ln(1 + n)) without ``mentions``, recency per page type;
5. at most 2 chunks per page, ``limit`` results, ``evidence`` and ``create_safety``
   stamped on each, then the token budget (chars/4) applied to whole results.

``search_degraded`` is None when search is whole, else a string naming why: with
provider ``none`` or a failing provider the vector arm is skipped
(``vector_search_unavailable: …``); when some searched chunks have no embedding yet
(``embeddings_pending: N of M``) the vector arm cannot see them. Soft-deleted pages have no chunks and are
filtered again when results are hydrated.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from pgvector import Vector

from brain import embeddings
from brain.access import ReadScope
from brain.exceptions import PROTOCOL_VERSION, InvalidParams
from brain.selectors import backlinks_sql
from brain.text import estimate_tokens, normalize_alias

RRF_K = 60
ARM_CANDIDATES = 50
KEYWORD_MATCH_CAP = 500
VECTOR_CHUNK_POOL = 100
MAX_CHUNKS_PER_PAGE = 2
MAX_LIMIT = 100
RRF_WEIGHT = 0.7
COSINE_WEIGHT = 0.3
TITLE_BOOST = 1.25
BACKLINK_FACTOR = 0.05
HIGH_VECTOR_MATCH = 0.80
KEYWORD_EXACT = 0.6
# Keyword guard: the pages the keyword arm ranks in its top KEYWORD_GUARD are never
# pushed out of the results by vector neighbours (see ``_keep_keyword_hits``).
KEYWORD_GUARD = 3
# Recency per page type: (half-life in days, coefficient); multiplier
# 1 + RECENCY_STRENGTH · c · h / (h + age_days). Concepts are evergreen.
RECENCY: dict[str, tuple[float, float]] = {
    "person": (365, 0.3),
    "company": (365, 0.3),
    "organization": (365, 0.3),
    "project": (180, 0.4),
    "deal": (180, 0.5),
    "email": (30, 1.0),
    "meeting": (60, 1.0),
    "note": (90, 0.3),
    "document": (180, 0.3),
    "concept": (1, 0.0),
}
RECENCY_DEFAULT = (90, 0.3)
RECENCY_STRENGTH = 0.2

EVIDENCE_SAFETY = {
    "alias_hit": "exists",
    "exact_title_match": "exists",
    "high_vector_match": "exists",
    "keyword_exact": "probable",
    "weak_semantic": "unknown",
}


@dataclass
class SearchResult:
    """One search hit: a chunk of a page (SPEC §3 result fields).

    ``similarity`` is the raw query↔chunk cosine (None in keyword-only mode);
    ``score`` the final blended and boosted score; ``evidence`` one of
    ``alias_hit | exact_title_match | high_vector_match | keyword_exact |
    weak_semantic`` and ``create_safety`` one of ``exists | probable | unknown``.
    """

    slug: str
    title: str
    source_id: str
    type: str
    chunk: str
    score: float
    similarity: float | None
    evidence: str
    create_safety: str
    page_id: int = 0
    chunk_ordinal: int = 0
    keyword_hit: bool = False
    provenance: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (ids as strings, scores rounded to 6 places)."""
        return {
            "slug": self.slug,
            "title": self.title,
            "source_id": self.source_id,
            "type": self.type,
            "chunk": self.chunk,
            "score": round(self.score, 6),
            "similarity": None
            if self.similarity is None
            else round(self.similarity, 6),
            "evidence": self.evidence,
            "create_safety": self.create_safety,
            "provenance": self.provenance,
        }


@dataclass
class SearchResponse:
    """The answer to one search: results best first, plus budget accounting.

    ``budget_used`` and ``dropped_count`` are set only when a budget was given;
    ``search_degraded`` is None when search is whole, else why it is not (see the
    module docstring).
    """

    query: str
    results: list[SearchResult]
    search_degraded: str | None
    budget_tokens: int | None = None
    budget_used: int | None = None
    dropped_count: int | None = None
    protocol_version: int = PROTOCOL_VERSION


@dataclass
class _Candidate:
    chunk_id: int
    page_id: int
    rrf: float = 0.0
    keyword_rank: int | None = None
    vector_rank: int | None = None
    similarity: float | None = None


def _keyword_arm(
    cursor: Any,
    *,
    query: str,
    alias: str,
    source_ids: Sequence[str],
    visibilities: Sequence[str],
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Keyword arm and alias hop in one round trip.

    Returns ``(keyword, aliased)``: the best ``ARM_CANDIDATES`` chunks by ``ts_rank``
    among at most ``KEYWORD_MATCH_CAP`` matches, best first; and the first chunk of
    each page (at most 20) whose normalised alias equals the query, as
    ``[(chunk_id, page_id)]``.
    """
    cursor.execute(
        """
        WITH q AS (SELECT websearch_to_tsquery(%(lang)s::regconfig, %(q)s) AS tsq),
        matched AS (
            SELECT c.id, c.page_id, c.tsv
            FROM brain_chunk c, q
            WHERE c.tsv @@ q.tsq
              AND c.source_id = ANY(%(sources)s)
              AND c.visibility = ANY(%(vis)s)
            LIMIT %(cap)s
        ),
        ranked AS (
            SELECT m.id, m.page_id
            FROM matched m, q
            ORDER BY ts_rank(m.tsv, q.tsq) DESC, m.id
            LIMIT %(n)s
        ),
        aliased AS (
            SELECT DISTINCT ON (a.page_id) c.id, a.page_id
            FROM brain_alias a
            JOIN brain_chunk c ON c.page_id = a.page_id AND c.visibility = ANY(%(vis)s)
            WHERE a.source_id = ANY(%(sources)s) AND a.alias = %(alias)s
            ORDER BY a.page_id, c.ordinal
            LIMIT 20
        )
        SELECT id, page_id, true FROM ranked
        UNION ALL
        SELECT id, page_id, false FROM aliased
        """,
        {
            "lang": settings.BRAIN_FTS_LANGUAGE,
            "q": query[:4000],
            "alias": alias[:320],
            "sources": list(source_ids),
            "vis": list(visibilities),
            "cap": KEYWORD_MATCH_CAP,
            "n": ARM_CANDIDATES,
        },
    )
    keyword: list[tuple[int, int]] = []
    aliased: list[tuple[int, int]] = []
    for chunk_id, page_id, is_keyword in cursor.fetchall():
        (keyword if is_keyword else aliased).append((chunk_id, page_id))
    return keyword, aliased


def _vector_arm(
    cursor: Any, *, vector: str, source_ids: Sequence[str], visibilities: Sequence[str]
) -> list[tuple[int, int, float]]:
    """HNSW nearest chunks, collapsed to the best chunk per page before the limit;
    returns ``[(chunk_id, page_id, cosine)]`` for the best ``ARM_CANDIDATES`` pages."""
    cursor.execute(
        "SELECT set_config('hnsw.ef_search', %s, true),"
        " set_config('hnsw.iterative_scan', 'relaxed_order', true)",
        [str(VECTOR_CHUNK_POOL)],
    )
    cursor.execute(
        """
        SELECT c.id, c.page_id, 1 - (c.embedding <=> %(v)s::vector) AS sim
        FROM brain_chunk c
        WHERE c.embedding IS NOT NULL
          AND c.source_id = ANY(%(sources)s)
          AND c.visibility = ANY(%(vis)s)
        ORDER BY c.embedding <=> %(v)s::vector
        LIMIT %(pool)s
        """,
        {
            "v": vector,
            "sources": list(source_ids),
            "vis": list(visibilities),
            "pool": VECTOR_CHUNK_POOL,
        },
    )
    best: dict[int, tuple[int, int, float]] = {}
    for chunk_id, page_id, sim in cursor.fetchall():
        if page_id not in best or sim > best[page_id][2]:
            best[page_id] = (chunk_id, page_id, float(sim))
    ranked = sorted(best.values(), key=lambda r: -r[2])
    return ranked[:ARM_CANDIDATES]


@dataclass
class _Row:
    chunk_id: int
    ordinal: int
    text: str
    page_id: int
    slug: str
    title: str
    source_id: str
    type_name: str
    effective_date: date | None
    updated_at: datetime
    provenance: Any
    backlinks: int
    similarity: float | None


def _hydrate(
    cursor: Any,
    *,
    chunk_ids: Sequence[int],
    vector: str,
    source_ids: Sequence[str],
    visibilities: Sequence[str],
    types: list[str] | None,
) -> list[_Row]:
    """One query for every candidate: chunk text, its live page (scope re-checked,
    soft-deleted pages dropped), type, backlinks without ``mentions`` and the raw
    cosine (NULL in keyword-only mode)."""
    cursor.execute(
        f"""
        SELECT c.id, c.ordinal, c.text, p.id, p.slug, p.title, p.source_id, t.name,
               p.effective_date, p.updated_at, p.frontmatter -> 'provenance',
               {backlinks_sql("p.id")},
               {"1 - (c.embedding <=> %(v)s::vector)" if vector else "NULL::float8"}
        FROM brain_chunk c
        JOIN brain_page p ON p.id = c.page_id
        JOIN brain_pagetype t ON t.id = p.type_id
        WHERE c.id = ANY(%(ids)s)
          AND p.deleted_at IS NULL
          AND p.source_id = ANY(%(sources)s)
          AND p.visibility = ANY(%(vis)s)
          AND (%(types)s::text[] IS NULL OR t.name = ANY(%(types)s::text[]))
        """,
        {
            "v": vector,
            "ids": list(chunk_ids),
            "sources": list(source_ids),
            "vis": list(visibilities),
            "types": types,
        },
    )
    out = []
    for row in cursor.fetchall():
        provenance = row[10]
        if isinstance(provenance, str):
            provenance = json.loads(provenance)
        out.append(
            _Row(
                chunk_id=row[0],
                ordinal=row[1],
                text=row[2],
                page_id=row[3],
                slug=row[4],
                title=row[5],
                source_id=row[6],
                type_name=row[7],
                effective_date=row[8],
                updated_at=row[9],
                provenance=provenance,
                backlinks=int(row[11]),
                similarity=None if row[12] is None else float(row[12]),
            )
        )
    return out


def _recency_boost(type_name: str, when: date | datetime, now: datetime) -> float:
    half_life, coefficient = RECENCY.get(type_name, RECENCY_DEFAULT)
    if coefficient == 0:
        return 1.0
    when_date = when.date() if isinstance(when, datetime) else when
    age_days = max((now.date() - when_date).days, 0)
    return 1 + RECENCY_STRENGTH * coefficient * half_life / (half_life + age_days)


_PENDING_SQL = """
SELECT EXISTS(
    SELECT 1 FROM brain_chunk
    WHERE source_id = ANY(%(sources)s) AND visibility = ANY(%(visibilities)s)
      AND embedding IS NULL
)
"""
_PENDING_COUNT_SQL = """
SELECT count(*) FILTER (WHERE embedding IS NULL), count(*) FROM brain_chunk
WHERE source_id = ANY(%(sources)s) AND visibility = ANY(%(visibilities)s)
"""


def _degradation(
    source_ids: Sequence[str], visibilities: Sequence[str], *, vector_ok: bool
) -> str | None:
    """Why search is not whole, or None (SPEC §3, §4 ``search_degraded``).

    ``vector_search_unavailable: provider <name>`` when the query could not be
    embedded; else ``embeddings_pending: N of M`` when N of the M searched chunks have
    no embedding yet (one indexed EXISTS on ``brain_chunk_embedding_pending`` when
    every chunk is embedded; the counts only when some are not).
    """
    if not vector_ok:
        return (
            f"vector_search_unavailable: provider {settings.BRAIN_EMBEDDING_PROVIDER}"
            " (keyword-only)"
        )
    params = {"sources": list(source_ids), "visibilities": list(visibilities)}
    with connection.cursor() as cursor:
        cursor.execute(_PENDING_SQL, params)
        if not cursor.fetchone()[0]:
            return None
        cursor.execute(_PENDING_COUNT_SQL, params)
        pending, total = cursor.fetchone()
    return f"embeddings_pending: {pending} of {total}"


def _query_vector(query: str) -> list[float] | None:
    vectors, _model = embeddings.embed_texts([query])
    return vectors[0] if vectors else None


def _keep_keyword_hits(
    results: list[SearchResult],
    scored: list[SearchResult],
    keyword: Sequence[tuple[int, int]],
) -> list[SearchResult]:
    """The keyword guard of hybrid fusion (SPEC §3; issue 24): every page among the
    first ``KEYWORD_GUARD`` distinct pages of the keyword arm (``keyword`` =
    ``[(chunk_id, page_id)]`` best first) that has a scored result but is missing
    from ``results`` takes the place of the lowest-scored unprotected result, so
    vector neighbours can never push a top keyword hit out of the top ``limit``.

    Why a guard, not weights: RRF already gives keyword rank 1 the same 1/61 as
    vector rank 1, but a page absent from the vector arm's 50 gets no cosine term
    in the 0.7/0.3 blend, so a known-item query whose exact sentence the keyword arm
    ranks first could fall behind ten paraphrase neighbours (measured on a
    1,000-page GBrain-style corpus: hybrid recall@10 95 % vs keyword 100 %; with the
    guard hybrid ≥ keyword by construction, ``tests/brain/test_links_corpus.py``).
    Lowering the cosine weight would also reorder every other query. Order and
    scores are unchanged; the protected result is placed by its own score.
    """
    protected: list[int] = []
    for _chunk, page_id in keyword:
        if page_id not in protected:
            protected.append(page_id)
        if len(protected) >= KEYWORD_GUARD:
            break
    present = {r.page_id for r in results}
    missing = [p for p in protected if p not in present]
    if not missing or not results:
        return results
    best: dict[int, SearchResult] = {}
    for result in scored:
        best.setdefault(result.page_id, result)
    kept = list(results)
    for page_id in missing:
        if page_id not in best:
            continue  # filtered out (type, visibility, deleted)
        victims = [i for i, r in enumerate(kept) if r.page_id not in protected]
        if not victims:
            break
        kept.pop(victims[-1])
        kept.append(best[page_id])
    kept.sort(key=lambda r: (-r.score, r.slug, r.chunk_ordinal))
    return kept


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
    """Hybrid search over page chunks (SPEC §3); see the module docstring.

    ``scope`` decides the readable sources and visibilities; ``sources`` can only
    narrow it. ``types`` keeps pages of those type names. ``limit`` 1..100 results
    (at most 2 per page). ``budget_tokens`` (chars/4) keeps whole results, best first,
    while they fit. ``query_embedding`` skips embedding the query (benchmarks; the
    SPEC §11 latency excludes it). Raises ``InvalidParams`` for a blank query or a
    bad limit or budget. Returns a ``SearchResponse``.
    """
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
    if not source_ids:
        return empty

    vector = (
        list(query_embedding) if query_embedding is not None else _query_vector(text)
    )
    degraded = vector is None
    reason = _degradation(source_ids, list(scope.visibilities), vector_ok=not degraded)
    empty.search_degraded = reason
    literal = Vector(vector).to_text() if vector is not None else ""
    visibilities = list(scope.visibilities)
    norm_query = normalize_alias(text)

    candidates: dict[int, _Candidate] = {}
    # The vector arm's SET LOCAL knobs need a transaction; keyword-only mode does not.
    txn = transaction.atomic() if not degraded else nullcontext()
    with txn, connection.cursor() as cursor:
        keyword, aliased = _keyword_arm(
            cursor,
            query=text,
            alias=norm_query,
            source_ids=source_ids,
            visibilities=visibilities,
        )
        for rank, (chunk_id, page_id) in enumerate(keyword, start=1):
            cand = candidates.setdefault(chunk_id, _Candidate(chunk_id, page_id))
            cand.keyword_rank = rank
            cand.rrf += 1 / (RRF_K + rank)
        if not degraded:
            nearest = _vector_arm(
                cursor, vector=literal, source_ids=source_ids, visibilities=visibilities
            )
            for rank, (chunk_id, page_id, sim) in enumerate(nearest, start=1):
                cand = candidates.setdefault(chunk_id, _Candidate(chunk_id, page_id))
                cand.vector_rank = rank
                cand.similarity = sim
                cand.rrf += 1 / (RRF_K + rank)
        # Alias hop: a page whose alias (or title) equals the query joins the pool.
        alias_pages = {page_id for _chunk, page_id in aliased}
        present = {c.page_id for c in candidates.values()}
        for chunk_id, page_id in aliased:
            if page_id not in present:
                candidates.setdefault(chunk_id, _Candidate(chunk_id, page_id))
        rows = (
            _hydrate(
                cursor,
                chunk_ids=[c.chunk_id for c in candidates.values()],
                vector=literal,
                source_ids=source_ids,
                visibilities=visibilities,
                types=list(types) if types else None,
            )
            if candidates
            else []
        )

    if not rows:
        return empty
    hydrated = {row.chunk_id: row for row in rows}
    alias_hits = alias_pages

    max_rrf = max((c.rrf for c in candidates.values()), default=0.0) or 1.0
    now = timezone.now()
    scored: list[SearchResult] = []
    for cand in candidates.values():
        row = hydrated.get(cand.chunk_id)
        if row is None:
            continue
        if cand.similarity is None and row.similarity is not None:
            cand.similarity = row.similarity
        norm_rrf = cand.rrf / max_rrf
        if degraded:
            base = norm_rrf
        else:
            base = RRF_WEIGHT * norm_rrf + COSINE_WEIGHT * max(
                cand.similarity or 0.0, 0.0
            )
        title_match = normalize_alias(row.title) == norm_query
        alias_hit = row.page_id in alias_hits and not title_match
        score = base
        if title_match or alias_hit:
            score *= TITLE_BOOST
        score *= 1 + BACKLINK_FACTOR * math.log1p(row.backlinks)
        score *= _recency_boost(
            row.type_name, row.effective_date or row.updated_at, now
        )
        if alias_hit:
            evidence = "alias_hit"
        elif title_match:
            evidence = "exact_title_match"
        elif cand.similarity is not None and cand.similarity >= HIGH_VECTOR_MATCH:
            evidence = "high_vector_match"
        elif cand.keyword_rank is not None and norm_rrf >= KEYWORD_EXACT:
            evidence = "keyword_exact"
        else:
            evidence = "weak_semantic"
        scored.append(
            SearchResult(
                slug=row.slug,
                title=row.title,
                source_id=row.source_id,
                type=row.type_name,
                chunk=row.text,
                score=score,
                similarity=cand.similarity,
                evidence=evidence,
                create_safety=EVIDENCE_SAFETY[evidence],
                page_id=row.page_id,
                chunk_ordinal=row.ordinal,
                keyword_hit=cand.keyword_rank is not None,
                provenance=row.provenance if isinstance(row.provenance, dict) else {},
            )
        )

    scored.sort(key=lambda r: (-r.score, r.slug, r.chunk_ordinal))
    per_page: dict[int, int] = defaultdict(int)
    results: list[SearchResult] = []
    for result in scored:
        if per_page[result.page_id] >= MAX_CHUNKS_PER_PAGE:
            continue
        per_page[result.page_id] += 1
        results.append(result)
        if len(results) >= limit:
            break
    if not degraded:
        results = _keep_keyword_hits(results, scored, keyword)

    response = SearchResponse(query=text, results=results, search_degraded=reason)
    if budget_tokens is not None:
        kept: list[SearchResult] = []
        used = 0
        for result in results:
            cost = estimate_tokens(result.chunk) + estimate_tokens(result.title)
            if used + cost <= budget_tokens:
                kept.append(result)
                used += cost
        response.results = kept
        response.budget_tokens = budget_tokens
        response.budget_used = used
        response.dropped_count = len(results) - len(kept)
    return response
