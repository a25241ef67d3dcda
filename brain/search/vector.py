"""Stage 3 of page search (SPEC §3): the vector arm (HNSW cosine with
iterative scans), the 0..1 evidence scale of a cosine (``cosine_part``,
``vector_part``), the hydration of the found chunks, and whether search is degraded
(no model, or embeddings pending).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.conf import settings
from django.db import connection

from brain import embeddings
from brain.search.keyword import SECONDARY_WEIGHT
from brain.search.results import ARM_CANDIDATES
from brain.search.terms import _tsquery_or
from brain.selectors import backlinks_sql

VECTOR_CHUNK_POOL = 100
HIGH_VECTOR_MATCH = 0.80
# Calibrated score (``calibrated_score``): cosine mapped from FLOOR (0) to FULL (1).
COSINE_FLOOR = 0.30
COSINE_FULL = HIGH_VECTOR_MATCH


def _vector_arm(
    cursor: Any,
    *,
    vector: str,
    excluded: Sequence[str],
    source_ids: Sequence[str],
    visibilities: Sequence[str],
) -> list[tuple[int, int, float]]:
    """HNSW nearest chunks, collapsed to the best chunk per page before the limit
    (best by ``vector_part``: a page's own words outweigh the same cosine in its
    quoted history); returns ``[(chunk_id, page_id, vector part)]`` for the best
    ``ARM_CANDIDATES`` pages. A chunk holding one of the ``excluded`` lexemes (the
    query's ``-word``) is skipped, as in the keyword arm (SPEC §3). Only chunks
    embedded by the query's model count (issue 46: a vector of another model is
    not comparable; those chunks are found by keywords until ``job reembed``)."""
    cursor.execute(
        "SELECT set_config('hnsw.ef_search', %s, true),"
        " set_config('hnsw.iterative_scan', 'relaxed_order', true)",
        [str(VECTOR_CHUNK_POOL)],
    )
    cursor.execute(
        """
        SELECT c.id, c.page_id, 1 - (c.embedding <=> %(v)s::vector) AS sim,
               c.secondary
        FROM brain_chunk c
        WHERE c.embedding IS NOT NULL
          AND c.embedding_model = %(model)s
          AND c.source_id = ANY(%(sources)s)
          AND c.visibility = ANY(%(vis)s)
          AND NOT (%(ex)s <> '' AND c.tsv @@ %(ex)s::tsquery)
        ORDER BY c.embedding <=> %(v)s::vector
        LIMIT %(pool)s
        """,
        {
            "v": vector,
            "model": embeddings.current_model(),
            "ex": _tsquery_or(excluded),
            "sources": list(source_ids),
            "vis": list(visibilities),
            "pool": VECTOR_CHUNK_POOL,
        },
    )
    best: dict[int, tuple[int, int, float]] = {}
    for chunk_id, page_id, sim, secondary in cursor.fetchall():
        part = vector_part(float(sim), secondary=secondary)
        if page_id not in best or part > best[page_id][2]:
            best[page_id] = (chunk_id, page_id, part)
    ranked = sorted(best.values(), key=lambda r: -r[2])
    return ranked[:ARM_CANDIDATES]


# The cosine of a chunk with the query, only when both come from the same model.
_COSINE = (
    "CASE WHEN c.embedding_model = %(model)s"
    " THEN 1 - (c.embedding <=> %(v)s::vector) END"
)


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
    matched: tuple[str, ...] = ()
    secondary: bool = False


def _hydrate(
    cursor: Any,
    *,
    chunk_ids: Sequence[int],
    vector: str,
    source_ids: Sequence[str],
    visibilities: Sequence[str],
    types: list[str] | None,
    lexemes: Sequence[str],
) -> list[_Row]:
    """One query for every candidate: chunk text, its live page (scope re-checked,
    soft-deleted pages dropped), type, backlinks without ``mentions``, the raw
    cosine (NULL in keyword-only mode and for a chunk embedded by another model),
    which of the query's ``lexemes`` the
    chunk holds and whether it is a secondary chunk."""
    cursor.execute(
        f"""
        SELECT c.id, c.ordinal, c.text, p.id, p.slug, p.title, p.source_id, t.name,
               p.effective_date, p.updated_at, p.frontmatter -> 'provenance',
               {backlinks_sql("p.id")},
               {_COSINE if vector else "NULL::float8"},
               tsvector_to_array(ts_filter(
                   setweight(setweight(c.tsv, 'D'), 'A', %(lexemes)s::text[]),
                   '{{a}}')),
               c.secondary
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
            "model": embeddings.current_model(),
            "ids": list(chunk_ids),
            "sources": list(source_ids),
            "vis": list(visibilities),
            "types": types,
            "lexemes": list(lexemes),
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
                matched=tuple(row[13] or ()),
                secondary=bool(row[14]),
            )
        )
    return out


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


