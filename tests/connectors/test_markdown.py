"""Markdown folders (SPEC §6.3): GBrain-compatible import and export."""

from __future__ import annotations

from datetime import date
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from brain.access import local_caller
from brain.models import Fact, Page, PageRevision, RawRecord, Source, TimelineEntry
from brain.services.pages import TimelineInput, page_add
from connectors.markdown.client import parse_page, path_to_slug
from connectors.markdown.sync import markdown_export, markdown_import

pytestmark = pytest.mark.django_db

PAGE_FILE = """---
type: person
title: Jane Doe
tags: [finance, board]
aliases: [JD, jane@example.org]
role: CFO
---
Jane runs finance at Acme.

## Facts
<!--- gbrain:facts:begin -->
| # | claim | kind | confidence | visibility | notability | valid_from | valid_until | source | context |
|---|---|---|---|---|---|---|---|---|---|
| 1 | Prefers morning meetings | preference | 0.9 | world | medium | 2024-01-02 |  | call notes |  |
| 2 | ~~Works remotely~~ | fact | 1.0 | world | medium | 2023-05-01 |  | hr | superseded by #3 |
<!--- gbrain:facts:end -->

<!-- timeline -->
- **2024-03-01** | Joined the board
- **2024-02-30** | An impossible date is skipped
- **2024-04-15** -- Presented the budget
"""


@pytest.fixture(autouse=True)
def _no_embeddings(settings) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"


def test_path_becomes_the_slug() -> None:
    assert path_to_slug("People/Jane Doe.md") == "people/jane-doe"
    assert (
        path_to_slug("Apple Notes/2017-05-03 ohmygreen.md")
        == "apple-notes/2017-05-03-ohmygreen"
    )
    assert path_to_slug("notes/v1.2_draft.md") == "notes/v1-2-draft"


def test_a_page_file_splits_into_frontmatter_body_facts_and_timeline() -> None:
    page = parse_page(PAGE_FILE, relpath="people/jane-doe.md")
    assert page.frontmatter["role"] == "CFO"
    assert page.body == "Jane runs finance at Acme."
    assert page.timeline == [
        (date(2024, 3, 1), "Joined the board"),
        (date(2024, 4, 15), "Presented the budget"),
    ]
    assert [(f.claim, f.struck) for f in page.facts] == [
        ("Prefers morning meetings", False),
        ("Works remotely", True),
    ]


@pytest.mark.parametrize(
    "sentinel",
    ["<!-- timeline -->", "--- timeline ---", "---\n\n## Timeline", "## Timeline"],
)
def test_gbrain_timeline_sentinels_split_the_timeline_from_the_body(
    sentinel: str,
) -> None:
    """GBrain's sentinel precedence (digest §1.3): each form starts the timeline."""
    text = (
        f"---\ntitle: T\n---\nBody line.\n\n{sentinel}\n"
        "- **2024-03-01** | Joined the board\n- **2024-04-15** -- Presented\n"
    )
    page = parse_page(text, relpath="t.md")
    assert page.body == "Body line."
    assert page.timeline == [
        (date(2024, 3, 1), "Joined the board"),
        (date(2024, 4, 15), "Presented"),
    ]


def test_a_horizontal_rule_or_a_prose_timeline_heading_stays_body() -> None:
    text = (
        "---\ntitle: T\n---\nAbove.\n\n---\n\nBelow.\n\n## Timeline\n"
        "We shipped in spring.\n- **2024-03-01** | Joined\n"
    )
    page = parse_page(text, relpath="t.md")
    assert page.timeline == [] and "We shipped in spring." in page.body


def test_import_writes_pages_through_the_write_path(tmp_path: Path) -> None:
    (tmp_path / "people").mkdir()
    (tmp_path / "people" / "jane-doe.md").write_text(PAGE_FILE)
    report = markdown_import(source_id="notes", directory=tmp_path)
    assert (report.created, report.errors) == (1, [])
    page = Page.objects.get(source_id="notes", slug="people/jane-doe")
    assert page.type.name == "person" and page.tags == ["finance", "board"]
    assert page.body == "Jane runs finance at Acme."  # the facts fence is not body text
    assert Source.objects.get(id="notes").kind == "markdown"
    raw = RawRecord.objects.get(page=page)
    assert raw.kind == "markdown" and raw.content == PAGE_FILE
    assert PageRevision.objects.get(page=page).actor == "markdown:notes"
    assert set(page.aliases.values_list("alias", flat=True)) == {
        "jane doe",
        "jd",
        "jane@example.org",
    }
    assert TimelineEntry.objects.filter(page=page).count() == 2
    facts = {f.text: f for f in Fact.objects.filter(entity=page)}
    assert facts["Prefers morning meetings"].kind == "preference"
    assert facts["Works remotely"].expired_at is not None


