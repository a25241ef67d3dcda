"""A page write too large to embed within the caller's request queues an
``embed_pending`` job instead (SPEC §7, §11: a 1 MB note is about a thousand chunks,
minutes of CPU); a small write still embeds right after its commit. The local model
is real, wrapped in a counter; the database is real; django-q2 runs jobs inline in
the test settings."""

from __future__ import annotations

import pytest

from brain.access import local_caller
from brain.models import Chunk, Source
from brain.services.pages import page_write
from brain.services.pages import write as page_writer
from jobs.models import Job
from tests.brain.embedding_counter import CountingProvider, count_local_embeddings

pytestmark = pytest.mark.django_db

PARAGRAPH = (
    "The quarterly planning notes cover budgets, hiring, vendor contracts and the "
    "office move, with owners and dates for each line item that was agreed. "
) * 12


@pytest.fixture
def counter(settings, monkeypatch) -> CountingProvider:  # type: ignore[no-untyped-def]
    """The configured local provider, counted."""
    return count_local_embeddings(settings, monkeypatch)


def _write(source: Source, slug: str, body: str):  # type: ignore[no-untyped-def]
    return page_write(
        source=source,
        mode="upsert",
        slug=slug,
        title="Planning notes",
        body=body,
        actor=local_caller(),
    )


def test_a_write_over_the_inline_limit_embeds_in_an_embed_pending_job(
    default_source: Source,
    counter: CountingProvider,
    django_capture_on_commit_callbacks,
    monkeypatch,
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(page_writer, "INLINE_EMBED_CHUNKS", 2)
    body = "\n\n".join(f"## Part {i}\n\n{PARAGRAPH}" for i in range(6))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        result = _write(default_source, "notes/planning", body)
    chunks = Chunk.objects.filter(page=result.page).count()
    assert chunks > 2 and result.index_current is False
    assert counter.calls == [] and not Job.objects.filter(kind="embed_pending").exists()
    with django_capture_on_commit_callbacks(execute=True):
        for callback in callbacks:
            callback()
    job = Job.objects.get(kind="embed_pending")
    assert job.created_by == "page_write"
    assert job.params == {"source_ids": [default_source.id]}
    assert job.status == Job.Status.SUCCEEDED
    assert not Chunk.objects.filter(page=result.page, embedding__isnull=True).exists()


def test_a_small_write_embeds_after_commit_without_a_job(
    default_source: Source,
    counter: CountingProvider,
    django_capture_on_commit_callbacks,
) -> None:  # type: ignore[no-untyped-def]
    with django_capture_on_commit_callbacks(execute=True):
        result = _write(default_source, "notes/short", "Budget review on Friday.")
    assert not Job.objects.filter(kind="embed_pending").exists()
    assert len(counter.texts) == 1
    assert not Chunk.objects.filter(page=result.page, embedding__isnull=True).exists()
