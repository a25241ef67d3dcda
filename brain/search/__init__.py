"""Hybrid page search (SPEC §3, revised by issue 26): a keyword arm and a vector
arm fused per page by a weighted sum of their evidence.

Pipeline, for one query inside one ``ReadScope`` (the only scoping input, SPEC §8):

1. terms: the query's words read by the same text search parser as the pages
   (``ts_debug`` with ``BRAIN_FTS_LANGUAGE``: stopwords and question words
   dropped, and the question-frame words of ``QUESTION_FRAME`` unless nothing else
   is left; the rest stemmed), each with its document frequency
   among the searched chunks (capped at ``DF_CAP``) and its idf; ``-word`` excludes;
   two adjacent words also stand for their concatenation ("Red Hat" for
   "redhat", "white paper" for "whitepapers": compound spacing);
2. keyword arm: OR over the terms, candidates bounded by taking the rarest terms
   while their frequencies sum to at most ``KEYWORD_MATCH_CAP`` (commoner terms only
   score), ranked by BM25 (term frequency from the tsvector's positions; a
   concatenation counts as an occurrence of each word it joins) with AND
   and phrase boosts (``_keyword_arm``), a secondary chunk (quoted history,
   signature, list footer: ``Chunk.secondary``) counting ``SECONDARY_WEIGHT`` of
   its score; a page's keyword score is the larger of its chunk-based score (its
   best chunk's plus a discounted share of one further chunk's for the query
   terms the best one lacks, ``page_keyword_scores``) and its page-level BM25
   (the page's term frequencies summed over its chunks, its length their token
   counts: ``combine_page_scores``), and gives the page its keyword rank; its
   evidence chunk is its best chunk;
3. vector arm: HNSW cosine (``<=>``) with iterative scans, ``VECTOR_CHUNK_POOL``
   nearest chunks, collapsed to the chunk with the best ``vector_part`` per page
   (a secondary chunk's counts ``SECONDARY_WEIGHT``), the best ``ARM_CANDIDATES``
   pages;
4. page-level fusion (``fused_key``): 1/3 × the page's keyword score as a share of
   the query's best keyword score + 2/3 × its best ``vector_part`` (the cosine
   mapped to 0..1, 0.30 → 0, 0.80 → 1), or its keyword share alone while none of its found chunks has an
   embedding yet (``pending_key``); a page whose title or alias equals the query adds 1/3 (a name
   arm, as much as the keyword arm's first page); then multiplicative boosts: exact title or alias ×1.25, backlinks
   ×(1 + 0.05·ln(1 + n)) without ``mentions``, recency per page type; ties go to
   the better keyword rank; the keyword arm's first page moves up past each page
   whose query-term coverage is ``KEYWORD_LEAD_MARGIN`` below its own
   (``keyword_lead``); the keyword arm's top 3 pages are kept in the top 10
   (``keep_keyword_hits``);
5. one result per page, its evidence chunk being the chunk of the arm that ranks the
   page higher (ties: keyword); a page whose evidence is a near-copy of a result
   ranked above it (a message sent twice, a forward, a whole quote) is folded into
   that result's ``duplicates`` and the next page takes its place
   (``fold_near_duplicates``); a second chunk of a page only when fewer than
   ``limit`` pages matched; each result's ``score`` is the calibrated 0..1 relevance
   of ``calibrated_score`` (not the fused rank key, which orders the results),
   ``matched_terms`` the query words its chunk holds, ``evidence`` and
   ``create_safety``; a page whose score is 0 (no query term, cosine at or below
   ``COSINE_FLOOR``) is left out; then the token budget (chars/4) on whole results.

``search_degraded`` is None when search is whole, else a string naming why: with
provider ``none``, a failing provider or a local model still loading the vector arm
is skipped (``vector_search_unavailable: …``, naming the loading); when some searched chunks have no embedding yet
(``embeddings_pending: N of M``) the vector arm cannot see them. Soft-deleted pages
have no chunks and are filtered again when results are hydrated.

The package is split by stage: ``terms`` (1), ``keyword`` (2), ``vector`` (3),
``fusion`` (4), ``fold`` (5), ``results`` (the answer shapes) and ``pipeline``
(``page_search`` calling each stage in turn). Callers import from ``brain.search``.
"""

from brain.search.fold import FoldCandidate, copy_words, fold_near_duplicates, near_copy
from brain.search.fusion import (
    KEYWORD_LEAD_MARGIN,
    KEYWORD_WEIGHT,
    VECTOR_WEIGHT,
    calibrated_score,
    fused_key,
    keep_keyword_hits,
    keyword_lead,
    pending_key,
)
from brain.search.keyword import (
    KEYWORD_MATCH_CAP,
    PAGE_EXTRA_WEIGHT,
    SECONDARY_WEIGHT,
    combine_page_scores,
    page_keyword_scores,
)
from brain.search.pipeline import page_search
from brain.search.results import (
    ARM_CANDIDATES,
    MAX_LIMIT,
    SearchResponse,
    SearchResult,
)
from brain.search.terms import QUESTION_FRAME
from brain.search.vector import COSINE_FLOOR, COSINE_FULL, cosine_part, vector_part

__all__ = [
    "ARM_CANDIDATES",
    "COSINE_FLOOR",
    "COSINE_FULL",
    "KEYWORD_LEAD_MARGIN",
    "KEYWORD_MATCH_CAP",
    "KEYWORD_WEIGHT",
    "MAX_LIMIT",
    "PAGE_EXTRA_WEIGHT",
    "QUESTION_FRAME",
    "SECONDARY_WEIGHT",
    "VECTOR_WEIGHT",
    "FoldCandidate",
    "SearchResponse",
    "SearchResult",
    "calibrated_score",
    "combine_page_scores",
    "copy_words",
    "cosine_part",
    "fold_near_duplicates",
    "fused_key",
    "keep_keyword_hits",
    "keyword_lead",
    "near_copy",
    "page_keyword_scores",
    "page_search",
    "pending_key",
    "vector_part",
]
