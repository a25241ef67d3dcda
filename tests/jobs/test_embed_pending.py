"""Embedding work is never done twice (SPEC §7, docs/jobs.md "Dream").

Dream queues ``embed_pending`` only when no queued or running job already covers
the pending chunks, and two embedders running at once (a demo's job and dream's,
two workers) never embed the same chunk: each batch is claimed with ``FOR UPDATE
SKIP LOCKED``. Embeddings come from the real local model wrapped in a counter; the
database is real.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest
from django.db import connections

from brain import embeddings
from brain.models import Chunk, Page, Source
from brain.services.pages import index as page_index
from brain.services.pages import pages_embed_pending
from jobs.models import Job
from jobs.runner import execute_job
from jobs.services import embed_pending_enqueue, job_claim, job_enqueue
from tests.brain.embedding_counter import CountingProvider
from tests.factories import PageFactory, SourceFactory

if TYPE_CHECKING:
    from brain.embeddings import EmbeddingProvider, Vector


@pytest.fixture
def local(settings) -> EmbeddingProvider:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "local"
    provider = embeddings.get_provider()
    assert provider is not None
    return provider


def pending_chunks(source: Source, n: int) -> list[Chunk]:
    page = PageFactory(source=source)
    return [
        Chunk.objects.create(
            page=page,
            source=source,
            visibility=page.visibility,
            ordinal=i,
            text=f"{source.id} chunk {i}",
            content_hash=f"{source.id}-{i}",
        )
        for i in range(n)
    ]


class GatedProvider(CountingProvider):
    """Counts like ``CountingProvider``; its first call waits for ``release``
    after setting ``inside`` (the first batch is then claimed but not stored)."""

    def __init__(self, inner: EmbeddingProvider) -> None:
        super().__init__(inner)
        self.inside = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: list[str]) -> list[Vector]:
        if not self.calls:
            self.inside.set()
            assert self.release.wait(60)
        return super().embed(texts)


def test_concurrent_embedders_never_embed_the_same_chunk(
    restore_migrated_rows: None,
    transactional_db: None,
    local: EmbeddingProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = SourceFactory(id="box")
    chunks = pending_chunks(source, 6)
    monkeypatch.setattr(page_index, "EMBED_BATCH", 2)
    first, second = GatedProvider(local), CountingProvider(local)
    providers = {"first": first, "second": second}
    monkeypatch.setattr(
        embeddings,
        "get_provider",
        lambda: providers[threading.current_thread().name],
    )
    counts: dict[str, int] = {}

    def embed() -> None:
        try:
            counts[threading.current_thread().name] = pages_embed_pending()
        finally:
            connections.close_all()

    one = threading.Thread(target=embed, name="first")
    one.start()
    assert first.inside.wait(60), "the first embedder never reached the model"
    two = threading.Thread(target=embed, name="second")
    two.start()
    two.join(120)
    first.release.set()
    one.join(120)

    assert set(first.texts).isdisjoint(second.texts)
    assert sorted(first.texts + second.texts) == sorted(
        f"{Page.objects.get().title}\n\n{c.text}" for c in chunks
    )
    assert counts == {"first": 2, "second": 4}
    assert not Chunk.objects.filter(embedding__isnull=True).exists()


@pytest.mark.django_db
def test_dream_does_not_queue_embed_pending_while_a_job_covering_the_backlog_runs(
    local: EmbeddingProvider,
) -> None:
    """The demo's job for its mailbox is running; dream finds every pending chunk
    in that mailbox and hands them to it instead of queueing a second job."""
    box = SourceFactory(id="box")
    pending_chunks(box, 3)
    demo, _ = job_enqueue(
        kind="embed_pending", params={"source_ids": ["box"]}, dispatch=False
    )
    claimed = job_claim(job_id=demo.pk, worker="host:1")
    assert claimed is not None and claimed.status == Job.Status.RUNNING
    job, _ = job_enqueue(
        kind="dream", params={"phases": ["embeddings"]}, dispatch=False
    )

    done = execute_job(job_id=job.pk)

    assert done is not None and done.status == Job.Status.SUCCEEDED, done.error
    assert list(Job.objects.filter(kind="embed_pending")) == [demo]
    summary = next(p for p in done.result["phases"] if p["phase"] == "embeddings")[
        "summary"
    ]
    assert summary.endswith(f"the embed_pending job #{demo.pk} (already running)")


@pytest.mark.django_db
def test_embed_pending_is_queued_for_a_backlog_no_live_job_covers(
    local: EmbeddingProvider,
) -> None:
    SourceFactory(id="box")
    other = SourceFactory(id="other")
    pending_chunks(other, 2)
    demo, _ = job_enqueue(
        kind="embed_pending", params={"source_ids": ["box"]}, dispatch=False
    )

    job, created = embed_pending_enqueue(created_by="test", dispatch=False)
    again, created_again = embed_pending_enqueue(created_by="test", dispatch=False)
    mine, mine_created = embed_pending_enqueue(
        source_ids=["box"], created_by="test", dispatch=False
    )

    assert created and job.params == {} and job != demo
    assert (again, created_again) == (job, False)
    assert mine_created is False
