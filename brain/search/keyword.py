"""Stage 2 of page search (SPEC §3): the keyword arm. BM25 over the query's
terms with AND and phrase boosts, candidates bounded by the rarest terms, secondary
chunks discounted (``SECONDARY_WEIGHT``), and a page's keyword score from its chunks
(``page_keyword_scores``, ``combine_page_scores``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from brain.search import terms as query_terms
from brain.search.terms import _quoted, _Terms, _tsquery_or

# Keyword arm (issue 26): candidate chunks at most (when only common terms: fewer),
# chunks ranked, document-frequency probe cap, how long the planner's lexeme
# statistics are cached, terms read from a query, BM25 constants, AND / phrase boosts.
KEYWORD_MATCH_CAP = 1000
COMMON_MATCH_CAP = 300
KEYWORD_CHUNKS = 100
BM25_K1 = 1.2
BM25_B = 0.75
AND_BOOST = 0.25
PHRASE_BOOST = 0.25
# A secondary chunk (quoted history, signature, list footer: ``brain.mailtext``)
# counts this share of its keyword score and of its cosine part (chosen on the even
# half of the retrieval dev set; see ``vector_part``).
SECONDARY_WEIGHT = 0.75
# Page-level keyword evidence (``page_keyword_scores``): the weight of a page's
# further chunk's new lexemes beside its best chunk. With it, on the retrieval dev
# set (ids 1-263) hybrid R@1/5/10 0.882/0.985/0.985 -> 0.886/0.985/0.989 and
# keyword-only 0.840/0.962/0.970 -> 0.844/0.962/0.973 (BM25 0.829/0.935/0.951);
# odd check half hybrid R@1 0.871 -> 0.871, keyword-only 0.848 -> 0.871; on the
# thread pages of ``--pages-from mail`` hybrid R@1 0.924 -> 0.935, keyword-only
# 0.886 -> 0.913, both halves up.
PAGE_EXTRA_WEIGHT = 0.75


@dataclass
class _KeywordHit:
    """One chunk of the keyword arm: its BM25-style ``score`` and the query lexemes
    it contains (``matched``)."""

    chunk_id: int
    page_id: int
    score: float
    matched: tuple[str, ...]


# A candidate chunk's occurrences of each query lexeme (its positions, at least 1),
# and, when the query has joined forms present, the same with each joined form's
# occurrences counted for each word it joins.
_OCCURRENCES = """
    SELECT x.lexeme, GREATEST(cardinality(x.positions), 1) AS tf
    FROM unnest(m.tsv) AS x
"""
_JOINED_OCCURRENCES = """
    SELECT COALESCE(jn.part, x.lexeme) AS lexeme,
           sum(GREATEST(cardinality(x.positions), 1)) AS tf
    FROM unnest(m.tsv) AS x
    LEFT JOIN unnest(%(join_from)s::text[], %(join_to)s::text[])
        AS jn(lexeme, part) ON jn.lexeme = x.lexeme
    GROUP BY 1
