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
4. page-level fusion (``fused_key``): 0.3 × the page's keyword score as a share of
   the query's best keyword score + 0.7 × its best ``vector_part`` (the cosine
   mapped to 0..1, 0.30 → 0, 0.80 → 1), or its keyword share alone while none of its found chunks has an
   embedding yet (``pending_key``); a page whose title or alias equals the query adds 0.3 (a name
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
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from pgvector import Vector

from brain import embeddings
from brain.access import ReadScope
from brain.exceptions import PROTOCOL_VERSION, InvalidParams
from brain.selectors import backlinks_sql
from brain.text import bounded_query, estimate_tokens, normalize_alias

ARM_CANDIDATES = 50
# Keyword arm (issue 26): candidate chunks at most (when only common terms: fewer),
# chunks ranked, document-frequency probe cap, how long the planner's lexeme
# statistics are cached, terms read from a query, BM25 constants, AND / phrase boosts.
KEYWORD_MATCH_CAP = 1000
COMMON_MATCH_CAP = 300
KEYWORD_CHUNKS = 100
DF_CAP = 250
COMMON_STATS_TTL = 300.0
MAX_QUERY_TERMS = 32
BM25_K1 = 1.2
BM25_B = 0.75
AND_BOOST = 0.25
PHRASE_BOOST = 0.25
VECTOR_CHUNK_POOL = 100
# Near-duplicate results (``fold_near_duplicates``, ``near_copy``): a result whose
# words all sit in one ranked above it (or hold all of its words), with a word-set
# Jaccard above NEAR_DUPLICATE (the reference's dedup threshold), is a copy of it; a
# text of fewer than COPY_MIN_WORDS distinct words only when the words are equal.
NEAR_DUPLICATE = 0.85
COPY_MIN_WORDS = 30
MAX_CHUNKS_PER_PAGE = 2
MAX_LIMIT = 100
TITLE_BOOST = 1.25
BACKLINK_FACTOR = 0.05
HIGH_VECTOR_MATCH = 0.80
# Calibrated score (``calibrated_score``): cosine mapped from FLOOR (0) to FULL (1).
COSINE_FLOOR = 0.30
COSINE_FULL = HIGH_VECTOR_MATCH
KEYWORD_EXACT = 0.6
# Fusion (``fused_key``): weights of the keyword share and of the cosine part,
# 1 : 2 (chosen as 0.35 : 0.7, the same order) so that the key stays on 0..1.
KEYWORD_WEIGHT = 1 / 3
VECTOR_WEIGHT = 2 / 3
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
# Keyword guard: the pages the keyword arm ranks in its top KEYWORD_GUARD are never
# pushed out of the fused top GUARD_WINDOW (see ``keep_keyword_hits``).
KEYWORD_GUARD = 3
GUARD_WINDOW = 10
# Keyword lead (``keyword_lead``): the keyword arm's first page moves up past each
# page whose idf-weighted coverage of the query's terms is this much below its own.
KEYWORD_LEAD_MARGIN = 0.2
# Question-frame words (``_query_terms``): words that frame a question rather than
# name what it asks about, and that the text search configuration keeps as terms:
# modal auxiliaries, indefinite pronouns and "say" (reported speech: "what did
# someone say would..."). Dropped from the terms unless nothing else is left.
QUESTION_FRAME = frozenset(
    {
        "would",
        "could",
        "might",
        "must",
        "someone",
        "somebody",
        "anyone",
        "anybody",
        "everyone",
        "everybody",
        "something",
        "anything",
        "everything",
        "nobody",
        "say",
        "says",
        "said",
        "saying",
    }
)
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
    ``score`` the calibrated relevance in 0..1, comparable across queries
    (``calibrated_score``; 1.0 for an exact title or alias match); results are
    ordered by the fused rank, so a later result may score higher; ``matched_terms``
    the query's meaningful words (as typed, lower-cased) that ``chunk`` holds, stems
    matched; ``evidence`` one of ``alias_hit | exact_title_match |
    high_vector_match | keyword_exact | weak_semantic`` (``keyword_exact``: a keyword
    hit whose chunk holds ≥ 60 % of the query's idf weight), ``create_safety``
    one of ``exists | probable | unknown``, and ``duplicates`` the slugs of pages
    whose best chunk is a near-copy of this one, folded into it
    (``fold_near_duplicates``).
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
    matched_terms: list[str] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)
    duplicates: list[str] = field(default_factory=list)

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
            "matched_terms": list(self.matched_terms),
            "provenance": self.provenance,
            "duplicates": list(self.duplicates),
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
class _KeywordHit:
    """One chunk of the keyword arm: its BM25-style ``score`` and the query lexemes
    it contains (``matched``)."""

    chunk_id: int
    page_id: int
    score: float
    matched: tuple[str, ...]


@dataclass
class _Terms:
    """The meaningful terms of a query: ``words`` (surface form → its lexemes, query
    order), ``df`` (capped) and ``idf`` per lexeme over the searched chunks (a lexeme
    no chunk holds has df 0 and the largest idf), ``excluded`` lexemes
    (``-word``) and ``joined``: the lexeme of two adjacent query words written as
    one ("red hat" → ``redhat``) → the lexemes of the two words it stands for
    (``df`` and ``idf`` hold its own figures too; the keyword arm scores it as an
    occurrence of each word it joins, see ``_keyword_arm``)."""

    words: dict[str, tuple[str, ...]]
    idf: dict[str, float]
    df: dict[str, int]
    excluded: tuple[str, ...]
    joined: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def lexemes(self) -> list[str]:
        """Distinct lexemes in query order, the joined forms of ``joined`` last."""
        out: list[str] = []
        for lexemes in self.words.values():
            out.extend(lx for lx in lexemes if lx not in out)
        out.extend(lx for lx in self.joined if lx not in out)
        return out

    @property
    def base(self) -> list[str]:
        """The lexemes of the query's own words (``lexemes`` without the joined
        forms)."""
        return [lx for lx in self.lexemes if lx not in self.joined]

    def covered(self, matched: Sequence[str]) -> set[str]:
        """The query's own lexemes that ``matched`` (lexemes a chunk holds) stand
        for: each one itself, a joined form both words it joins."""
        out: set[str] = set()
        for lexeme in matched:
            out.update(self.joined.get(lexeme, (lexeme,)))
        return out

    def coverage(self, matched: Sequence[str] | set[str]) -> float:
        """The idf-weighted share (0..1) of the query's own lexemes that
        ``matched`` covers (``covered``); 0 for a query without terms."""
        base = [lx for lx in self.idf if lx not in self.joined]
        total = sum(self.idf[lx] for lx in base)
        if not total:
            return 0.0
        held = self.covered(list(matched))
        return sum(self.idf[lx] for lx in base if lx in held) / total


# A ``-word`` exclusion: a minus at the start of a word (not inside a compound such as
# "XML-in-silicon", which the text search parser reads as one hyphenated word).
_EXCLUDED = re.compile(r"(?<![\w-])-([^\W_]+(?:['’][^\W_]+)*)")


def _tsquery_or(lexemes: Sequence[str]) -> str:
    """A tsquery text OR-ing already-normalised lexemes (quoted, so no lexeme is
    re-parsed as an operator)."""
    return " | ".join(_quoted(lx) for lx in lexemes)


def _quoted(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


_COMMON: dict[str, Any] = {"at": -math.inf, "share": {}, "rows": 0.0}


def _common_lexemes(cursor: Any) -> tuple[dict[str, float], float]:
    """``(share, rows)``: the most common lexemes of ``brain_chunk.tsv`` with the share
    of chunks holding each, and the estimated chunk count, from the planner's
    statistics (``pg_stats.most_common_elems``, kept by ANALYZE / autovacuum; empty
    before the first ANALYZE). Cached per process for ``COMMON_STATS_TTL`` seconds."""
    now = time.monotonic()
    if now - _COMMON["at"] < COMMON_STATS_TTL:
        return _COMMON["share"], _COMMON["rows"]
    cursor.execute(
        """
        SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs,
               c.reltuples
        FROM pg_class c
        LEFT JOIN pg_stats s ON s.schemaname = current_schema()
             AND s.tablename = 'brain_chunk' AND s.attname = 'tsv'
        WHERE c.oid = 'brain_chunk'::regclass
        """
    )
    row = cursor.fetchone()
    elems, freqs, rows = row if row else (None, None, 0)
    share = dict(zip(elems or (), freqs or (), strict=False))
    _COMMON.update(at=now, share=share, rows=float(rows or 0))
    return share, float(rows or 0)


def _query_terms(
    cursor: Any, *, text: str, source_ids: Sequence[str], visibilities: Sequence[str]
) -> _Terms:
    """Normalise the query's words with ``BRAIN_FTS_LANGUAGE`` as the page text is
    normalised (the same parser: stopwords, question words and auxiliaries such as
    "when", "did", "the" have no lexeme; the question-frame words of
    ``QUESTION_FRAME`` ("would", "someone", "say") are dropped unless the query has
    no other word; the rest are stemmed: "classes" →
    ``class``; compounds and dotted tokens parse as on a page) and find each lexeme's document frequency among
    the searched chunks, capped at ``DF_CAP``: a lexeme among the planner's most
    common elements (once the table has more than ``DF_CAP`` rows) takes its
    estimate from there, unprobed (probing a common word reads its whole posting
    list, SPEC §11); the others, rarer by construction, are counted with a capped
    index probe. The estimate is over all chunks, the probe over the searched ones.
    Two round trips (plus the statistics, cached). A word is a token of the parser
    (lower-cased); ``-word`` (a minus at a word's start) excludes it.

    Compound spacing (issue 26): each two adjacent words of the query (plain words
    with only white space between them, both kept as terms) also stand for their
    concatenation as the parser reads it ("Red Hat" → ``redhat``, "white paper" →
    ``whitepap``, the stem of "whitepapers"), and a hyphenated word for itself
    without hyphens ("e-mail" → ``email``, standing for the compound and its
    parts), in ``_Terms.joined`` when it is not
    one of the query's own lexemes; its document frequency is found with the
    others in the same probe (one more capped index probe per adjacent pair, no
    more round trips), and the keyword arm uses it only where some chunk holds it.
    Why: mail and notes write product and company names and compounds both ways
    ("Red Hat" / "redhat", "web page" / "webpage", "e-mail" / "email"), and a
    page that writes them
    as one word matched none of the question's words for them; whole-word BM25
    misses it the same way."""
    text = text[:4000]
    excluded_words = list(dict.fromkeys(w.lower() for w in _EXCLUDED.findall(text)))
    kept_text = _EXCLUDED.sub(" ", text)
    # The document parser itself reads the query (``ts_debug``, token by token, in
    # order), so a query word becomes the lexemes its text would have on a page:
    # "802.11a" the float ``802.11``, "XML-in-silicon" the compound and its parts,
    # an address or a URL one token (issue 26: splitting the query on \w+ first
    # made lexemes no page holds).
    #
    # Kind 2 and 3 rows are the compound spellings (issue 26): two adjacent words
    # of the query (plain words, only white space between them, neither a
    # stopword) read as one word ("Red Hat" → ``redhat``, "white paper" →
    # ``whitepap`` as "whitepapers" is stemmed), and a hyphenated word without its
    # hyphens ("e-mail" → ``email``).
    cursor.execute(
        """
        WITH d AS (
            SELECT * FROM ts_debug(%(lang)s::regconfig, %(kept)s) WITH ORDINALITY
                AS d(alias, description, token, dictionaries, dictionary, lexemes, n)
        )
        SELECT 0, d.n, lower(d.token), d.lexemes, NULL::text, NULL::text
        FROM d WHERE cardinality(d.lexemes) > 0
        UNION ALL
        SELECT 1, w.n, w.word, ARRAY(SELECT unnest(tsvector_to_array(
                   to_tsvector(%(lang)s::regconfig, w.word)))), NULL, NULL
        FROM unnest(%(excluded)s::text[]) WITH ORDINALITY AS w(word, n)
        UNION ALL
        SELECT 2, a.n, lower(a.token || b.token), ARRAY(SELECT unnest(
                   tsvector_to_array(to_tsvector(%(lang)s::regconfig,
                                                 a.token || b.token)))),
               lower(a.token), lower(b.token)
        FROM d a JOIN d g ON g.n = a.n + 1 JOIN d b ON b.n = a.n + 2
        WHERE a.alias IN ('asciiword', 'word') AND b.alias IN ('asciiword', 'word')
          AND cardinality(a.lexemes) > 0 AND cardinality(b.lexemes) > 0
          AND g.alias = 'blank' AND btrim(g.token, E' \t\r\n') = ''
        UNION ALL
        SELECT 3, d.n, lower(replace(d.token, '-', '')), ARRAY(SELECT unnest(
                   tsvector_to_array(to_tsvector(%(lang)s::regconfig,
                                                 replace(d.token, '-', ''))))),
               lower(d.token), NULL
        FROM d WHERE d.alias IN ('asciihword', 'hword')
        ORDER BY 1, 2
        """,
        {
            "lang": settings.BRAIN_FTS_LANGUAGE,
            "kept": kept_text,
            "excluded": excluded_words[:MAX_QUERY_TERMS],
        },
    )
    parsed: dict[str, tuple[str, ...]] = {}
    words: list[str] = []
    pairs: list[tuple[str, str, tuple[str, ...]]] = []
    for kind, _n, word, lexemes, first, second in cursor.fetchall():
        if kind >= 2:
            pairs.append((first, second, tuple(lexemes or ())))
            continue
        if not kind:
            words.append(word)
        parsed.setdefault(word, tuple(lexemes or ()))
    words = list(dict.fromkeys(words))
    content = [w for w in words if w not in QUESTION_FRAME]
    words = (content or words)[:MAX_QUERY_TERMS]
    excluded_words = excluded_words[:MAX_QUERY_TERMS]
    lexemes_of = {w: parsed.get(w, ()) for w in words + excluded_words}
    if not words and not excluded_words:
        return _Terms({}, {}, {}, ())
    own = {lx for w in words for lx in lexemes_of[w]}
    joined: dict[str, tuple[str, ...]] = {}
    for first, second, lexemes in pairs:
        # Two adjacent words must both be terms; a hyphenated word (``second``
        # None) must be one, and stands for itself and its parts, some of which
        # may be stopwords ("check-in").
        kept_words = [first] if second is None else [first, second]
        parts = [first, *first.split("-")] if second is None else kept_words
        if all(w in words for w in kept_words) and len(lexemes) == 1:
            if lexemes[0] not in own and lexemes[0] not in joined:
                joined[lexemes[0]] = tuple(
                    dict.fromkeys(lx for w in parts for lx in lexemes_of.get(w, ()))
                )
    share, rows = _common_lexemes(cursor)
    df: dict[str, int] = {}
    probe: list[str] = []
    for lexeme in dict.fromkeys(
        [lx for lxs in lexemes_of.values() for lx in lxs] + list(joined)
    ):
        if lexeme in share and rows >= DF_CAP:
            df[lexeme] = min(max(round(share[lexeme] * rows), 1), DF_CAP)
        else:
            probe.append(lexeme)
    cursor.execute(
        """
        SELECT t.lexeme, (
            SELECT count(*) FROM (
                SELECT 1 FROM brain_chunk c
                WHERE c.tsv @@ t.tsq
                  AND c.source_id = ANY(%(sources)s)
                  AND c.visibility = ANY(%(vis)s)
                LIMIT %(dfcap)s
            ) s
        )
        FROM unnest(%(lexemes)s::text[], %(tsqs)s::tsquery[]) AS t(lexeme, tsq)
        UNION ALL
        SELECT NULL, CASE WHEN reltuples >= %(dfcap)s THEN reltuples::bigint
                          ELSE (SELECT count(*) FROM brain_chunk) END
        FROM pg_class WHERE oid = 'brain_chunk'::regclass
        """,
        {
            "lexemes": probe,
            "tsqs": [_quoted(lx) for lx in probe],
            "sources": list(source_ids),
            "vis": list(visibilities),
            "dfcap": DF_CAP,
        },
    )
    total = 1
    for lexeme, count in cursor.fetchall():
        if lexeme is None:
            total = max(int(count or 0), 1)
        else:
            df[lexeme] = int(count)
    excluded = tuple(lx for w in excluded_words for lx in lexemes_of.get(w, ()))
    kept = {w: lexemes_of[w] for w in words if lexemes_of.get(w)}
    idf = {
        lx: math.log(1 + (total - min(n, total) + 0.5) / (n + 0.5))
        for lx, n in df.items()
        if lx not in excluded
    }
    joined = {
        lx: parts
        for lx, parts in joined.items()
        if lx not in excluded and not set(parts) & set(excluded)
    }
    return _Terms(kept, idf, df, excluded, joined)


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
    ranked = sorted(present, key=lambda lx: (terms.df[lx], lx))
    selective: list[str] = []
    budget = 0
    for lexeme in ranked:
        n = terms.df[lexeme]
        if n >= DF_CAP or (selective and budget + n > KEYWORD_MATCH_CAP):
            break
        selective.append(lexeme)
        budget += n
    if selective:
        candidate_query = _tsquery_or(selective)
    elif ranked:
        candidate_query = " & ".join(_quoted(lx) for lx in ranked)
    else:
        candidate_query = ""
    # The query's own lexemes some chunk holds (itself or through a joined form)
    # are the terms scored; a joined form counts as an occurrence of each word it
    # joins (``terms.joined``), so "redhat" scores as "red" and "hat" would and a
    # chunk holding both spellings is not counted twice.
    joins = [
        (joined, part)
        for joined, parts in terms.joined.items()
        if joined in present
        for part in dict.fromkeys(parts)
    ]
    lexemes = [
        lx for lx in terms.base if lx in present or any(lx == p for _j, p in joins)
    ]
    params: dict[str, Any] = {
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
    # Each candidate's tsvector is cut down to the query's lexemes once (positions
    # kept: the phrase test still holds, and a lexeme's positions are its term
    # frequency, title and text alike, at most 256 as PostgreSQL keeps them); then
    # the BM25 sum over the lexemes it holds, joined to their idf. Length is the
    # chunk's token count.
    cursor.execute(
        """
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
        """.replace("OCCURRENCES", _JOINED_OCCURRENCES if joins else _OCCURRENCES),
        params,
    )
    keyword: list[_KeywordHit] = []
    aliased: list[tuple[int, int]] = []
    page_hits: list[tuple[_KeywordHit, float]] = []
    for kind, chunk_id, page_id, matched, score, extra in cursor.fetchall():
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
    query's ``-word``) is skipped, as in the keyword arm (SPEC §3)."""
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
          AND c.source_id = ANY(%(sources)s)
          AND c.visibility = ANY(%(vis)s)
          AND NOT (%(ex)s <> '' AND c.tsv @@ %(ex)s::tsquery)
        ORDER BY c.embedding <=> %(v)s::vector
        LIMIT %(pool)s
        """,
        {
            "v": vector,
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
    cosine (NULL in keyword-only mode), which of the query's ``lexemes`` the
    chunk holds and whether it is a secondary chunk."""
    cursor.execute(
        f"""
        SELECT c.id, c.ordinal, c.text, p.id, p.slug, p.title, p.source_id, t.name,
               p.effective_date, p.updated_at, p.frontmatter -> 'provenance',
               {backlinks_sql("p.id")},
               {"1 - (c.embedding <=> %(v)s::vector)" if vector else "NULL::float8"},
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

    ``vector_search_unavailable: provider <name> (keyword-only)`` when the query
    could not be embedded (``(model loading, …)`` while the local model is still
    loading in this process's background thread); else ``embeddings_pending: N of M`` when N of the M searched chunks have
    no embedding yet (one indexed EXISTS on ``brain_chunk_embedding_pending`` when
    every chunk is embedded; the counts only when some are not).
    """
    if not vector_ok:
        provider = settings.BRAIN_EMBEDDING_PROVIDER
        if embeddings.model_loading():
            return (
                f"vector_search_unavailable: provider {provider} (model loading, "
                "keyword-only until it is ready, usually a few seconds)"
            )
        return f"vector_search_unavailable: provider {provider} (keyword-only)"
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


def fused_key(
    keyword_share: float, similarity: float | None, *, secondary: bool = False
) -> float:
    """The fusion key of one page before its boosts (SPEC §3; issue 26), a
    weighted sum of the two arms' evidence on a 0..1 scale::

        KEYWORD_WEIGHT · keyword_share + VECTOR_WEIGHT · vector_part(cosine)

    ``keyword_share`` is the page's keyword score (``page_keyword_scores``: its
    best chunk's BM25 score and a share of one further chunk's) divided by the
    best page keyword score of the query (1.0 for the keyword arm's first page, 0
    for a page it did not find); ``similarity`` the best cosine among the page's chunks
    that either arm found (None in keyword-only mode, then the order is the
    keyword arm's).

    Why scores, not reciprocal ranks: RRF (k = 60, used before) gives a page each
    arm ranks 15th more than a page one arm ranks 2nd and the other misses, and
    it cannot see that the keyword arm's first page scores twice its second. On
    the retrieval dev set (``benchmarks/retrieval_quality.py``), with the same two
    arms, page-level RRF put the answer first for 82.2 % of the questions and this
    sum for 85.6 % (R@5 95.7 → 97.1 %, R@10 97.1 → 97.6 %). The weights 0.3 / 0.7
    were chosen on the set's even-numbered questions (R@1 with keyword weight 0.25:
    84.6 %, 0.3: 87.5 %, 0.35: 86.5 %; RRF 80.8 %); on the odd-numbered check half
    the sum ties RRF (R@1 83.7 %, R@5 97.1 %, R@10 98.1 % both), so the gain is
    shown on the tuning half only (those figures are on ids 1-208). Re-measured
    with the seeded extension (ids 1-263, even half 131 questions), no alternative
    beats this sum on the even half (R@1 0.863, R@5 0.977): keyword weight 0.35-0.6
    (R@1 0.832-0.863, R@5 at most 0.977), page-level RRF at k 1-60 (R@1 0.809-0.817, R@5
    0.954-0.977; k 1 wins R@5 on the odd half only), the vector part relative to the
    query's best (R@1 0.809-0.840), and keeping the vector arm's first page in the
    top 3 or 5 when its cosine part leads the runner-up by 0-0.1 (never fires: it is
    there already). Re-tuned once the keyword arm scored pages by the larger of
    its chunk-based score and page-level BM25 (``combine_page_scores``), which
    brings the runner-up pages' keyword shares closer to the first's: keyword
    weight 0.3 → 0.35 beside the vector weight 0.7 (kept as 1/3 : 2/3, the same
    order on the 0..1 scale), chosen on the even half of the SpamAssassin questions
    (standalone run, R@1/R@5: 0.3 0.870/0.985, 0.35 0.878/0.985, 0.4
    0.878/0.985, 0.5 0.870/0.985, 0.6 0.870/0.985; with the Enron pages in the
    same index 0.878, 0.878, 0.885, 0.878, 0.870 at R@1, all 0.977 at R@5; 0.35,
    the smaller change of the two that tie standalone). Check half (odd ids,
    standalone) 0.856/0.985 → 0.864/0.985; the Enron questions, which chose
    nothing, hybrid 0.875/0.975 → 0.875/0.988. The vector weight is the larger because its
    part is an absolute cosine that rarely reaches 1, while the keyword share is
    relative and always 1 for the keyword arm's first page.
    """
    keyword_share = min(max(keyword_share, 0.0), 1.0)
    part = vector_part(similarity, secondary=secondary)
    return KEYWORD_WEIGHT * keyword_share + VECTOR_WEIGHT * part


def pending_key(keyword_share: float) -> float:
    """The fusion key of a page none of whose found chunks has an embedding yet,
    while the query has one (SPEC §3 hybrid): its keyword share on the same 0..1
    scale as ``fused_key``, as if the vector arm agreed with the keyword arm. Scoring
    it by ``fused_key`` would count the missing vector part as 0, as if the page
    were unrelated, and rank a page that holds every word of the query below pages
    that hold one (newcomer check: a note just saved ranked 5th for its own
    title). Once embedded, the page is scored by ``fused_key``."""
    return min(max(keyword_share, 0.0), 1.0)


def calibrated_score(coverage: float, similarity: float | None) -> float:
    """The ``score`` of a result, 0..1, comparable across queries (issue 26).

    ``coverage`` is the idf-weighted share of the query's meaningful terms that the
    result's chunk holds (1.0: every term, rare ones weigh more); the cosine is
    mapped by ``cosine_part`` (``COSINE_FLOOR`` 0.30 → 0, ``COSINE_FULL`` =
    ``HIGH_VECTOR_MATCH`` 0.80 → 1, clamped). The two are combined as a noisy OR,
    ``1 − (1 − coverage)(1 − cosine_part)``: either arm alone can vouch for a
    result; an unrelated page has neither. Keyword-only mode (``similarity`` None)
    is the coverage alone. On the retrieval dev set (``benchmarks/
    retrieval_quality.py``, which prints it; ids 1-263, with ``QUESTION_FRAME``) the
    answer page scores a median 0.91 (97 % ≥ 0.5) and the other top-10 results a
    median 0.32 (20 % ≥ 0.5), so 0.5 is a usable cut (before issue 26: 0.94 against 0.79, 90 % of them ≥ 0.5).
    """
    semantic = cosine_part(similarity)
    coverage = min(max(coverage, 0.0), 1.0)
    return 1 - (1 - coverage) * (1 - semantic)


@dataclass
class _PageRank:
    """One page in the fusion: its rank in each arm (None when absent), its best
    chunk per arm, and the ordering key (``fused_key`` × boosts)."""

    page_id: int
    keyword_rank: int | None = None
    vector_rank: int | None = None
    keyword_chunk: int | None = None
    vector_chunk: int | None = None
    named: bool = False
    key: float = 0.0

    def order(self) -> tuple[float, float, float]:
        """Sort key: fused key descending, then the keyword arm's rank, then the
        vector arm's (a tie goes to the page the keyword arm ranks higher)."""
        return (
            -self.key,
            self.keyword_rank if self.keyword_rank is not None else math.inf,
            self.vector_rank if self.vector_rank is not None else math.inf,
        )


def keyword_lead(
    ordered: list[int], lead: int, coverage: dict[int, float], margin: float
) -> list[int]:
    """The keyword arm's lead in fusion (issue 26: "ties broken by the keyword
    arm's rank"): ``lead`` (the keyword arm's first page) moves up past each page
    directly above it in ``ordered`` (page ids in fused order) whose ``coverage``
    (the idf-weighted share of the query's terms its found chunks hold, 0..1, and
    1.0 for a page the query names by alias or title; a missing page counts 0) is
    more than ``margin`` below the lead's own; it stops
    at the first page that is not. Other pages keep their order. Returns the new
    order (``ordered`` is not changed).

    Why: the vector arm ranks the replies of a thread, which share its subject, as
    close to the question as the message that answers it, so a reply holding the
    question's common words can outscore the page holding its rare ones by a
    cosine margin. The keyword arm's first page leads only where its keyword
    evidence is clearly stronger, not on near ties. Measured on the retrieval dev
    set (``benchmarks/retrieval_quality.py``, with ``QUESTION_FRAME``): hybrid R@1
    on the even half 0.863 without the lead; with margin 0.05 0.878, 0.1 0.885,
    0.2 0.878, 0.3 0.893, 0.4 0.878, 0.5 0.870 (chosen: 0.3; moving each of the
    keyword arm's top 3 in turn changed nothing). On the odd check half 0.3 gives
    0.856 → 0.864 with no question lost in either half; R@5 unchanged.
    Re-tuned with the page-level keyword scores (``combine_page_scores``) and
    the keyword weight 0.35 : 0.7 of ``fused_key``, on the same even half (the
    standalone run's hybrid R@1, then with the Enron pages in the same index):
    margin 0 0.847 / 0.870, 0.1 0.863 / 0.885, 0.15 0.878 / 0.885, 0.2 0.885 /
    0.885, 0.25 0.870 / 0.878, 0.3 0.878 / 0.878 (chosen: 0.2). Check half
    0.864 / 0.871 → 0.871 / 0.879; the Enron questions, which chose nothing,
    0.875 → 0.887; R@5 unchanged everywhere.
    """
    order = list(ordered)
    if lead not in order:
        return order
    floor = coverage.get(lead, 0.0) - margin
    i = order.index(lead)
    while i > 0 and coverage.get(order[i - 1], 0.0) < floor:
        order[i - 1], order[i] = order[i], order[i - 1]
        i -= 1
    return order


def keep_keyword_hits(
    ordered: list[int], keyword_pages: Sequence[int], window: int
) -> list[int]:
    """The keyword guard of fusion (issues 24 and 26): the first ``KEYWORD_GUARD``
    pages of the keyword arm (``keyword_pages``, best first) that are in
    ``ordered`` (page ids in fused order) all end up among its first ``window``.
    Each one below the window takes the place of the lowest unprotected page in
    it; the displaced page moves just below the window. Otherwise the order is
    unchanged.

    Why a guard, not weights: with the keyword weight 0.3 of ``fused_key``, ten
    pages with close cosines (or vector pages lifted by the backlink and recency
    boosts) can outscore the page whose exact words the keyword arm ranks first.
    Measured on the 1,000-page GBrain-style corpus of issue 24, chunk-level RRF
    without the guard found 95 of 100 known items in its top 10 where keyword
    search found 100; raising the keyword weight to close that gap would reorder
    every other query, while the guard touches only queries where it fires
    (``tests/brain/test_links_corpus.py`` asserts hybrid ≥ keyword).
    """
    present = set(ordered)
    protected: list[int] = []
    for page_id in keyword_pages:
        if page_id in present and page_id not in protected:
            protected.append(page_id)
        if len(protected) >= KEYWORD_GUARD:
            break
    top, rest = list(ordered[:window]), list(ordered[window:])
    for page_id in protected:
        if page_id in top:
            continue
        victims = [i for i, p in enumerate(top) if p not in protected]
        if not victims:
            break
        displaced = top.pop(victims[-1])
        rest.remove(page_id)
        top.append(page_id)
        rest.insert(0, displaced)
    return top + rest


class FoldCandidate(NamedTuple):
    """One page offered to ``fold_near_duplicates``, in fused order: its slug, the
    title and text of its evidence chunk, whether that chunk is secondary (quoted
    history, a signature or a list footer), and ``build``, which makes its
    ``SearchResult`` (None when neither arm vouches for the page: score 0). Built
    lazily, so a page past the limit costs only its word set (SPEC §3 dedup)."""

    slug: str
    title: str
    text: str
    secondary: bool
    build: Callable[[], SearchResult | None]


def fold_near_duplicates(
    candidates: Iterable[FoldCandidate], *, limit: int
) -> list[SearchResult]:
    """The first ``limit`` results of ``candidates`` (``FoldCandidate``, in fused
    order; one whose ``build`` gives None is left out) with near-duplicate copies
    folded together (SPEC §3 dedup, issue 26; the reference's search dedup drops
    chunks over 0.85 Jaccard-similar to a kept one; here stricter). Only pages of
    ``candidates`` are ever listed, so ``duplicates`` names no page outside the
    caller's ``ReadScope``. A result whose title and chunk words
    (``copy_words``) hold all of a kept result's words or sit all in them, with a
    Jaccard similarity over ``NEAR_DUPLICATE`` (``near_copy``; a short text only
    when its words are the same), is a copy: a message sent twice, forwarded with a
    forward line, or quoted whole by a reply. A copy is
    not shown; its slug is listed in the kept result's ``duplicates``, and it does
    not use up the limit, so the next page takes its place. When the kept result's
    chunk is secondary and the copy's is the page's own words (a reply quoting a
    message ranked above the message itself), the copy takes the kept result's
    place and the reply becomes the duplicate. ``candidates`` is read to its end
    (the fused candidate pages, at most a few hundred), so a copy ranked below the
    ``limit``-th result is still listed in ``duplicates``, whatever ``limit``.

    On the retrieval dev set (``benchmarks/retrieval_quality.py``, which counts a
    near-copy of an answer page as an answer for every ranker), where a reply
    quoting a film scene whole ranked above the message that posted it and a
    message sent twice took two places: SpamAssassin hybrid R@1 0.882 → 0.886
    (BM25 0.833), R@5 0.985 unchanged; with the Enron pages in one index, all 343
    questions R@1 0.883 → 0.886 and keyword-only 0.860 → 0.863; no question's
    answer moved down; thread pages (``--pages-from mail``) unchanged. Jaccard
    alone (the reference's rule) also folded the Enron set's weekly notices that
    differ by their date and access requests that differ by the person, each the
    answer to a different question: hence the containment test of ``near_copy``.
    """
    kept: list[tuple[SearchResult, bool, frozenset[str]]] = []
    for candidate in candidates:
        words = copy_words(candidate.title, candidate.text)
        copy_of = next(
            (i for i, (_r, _s, held) in enumerate(kept) if near_copy(words, held)),
            None,
        )
        if copy_of is None:
            if len(kept) < limit and (item := candidate.build()) is not None:
                kept.append((item, candidate.secondary, words))
            continue
        held_item, held_secondary, _held_words = kept[copy_of]
        if (
            held_secondary
            and not candidate.secondary
            and (item := candidate.build()) is not None
        ):
            item.duplicates = [*held_item.duplicates, held_item.slug]
            kept[copy_of] = (item, candidate.secondary, words)
        else:
            held_item.duplicates.append(candidate.slug)
    return [item for item, _secondary, _words in kept]


def copy_words(title: str, text: str) -> frozenset[str]:
    """The distinct lower-cased whitespace-separated words of a title and a text:
    what ``near_copy`` compares (``fold_near_duplicates``; the retrieval benchmark
    reads pages with it too). The title keeps two short messages of different
    threads that say the same few words ("Thanks, will do.") apart. Split on
    whitespace, not parsed: copies are split alike, and it costs a fraction of a
    regular expression over every candidate's chunk (SPEC §3 dedup)."""
    return frozenset(f"{title}\n{text}".lower().split())


def near_copy(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two word sets (``copy_words``: a result's title and chunk words) are
    copies of one text: every word of the smaller is in the larger (the larger adds
    at most a forward line, a reply's header or a few words of its own), and the
    smaller holds over ``NEAR_DUPLICATE`` (0.85) of the larger's words (their Jaccard
    similarity, the reference's dedup threshold); when either has fewer than
    ``COPY_MIN_WORDS`` (30) distinct words, they must be equal. Two texts that each
    hold a word the other lacks are two messages, however alike: a weekly notice
    dated the 19th and the same notice dated the 26th, an access request for one
    person and the same request for another (SPEC §3 dedup)."""
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    if len(small) < COPY_MIN_WORDS:
        return a == b and bool(a)
    # The size test first: it is O(1) and rejects most pairs.
    return len(small) > NEAR_DUPLICATE * len(large) and small <= large


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

    # The query's meaning is embedded without its ``-word`` exclusions: "harbour
    # -zephyr" must not pull the vector arm toward Zephyr.
    positive = _EXCLUDED.sub(" ", text).strip()
    if not positive:
        return empty  # only exclusions: nothing asked for
    vector = (
        list(query_embedding)
        if query_embedding is not None
        else _query_vector(positive)
    )
    degraded = vector is None
    reason = _degradation(source_ids, list(scope.visibilities), vector_ok=not degraded)
    empty.search_degraded = reason
    literal = Vector(vector).to_text() if vector is not None else ""
    visibilities = list(scope.visibilities)
    norm_query = normalize_alias(text)

    pages: dict[int, _PageRank] = {}
    keyword_score: dict[int, float] = {}
    chunk_page: dict[int, int] = {}
    # The vector arm's SET LOCAL knobs need a transaction; keyword-only mode does not.
    txn = transaction.atomic() if not degraded else nullcontext()
    with txn, connection.cursor() as cursor:
        # The keyword arm reads the query within PostgreSQL's full-text bounds
        # (``bounded_query``: 256 words, none over 500 characters).
        keyword_text = bounded_query(text)
        terms = _query_terms(
            cursor,
            text=keyword_text,
            source_ids=source_ids,
            visibilities=visibilities,
        )
        keyword, aliased, page_hits = _keyword_arm(
            cursor,
            text=keyword_text,
            terms=terms,
            alias=norm_query,
            source_ids=source_ids,
            visibilities=visibilities,
        )
        # Each page's best keyword chunk; the second best only for the first
        # ``limit`` pages (a second chunk is shown only when pages run short).
        # Pages ranked by their keyword score (``page_keyword_scores``: the best
        # chunk and a share of one further chunk), ties in their best chunks' order.
        page_keyword = combine_page_scores(keyword, page_hits, terms.idf)
        rank_of = {
            page_id: rank
            for rank, page_id in enumerate(
                sorted(page_keyword, key=lambda p: -page_keyword[p]), start=1
            )
        }
        kept_chunks: dict[int, int] = defaultdict(int)
        for hit in sorted(keyword, key=lambda h: rank_of[h.page_id]):
            rank = rank_of[hit.page_id]
            wanted = MAX_CHUNKS_PER_PAGE if rank <= limit else 1
            if rank > ARM_CANDIDATES or kept_chunks[hit.page_id] >= wanted:
                continue
            kept_chunks[hit.page_id] += 1
            page = pages.setdefault(hit.page_id, _PageRank(hit.page_id, rank))
            if page.keyword_chunk is None:
                page.keyword_chunk = hit.chunk_id
            keyword_score[hit.chunk_id] = hit.score
            chunk_page[hit.chunk_id] = hit.page_id
        keyword_pages = list(pages)
        if not degraded:
            nearest = _vector_arm(
                cursor,
                vector=literal,
                excluded=terms.excluded,
                source_ids=source_ids,
                visibilities=visibilities,
            )
            for rank, (chunk_id, page_id, _sim) in enumerate(nearest, start=1):
                chunk_page[chunk_id] = page_id
                page = pages.setdefault(page_id, _PageRank(page_id))
                page.vector_rank = rank
                page.vector_chunk = chunk_id
        # Name hop: a page whose alias (or title) equals the query joins as rank 1
        # of a third arm.
        for chunk_id, page_id in aliased:
            chunk_page.setdefault(chunk_id, page_id)
            page = pages.setdefault(page_id, _PageRank(page_id))
            page.named = True
            if page.keyword_chunk is None and page.vector_chunk is None:
                page.vector_chunk = chunk_id
        rows = (
            _hydrate(
                cursor,
                chunk_ids=list(chunk_page),
                vector=literal,
                source_ids=source_ids,
                visibilities=visibilities,
                types=list(types) if types else None,
                lexemes=terms.lexemes,
            )
            if chunk_page
            else []
        )

    if not rows:
        return empty
    hydrated = {row.chunk_id: row for row in rows}
    page_rows: dict[int, _Row] = {}
    for row in rows:
        page_rows.setdefault(row.page_id, row)
    now = timezone.now()
    best_keyword = max(page_keyword.values(), default=0.0)
    # Each page's best vector evidence: the chunk with the largest ``vector_part``.
    best_vector: dict[int, _Row] = {}
    for row in rows:
        if row.similarity is None:
            continue
        held = best_vector.get(row.page_id)
        part = vector_part(row.similarity, secondary=row.secondary)
        if held is None or part > vector_part(
            held.similarity, secondary=held.secondary
        ):
            best_vector[row.page_id] = row
    for page in pages.values():
        page_row = page_rows.get(page.page_id)
        if page_row is None:
            continue
        share = (
            page_keyword[page.page_id] / best_keyword
            if page.keyword_chunk is not None and best_keyword > 0
            else 0.0
        )
        vector_row = best_vector.get(page.page_id)
        if vector_row is None and not degraded:
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
        if page.named or normalize_alias(page_row.title) == norm_query:
            key += KEYWORD_WEIGHT
            key *= TITLE_BOOST
        key *= 1 + BACKLINK_FACTOR * math.log1p(page_row.backlinks)
        key *= _recency_boost(
            page_row.type_name, page_row.effective_date or page_row.updated_at, now
        )
        page.key = key
    ordered = [
        p.page_id
        for p in sorted(
            (p for p in pages.values() if p.page_id in page_rows),
            key=lambda p: (*p.order(), page_rows[p.page_id].slug),
        )
    ]
    total_idf = sum(terms.idf.get(lx, 0.0) for lx in terms.base)
    if not degraded and total_idf:
        page_lexemes: dict[int, set[str]] = defaultdict(set)
        for row in rows:
            page_lexemes[row.page_id].update(row.matched)
        # A page named by the query (alias or exact title) is matched in full.
        coverage = {
            pid: 1.0
            if pages[pid].named or normalize_alias(page_rows[pid].title) == norm_query
            else terms.coverage(page_lexemes[pid])
            for pid in ordered
        }
        leads = [pid for pid in keyword_pages if pid in page_rows]
        if leads:
            ordered = keyword_lead(ordered, leads[0], coverage, KEYWORD_LEAD_MARGIN)
    if not degraded:
        ordered = keep_keyword_hits(
            ordered,
            [pid for pid in keyword_pages if pid in page_rows],
            min(limit, GUARD_WINDOW),
        )

    def result(page: _PageRank, chunk_id: int) -> SearchResult:
        row = hydrated[chunk_id]
        matched = terms.covered(row.matched)
        coverage = terms.coverage(matched)
        title_match = normalize_alias(row.title) == norm_query
        alias_hit = page.named and not title_match
        if alias_hit:
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

    keyword_chunks: dict[int, list[int]] = defaultdict(list)
    for chunk_id, page_id in chunk_page.items():
        if chunk_id in keyword_score:
            keyword_chunks[page_id].append(chunk_id)

    def evidence_chunks(page: _PageRank) -> list[int]:
        """The page's chunks, best first: the chunk of the arm ranking it higher
        (a tie goes to the keyword arm), then the other arm's, then the keyword
        arm's other chunks of the page."""
        first, second = page.keyword_chunk, page.vector_chunk
        if page.keyword_rank is None or (
            page.vector_rank is not None and page.vector_rank < page.keyword_rank
        ):
            first, second = second, first
        more = sorted(
            keyword_chunks.get(page.page_id, ()), key=lambda c: -keyword_score[c]
        )
        out: list[int] = []
        for chunk_id in (first, second, *more):
            if chunk_id is not None and chunk_id in hydrated and chunk_id not in out:
                out.append(chunk_id)
        return out

    page_chunks: dict[int, list[int]] = {}

    def candidates() -> Iterator[FoldCandidate]:
        for pid in ordered:
            page_chunks[pid] = evidence_chunks(pages[pid])
            row = hydrated[page_chunks[pid][0]]

            def build(
                page: _PageRank = pages[pid], chunk_id: int = row.chunk_id
            ) -> SearchResult | None:
                first = result(page, chunk_id)
                # Neither arm vouches for a page scoring 0 (no query term, cosine
                # at or below COSINE_FLOOR): one of the k nearest neighbours the
                # vector arm returns however unrelated they are. Left out rather
                # than sent with score 0.
                return first if first.score > 0.0 else None

            yield FoldCandidate(row.slug, row.title, row.text, row.secondary, build)

    firsts = fold_near_duplicates(candidates(), limit=limit)
    spare = limit - len(firsts)
    results: list[SearchResult] = []
    for first in firsts:
        results.append(first)
        chunks = page_chunks[first.page_id]
        if spare > 0 and len(chunks) > 1 and MAX_CHUNKS_PER_PAGE > 1:
            results.append(result(pages[first.page_id], chunks[1]))
            spare -= 1

    response = SearchResponse(query=text, results=results, search_degraded=reason)
    if budget_tokens is not None:
        kept: list[SearchResult] = []
        used = 0
        for item in results:
            cost = estimate_tokens(item.chunk) + estimate_tokens(item.title)
            if used + cost <= budget_tokens:
                kept.append(item)
                used += cost
        response.results = kept
        response.budget_tokens = budget_tokens
        response.budget_used = used
        response.dropped_count = len(results) - len(kept)
    return response
