"""Markdown import loses nothing (SPEC §6 "Every importer", §6.3): BOM stripped,
invalid frontmatter values and NUL bytes held with the line and reason while the
import goes on, slug collisions reported (never merged), and export → import
round-trips every fact, page-less ones included."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client

from brain.access import local_caller
from brain.models import Fact, Page, RawRecord, Source
from brain.services.pages import page_add
from connectors.markdown.sync import markdown_export, markdown_import
from connectors.models import HeldItem, SyncRun

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_embeddings(settings) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"


def _write(folder: Path, name: str, data: bytes) -> None:
    (folder / name).write_bytes(data)


def test_an_invalid_frontmatter_date_is_held_with_its_line_and_the_import_goes_on(
    tmp_path: Path,
) -> None:
    """Regression: ``effective_date: 2026-02-30`` crashed the import with a
    traceback (files after it never written), the source showed no error, health
    said ok."""
    _write(tmp_path, "a.md", b"---\ntitle: Alder\n---\nFirst.\n")
    bad = b"---\ntitle: Birch\neffective_date: 2026-02-30\n---\nSecond.\n"
    _write(tmp_path, "b.md", bad)
    _write(tmp_path, "c.md", b"---\ntitle: Cedar\n---\nThird.\n")
    report = markdown_import(source_id="notes", directory=tmp_path, embed=False)
    assert report.created == 2 and report.held == 1
    assert report.errors == [
        "b.md: line 3: effective_date '2026-02-30' is not a date (YYYY-MM-DD)"
    ]
    assert set(
        Page.objects.filter(source_id="notes").values_list("slug", flat=True)
    ) == {
        "a",
        "c",
    }
    held = HeldItem.objects.get(source_id="notes")
    assert (held.error_code, held.location, bytes(held.raw)) == (
        "invalid_frontmatter",
        "b.md:3",
        bad,
    )
    run = SyncRun.objects.get(source_id="notes")
    assert run.status == "succeeded_with_holds"
    assert Source.objects.get(id="notes").counts["held"] == 1
    assert Client().get("/api/health").json()["imports"]["held"] == 1
    # Fixing the file stores it and releases the hold.
    _write(tmp_path, "b.md", bad.replace(b"2026-02-30", b"2026-02-28"))
    again = markdown_import(source_id="notes", directory=tmp_path, embed=False)
    assert (again.created, again.unchanged, again.held) == (1, 2, 0)
    held.refresh_from_db()
    assert held.released_at is not None


def test_a_nul_byte_is_held_not_fatal(tmp_path: Path) -> None:
    _write(tmp_path, "a.md", b"---\ntitle: Alder\n---\nbefore\x00after\n")
    _write(tmp_path, "b.md", b"---\ntitle: Birch\n---\nFine.\n")
    report = markdown_import(source_id="notes", directory=tmp_path, embed=False)
    assert report.created == 1
    assert report.errors == ["a.md: line 4: a NUL byte (not text)"]


def test_a_byte_order_mark_does_not_hide_the_frontmatter(tmp_path: Path) -> None:
    """Regression: a file starting with a UTF-8 BOM lost its frontmatter."""
    data = "\ufeff---\ntitle: Rowan\ntags: [tree]\n---\nBody.\n".encode()
    _write(tmp_path, "rowan.md", data)
    markdown_import(source_id="notes", directory=tmp_path, embed=False)
    page = Page.objects.get(source_id="notes", slug="rowan")
    assert page.title == "Rowan" and page.tags == ["tree"]
    assert "title:" not in page.body
    raw = RawRecord.objects.get(source_id="notes", kind="markdown")
    assert bytes(raw.data) == data  # the raw layer keeps the bytes exactly


def test_two_files_with_one_slug_are_reported_not_merged(tmp_path: Path) -> None:
    """Regression: ``Fern Walk.md`` and ``fern_walk.md`` silently merged."""
    _write(tmp_path, "Fern Walk.md", b"---\ntitle: Fern Walk\n---\nUpper.\n")
    _write(tmp_path, "fern_walk.md", b"---\ntitle: fern walk\n---\nLower.\n")
    report = markdown_import(source_id="notes", directory=tmp_path, embed=False)
    assert report.created == 1 and report.held == 1
    page = Page.objects.get(source_id="notes", slug="fern-walk")
    assert page.body == "Upper."
    assert page.revisions.count() == 1  # never overwritten by the other file
    held = HeldItem.objects.get(source_id="notes")
    assert held.error_code == "slug_collision"
    assert "Fern Walk.md" in held.message


def test_export_then_import_round_trips_every_live_fact(
    tmp_path: Path, source_a: Source
) -> None:
    """Regression: export then import kept only facts attached to a page."""
    page_add(
        source=source_a,
        slug="people/ada-quill",
        title="Ada Quill",
        body="Ships pallets.",
        actor=local_caller(),
    )
    ada = Page.objects.get(source=source_a, slug="people/ada-quill")
    Fact.objects.create(
        source=source_a, entity=ada, text="Ada prefers tea", provenance="chat"
    )
    for index in range(5):
        Fact.objects.create(
            source=source_a, text=f"The depot opens at {index + 6} am", provenance="n"
        )
    export = markdown_export(directory=tmp_path, source_id=source_a.id)
    assert export.facts == 5
    markdown_import(source_id="copy", directory=tmp_path, embed=False)
    live = sorted(
        Fact.objects.filter(source_id="copy", expired_at__isnull=True).values_list(
            "text", flat=True
        )
    )
    original = sorted(
        Fact.objects.filter(source=source_a, expired_at__isnull=True).values_list(
            "text", flat=True
        )
    )
    assert live == original and len(live) == 6
    # A second import adds nothing.
    again = markdown_import(source_id="copy", directory=tmp_path, embed=False)
    assert again.facts_added == 0


def test_import_markdown_command_lists_held_files(tmp_path: Path) -> None:
    _write(tmp_path, "b.md", b"---\neffective_date: 2026-02-30\n---\nx\n")
    out, err = StringIO(), StringIO()
    call_command(
        "import_markdown",
        str(tmp_path),
        "--source",
        "notes",
        "--no-embed",
        stdout=out,
        stderr=err,
    )
    assert "1 held" in out.getvalue()
    assert "b.md: line 2: effective_date" in err.getvalue()