"""


def _keyword_arm(
    cursor: Any,
    *,
    text: str,
    terms: _Terms,
    alias: str,
    source_ids: Sequence[str],
    visibilities: Sequence[str],
) -> tuple[list[_KeywordHit], list[tuple[int, int]], list[tuple[_KeywordHit, float]]]:
    """Keyword arm and alias hop in one round trip (SPEC §3; issue 26).

    OR semantics over the query's meaningful terms: a chunk matching any of them is
    a candidate, so one missing or irregularly inflected word ("go" asked, "went"
    written) no longer empties the arm. Candidates are bounded: the terms are taken
    rarest first while their summed document frequencies stay within
    ``KEYWORD_MATCH_CAP`` (the rarest is always taken); the commoner terms only
    score. Each candidate is scored by BM25 (k1 ``BM25_K1`` 1.2, b ``BM25_B`` 0.75)::

        Σ_matched idf(t) · tf · (k1 + 1) / (tf + k1 · (1 − b + b · len / avg_len))

    with ``tf`` the lexeme's occurrences in the chunk (title included; its positions
    in the tsvector, so a page that keeps returning to a rare word outranks one
    that names it once: before issue 26's second pass tf was taken as 1),
    ``len`` the chunk's token count, ``avg_len`` over the candidates,
    ``idf(t) = ln(1 + (N − df + 0.5)/(df + 0.5))``. A concatenation of two query
    words (``_Terms.joined``, "redhat" for "Red Hat") is no term of its own: each
    of its occurrences counts as one of each word it joins, so a chunk writing
    "redhat" scores as one writing "red hat", and one writing both spellings has
    the words' term frequencies summed (saturating), not a third term. Then
    × (1 + ``AND_BOOST``) when the
    chunk holds every term and × (1 + ``PHRASE_BOOST``) when it holds them as a
    phrase (boosted, never required). Chunks holding an excluded ``-word`` are
    dropped. When every term is too common to bound (df ≥ ``DF_CAP``) the candidates
    are the first ``COMMON_MATCH_CAP`` chunks holding all of them.

    Page-level BM25 in the same statement (``combine_page_scores``): each page with a
    candidate chunk is scored by the same formula over the page, ``tf`` the
    lexeme's occurrences summed over the page's candidate chunks (a secondary
    chunk's counting ``SECONDARY_WEIGHT``), ``len`` the sum of the token counts of
    all the page's searched chunks (one probe of the ``page_id`` index per page,
    no tsvector read), ``avg_len`` over the candidate pages; × (1 + ``AND_BOOST``)
    when the page holds every term, × (1 + ``PHRASE_BOOST``) when one of its
    chunks holds the phrase. The candidate bound is unchanged: the pages are those
    of the (at most ``KEYWORD_MATCH_CAP``) candidate chunks. A page's chunks that
    hold none of the candidate terms (only commoner ones) add to its length, not
    to its term frequencies: reading their tsvectors as well cost 2.4× the
    keyword arm's time (p50 10 -> 25 ms on the retrieval dev set) for one
    question of the 343 at R@5.

    Returns ``(keyword, aliased, pages)``: the best ``KEYWORD_CHUNKS`` chunks as
    ``_KeywordHit`` best first; the first chunk of each page (at most 20) whose
    normalised alias equals the query, as ``[(chunk_id, page_id)]``; and
    ``[(best chunk, page score)]`` for the ``KEYWORD_CHUNKS`` pages with the best
    page-level BM25 and every page of ``keyword``, the best chunk being the page's
    best-scored candidate chunk (its evidence), in no particular order.
    """
    present = {lx: w for lx, w in terms.idf.items() if terms.df[lx] > 0}
    candidate_query, selective = _candidate_query(terms, present)
    joins, lexemes = _scored_lexemes(terms, present)
    params = _keyword_params(
        terms,
        text=text,
        alias=alias,
        source_ids=source_ids,
        visibilities=visibilities,
        lexemes=lexemes,
        joins=joins,
        candidate_query=candidate_query,
        selective=selective,
    )
    occurrences = _JOINED_OCCURRENCES if joins else _OCCURRENCES
    cursor.execute(_KEYWORD_SQL.replace("OCCURRENCES", occurrences), params)
    return _keyword_rows(cursor.fetchall())


def _keyword_params(
    terms: _Terms,
    *,
    text: str,
    alias: str,
    source_ids: Sequence[str],
    visibilities: Sequence[str],
    lexemes: list[str],
    joins: list[tuple[str, str]],
    candidate_query: str,
    selective: bool,
) -> dict[str, Any]:
    """The bound parameters of ``_KEYWORD_SQL``."""
    return {
        "lexemes": lexemes,
        "idfs": [terms.idf.get(lx, 0.0) for lx in lexemes],
        "filter": lexemes + [j for j in dict.fromkeys(j for j, _p in joins)],
        "join_from": [j for j, _p in joins],
        "join_to": [p for _j, p in joins],
        "lang": settings.BRAIN_FTS_LANGUAGE,
        "q": text[:4000],
        "phrase": "y" if len(lexemes) > 1 else "",
        "nterms": len(lexemes),
        "cq": candidate_query,
        "ex": _tsquery_or(terms.excluded),
        "alias": alias[:320],
        "sources": list(source_ids),
        "vis": list(visibilities),
        "cap": KEYWORD_MATCH_CAP if selective else COMMON_MATCH_CAP,
        "n": KEYWORD_CHUNKS,
        "k1": BM25_K1,
        "b": BM25_B,
        "and_boost": AND_BOOST,
        "phrase_boost": PHRASE_BOOST,
        "secondary": SECONDARY_WEIGHT,
    }


def _candidate_query(terms: _Terms, present: dict[str, float]) -> tuple[str, bool]:
    """``(tsquery text, selective)``: OR over the rarest present lexemes while
    their document frequencies sum to at most ``KEYWORD_MATCH_CAP`` (the rarest is
    always taken; none at or over ``DF_CAP``); when every term is too common,
    AND over all of them (``selective`` False); '' when nothing is present."""
    ranked = sorted(present, key=lambda lx: (terms.df[lx], lx))
    selective: list[str] = []
    budget = 0
    for lexeme in ranked:
        n = terms.df[lexeme]
        if n >= query_terms.DF_CAP or (selective and budget + n > KEYWORD_MATCH_CAP):
            break
        selective.append(lexeme)
        budget += n
    if selective:
        return _tsquery_or(selective), True
    if ranked:
        return " & ".join(_quoted(lx) for lx in ranked), False
    return "", False


def _scored_lexemes(
    terms: _Terms, present: dict[str, float]
) -> tuple[list[tuple[str, str]], list[str]]:
    """``(joins, lexemes)``: the query's own lexemes some chunk holds (itself or
    through a joined form) are the terms scored; a joined form counts as an
    occurrence of each word it joins (``joins``: ``(joined, part)`` pairs), so
    "redhat" scores as "red" and "hat" would and a chunk holding both spellings
    is not counted twice."""
    joins = [
        (joined, part)
        for joined, parts in terms.joined.items()
        if joined in present
        for part in dict.fromkeys(parts)
    ]
    lexemes = [
        lx for lx in terms.base if lx in present or any(lx == p for _j, p in joins)
    ]
    return joins, lexemes


def _keyword_rows(
    rows: list[tuple[Any, ...]],
) -> tuple[list[_KeywordHit], list[tuple[int, int]], list[tuple[_KeywordHit, float]]]:
    """``_KEYWORD_SQL``'s rows as ``(keyword, aliased, page_hits)`` (see
    ``_keyword_arm``)."""
    keyword: list[_KeywordHit] = []
    aliased: list[tuple[int, int]] = []
    page_hits: list[tuple[_KeywordHit, float]] = []
    for kind, chunk_id, page_id, matched, score, extra in rows:
        if kind == "c":
            keyword.append(
                _KeywordHit(chunk_id, page_id, float(score), tuple(matched or ()))
            )
        elif kind == "p":
            page_hits.append(
                (
                    _KeywordHit(chunk_id, page_id, float(extra), tuple(matched or ())),
                    float(score),
                )
            )
        else:
            aliased.append((chunk_id, page_id))
    return keyword, aliased, page_hits


# The keyword arm's one round trip (``_keyword_arm``): each candidate's tsvector
# is cut down to the query's lexemes once (positions kept: the phrase test still
# holds, and a lexeme's positions are its term frequency, title and text alike, at
# most 256 as PostgreSQL keeps them); then the BM25 sum over the lexemes it holds,
# joined to their idf (length: the chunk's token count); the page-level BM25 over
# the pages hit; the alias hop. ``OCCURRENCES`` is replaced by ``_OCCURRENCES`` or
# ``_JOINED_OCCURRENCES``.
_KEYWORD_SQL = """
WITH phrase AS (
    SELECT CASE WHEN %(phrase)s <> ''
                THEN phraseto_tsquery(%(lang)s::regconfig, %(q)s) END AS tsq
),
matched AS (
    SELECT c.id, c.page_id, c.secondary, GREATEST(c.token_count, 1) AS len,
           ts_filter(setweight(setweight(c.tsv, 'D'), 'A', %(filter)s::text[]),
                     '{a}') AS tsv
    FROM brain_chunk c
    WHERE %(cq)s <> '' AND c.tsv @@ %(cq)s::tsquery
      AND NOT (%(ex)s <> '' AND c.tsv @@ %(ex)s::tsquery)
      AND c.source_id = ANY(%(sources)s)
      AND c.visibility = ANY(%(vis)s)
    LIMIT %(cap)s
),
stats AS (
    SELECT GREATEST(avg(len), 1) AS avg_len FROM matched
),
scored AS (
    SELECT m.id, m.page_id, m.secondary, t.matched, t.weight,
           ph.tsq IS NOT NULL AND m.tsv @@ ph.tsq AS phrase_hit
    FROM matched m CROSS JOIN phrase ph CROSS JOIN stats s
    CROSS JOIN LATERAL (
        SELECT array_agg(u.lexeme ORDER BY u.ord) AS matched,
               sum(u.idf * u.tf * (%(k1)s + 1)
                   / (u.tf + %(k1)s * (1 - %(b)s + %(b)s * m.len / s.avg_len)))
                   AS weight
        FROM (
            SELECT w.lexeme, q.ord, (%(idfs)s::float8[])[q.ord] AS idf,
                   w.tf
            FROM (OCCURRENCES) w
            CROSS JOIN LATERAL array_position(
                %(lexemes)s::text[], w.lexeme) AS q(ord)
            WHERE q.ord IS NOT NULL
        ) u
    ) t
),
ranked AS (
    SELECT id, page_id, matched,
           weight
           * CASE WHEN cardinality(matched) = %(nterms)s
                  THEN 1 + %(and_boost)s ELSE 1 END
           * CASE WHEN phrase_hit THEN 1 + %(phrase_boost)s ELSE 1 END
           * CASE WHEN secondary THEN %(secondary)s ELSE 1 END AS score
    FROM scored
    WHERE weight IS NOT NULL
    ORDER BY score DESC, id
    LIMIT %(n)s
),
pages_hit AS (
    SELECT DISTINCT page_id FROM matched
),
page_len AS (
    SELECT c.page_id, sum(GREATEST(c.token_count, 1)) AS len
    FROM brain_chunk c JOIN pages_hit h ON h.page_id = c.page_id
    WHERE c.source_id = ANY(%(sources)s) AND c.visibility = ANY(%(vis)s)
    GROUP BY c.page_id
),
page_stats AS (
    SELECT GREATEST(avg(len), 1) AS avg_len FROM page_len
),
page_tf AS (
    SELECT m.page_id, w.lexeme,
           sum(w.tf * CASE WHEN m.secondary THEN %(secondary)s ELSE 1 END) AS tf
    FROM matched m CROSS JOIN LATERAL (OCCURRENCES) w
    GROUP BY 1, 2
),
page_scored AS (
    SELECT t.page_id, count(*) AS nmatched,
           sum((%(idfs)s::float8[])[q.ord] * t.tf * (%(k1)s + 1)
               / (t.tf + %(k1)s * (1 - %(b)s + %(b)s * l.len / s.avg_len)))
               AS weight
    FROM page_tf t JOIN page_len l ON l.page_id = t.page_id
    CROSS JOIN page_stats s
    CROSS JOIN LATERAL array_position(%(lexemes)s::text[], t.lexeme) AS q(ord)
    WHERE q.ord IS NOT NULL
    GROUP BY t.page_id
),
best_chunk AS (
    SELECT DISTINCT ON (sc.page_id) sc.page_id, sc.id, sc.matched,
           sc.score, sc.phrase_hit
    FROM (
        SELECT id, page_id, matched, phrase_hit,
               weight
               * CASE WHEN cardinality(matched) = %(nterms)s
                      THEN 1 + %(and_boost)s ELSE 1 END
               * CASE WHEN phrase_hit THEN 1 + %(phrase_boost)s ELSE 1 END
               * CASE WHEN secondary THEN %(secondary)s ELSE 1 END AS score
        FROM scored WHERE weight IS NOT NULL
    ) sc
    ORDER BY sc.page_id, sc.score DESC, sc.id
),
page_phrase AS (
    SELECT page_id, bool_or(phrase_hit) AS phrase_hit FROM scored
    GROUP BY page_id
),
page_ranked AS (
    SELECT ps.page_id, bc.id, bc.matched, bc.score AS chunk_score,
           ps.weight
           * CASE WHEN ps.nmatched = %(nterms)s
                  THEN 1 + %(and_boost)s ELSE 1 END
           * CASE WHEN pp.phrase_hit THEN 1 + %(phrase_boost)s ELSE 1 END
           AS score
    FROM page_scored ps
    JOIN best_chunk bc ON bc.page_id = ps.page_id
    JOIN page_phrase pp ON pp.page_id = ps.page_id
),
page_top AS (
    (SELECT * FROM page_ranked ORDER BY score DESC, page_id LIMIT %(n)s)
    UNION
    (SELECT pr.* FROM page_ranked pr
     WHERE pr.page_id IN (SELECT page_id FROM ranked))
),
aliased AS (
    SELECT DISTINCT ON (a.page_id) c.id, a.page_id
    FROM brain_alias a
    JOIN brain_chunk c ON c.page_id = a.page_id AND c.visibility = ANY(%(vis)s)
    WHERE a.source_id = ANY(%(sources)s) AND a.alias = %(alias)s
    ORDER BY a.page_id, c.ordinal
    LIMIT 20
)
SELECT 'c', id, page_id, matched, score, 0::float8 FROM ranked
UNION ALL
SELECT 'p', id, page_id, matched, score, chunk_score FROM page_top
UNION ALL
SELECT 'a', id, page_id, NULL, 0, 0 FROM aliased
"""


def page_keyword_scores(
    hits: Sequence[_KeywordHit], idf: dict[str, float]
) -> dict[int, float]:
    """The keyword arm's score of each page from its chunks' hits (issue 26): the
    page's best chunk's BM25 score plus ``PAGE_EXTRA_WEIGHT`` × the share of its
    next chunk's score earned by query lexemes the best chunk lacks (that chunk's
    score × the idf of its new lexemes ÷ the idf of all its matched lexemes; the
    page's first further chunk holding such a lexeme, ``hits`` order; ``idf`` per
    lexeme, one without an idf weighs 0). ``hits`` best first (``_keyword_arm``);
    returns ``{page_id: score}`` in the order of the pages' first hits. A secondary
    chunk's share keeps its ``SECONDARY_WEIGHT`` (it is in the chunk's score).

    Why: the page is what a question asks for, and its words can be split between
    its chunks: a mail's own lines in one and the writer's signature ("-- Fel") in
    another, one message of a thread page naming the subject and the next the
    answer. Scored by its best chunk alone such a page counted as holding one of
    the question's words, below pages holding that one word more often; BM25 over
    the whole page adds them up. One further chunk, discounted: every lexeme of
    every chunk counted in full lifts long pages, which hold each common word
    somewhere, over the page that answers. Measured with
    ``benchmarks/retrieval_quality.py``, chosen on the even ids of the per-message
    pages (hybrid R@1 there 0.893 without; weight 0.25, 0.5, 0.75, 1 with one
    further chunk 0.893, 0.893, 0.901, 0.870; with every further chunk 0.893,
    0.885, 0.885, 0.855; keyword-only R@1 there 0.832 without, 0.817 with the
    choice, its one loss); see ``PAGE_EXTRA_WEIGHT`` for the whole set."""
    scores: dict[int, float] = {}
    held: dict[int, set[str]] = {}
    extended: set[int] = set()
    for hit in hits:
        lexemes = set(hit.matched)
        if hit.page_id not in scores:
            scores[hit.page_id] = hit.score
            held[hit.page_id] = lexemes
            continue
        new = lexemes - held[hit.page_id]
        total = sum(idf.get(lx, 0.0) for lx in lexemes)
        if hit.page_id in extended or not new or total <= 0:
            continue
        extended.add(hit.page_id)
        share = sum(idf.get(lx, 0.0) for lx in new) / total
        scores[hit.page_id] += PAGE_EXTRA_WEIGHT * hit.score * share
    return scores


def combine_page_scores(
    hits: list[_KeywordHit],
    page_hits: Sequence[tuple[_KeywordHit, float]],
    idf: dict[str, float],
) -> dict[int, float]:
    """The keyword arm's score of each page (SPEC §3 keyword arm; issue 26): the
    larger of its chunk-based score (``page_keyword_scores`` over ``hits``, the best chunks) and
    its page-level BM25 score (``page_hits``: ``(best chunk, page score)`` per page,
    from ``_keyword_arm``). A page that only page-level BM25 found is scored by its
    best chunk alone on the chunk side and its best chunk is appended to ``hits``
    (its evidence). Returns ``{page_id: score}``, the pages of ``hits`` first.

    Why the larger of the two: each view misses a kind of page the other finds.
    Chunk BM25 scores a long page by its best ~300 tokens, as if it were a short
    document: a long newsletter or digest holding the question's words in one item
    competes with short pages on that item alone, and a page whose words are spread
    over its chunks gets at most one further chunk's share. Page-level BM25 (the
    page's term frequencies summed over its chunks, saturated once, its length the
    sum of its chunks' token counts; see ``_keyword_arm``) is what the BM25 bar
    does, and finds those; but it drowns a 26,000-token digest's one relevant
    message in its length (a SpamAssassin question lost from the top 10 with
    page-level BM25 alone).

    Measured with ``benchmarks/retrieval_quality.py --set both`` (SpamAssassin ids
    1-263 and Enron ids 301-380 in one index; fusion keyword weight 0.3, before its
    re-tune in ``fused_key``), R@1/R@5 before -> after, BM25
    SpamAssassin 0.810/0.928, Enron 0.800/0.950: Enron hybrid 0.825/0.963 ->
    0.838/0.975, keyword-only 0.750/0.938 -> 0.812/0.950; SpamAssassin hybrid
    0.875/0.985 -> 0.871/0.981, keyword-only 0.852/0.958 -> 0.852/0.951 (even half
    hybrid 0.878/0.977 unchanged, odd half 0.871/0.992 -> 0.864/0.985; one of
    them a question whose page falls from the keyword arm's 38th page to past its
    50th). With the token parts of ``brain.services.pages.index.token_parts`` as
    well: Enron hybrid 0.875/0.975, keyword-only 0.850/0.975; SpamAssassin hybrid
    0.871/0.981, keyword-only 0.863/0.954 (even half hybrid 0.878/0.977,
    keyword-only 0.832/0.939 -> 0.840/0.947; odd half hybrid 0.864/0.985,
    keyword-only 0.871/0.977 -> 0.886/0.962). Alternatives, the same run with
    every chunk of a candidate page read for its term frequencies: the larger of
    the two views as here, SpamAssassin hybrid 0.875/0.985 (even half R@5 0.985),
    the rest within a question; page-level BM25 alone Enron hybrid 0.838/0.988 but
    SpamAssassin 0.871/0.981 and keyword-only 0.848/0.947 (the digest above); the
    mean of the two views Enron 0.825/0.975, SpamAssassin 0.859/0.981; b 0.5 or
    0.6 at page level loses 4-5 pt of keyword-only R@1 on both sets; b 0.9 or 1.0,
    k1 1.5, a secondary chunk counting 0.5 or 1 of its occurrences, or the page
    score × 1.2 are within a question or two of the larger-of on each set."""
    scores = page_keyword_scores(hits, idf)
    out = dict(scores)
    for hit, score in page_hits:
        if hit.page_id not in scores:
            hits.append(hit)
            out[hit.page_id] = max(hit.score, score)
        else:
            out[hit.page_id] = max(scores[hit.page_id], score)
    return out
