"""``brain.bulk``: one-statement inserts for the import paths (SPEC §11 ingest rate)
must write rows that read back exactly like rows the ORM writes."""

from __future__ import annotations

from datetime import UTC, date

import pytest

from brain.bulk import JsonText, bulk_insert, bulk_insert_objects
from brain.models import Chunk, Page, PageType, RawRecord, Source
from connectors.models import ImportedItem

pytestmark = pytest.mark.django_db


def test_bulk_insert_objects_sets_keys_and_round_trips_json_arrays_and_dates(
    default_source: Source,
) -> None:
    note = PageType.objects.get(name="note")
    pages = [
        Page(
            source=default_source,
            slug=f"notes/p{i}",
            type=note,
            title=f"P {i}",
            body="Text with 'quotes', \"double\", \\ and {braces}.",
            frontmatter={"title": f"P {i}", "nested": {"list": [1, "two", None]}},
            tags=["a,b", 'q"uote', "{x}", "ünïcode"],
            effective_date=date(2002, 1, 31),
        )
        for i in range(3)
    ]
    bulk_insert_objects(pages)
    assert all(p.pk and not p._state.adding for p in pages)
    for page in pages:
        stored = Page.objects.get(pk=page.pk)
        assert stored.slug == page.slug
        assert stored.body == page.body
        assert stored.frontmatter == page.frontmatter
        assert stored.tags == ["a,b", 'q"uote', "{x}", "ünïcode"]
        assert stored.effective_date == date(2002, 1, 31)
        assert stored.created_at is not None and stored.updated_at is not None
        assert stored.indexed_hash == "" and stored.deleted_at is None


def test_bulk_insert_skips_conflicts_and_returns_only_the_rows_written(
    default_source: Source,
) -> None:
    RawRecord.objects.create(
        source=default_source,
        external_id="<old@x>",
        kind="rfc822",
        content="kept",
        content_hash="h",
    )
    rows = [
        {
            "source_id": default_source.id,
            "external_id": key,
            "kind": "rfc822",
            "content": f"new {key}",
            "metadata": {"k": key},
            "content_hash": "h",
        }
        for key in ("<old@x>", "<new@x>")
    ]
    written = bulk_insert(
        RawRecord,
        rows,
        conflict=["source", "external_id"],
        returning=["id", "external_id"],
    )
    assert [key for _pk, key in written] == ["<new@x>"]
    assert RawRecord.objects.get(external_id="<old@x>").content == "kept"
    new = RawRecord.objects.get(external_id="<new@x>")
    assert new.metadata == {"k": "<new@x>"} and new.payload is None
    assert new.captured_at is not None  # the Python default was filled in


def test_bulk_insert_objects_updates_conflicting_rows_when_asked(
    default_source: Source,
) -> None:
    def item(outcome: str) -> ImportedItem:
        return ImportedItem(
            source=default_source,
            external_id="m1",
            kind="message",
            content_hash="h",
            participants=["a@x", "b@x"],
            outcome=outcome,
        )

    bulk_insert_objects([item("stored")], conflict=["source", "external_id"])
    bulk_insert_objects(
        [item("skipped")], conflict=["source", "external_id"], update=["outcome"]
    )
    stored = ImportedItem.objects.get(external_id="m1")
    assert stored.outcome == "skipped" and stored.participants == ["a@x", "b@x"]


def test_bulk_insert_computes_columns_and_writes_vectors(
    default_source: Source,
) -> None:
    page = Page.objects.create(
        source=default_source,
        slug="notes/v",
        type=PageType.objects.get(name="note"),
        title="Vec",
    )
    bulk_insert(
        Chunk,
        [
            {
                "page_id": page.pk,
                "source_id": default_source.id,
                "visibility": "world",
                "ordinal": 0,
                "text": "budget figures",
                "content_hash": "c",
                "embedding": [0.5] * 384,
                "embedding_model": "m",
                "title": "Quarterly",
            }
        ],
        extra={"title": "text"},
        computed={"tsv": ("to_tsvector('english', r.title || ' ' || r.text)", [])},
    )
    chunk = Chunk.objects.get(page=page)
    assert list(chunk.embedding) == [0.5] * 384
    assert Chunk.objects.filter(pk=chunk.pk, tsv="quarterly").exists()
    assert chunk.token_count == 0  # field default


