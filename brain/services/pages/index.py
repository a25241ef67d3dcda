"""The search index of pages: chunks and embeddings (SPEC §3)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q

from brain import embeddings
from brain.bulk import bulk_insert
from brain.chunking import chunk_segments, chunk_tokens
from brain.models import (
    Chunk,
    Page,
)
from brain.services.pages.inputs import EMBED_BATCH
from brain.text import sha256_hex

# --- the index: chunks and embeddings ----------------------------------------------------


def _chunk_hash(title: str, text: str) -> str:
    return sha256_hex(f"{title}\n\n{text}")


# A run of text the parser keeps as one token although it joins words or numbers
# (issue 26): a slashed date or a path (``file``: "11/26/2001", "/usr/bin/python3"),
# a host ("www.enron.com"), a URL, an e-mail address. A bare decimal is left alone.
_JOINED_RUN = re.compile(r"\S*[^\W_][/@.][^\W_]\S*")
_DECIMAL = re.compile(r"[+-]?\d+\.\d+")
_PART = re.compile(r"[^\W_]+")


def token_parts(text: str) -> str:
    """SPEC §3 keyword arm: the words and numbers inside the runs of ``text``
    that the text search parser keeps as one token (a slashed date, a path, a host, a URL, an e-mail
    address: any run of non-blank characters with ``/``, ``@`` or ``.`` between
    two letters or digits, a bare decimal number excepted), split at every
    character that is not a letter or digit, space-separated; "" when there are
    none. The chunk's tsvector indexes them besides the whole tokens
    (``_rebuild_chunks_many``).

    Why: PostgreSQL's parser reads "West VaR - 11/26/2001" as the words and one
    ``file`` token ``11/26/2001``, "phillip.allen@enron.com" as one ``email``
    token, so a question asking for "26 November 2001" or naming "Phillip Allen"
    matched none of them (BM25 over ``\\w+`` tokens splits them). The query side
    is unchanged: a query that writes the whole token still matches it whole.
    About 70 µs of Python per chunk (the retrieval dev set's 5,302 chunks: 0.38 s),
    and their tsvectors grow 12 % (text form). Measured with
    ``benchmarks/retrieval_quality.py --set both``: Enron hybrid R@1/R@5
    0.838/0.975 -> 0.875/0.975, keyword-only 0.812/0.950 -> 0.850/0.975 (with
    ``brain.search.combine_page_scores``; dates, the senders' addresses of
    forwarded mail); SpamAssassin hybrid 0.871/0.981 either way, one question of
    the odd half lost at rank 1 (a "Red Hat" question: "redhat.com" in links now
    counts for the joined form), keyword-only 0.852/0.951 -> 0.863/0.954. Writing
    the month's name beside a slashed date changed no figure."""
    out: list[str] = []
    for run in _JOINED_RUN.findall(text):
        if _DECIMAL.fullmatch(run):
            continue
        parts = _PART.findall(run)
        if len(parts) > 1:
            out.extend(parts)
    return " ".join(out)


def _chunk_texts(page: Page) -> list[tuple[str, bool]]:
    """The chunks a page's index holds: ``[(text, secondary)]`` of its body, or its
    title alone when the body is blank."""
    return chunk_segments(page.body) or ([(page.title, False)] if page.title else [])


def _rebuild_chunks(page: Page) -> int:
    """``_rebuild_chunks_many`` for one page; returns its chunks still waiting for
    an embedding."""
    return _rebuild_chunks_many([page]).get(page.pk, 0)


def _rebuild_chunks_many(
    pages: Sequence[Page], *, new_ids: Collection[int] = ()
) -> dict[int, int]:
    """Replace the chunks (text + tsvector) of ``pages`` inside the caller's
    transaction, with three statements whatever the number of pages (one when
    every page is in ``new_ids``: pages created in this transaction, which have
    no chunks to carry over or delete).

    Embeddings of chunks whose text (and title) did not change are carried over when
    they came from the current provider, so an edit re-embeds only what changed.
    Returns, per page id, the number of chunks still waiting for an embedding (0 with
    provider ``none``: there is nothing to embed).
    """
    if not pages:
        return {}
    provider = embeddings.get_provider()
    model = provider.name if provider else ""
    ids = [page.pk for page in pages]
    stored = [pk for pk in ids if pk not in new_ids]
    old: dict[tuple[int, str], Chunk] = {}
    if model and stored:
        old = {
            (c.page_id, c.content_hash): c
            for c in Chunk.objects.filter(
                page_id__in=stored, embedding__isnull=False, embedding_model=model
            ).only("page_id", "content_hash", "embedding", "embedding_model")
        }
    if stored:
        Chunk.objects.filter(page_id__in=stored).delete()
    rows: list[dict[str, Any]] = []
    waiting: dict[int, int] = {}
    for page in pages:
        texts = _chunk_texts(page)
        title_parts = token_parts(page.title)
        waiting[page.pk] = 0
        for ordinal, (text, secondary) in enumerate(texts):
            digest = _chunk_hash(page.title, text)
            reuse = old.get((page.pk, digest))
            if reuse is None:
                waiting[page.pk] += 1
            rows.append(
                {
                    "page_id": page.pk,
                    "source_id": page.source_id,
                    "visibility": page.visibility,
                    "ordinal": ordinal,
                    "text": text,
                    "token_count": chunk_tokens(text),
                    "content_hash": digest,
                    "secondary": secondary,
                    "embedding": reuse.embedding if reuse else None,
                    "embedding_model": reuse.embedding_model if reuse else "",
                    "title": page.title,
                    "parts": f"{title_parts}\n{token_parts(text)}",
                }
            )
    language = settings.BRAIN_FTS_LANGUAGE
    # The tsvector (title weight A, text weight D, then the parts of the tokens the
    # parser keeps whole, ``token_parts``, weight D) is computed by the INSERT itself.
    bulk_insert(
        Chunk,
        rows,
        extra={"title": "text", "parts": "text"},
        computed={
            "tsv": (
                "setweight(to_tsvector(%s::regconfig, COALESCE(r.title, '')), 'A') || "
                "setweight(to_tsvector(%s::regconfig, COALESCE(r.text, '')), 'D') || "
                "setweight(to_tsvector(%s::regconfig, COALESCE(r.parts, '')), 'D')",
                [language, language, language],
            )
        },
    )
    if provider is None:
        return dict.fromkeys(ids, 0)
    return waiting


def _embed_chunks(
    chunks: list[Chunk], titles: dict[int, str], timing: dict[str, float] | None = None
) -> str | None:
    """Embed ``chunks`` (title + text) and store the vectors; returns the model name,
    or None when no provider is configured or it failed (chunks stay pending).
    ``timing["model_seconds"]`` accumulates the time spent in the model call."""
    if not chunks:
        provider = embeddings.get_provider()
        return provider.name if provider else None
    started = time.perf_counter()
    vectors, model = embeddings.embed_texts(
        [f"{titles[c.page_id]}\n\n{c.text}" for c in chunks]
    )
    if timing is not None:
        timing["model_seconds"] = (
            timing.get("model_seconds", 0.0) + time.perf_counter() - started
        )
    if vectors is None:
        return None
    for chunk, vector in zip(chunks, vectors, strict=True):
        chunk.embedding = vector
        chunk.embedding_model = model
    Chunk.objects.bulk_update(chunks, ["embedding", "embedding_model"])
    return model


def _mark_indexed(page_ids: Iterable[int], model: str) -> set[int]:
    """Set ``indexed_hash = content_hash`` for pages whose chunks all carry an
    embedding from ``model``, in one compare-and-set statement (a page rewritten
    meanwhile has new chunks without vectors and stays behind). Returns the ids
    of ``page_ids`` whose index is current afterwards."""
    ids = list(page_ids)
    if not ids:
        return set()
    stale = Chunk.objects.filter(page_id=OuterRef("pk")).filter(_needs_embedding(model))
    Page.objects.filter(pk__in=ids, deleted_at__isnull=True).exclude(
        indexed_hash=F("content_hash")
    ).exclude(Exists(stale)).update(indexed_hash=F("content_hash"))
    return set(
        Page.objects.filter(pk__in=ids, indexed_hash=F("content_hash")).values_list(
            "pk", flat=True
        )
    )


def _embed_pages(pages: Sequence[tuple[int, str]]) -> set[int]:
    """Embed the pending chunks of ``pages`` ((page id, content hash when written)
    pairs) outside any transaction (STYLE rule 15), ``EMBED_BATCH`` chunks per
    model call whatever page they belong to.

    A page rewritten since (another content hash) is left to its own writer.
    Returns the ids whose index is current afterwards. A provider of ``none``
    counts as current once the chunks exist (nothing to embed); a failing provider
    leaves the pages behind for ``pages_embed_pending``.
    """
    wanted = dict(pages)
    titles = {
        pk: title
        for pk, title, content_hash in Page.objects.filter(
            pk__in=list(wanted)
        ).values_list("pk", "title", "content_hash")
        if content_hash == wanted[pk]
    }
    if not titles:
        return set()
    provider = embeddings.get_provider()
    if provider is None:
        Page.objects.filter(pk__in=list(titles)).update(indexed_hash=F("content_hash"))
        return set(titles)
    chunks = list(
        Chunk.objects.filter(page_id__in=list(titles))
        .filter(_needs_embedding(provider.name))
        .only("id", "page_id", "text")
        .order_by("page_id", "ordinal")
    )
    model = provider.name
    for offset in range(0, len(chunks), EMBED_BATCH):
        embedded_with = _embed_chunks(chunks[offset : offset + EMBED_BATCH], titles)
        if embedded_with is None:
            return set()
        model = embedded_with
    return _mark_indexed(titles, model)


def _chunks_to_embed(pages: Sequence[tuple[int, str]]) -> int:
    """How many chunks of ``pages`` ((page id, content hash) pairs) ``_embed_pages``
    would embed now: no vector or another model's; 0 with provider ``none``. One
    count query."""
    provider = embeddings.get_provider()
    if provider is None:
        return 0
    return (
        Chunk.objects.filter(page_id__in=[pk for pk, _ in pages])
        .filter(_needs_embedding(provider.name))
        .count()
    )


def _embed_page(page_id: int, content_hash: str) -> bool:
    """``_embed_pages`` for one page: True when its index is current afterwards."""
    return page_id in _embed_pages([(page_id, content_hash)])


def page_reindex(*, page: Page) -> bool:
    """Force a rebuild of one page's chunks and embeddings (admin "re-embed").

    Chunks are rebuilt in a transaction, then embedded after it; returns True when the
    index is current afterwards (False while deferred to an outer commit or when the
    provider failed)."""
    with transaction.atomic():
        locked = Page.objects.select_for_update().get(pk=page.pk)
        if locked.deleted_at is not None:
            return False
        Chunk.objects.filter(page=locked).update(embedding=None, embedding_model="")
        Page.objects.filter(pk=locked.pk).update(indexed_hash="")
        if _rebuild_chunks(locked) == 0:
            Page.objects.filter(pk=locked.pk).update(indexed_hash=locked.content_hash)
            return True
    if connection.in_atomic_block:
        transaction.on_commit(lambda: _embed_page(locked.pk, locked.content_hash))
        return False
    return _embed_page(locked.pk, locked.content_hash)


def pages_rechunk(
    *, batch: int = 500, progress: Callable[[int, int], None] | None = None
) -> tuple[int, int]:
    """Bring every live page's chunks to the current chunker (issue 26: a page's
    own words and its quoted history, signature or list footer in separate chunks,
    ``Chunk.secondary``); run after ``migrate`` applies ``brain.0013``
    (``brain.apps.rechunk_after_migrate``) for the pages stored before it.

    Pages are read ``batch`` at a time in id order; a page whose chunks (text and
    ``secondary``, in order) already match ``chunk_segments`` of its body is left
    alone, the others are rebuilt by ``_rebuild_chunks_many`` in one transaction per
    batch: chunks whose text did not change keep their embedding from the current
    provider, the rest wait for ``pages_embed_pending`` (search says
    ``embeddings_pending`` meanwhile). Calls ``progress(seen, rebuilt)`` after each
    batch. Returns ``(pages seen, pages rebuilt)``. Idempotent.
    """
    seen = rebuilt = 0
    last = 0
    while True:
        pages = list(
            Page.objects.filter(pk__gt=last, deleted_at__isnull=True).order_by("pk")[
                :batch
            ]
        )
        if not pages:
            return seen, rebuilt
        last = pages[-1].pk
        stored: dict[int, list[tuple[str, bool]]] = {}
        for page_id, text, secondary in (
            Chunk.objects.filter(page_id__in=[p.pk for p in pages])
            .order_by("page_id", "ordinal")
            .values_list("page_id", "text", "secondary")
        ):
            stored.setdefault(page_id, []).append((text, secondary))
        stale = [
            page for page in pages if stored.get(page.pk, []) != _chunk_texts(page)
        ]
        if stale:
            with transaction.atomic():
                _rebuild_chunks_many(stale)
        seen += len(pages)
        rebuilt += len(stale)
        if progress is not None:
            progress(seen, rebuilt)


def _needs_embedding(model: str) -> Q:
    """Chunks ``pages_embed_pending`` fills: no vector, or one from another model."""
    return Q(embedding__isnull=True) | ~Q(embedding_model=model)


def pages_embed_backlog(*, exclude_source_ids: Iterable[str] = ()) -> int:
    """How many chunks of live pages ``pages_embed_pending`` would embed now (no
    vector, or another model's), leaving out the sources in
    ``exclude_source_ids``; 0 with provider ``none``. One count query."""
    provider = embeddings.get_provider()
    if provider is None:
        return 0
    return (
        Chunk.objects.filter(
            _needs_embedding(provider.name), page__deleted_at__isnull=True
        )
        .exclude(source_id__in=list(exclude_source_ids))
        .count()
    )


def pages_embed_pending(
    *,
    limit: int | None = None,
    progress: Callable[[int], None] | None = None,
    source_ids: Sequence[str] | None = None,
    timing: dict[str, float] | None = None,
) -> int:
    """Fill missing or stale chunk embeddings (job ``embed_pending``, SPEC §7, §10).

    Embeds chunks with no embedding or one from another model (a managed re-embed
    after a provider change), in batches of 64, at most ``limit`` chunks; calls
    ``progress(n)`` after each batch with the number embedded in it. Pages whose
    chunks are all embedded get ``indexed_hash = content_hash``. Returns the number of
    chunks embedded; 0 with provider ``none`` or when the provider fails (logged).
    ``source_ids`` limits it to those sources (an importer filling its own pages).
    ``timing``, when given, gets ``seconds`` (the whole run) and ``model_seconds``
    (inside the model), so a caller can compare the pipeline's rate with the
    model's own. Idempotent: a second run finds nothing to do.

    Embedders running at once never embed the same chunk: each batch is claimed
    with ``SELECT … FOR UPDATE SKIP LOCKED`` in a transaction that holds it while
    the batch is embedded and stored (one model call, ``EMBED_BATCH`` chunks), so a
    second embedder takes the next unclaimed chunks and stops when none are left.
    A page write that replaces a claimed page's chunks waits for that batch.
    """
    started = time.perf_counter()
    if timing is not None:
        timing.update(seconds=0.0, model_seconds=0.0)
    provider = embeddings.get_provider()
    if provider is None:
        return 0
    total = 0
    stale = _needs_embedding(provider.name)
    if source_ids is not None:
        stale &= Q(source_id__in=list(source_ids))
    while limit is None or total < limit:
        size = EMBED_BATCH if limit is None else min(EMBED_BATCH, limit - total)
        with transaction.atomic():
            batch = list(
                Chunk.objects.filter(stale, page__deleted_at__isnull=True)
                .select_for_update(skip_locked=True, of=("self",))
                .only("id", "page_id", "text")
                .order_by("id")[:size]
            )
            if not batch:
                break
            titles = dict(
                Page.objects.filter(pk__in={c.page_id for c in batch}).values_list(
                    "pk", "title"
                )
            )
            model = _embed_chunks(batch, titles, timing)
        if model is None:
            break
        total += len(batch)
        _mark_indexed({c.page_id for c in batch}, model)
        if progress is not None:
            progress(len(batch))
    if timing is not None:
        timing["seconds"] = time.perf_counter() - started
    return total
