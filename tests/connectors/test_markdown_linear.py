"""Markdown import that stays linear (issue 48, SPEC §11): the files of a batch are
written with a constant number of queries, whatever the number of files in it and
whatever the number of pages the source already holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from brain.models import DanglingLink, Page, Relation
from connectors.markdown.sync import BATCH_FILES, markdown_import

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_embeddings(settings) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"


def person(i: int) -> str:
    return (
        f"---\ntype: person\ntitle: Person {i}\n---\n"
        f"Person {i} works at [[companies/acme]] and knows [[people/p-0]].\n"
    )


def note(i: int) -> str:
    return (
        f"---\ntype: note\ntitle: Note {i}\n---\n"
        f"Met [[people/p-0]] and [[Person 1]] about [[nowhere-{i}]].\n\n"
        "<!-- timeline -->\n"
        f"- **2024-03-0{1 + i % 9}** | Wrote note {i}\n"
    )


def queries_to_add(folder: Path, *, existing: int, new: int) -> int:
    """Import ``existing`` person pages (and their company) into a source named
    after ``folder``, then count the queries of a second import that adds ``new``
    linked notes to the folder."""
    source = folder.name
    (folder / "people").mkdir(parents=True)
    (folder / "companies").mkdir()
    (folder / "companies/acme.md").write_text("---\ntitle: Acme\n---\nA company.\n")
    for i in range(existing):
        (folder / f"people/p-{i}.md").write_text(person(i))
    markdown_import(source_id=source, directory=folder, embed=False)
    assert Page.objects.filter(source_id=source).count() == existing + 1
    (folder / "notes").mkdir()
    for i in range(new):
        (folder / f"notes/n-{i}.md").write_text(note(i))
    with CaptureQueriesContext(connection) as captured:
        report = markdown_import(source_id=source, directory=folder, embed=False)
    assert (report.created, report.unchanged, report.held) == (new, existing + 1, 0)
    notes = Page.objects.filter(source_id=source, slug__startswith="notes/")
    assert Relation.objects.filter(from_page__in=notes).count() == 2 * new
    assert DanglingLink.objects.filter(from_page__in=notes).count() == new
    return len(captured.captured_queries)


def test_a_batch_costs_the_same_queries_at_any_size(tmp_path: Path) -> None:
    assert BATCH_FILES >= 40
    small = queries_to_add(tmp_path / "a", existing=20, new=10)
    wider = queries_to_add(tmp_path / "b", existing=20, new=40)
    larger = queries_to_add(tmp_path / "c", existing=300, new=40)

    # Not one query per file, nor per page already stored.
    assert small == wider == larger, (small, wider, larger)


def test_forward_links_resolve_once_at_the_end(tmp_path: Path) -> None:
    """A page linking to pages of later batches is re-linked once, at the import's
    end, not in every batch that writes one of its targets (issue 48: that re-link
    work grew with the pages already imported, so the rate fell tenth by tenth)."""
    folder = tmp_path / "fwd"
    (folder / "notes").mkdir(parents=True)
    total = 4 * BATCH_FILES
    later = [BATCH_FILES + 1, 2 * BATCH_FILES + 1, 3 * BATCH_FILES + 1]
    for i in range(total):
        links = " ".join(f"[[notes/n-{j:04d}]]" for j in later) if i == 0 else ""
        (folder / f"notes/n-{i:04d}.md").write_text(
            f"---\ntitle: Note {i}\n---\nNote {i}. {links}\n"
        )
    with CaptureQueriesContext(connection) as captured:
        markdown_import(source_id="fwd", directory=folder, embed=False)
    first = Page.objects.get(source_id="fwd", slug="notes/n-0000")
    targets = set(
        Relation.objects.filter(from_page=first).values_list("to_page__slug", flat=True)
    )
    assert targets == {f"notes/n-{j:04d}" for j in later}
    assert not DanglingLink.objects.filter(source_id="fwd").exists()
    relinks = [
        q["sql"]
        for q in captured.captured_queries
        if q["sql"].startswith('DELETE FROM "brain_danglinglink"')
        and str(first.pk) in re.findall(r"\d+", q["sql"].partition(" IN ")[2])
    ]
    # Written once (its links parsed, three left dangling), re-linked once at the end.
    assert len(relinks) == 2, len(relinks)