def test_unchanged_files_are_skipped_by_content_hash(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("---\ntitle: A\n---\nAlpha.\n")
    markdown_import(source_id="notes", directory=tmp_path)
    again = markdown_import(source_id="notes", directory=tmp_path)
    assert (again.created, again.updated, again.unchanged) == (0, 0, 1)
    assert PageRevision.objects.count() == 1 and RawRecord.objects.count() == 1


def test_an_edited_file_updates_its_page_and_keeps_each_version_raw(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.md"
    path.write_text("---\ntitle: A\n---\nAlpha.\n")
    markdown_import(source_id="notes", directory=tmp_path)
    path.write_text("---\ntitle: A\n---\nAlpha, revised.\n")
    report = markdown_import(source_id="notes", directory=tmp_path)
    assert report.updated == 1
    assert Page.objects.get(slug="a").body == "Alpha, revised."
    assert RawRecord.objects.count() == 2


def test_deleted_files_become_soft_deletes(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("---\ntitle: A\n---\nAlpha.\n")
    (tmp_path / "b.md").write_text("---\ntitle: B\n---\nBeta.\n")
    markdown_import(source_id="notes", directory=tmp_path)
    (tmp_path / "b.md").unlink()
    report = markdown_import(source_id="notes", directory=tmp_path)
    assert report.deleted == 1
    assert Page.objects.get(slug="b").deleted_at is not None
    assert Page.objects.get(slug="a").deleted_at is None


def test_a_bad_file_is_reported_and_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "bad.md").write_text("---\ntitle: [unclosed\n---\nx\n")
    (tmp_path / "good.md").write_text("---\ntitle: Good\n---\nFine.\n")
    report = markdown_import(source_id="notes", directory=tmp_path)
    assert report.created == 1 and len(report.errors) == 1
    assert report.errors[0].startswith("bad.md:")
    assert not Page.objects.filter(slug="bad").exists()


def test_unknown_type_is_kept_as_legacy_type(tmp_path: Path) -> None:
    (tmp_path / "x.md").write_text("---\ntype: spaceship\ntitle: X\n---\nBody.\n")
    markdown_import(source_id="notes", directory=tmp_path)
    page = Page.objects.get(slug="x")
    assert page.type.name == "note" and page.frontmatter["legacy_type"] == "spaceship"


def test_export_then_import_into_an_empty_source_reproduces_the_same_pages(
    tmp_path: Path, source_a: Source, source_b: Source
) -> None:
    remote = local_caller()
    page_add(
        source=source_a,
        slug="people/jane-doe",
        title="Jane Doe",
        body="# Role\n\nRuns finance.\n\nLikes | pipes.",
        tags=["finance"],
        frontmatter={"aliases": ["JD"], "role": "CFO", "nested": {"k": [1, 2]}},
        timeline=[TimelineInput(date(2024, 3, 1), "Joined the board")],
        actor=remote,
    )
    page_add(
        source=source_a,
        slug="notes/secret",
        title="Secret plan",
        body="Quiet.",
        visibility="private",
        effective_date=date(2024, 1, 5),
        actor=remote,
    )
    page_add(
        source=source_a, slug="companies/acme", title="Acme", body="", actor=remote
    )
    jane = Page.objects.get(source=source_a, slug="people/jane-doe")
    Fact.objects.create(
        source=source_a,
        entity=jane,
        text="Prefers | tea",
        kind="preference",
        provenance="chat on 2024-02-01",
        confidence=0.8,
    )

    report = markdown_export(directory=tmp_path, source_id="team-a")
    assert (report.pages, report.written) == (3, 3)
    imported = markdown_import(source_id="team-b", directory=tmp_path)
    assert imported.errors == [] and imported.created == 3

    fields = (
        "slug",
        "title",
        "body",
        "type__name",
        "summary",
        "tags",
        "visibility",
        "effective_date",
        "frontmatter",
        "content_hash",
    )
    original = list(
        Page.objects.filter(source=source_a).order_by("slug").values(*fields)
    )
    copy = list(Page.objects.filter(source=source_b).order_by("slug").values(*fields))
    assert copy == original
    copied_jane = Page.objects.get(source=source_b, slug="people/jane-doe")
    assert list(copied_jane.timeline.values_list("date", "summary")) == [
        (date(2024, 3, 1), "Joined the board")
    ]
    fact = Fact.objects.get(entity=copied_jane)
    assert (fact.text, fact.kind, fact.confidence, fact.provenance) == (
        "Prefers | tea",
        "preference",
        0.8,
        "chat on 2024-02-01",
    )
    # A second export of the same pages rewrites nothing.
    assert markdown_export(directory=tmp_path, source_id="team-a").written == 0


def test_commands_print_what_they_did(tmp_path: Path, source_a: Source) -> None:
    page_add(
        source=source_a, slug="notes/a", title="A", body="Alpha.", actor=local_caller()
    )
    out = StringIO()
    call_command("export_markdown", str(tmp_path), stdout=out, stderr=StringIO())
    assert "Exported 1 page(s)" in out.getvalue()
    assert (tmp_path / "team-a" / "notes" / "a.md").exists()
    out = StringIO()
    call_command(
        "import_markdown",
        str(tmp_path / "team-a"),
        "--source",
        "copy",
        stdout=out,
        stderr=StringIO(),
    )
    assert "1 created" in out.getvalue()


def _link_set(source_id: str) -> set[tuple[str, str, str]]:
    from brain.models import Relation

    return set(
        Relation.objects.filter(source_id=source_id).values_list(
            "from_page__slug", "to_page__slug", "relation_type__name"
        )
    )


def test_markdown_wikilinks_become_relations_and_export_import_round_trips_them(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "in"
    (folder / "people").mkdir(parents=True)
    (folder / "companies").mkdir()
    (folder / "people" / "ada-quill.md").write_text(
        "---\ntype: person\ntitle: Ada Quill\n---\n"
        "Ada works at [[companies/zinc-works|Zinc]] and knows [[Bo Lantern]].\n"
    )
    (folder / "people" / "bo-lantern.md").write_text(
        "---\ntype: person\ntitle: Bo Lantern\n---\nFriend of [[people/ada-quill]].\n"
    )
    (folder / "companies" / "zinc-works.md").write_text(
        "---\ntype: company\ntitle: Zinc Works\n---\nA company.\n"
    )
    markdown_import(source_id="wiki", directory=folder, embed=False)
    expected = {
        ("people/ada-quill", "companies/zinc-works", "works_at"),
        ("people/ada-quill", "people/bo-lantern", "mentions"),
        ("people/bo-lantern", "people/ada-quill", "mentions"),
    }
    assert _link_set("wiki") == expected  # ada's link to bo resolved once bo appeared
    out = tmp_path / "out"
    markdown_export(source_id="wiki", directory=out)
    assert "[[companies/zinc-works|Zinc]]" in (out / "people/ada-quill.md").read_text()
    markdown_import(source_id="copy", directory=out, embed=False)
    assert _link_set("copy") == expected


AS_WRITTEN = """---
title: No
aliases: [Yes, Off]
zip: 01234
version: 1.10
hex: 0x1F
clock: 1:20
ratio: 0.5
count: 12
draft: false
---
Values as written.
"""


def test_frontmatter_values_keep_their_text_and_export_writes_them_back(
    tmp_path: Path,
) -> None:
    """Issue 46: YAML 1.1 read ``No`` as false, ``[Yes, Off]`` as booleans,
    ``01234`` as 668, ``1.10`` as 1.1, ``1:20`` as 80, and the export wrote the
    altered values back."""
    source, exported = tmp_path / "in", tmp_path / "out"
    source.mkdir()
    (source / "zip-note.md").write_text(AS_WRITTEN)
    written = {
        "zip": "01234",
        "version": "1.10",
        "hex": "0x1F",
        "clock": "1:20",
        "ratio": 0.5,
        "count": 12,
        "draft": False,
    }
    parsed = parse_page(AS_WRITTEN, relpath="zip-note.md").frontmatter
    assert parsed == {"title": "No", "aliases": ["Yes", "Off"], **written}
    assert markdown_import(source_id="notes", directory=source).errors == []
    page = Page.objects.get(source_id="notes", slug="zip-note")
    assert page.title == "No"
    assert {"yes", "off"} <= set(page.aliases.values_list("alias", flat=True))
    assert {k: page.frontmatter[k] for k in written} == written
    markdown_export(directory=exported)
    text = (exported / "notes" / "zip-note.md").read_text()
    again = parse_page(text, relpath="zip-note.md").frontmatter
    assert again["title"] == "No" and again["aliases"] == ["Yes", "Off"]
    assert {k: again[k] for k in written} == written
    # Any YAML reader gets the same values back: text that YAML 1.1 would turn
    # into something else is quoted.
    import yaml

    loaded = yaml.safe_load(text.split("---")[1])
    assert loaded["title"] == "No" and loaded["zip"] == "01234"
    assert loaded["version"] == "1.10" and loaded["clock"] == "1:20"
