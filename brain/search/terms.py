"""Stage 1 of page search (SPEC §3): the query's terms, read by the same text
search parser as the pages (``ts_debug``), each with its document frequency among
the searched chunks and its idf; ``-word`` exclusions; adjacent words also stand
for their concatenation (compound spacing). See ``brain.search`` for the whole
pipeline.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

DF_CAP = 250
COMMON_STATS_TTL = 300.0
MAX_QUERY_TERMS = 32
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


_Pair = tuple[str, str | None, tuple[str, ...]]
"""A compound spelling of the query: two adjacent words, or a hyphenated word
(second None), with the lexemes of their concatenation."""


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
    words, excluded_words, lexemes_of, pairs = _parsed_query(cursor, text)
    if not words and not excluded_words:
        return _Terms({}, {}, {}, ())
    joined = _compounds(words, lexemes_of, pairs)
    df, total = _document_frequencies(
        cursor,
        list(
            dict.fromkeys(
                [lx for lxs in lexemes_of.values() for lx in lxs] + list(joined)
            )
        ),
        source_ids=source_ids,
        visibilities=visibilities,
    )
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


def _parsed_query(
    cursor: Any, text: str
) -> tuple[list[str], list[str], dict[str, tuple[str, ...]], list[_Pair]]:
    """The query read by the document parser (``ts_debug``): ``(words,
    excluded words, {word: lexemes}, compound pairs)``, at most
    ``MAX_QUERY_TERMS`` words of each kind, question-frame words dropped unless
    nothing else is left. A pair is ``(first, second, lexemes)``: two adjacent
    words read as one, or a hyphenated word (``second`` None) without hyphens.
    One round trip."""
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
    pairs: list[_Pair] = []
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
    return words, excluded_words, lexemes_of, pairs


def _compounds(
    words: list[str], lexemes_of: dict[str, tuple[str, ...]], pairs: list[_Pair]
) -> dict[str, tuple[str, ...]]:
    """Compound spacing: ``{joined lexeme: the lexemes of its parts}`` for each
    pair whose words are all terms and whose concatenation is one lexeme that is
    not already one of the query's own."""
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
    return joined


def _document_frequencies(
    cursor: Any,
    lexemes: list[str],
    *,
    source_ids: Sequence[str],
    visibilities: Sequence[str],
) -> tuple[dict[str, int], int]:
    """``({lexeme: document frequency capped at DF_CAP}, chunk count)``: a lexeme
    among the planner's most common elements takes its estimate from there,
    unprobed; the others are counted with a capped index probe over the searched
    chunks. One round trip (plus the cached statistics)."""
    share, rows = _common_lexemes(cursor)
    df: dict[str, int] = {}
    probe: list[str] = []
    for lexeme in lexemes:
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
    return df, total
