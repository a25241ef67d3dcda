"""Chunks and embeddings follow the one write path (SPEC §2.3, §3; STYLE rule 8).

Embeddings come from the real local model wrapped in a counter, so the tests see
exactly which texts were embedded; the database is real.
"""

from __future__ import annotations

import pytest
from django.db.migrations import Migration
from django.db.migrations.loader import MigrationLoader

from brain import embeddings
from brain.access import local_caller
from brain.apps import rechunk_after_migrate
from brain.embeddings import EmbeddingUnavailable
from brain.models import Chunk, Page, Source
from brain.services.pages import (
    page_add,
    page_update,
    page_write,
    pages_embed_pending,
    pages_rechunk,
)
from tests.brain.embedding_counter import CountingProvider, count_local_embeddings

pytestmark = pytest.mark.django_db


@pytest.fixture
def counter(settings, monkeypatch) -> CountingProvider:  # type: ignore[no-untyped-def]
    """The configured local provider, counted."""
    return count_local_embeddings(settings, monkeypatch)


class FailingProvider:
    name = "local:all-MiniLM-L6-v2"
    dimensions = 384

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise EmbeddingUnavailable("model went away")


def _write(source: Source, slug: str, body: str, mode: str = "upsert", **kw):  # type: ignore[no-untyped-def]
    return page_write(
        source=source,
        mode=mode,
        slug=slug,
        title=slug.split("/")[-1],
        body=body,
        actor=local_caller(),
        **kw,
    )


