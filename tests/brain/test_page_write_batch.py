"""The batched write path (SPEC §2.3 one write function, §11 ingest rate):
``pages_write`` writes many pages with the same rules as ``page_write`` and a
number of statements that does not grow with the batch."""

from __future__ import annotations

from dataclasses import replace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from brain.access import local_caller
from brain.exceptions import AlreadyExists, InvalidParams, SchemaViolation
from brain.models import Alias, Chunk, Page, PageRevision, RawRecord, Relation, Source
from brain.search import page_search
from brain.services.pages import (
    PageInput,
    RawInput,
    RelationInput,
    WriteResult,
    page_add,
    pages_write,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_embeddings(settings) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"


def _thread(n: int) -> PageInput:
    return PageInput(
        mode="upsert",
        slug=f"email/thread-{n}",
        title=f"Quarterly budget thread {n}",
        body=f"Anna asked for the budget figures {n}.\n\nBob will send them Friday.",
        type_name="email",
        raws=[RawInput(external_id=f"<m{n}@x>", kind="rfc822", content=f"raw {n}")],
    )


ANN_AT_ACME = PageInput(
    mode="create",
    slug="people/ann",
    title="Ann",
    body="Engineer.",
    type_name="person",
    relations=[RelationInput(type="works_at", to_slug="companies/acme")],
)


def _acme(*relations: RelationInput) -> PageInput:
    return PageInput(
        mode="create",
        slug="companies/acme",
        title="Acme",
        body="Co.",
        type_name="company",
        relations=relations,
    )


def _write(source: Source, items: list[PageInput], **kw):  # type: ignore[no-untyped-def]
    return pages_write(source=source, actor=local_caller(), items=items, **kw)


def test_pages_write_uses_the_same_number_of_statements_for_5_or_50_pages(
    default_source: Source,
) -> None:
    with CaptureQueriesContext(connection) as small:
        _write(default_source, [_thread(n) for n in range(5)])
    with CaptureQueriesContext(connection) as large:
        _write(default_source, [_thread(n) for n in range(100, 150)])
    assert len(large.captured_queries) == len(small.captured_queries)
    assert Page.objects.filter(source=default_source, type__name="email").count() == 55
    assert PageRevision.objects.filter(page__source=default_source).count() == 55


def test_pages_write_of_new_pages_reads_and_deletes_no_old_chunks(
    default_source: Source,
) -> None:
    # A page created by the write has no chunks yet: only its insert touches them.
    with CaptureQueriesContext(connection) as new:
        _write(default_source, [_thread(n) for n in range(3)])
    chunk_sql = [q["sql"] for q in new.captured_queries if '"brain_chunk"' in q["sql"]]
    assert [sql.split()[0] for sql in chunk_sql] == ["INSERT"]
    assert Chunk.objects.filter(page__source=default_source).count() == 3
    changed = replace(_thread(1), body="Bob sent the budget figures.")
    with CaptureQueriesContext(connection) as again:
        _write(default_source, [changed])
    chunk_sql = [
        q["sql"] for q in again.captured_queries if '"brain_chunk"' in q["sql"]
    ]
    assert [sql.split()[0] for sql in chunk_sql] == ["DELETE", "INSERT"]
    assert [c.text for c in Chunk.objects.filter(page__slug="email/thread-1")] == [
        "Bob sent the budget figures."
    ]


def test_pages_write_stores_raw_records_linked_to_their_pages(
    default_source: Source,
) -> None:
    results = _write(default_source, [_thread(n) for n in range(3)])
    for n, result in enumerate(results):
        assert isinstance(result, WriteResult) and result.created
        raw = RawRecord.objects.get(source=default_source, external_id=f"<m{n}@x>")
        assert raw.page_id == result.page.pk
        assert result.raw_records == [raw]
        revision = result.page.revisions.get()
        assert revision.raw_record_id == raw.pk


def test_pages_write_indexes_titles_and_bodies_for_keyword_search(
    default_source: Source,
) -> None:
    _write(default_source, [_thread(n) for n in range(3)])
    page = Page.objects.get(source=default_source, slug="email/thread-1")
    assert page.indexed_hash == page.content_hash
    chunks = list(Chunk.objects.filter(page=page))
    assert chunks and all(c.tsv for c in chunks)
    # A title-only word (weight A) and a body-only word (weight D) both find it.
    for query in ("quarterly", "friday"):
        scope = local_caller().read_scope([default_source.id])
        hits = page_search(scope=scope, query=query, limit=10).results
        assert "email/thread-1" in {h.slug for h in hits}


def test_pages_write_collect_refuses_one_item_and_writes_the_others(
    default_source: Source,
) -> None:
    bad = PageInput(mode="create", slug="email/bad", body="x", type_name="no-such-type")
    results = _write(default_source, [_thread(1), bad, _thread(2)], errors="collect")
    assert isinstance(results[0], WriteResult)
    assert isinstance(results[1], SchemaViolation)
    assert isinstance(results[2], WriteResult)
    assert not Page.objects.filter(slug="email/bad").exists()
    assert RawRecord.objects.filter(source=default_source).count() == 2


def test_pages_write_raise_refuses_the_whole_batch_before_writing_anything(
    default_source: Source,
) -> None:
    page_add(source=default_source, actor=local_caller(), slug="notes/taken", body="x")
    before = (Page.objects.count(), RawRecord.objects.count(), Chunk.objects.count())
    taken = PageInput(mode="create", slug="notes/taken", body="again")
    with pytest.raises(AlreadyExists):
        _write(default_source, [_thread(1), taken])
    after = (Page.objects.count(), RawRecord.objects.count(), Chunk.objects.count())
    assert after == before


def test_pages_write_refuses_the_same_slug_twice_in_one_call(
    default_source: Source,
) -> None:
    results = _write(default_source, [_thread(1), _thread(1)], errors="collect")
    assert isinstance(results[0], WriteResult)
    assert isinstance(results[1], InvalidParams)
    assert "twice" in results[1].message


def test_pages_write_relations_may_point_at_pages_of_the_same_call(
    default_source: Source,
) -> None:
    results = _write(
        default_source,
        [
            ANN_AT_ACME,
            _acme(),
        ],
    )
    assert all(isinstance(r, WriteResult) for r in results)
    relation = Relation.objects.get(from_page__slug="people/ann")
    assert relation.to_page.slug == "companies/acme"
    assert relation.relation_type.name == "works_at"
    assert Alias.objects.filter(page__slug="people/ann", alias="ann").exists()


def test_pages_write_resave_of_the_same_batch_is_a_noop(default_source: Source) -> None:
    _write(default_source, [_thread(n) for n in range(4)])
    counts = (PageRevision.objects.count(), RawRecord.objects.count())
    results = _write(default_source, [_thread(n) for n in range(4)])
    assert [r.operation for r in results] == ["noop"] * 4
    assert all(not r.changed and r.index_current for r in results)
    assert (PageRevision.objects.count(), RawRecord.objects.count()) == counts


def test_pages_write_rejects_an_unknown_errors_mode(default_source: Source) -> None:
    with pytest.raises(ValueError, match="errors"):
        _write(default_source, [_thread(1)], errors="ignore")
    assert not Page.objects.filter(source=default_source, type__name="email").exists()


def test_pages_write_refuses_a_relation_to_a_page_refused_in_the_same_call(
    default_source: Source,
) -> None:
    """A target refused for its own relation (to a page that does not exist) is
    not written, so a page relating to it is refused too (NotFound) instead of
    failing the whole batch."""
    from brain.exceptions import NotFound

    results = _write(
        default_source,
        [
            ANN_AT_ACME,
            _acme(RelationInput(type="related_to", to_slug="notes/ghost")),
            _thread(1),
        ],
        errors="collect",
    )
    assert isinstance(results[0], NotFound) and "companies/acme" in results[0].message
    assert isinstance(results[1], NotFound) and "notes/ghost" in results[1].message
    assert isinstance(results[2], WriteResult)
    assert not Page.objects.filter(slug__in=["people/ann", "companies/acme"]).exists()
