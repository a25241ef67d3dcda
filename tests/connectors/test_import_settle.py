"""Settled indexes when an import ends (issue 48, SPEC §11): every bulk write path
leaves the full-text GIN index's pending list merged and its tables analysed, so
the first search after an import runs at settled speed."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection

from brain.maintenance import tables_settle
from brain.models import Chunk, Page
from connectors.mailbox.sync import mailbox_import
from connectors.markdown.sync import markdown_import
from tests.brain.gbrain_corpus import generate, write

pytestmark = pytest.mark.django_db

MBOX = (
    Path(__file__).resolve().parent.parent / "data/spamassassin/easy-ham-1-slice.mbox"
)


@pytest.fixture(autouse=True)
def _no_embeddings(settings) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"


def pending_pages(index: str = "brain_chunk_tsv_gin") -> int:
    """Pages still in ``index``'s pending list: ``gin_clean_pending_list`` merges
    them and says how many there were (pgstattuple and pageinspect are not in the
    embedded server)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT gin_clean_pending_list(%s::regclass)", [index])
        return int(cursor.fetchone()[0])


def reltuples(table: str) -> float:
    """The planner's row estimate of ``table`` (-1 or stale until it is analysed)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [table]
        )
        return float(cursor.fetchone()[0])


def test_settle_merges_the_pending_list_and_analyses(db: None, tmp_path: Path) -> None:
    write(generate(30, seed=48), tmp_path)
    markdown_import(source_id="notes", directory=tmp_path, embed=False)
    Page.objects.filter(source_id="notes").update(title="x")  # new index entries
    Chunk.objects.filter(source_id="notes").update(text="y")

    report = tables_settle([Page, Chunk])

    assert report.tables == ["brain_page", "brain_chunk"]
    assert set(report.gin_pages) >= {"brain_chunk_tsv_gin", "brain_page_title_trgm"}
    assert report.gin_pages["brain_chunk_tsv_gin"] > 0
    assert report.skipped == []
    assert pending_pages() == 0
    assert reltuples("brain_chunk") == Chunk.objects.count()


def test_a_markdown_import_ends_with_settled_indexes(db: None, tmp_path: Path) -> None:
    write(generate(60, seed=48), tmp_path)
    pending_pages()  # start from an empty pending list

    markdown_import(source_id="notes", directory=tmp_path, embed=False)

    assert Chunk.objects.filter(source_id="notes").count() >= 60
    assert pending_pages() == 0
    assert pending_pages("brain_page_title_trgm") == 0
    assert reltuples("brain_chunk") == Chunk.objects.count()
    assert reltuples("brain_page") == Page.objects.count()


def test_a_mail_import_ends_with_settled_indexes(db: None) -> None:
    pending_pages()

    mailbox_import(source_id="ham", path=MBOX, owners=[])

    assert Chunk.objects.filter(source_id="ham").exists()
    assert pending_pages() == 0
    assert reltuples("brain_chunk") == Chunk.objects.count()
