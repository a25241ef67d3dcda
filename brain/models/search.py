"""The search index: chunks with embeddings (SPEC §3)."""

from __future__ import annotations

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import Q
from pgvector.django import HnswIndex

from brain.models.base import EMBEDDING_DIMENSIONS, EmbeddingField, Visibility
from brain.models.pages import Page
from brain.models.sources import Source

# --- Search index (SPEC §3) ----------------------------------------------------------


class Chunk(models.Model):
    """A searchable piece of a page body (about 300 tokens), with its tsvector and
    embedding. ``source`` and ``visibility`` are copied from the page so both search
    arms filter without a join."""

    page = models.ForeignKey(Page, on_delete=models.CASCADE, related_name="chunks")
    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="+")
    visibility = models.CharField(max_length=8, choices=Visibility.choices)
    ordinal = models.PositiveIntegerField()
    text = models.TextField()
    token_count = models.PositiveIntegerField(default=0)
    tsv = SearchVectorField(null=True)
    embedding = EmbeddingField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True)
    content_hash = models.CharField(max_length=64)
    # Only quoted history, a signature or a list footer (``brain.mailtext``): search
    # counts it as weaker evidence than the page's own words (issue 26).
    secondary = models.BooleanField(default=False, db_default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["page", "ordinal"],
                name="%(app_label)s_%(class)s_unique_ordinal",
            ),
        ]
        indexes = [
            GinIndex(fields=["tsv"], name="brain_chunk_tsv_gin"),
            HnswIndex(
                name="brain_chunk_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            models.Index(fields=["source", "visibility"]),
            # search_degraded: "is any searched chunk still without an embedding?"
            # stays one index probe when every chunk is embedded (SPEC §3).
            models.Index(
                fields=["source", "visibility"],
                condition=Q(embedding__isnull=True),
                name="brain_chunk_embedding_pending",
            ),
            # search_degraded: "is any searched chunk embedded by another model?"
            # is two range probes of this index (issue 46, ``embeddings_stale``).
            models.Index(
                fields=["embedding_model"], name="brain_chunk_embedding_model"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.page_id}#{self.ordinal}"