def test_bulk_insert_refuses_a_value_too_long_for_its_column_instead_of_cutting_it(
    default_source: Source,
) -> None:
    """A regression: arrays cast to ``varchar(n)[]`` cut long values silently."""
    from django.db import DataError, transaction

    row = {
        "source_id": default_source.id,
        "external_id": "x" * 600,
        "kind": "rfc822",
        "content": "c",
        "content_hash": "h",
    }
    with pytest.raises(DataError), transaction.atomic():
        bulk_insert(RawRecord, [row])
    assert not RawRecord.objects.filter(source=default_source).exists()
    page = Page(
        source=default_source,
        slug="notes/t",
        title="T",
        type=PageType.objects.get(name="note"),
        tags=["t" * 101],
    )
    with pytest.raises(DataError), transaction.atomic():
        bulk_insert_objects([page])


@pytest.mark.filterwarnings("ignore:DateTimeField .* received a naive datetime")
def test_bulk_insert_writes_dates_and_keys_as_the_orm_does(
    default_source: Source,
) -> None:
    """Aware date-times pass through unchanged, a naive one is made aware as the
    ORM makes it, and foreign keys are their target's value: each row reads back
    like the same row saved by the ORM."""
    from datetime import datetime, timedelta, timezone

    from django.utils import timezone as django_timezone

    page = Page.objects.create(
        source=default_source,
        slug="notes/host",
        type=PageType.objects.get(name="note"),
        title="Host",
    )
    moments = [
        datetime(2002, 8, 22, 18, 26, 25, tzinfo=timezone(timedelta(hours=2))),
        datetime(2002, 8, 22, 18, 26, 25, tzinfo=UTC),
        datetime(2002, 8, 22, 18, 26, 25),  # noqa: DTZ001 - naive on purpose
    ]
    # A naive value is read in the current time zone (not the database's UTC).
    with django_timezone.override("Europe/Paris"):
        bulk_insert(
            RawRecord,
            [
                {
                    "source_id": default_source.id,
                    "external_id": f"bulk-{i}",
                    "kind": "rfc822",
                    "page_id": page.pk,
                    "captured_at": moment,
                }
                for i, moment in enumerate(moments)
            ],
        )
        for i, moment in enumerate(moments):
            RawRecord.objects.create(
                source=default_source,
                external_id=f"orm-{i}",
                kind="rfc822",
                page=page,
                captured_at=moment,
            )
    for i in range(len(moments)):
        bulk = RawRecord.objects.get(external_id=f"bulk-{i}")
        orm = RawRecord.objects.get(external_id=f"orm-{i}")
        assert bulk.captured_at == orm.captured_at
        assert (bulk.page_id, bulk.source_id) == (page.pk, default_source.id)


def test_bulk_insert_sends_json_text_as_it_is_and_encodes_a_plain_string(
    default_source: Source,
) -> None:
    rows = [
        {
            "source_id": default_source.id,
            "external_id": key,
            "kind": "rfc822",
            "content": "x",
            "metadata": value,
            "payload": value,
            "content_hash": "h",
        }
        for key, value in (
            ("<encoded@x>", JsonText('{"body": "ünï \\"q\\"", "n": [1, null]}')),
            ("<plain@x>", '{"not": "parsed"}'),
        )
    ]
    bulk_insert(RawRecord, rows)
    encoded = RawRecord.objects.get(external_id="<encoded@x>")
    assert encoded.metadata == encoded.payload == {"body": 'ünï "q"', "n": [1, None]}
    plain = RawRecord.objects.get(external_id="<plain@x>")
    assert plain.metadata == plain.payload == '{"not": "parsed"}'  # a JSON string
