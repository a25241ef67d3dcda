"""One model per vector (SPEC §3, issue 46): the stored vectors and the configured
embedding model.

Every chunk and fact vector carries the id of the model that made it
(``embedding_model``, e.g. ``local:all-MiniLM-L6-v2``, written with the vector by
the embed path); its dimension is the vector column's own type (one dimension per
column, read from the catalog: ``brain.embeddings.column_dimensions``). A configured
model other than the stored one leaves those vectors stale: search answers with
``embeddings_stale`` and finds them by keywords only, until job ``reembed``
(``jobs.handlers.reembed``) re-embeds them in batches. A model of another dimension
first migrates the columns (``vectors_migrate_dimensions``): every stored vector is
dropped (it cannot be compared with the new model's anyway), the columns take the
new dimension and their HNSW indexes are rebuilt (empty, so at once), then the
re-embed fills them.
"""

from __future__ import annotations

from django.db import connection, transaction
from django.db.models import Count, Q

from brain import embeddings
from brain.models import Chunk, Fact, Page


def vectors_stale_counts() -> dict[str, int | str | None]:
    """How the stored chunk vectors match the configured model.

    Returns ``{model, dimensions, stored_dimensions, stale, embedded, total}``:
    ``stale`` chunks hold a vector the configured model cannot use (another
    model's, or every stored one when the dimension differs), ``embedded`` those
    embedded by the configured model. ``model`` is "" for provider ``none`` (then
    nothing is stale). One aggregate query and one catalog lookup.
    """
    provider = embeddings.get_provider()
    model = provider.name if provider else ""
    stored = embeddings.column_dimensions()
    stats = Chunk.objects.aggregate(
        total=Count("id"),
        stale=Count("id", filter=embeddings.stale_chunks_q()),
        embedded=Count(
            "id",
            filter=Q(embedding__isnull=False, embedding_model=model)
            & ~embeddings.stale_chunks_q(),
        ),
    )
    return {
        "model": model,
        "dimensions": provider.dimensions if provider else None,
        "stored_dimensions": stored,
        **stats,
    }


def vectors_migrate_dimensions() -> int | None:
    """Give the vector columns of chunks and facts the configured model's
    dimension when they hold another (the first step of job ``reembed``).

    In one transaction: drop both HNSW indexes, alter both ``embedding`` columns
    to ``vector(N)`` with every stored vector set to NULL (``embedding_model``
    emptied, pages marked "index behind"), and recreate the indexes. Returns the
    new dimension, or None when there was nothing to migrate (provider ``none``
    or the dimension already matches): idempotent, so a resumed job skips it.
    Takes an exclusive lock on both tables for the duration (an empty index
    builds at once).
    """
    provider = embeddings.get_provider()
    if provider is None or not embeddings.dimensions_differ():
        return None
    size = int(provider.dimensions)
    indexes = {
        model: next(
            i
            for i in model._meta.indexes
            if i.name == f"{model._meta.db_table}_embedding_hnsw"
        )
        for model in (Chunk, Fact)
    }
    with transaction.atomic(), connection.schema_editor(atomic=False) as editor:
        # ALTER TABLE refuses a table with deferred constraint checks still queued
        # by this transaction: run them now.
        editor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        for model, hnsw in indexes.items():
            editor.execute(f'DROP INDEX IF EXISTS "{hnsw.name}"')
            editor.execute(
                f'ALTER TABLE "{model._meta.db_table}" ALTER COLUMN "embedding"'
                f" TYPE vector({size}) USING NULL"
            )
        for model, hnsw in indexes.items():
            model.objects.exclude(embedding_model="").update(embedding_model="")
            editor.add_index(model, hnsw)
        Page.objects.filter(pk__in=Chunk.objects.values("page_id")).exclude(
            indexed_hash=""
        ).update(indexed_hash="")
    return size
