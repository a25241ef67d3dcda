"""The answer shapes of page search (SPEC §3): ``SearchResult`` (one page's
evidence chunk with its calibrated score and evidence kind) and ``SearchResponse``,
with the bounds every stage shares (``MAX_LIMIT`` results, ``ARM_CANDIDATES`` pages
per arm, ``MAX_CHUNKS_PER_PAGE``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from brain.exceptions import PROTOCOL_VERSION

ARM_CANDIDATES = 50
MAX_CHUNKS_PER_PAGE = 2
MAX_LIMIT = 100

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