def test_embeddings_are_computed_after_commit_and_mark_the_index_current(
    default_source: Source,
    counter: CountingProvider,
    django_capture_on_commit_callbacks,
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        result = _write(
            default_source, "notes/a", "Quarterly budget review with finance."
        )
        # Inside the write nothing was embedded: that waits for the commit.
        assert counter.calls == [] and result.index_current is False
        assert Chunk.objects.get(page=result.page).embedding is None
    for callback in callbacks:
        callback()
    page = Page.objects.get(pk=result.page.pk)
    assert page.indexed_hash == page.content_hash
    chunk = Chunk.objects.get(page=page)
    assert chunk.embedding is not None and chunk.embedding_model == counter.name
    assert len(counter.texts) == 1


def test_unchanged_resave_does_not_re_embed(
    default_source: Source,
    counter: CountingProvider,
    django_capture_on_commit_callbacks,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        _write(default_source, "notes/a", "Quarterly budget review with finance.")
    calls = len(counter.calls)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        result = _write(
            default_source, "notes/a", "Quarterly budget review with finance."
        )
    assert result.changed is False and result.index_current is True
    assert callbacks == [] and len(counter.calls) == calls


def test_editing_one_page_re_embeds_only_that_page(
    default_source: Source,
    counter: CountingProvider,
    django_capture_on_commit_callbacks,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        _write(default_source, "notes/a", "The offsite is in Lisbon in March.")
        _write(default_source, "notes/b", "Hiring plan for the data team.")
    untouched = Chunk.objects.get(page__slug="notes/b")
    counter.calls.clear()
    with django_capture_on_commit_callbacks(execute=True):
        page_update(
            source=default_source,
            slug="notes/a",
            body="Flights are booked.",
            actor=local_caller(),
        )
    assert counter.texts and all(t.startswith("a\n\n") for t in counter.texts)
    after = Chunk.objects.get(page__slug="notes/b")
    assert (after.pk, list(after.embedding)) == (
        untouched.pk,
        list(untouched.embedding),
    )


def test_appending_reuses_embeddings_of_unchanged_chunks(
    default_source: Source,
    counter: CountingProvider,
    django_capture_on_commit_callbacks,
) -> None:
    first = "# Plan\n\nThe offsite is in Lisbon in March."
    with django_capture_on_commit_callbacks(execute=True):
        _write(default_source, "notes/a", first)
    counter.calls.clear()
    with django_capture_on_commit_callbacks(execute=True):
        page_update(
            source=default_source,
            slug="notes/a",
            body="# Travel\n\nFlights are booked.",
            actor=local_caller(),
        )
    assert counter.texts == ["a\n\n# Travel\n\nFlights are booked."]
    assert Chunk.objects.filter(embedding__isnull=True).count() == 0


def test_deferred_embedding_is_filled_by_embed_pending(
    default_source: Source,
    counter: CountingProvider,
    django_capture_on_commit_callbacks,
) -> None:
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        _write(default_source, "notes/a", "Alpha.", embed=False)
        _write(default_source, "notes/b", "Beta.", embed=False)
    assert callbacks == [] and counter.calls == []
    assert Page.objects.exclude(indexed_hash="").count() == 0
    seen: list[int] = []
    assert pages_embed_pending(progress=seen.append) == 2
    assert sum(seen) == 2
    assert Page.objects.filter(indexed_hash="").count() == 0
    # Idempotent: the second run finds nothing.
    assert pages_embed_pending() == 0


def test_failing_provider_leaves_the_page_written_and_the_index_behind(
    default_source: Source, monkeypatch, django_capture_on_commit_callbacks
) -> None:
    monkeypatch.setattr(embeddings, "get_provider", lambda: FailingProvider())
    with django_capture_on_commit_callbacks(execute=True):
        result = page_add(
            source=default_source,
            slug="notes/a",
            title="A",
            body="Still saved.",
            actor=local_caller(),
        )
    page = Page.objects.get(pk=result.page.pk)
    assert page.body == "Still saved." and page.indexed_hash == ""
    assert Chunk.objects.get(page=page).tsv  # keyword search still finds it
    assert pages_embed_pending() == 0


def test_embed_pending_can_be_limited_to_sources(
    default_source: Source,
    counter: CountingProvider,
    django_capture_on_commit_callbacks,
) -> None:
    """An importer fills its own source's embeddings, not everybody's backlog."""
    from tests.factories import SourceFactory

    other = SourceFactory(id="other-mail", kind=Source.Kind.MAILBOX)
    with django_capture_on_commit_callbacks(execute=True):
        _write(default_source, "notes/a", "Alpha.", embed=False)
        _write(other, "notes/b", "Beta.", embed=False)
    assert pages_embed_pending(source_ids=[other.id]) == 1
    assert Page.objects.get(source=other).indexed_hash != ""
    assert Page.objects.get(source=default_source).indexed_hash == ""
    assert pages_embed_pending() == 1


def test_embeddings_of_a_batch_are_computed_together_after_commit(
    default_source: Source,
    counter: CountingProvider,
    django_capture_on_commit_callbacks,
) -> None:
    """``pages_write`` embeds every changed page of a batch in shared model calls
    once the transaction commits, and marks each page current."""
    from brain.services.pages import PageInput, pages_write

    with django_capture_on_commit_callbacks(execute=True):
        results = pages_write(
            source=default_source,
            actor=local_caller(),
            items=[
                PageInput(mode="create", slug=f"notes/n{i}", body=f"Note {i}.")
                for i in range(5)
            ],
        )
    assert len(counter.calls) == 1 and len(counter.calls[0]) == 5
    assert Page.objects.filter(indexed_hash="").count() == 0
    assert all(r.changed for r in results)


REPLY_WITH_FOOTER = (
    "Have a look at smoothwall, it will save you lots of time.\n\nJustin\n\n"
    "-- \nIrish Linux Users' Group: ilug@linux.ie\n"
    "http://www.linux.ie/mailman/listinfo/ilug for (un)subscription information."
)


def test_pages_rechunk_recuts_pages_stored_before_the_split(
    default_source: Source,
    counter: CountingProvider,
    django_capture_on_commit_callbacks,
) -> None:  # type: ignore[no-untyped-def]
    """``migrate`` applying brain.0013 runs ``pages_rechunk``: a page indexed as one mixed
    chunk (as before issue 26's split) gets its own words and its signature in
    separate chunks; an unchanged chunk keeps its embedding; a second run does
    nothing."""
    with django_capture_on_commit_callbacks(execute=True):
        page = _write(default_source, "notes/reply", REPLY_WITH_FOOTER).page
        _write(default_source, "notes/plain", "Nothing quoted here.")
    assert list(
        Chunk.objects.filter(page=page).order_by("ordinal").values_list("secondary")
    ) == [(False,), (True,)]
    # The index as the old chunker left it: one chunk holding the whole body.
    Chunk.objects.filter(page=page).delete()
    old = Chunk.objects.filter(page__slug="notes/plain").get()
    Chunk.objects.create(
        page=page,
        source=default_source,
        visibility=page.visibility,
        ordinal=0,
        text=REPLY_WITH_FOOTER,
        content_hash="old",
        embedding=old.embedding,
        embedding_model=old.embedding_model,
    )
    kept = Chunk.objects.get(page__slug="notes/plain").embedding
    unrelated = _migration("brain", "0012_merge_reason_people_evidence")
    assert rechunk_after_migrate(plan=[(unrelated, False)], verbosity=0) is None
    recut = _migration("brain", "0013_chunk_secondary")
    assert rechunk_after_migrate(plan=[(recut, True)], verbosity=0) is None
    assert rechunk_after_migrate(plan=[(unrelated, False), (recut, False)]) == (2, 1)
    chunks = list(Chunk.objects.filter(page=page).order_by("ordinal"))
    assert [(c.secondary, c.embedding is None) for c in chunks] == [
        (False, True),  # new texts: waiting for embed_pending
        (True, True),
    ]
    assert "Irish Linux" in chunks[1].text and "Irish" not in chunks[0].text
    assert list(Chunk.objects.get(page__slug="notes/plain").embedding) == list(kept)
    assert pages_rechunk() == (2, 0)
    assert pages_embed_pending() == 2


def _migration(app_label: str, name: str) -> Migration:
    """The real migration object ``migrate`` puts in its plan."""
    return MigrationLoader(None, ignore_no_migrations=True).get_migration(
        app_label, name
    )
