"""SPEC §2: every uniqueness rule is a database constraint (STYLE rule 5).

Each test inserts a duplicate directly, bypassing services, and the database refuses.
"""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from brain.models import Alias, Fact, Page, RawRecord, Relation, Source, TimelineEntry
from tests.factories import (
    AliasFactory,
    PageFactory,
    RawRecordFactory,
    RelationFactory,
    SourceFactory,
    TimelineEntryFactory,
    page_type,
)

pytestmark = pytest.mark.django_db


def refused(fn) -> bool:  # type: ignore[no-untyped-def]
    try:
        with transaction.atomic():
            fn()
    except IntegrityError:
        return True
    return False


def test_slug_is_unique_per_source() -> None:
    page = PageFactory(slug="notes/x")
    assert refused(
        lambda: Page.objects.create(
            source=page.source, slug="notes/x", type=page_type("note"), title="dup"
        )
    )
    other = SourceFactory()
    Page.objects.create(
        source=other, slug="notes/x", type=page_type("note"), title="ok"
    )


def test_raw_record_is_unique_per_source_and_external_id() -> None:
    raw = RawRecordFactory(external_id="<a@b>")
    assert refused(
        lambda: RawRecord.objects.create(
            source=raw.source, external_id="<a@b>", kind="rfc822", content_hash="x"
        )
    )


def test_alias_triple_is_unique() -> None:
    alias = AliasFactory(alias="jane doe")
    assert refused(
        lambda: Alias.objects.create(
            source=alias.source, page=alias.page, alias="jane doe"
        )
    )
    # The same text may name another page (collisions resolve at read time).
    other = PageFactory(source=alias.source)
    Alias.objects.create(source=alias.source, page=other, alias="jane doe")


def test_relation_triple_is_unique() -> None:
    rel = RelationFactory()
    assert refused(
        lambda: Relation.objects.create(
            source=rel.source,
            from_page=rel.from_page,
            to_page=rel.to_page,
            relation_type=rel.relation_type,
        )
    )


def test_timeline_entries_are_deduplicated() -> None:
    entry = TimelineEntryFactory()
    assert refused(
        lambda: TimelineEntry.objects.create(
            page=entry.page,
            date=entry.date,
            summary=entry.summary,
            summary_hash=entry.summary_hash,
            source_ref=entry.source_ref,
        )
    )


def test_source_id_format_is_enforced_by_the_database() -> None:
    assert refused(lambda: Source.objects.create(id="Bad_ID", name="x"))
    assert refused(lambda: Source.objects.create(id="-x", name="x"))


def test_fact_provenance_must_not_be_blank() -> None:
    source = SourceFactory()
    assert refused(
        lambda: Fact.objects.create(source=source, text="t", provenance="   ")
    )


def test_fact_confidence_stays_in_range() -> None:
    source = SourceFactory()
    assert refused(
        lambda: Fact.objects.create(
            source=source, text="t", provenance="p", confidence=1.5
        )
    )