_STALE_SQL = """
SELECT EXISTS(
    SELECT 1 FROM brain_chunk
    WHERE ((embedding_model > '' AND embedding_model < %(model)s)
           OR embedding_model > %(model)s)
      AND embedding IS NOT NULL
)
"""
_STALE_COUNT_SQL = """
SELECT count(*) FILTER (WHERE embedding IS NOT NULL
                          AND (%(all)s OR embedding_model <> %(model)s)),
       count(*)
FROM brain_chunk
WHERE source_id = ANY(%(sources)s) AND visibility = ANY(%(visibilities)s)
"""


def _degradation(
    source_ids: Sequence[str], visibilities: Sequence[str], *, vector_ok: bool
) -> str | None:
    """Why search is not whole, or None (SPEC §3, §4 ``search_degraded``).

    ``embeddings_stale: N of M (…)`` when N of the M searched chunks hold a vector
    of another model or dimension than the configured one (issue 46: those are
    found by keywords only, every chunk when the dimension differs, until job
    ``reembed`` finishes); else ``vector_search_unavailable: provider <name>
    (keyword-only)`` when the query could not be embedded (``(model loading, …)``
    while the local model is still loading in this process's background thread);
    then ``embeddings_pending: N of M`` when N of the M searched chunks have no
    embedding yet (one indexed EXISTS each on ``brain_chunk_embedding_model``,
    over every source so it stays two index range probes, and
    ``brain_chunk_embedding_pending`` when every chunk is current; the scoped
    counts only when some are not). Stale and pending join with "; ".
    """
    params = {"sources": list(source_ids), "visibilities": list(visibilities)}
    differ = embeddings.dimensions_differ()
    stale = _stale(params, all_stale=differ)
    if not vector_ok and not differ:
        provider = settings.BRAIN_EMBEDDING_PROVIDER
        if embeddings.model_loading():
            return (
                f"vector_search_unavailable: provider {provider} (model loading, "
                "keyword-only until it is ready, usually a few seconds)"
            )
        return f"vector_search_unavailable: provider {provider} (keyword-only)"
    with connection.cursor() as cursor:
        cursor.execute(_PENDING_SQL, params)
        if not cursor.fetchone()[0]:
            return stale
        cursor.execute(_PENDING_COUNT_SQL, params)
        pending, total = cursor.fetchone()
    reasons = [stale, f"embeddings_pending: {pending} of {total}"]
    return "; ".join(r for r in reasons if r)


def _stale(params: dict[str, Any], *, all_stale: bool) -> str | None:
    """``embeddings_stale: N of M (…)`` for the searched chunks (``params``:
    sources, visibilities) whose vector the configured model cannot use (every
    embedded one when ``all_stale``: another dimension), or None (also when the
    stale chunks are all in sources this search does not read)."""
    model = embeddings.current_model()
    if not model:
        return None
    params = {**params, "model": model, "all": all_stale}
    with connection.cursor() as cursor:
        if not all_stale:
            cursor.execute(_STALE_SQL, params)
            if not cursor.fetchone()[0]:
                return None
        cursor.execute(_STALE_COUNT_SQL, params)
        stale, total = cursor.fetchone()
    if not stale and not all_stale:
        return None
    if all_stale:
        why = (
            f"the configured model {model} has another dimension than the stored "
            "vectors; keyword-only"
        )
    else:
        why = f"embedded by another model than {model}; keyword-only for them"
    return (
        f"embeddings_stale: {stale} of {total} ({why} until job "
        f"{embeddings.REEMBED_JOB} finishes)"
    )


def _query_vector(query: str) -> list[float] | None:
    vectors, _model = embeddings.embed_texts([query])
    return vectors[0] if vectors else None


def cosine_part(similarity: float | None) -> float:
    """A cosine on the 0..1 evidence scale shared by ``score`` and fusion: linear
    from ``COSINE_FLOOR`` 0.30 (0; the default model scores unrelated text below
    it) to ``COSINE_FULL`` 0.80 (1), clamped; 0 without a cosine (keyword-only)."""
    if similarity is None:
        return 0.0
    part = (similarity - COSINE_FLOOR) / (COSINE_FULL - COSINE_FLOOR)
    return min(max(part, 0.0), 1.0)


def vector_part(similarity: float | None, *, secondary: bool = False) -> float:
    """The vector arm's evidence of one chunk on the 0..1 fusion scale:
    ``cosine_part`` of its cosine, times ``SECONDARY_WEIGHT`` for a secondary chunk
    (quoted history, a signature or a list footer, ``brain.mailtext``), so a reply
    quoting an answer ranks below the message that gives it while the quote still
    counts where the original is not in the brain (issue 26).

    On the retrieval dev set (``benchmarks/retrieval_quality.py``) the weight was
    chosen on the even-numbered questions: hybrid R@1 there 0.875 at 1.0 (the
    split alone, which also drops keyword-only R@1 from 0.817 to 0.779 overall:
    a short signature chunk holding the title's words is scored as a short
    document), 0.894 at 0.85, 0.904 at 0.75, 0.894 at 0.65 and at 0.5 (before the
    split: 0.885). On the odd-numbered check half 0.75 gives R@1 0.846 and R@5
    0.971, as before the split.
    """
    part = cosine_part(similarity)
    return part * SECONDARY_WEIGHT if secondary else part
