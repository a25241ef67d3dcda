"""Recall by meaning: facts ranked by hybrid keyword + vector (SPEC §2.4, §4 recall).

``fact_search`` answers a natural question ("how should I contact Luka?", "who
handles the construction loan draws?") with the active facts of the caller's scope,
best first. Candidates come from three places: the keyword arm (any of the query's
words in the fact text), the vector arm (the nearest fact embeddings to the query,
pgvector cosine) and the facts of a page the query names (title or alias, as
``entity()`` resolves it). Each candidate is scored like a page (SPEC §3): the
keyword score (``ts_rank`` of the query's words ORed, over the fact's text plus its
entity's title and aliases, so a fact's entity name counts as its words) and the
cosine, each normalised by its best candidate, fused 1/3 : 2/3. Without an
embedding model the keyword arm alone ranks (no error).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connection
from django.db.models import QuerySet
from pgvector.django import CosineDistance

from brain.access import ReadScope
from brain.embeddings import embed_texts
from brain.models import Alias, Fact
from brain.selectors_facts import fact_list_active
from brain.services.entities import entity_resolve
from brain.text import bounded_query

KEYWORD_WEIGHT = 1 / 3
VECTOR_WEIGHT = 2 / 3
ARM_FETCH = 50
NAME_GRAMS_MAX = 30
_WORD = re.compile(r"[\w'’-]+")


def fact_search(
    *, scope: ReadScope, query: str, since: datetime | None = None, limit: int = 50
) -> list[Fact]:
    """The active facts readable in ``scope`` (recorded at or after ``since``) that
    answer ``query``, best first, at most ``limit``. Never raises for an empty
    brain or a missing embedding model."""
    base = fact_list_active(scope=scope, since=since)
    query = bounded_query(query)  # a pasted page as a query stays answerable
    words = list(dict.fromkeys(w for w in _WORD.findall(query) if len(w) > 1))
    if not words:
        return []
    or_query = " or ".join(w.replace("'", "") for w in words)
    cand: dict[int, Fact] = {}
    for fact in _keyword_candidates(base, or_query):
        cand[fact.pk] = fact
    named, name_words = _named_pages(scope, words)
    if named:
        for fact in base.filter(entity_id__in=named).order_by("-created_at")[:200]:
            cand.setdefault(fact.pk, fact)
    # The vector arm asks the question without the names (the keyword arm has
    # them): a fact's text seldom repeats its entity's name.
    asked = " ".join(w for w in words if w.lower() not in name_words) or query
    cosines = _vector_arm(base, asked, cand)
    if not cand:
        return []
    facts = list(cand.values())
    keyword = _keyword_scores(facts, or_query)
    best_kw = max(keyword) or 1.0
    best_cos = max([c for c in cosines.values() if c > 0] or [1.0])
    scored = []
    for fact, kw in zip(facts, keyword, strict=True):
        cos = max(cosines.get(fact.pk, 0.0), 0.0)
        score = KEYWORD_WEIGHT * kw / best_kw + VECTOR_WEIGHT * cos / best_cos
        scored.append((-score, -fact.created_at.timestamp(), -fact.pk, fact))
    scored.sort(key=lambda row: row[:3])
    return [row[3] for row in scored[:limit]]


def _keyword_candidates(base: QuerySet[Fact], or_query: str) -> Iterable[Fact]:
    """Facts whose text holds any of the query's words (websearch ``or``)."""
    config = settings.BRAIN_FTS_LANGUAGE
    return (
        base.annotate(_tsv=SearchVector("text", config=config))
        .filter(_tsv=SearchQuery(or_query, config=config, search_type="websearch"))
        .order_by("-created_at")[: ARM_FETCH * 4]
    )


def _named_pages(scope: ReadScope, words: list[str]) -> tuple[set[int], set[str]]:
    """(pages the query names, the lower-case words naming them): runs of one to
    three words resolved as ``entity()`` does by alias or exact title (at most 30
    tries)."""
    names: list[str] = []
    for size in (3, 2, 1):
        for i in range(len(words) - size + 1):
            gram = words[i : i + size]
            if max(len(w) for w in gram) >= 3:
                names.append(" ".join(gram).strip("'’"))
    found: set[int] = set()
    name_words: set[str] = set()
    for name in names[:NAME_GRAMS_MAX]:
        if set(name.lower().split()) <= name_words:
            continue  # "Luka" after "Luka Petrov"
        resolution = entity_resolve(scope=scope, name=name)
        if resolution.page is not None and resolution.arm in ("alias", "exact"):
            found.add(resolution.page.pk)
            name_words.update(name.lower().split())
    return found, name_words


def _vector_arm(
    base: QuerySet[Fact], query: str, cand: dict[int, Fact]
) -> dict[int, float]:
    """Cosine of the query with the nearest facts (adding them to ``cand``) and with
    every candidate; empty without an embedding model."""
    vectors, model = embed_texts([query])
    if not vectors:
        return {}
    vector = vectors[0]
    near = (
        base.filter(embedding__isnull=False, embedding_model=model)
        .annotate(_distance=CosineDistance("embedding", vector))
        .order_by("_distance")[:ARM_FETCH]
    )
    out: dict[int, float] = {}
    for fact in near:
        cand.setdefault(fact.pk, fact)
        out[fact.pk] = 1.0 - float(fact._distance)
    rest = [pk for pk in cand if pk not in out]
    if rest:
        rows = (
            Fact.objects.filter(pk__in=rest, embedding__isnull=False)
            .annotate(_distance=CosineDistance("embedding", vector))
            .values_list("pk", "_distance")
        )
        out.update({pk: 1.0 - float(d) for pk, d in rows})
    return out


def _keyword_scores(facts: list[Fact], or_query: str) -> list[float]:
    """``ts_rank`` of the ORed query over each fact's text, its entity's title and
    aliases (one round trip)."""
    page_ids = {f.entity_id for f in facts if f.entity_id}
    aliases: dict[int, list[str]] = {}
    for page_id, alias in Alias.objects.filter(page_id__in=page_ids).values_list(
        "page_id", "alias"
    ):
        aliases.setdefault(page_id, []).append(alias)
    docs = [
        " ".join(
            [
                f.text,
                f.entity.title if f.entity else "",
                *aliases.get(f.entity_id or 0, []),
            ]
        )
        for f in facts
    ]
    config = settings.BRAIN_FTS_LANGUAGE
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT ts_rank(to_tsvector(%s::regconfig, d), q) "
            "FROM unnest(%s::text[]) WITH ORDINALITY AS t(d, i), "
            "websearch_to_tsquery(%s::regconfig, %s) AS q ORDER BY i",
            [config, docs, config, or_query],
        )
        return [float(row[0]) for row in cursor.fetchall()]
