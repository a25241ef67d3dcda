"""Issue 24's corpus test: a generated GBrain-style markdown corpus (150 pages,
fixed seed, prose from the mail in tests/data; ``gbrain_corpus``) imported through
``import_markdown``. Links stored = links written, backlinks per page = a count from
the files, export -> import keeps the relations, and hybrid known-item recall@10 is
at least keyword recall@10."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from brain.access import local_caller
from brain.models import DanglingLink, Page, Relation, TimelineEntry
from brain.search import page_search
from brain.selectors import backlink_counts
from connectors.markdown.sync import markdown_export, markdown_import
from tests.brain.gbrain_corpus import distinct_count, generate, write

pytestmark = pytest.mark.django_db

PAGES = 150
SEED = 24


def _relations(source_id: str) -> set[tuple[str, str, str]]:
    return set(
        Relation.objects.filter(
            source_id=source_id, provenance__link_source="wikilink"
        ).values_list("from_page__slug", "to_page__slug", "relation_type__name")
    )


def _recall(queries: list[tuple[str, str]], **kw: object) -> int:
    scope = local_caller().read_scope(["corpus"])
    found = 0
    for sentence, slug in queries:
        results = page_search(scope=scope, query=sentence, limit=10, **kw).results
        found += slug in {r.slug for r in results}
    return found


def test_gbrain_corpus_links_backlinks_round_trip_and_recall(
    tmp_path: Path, settings
) -> None:  # type: ignore[no-untyped-def]
    pages = generate(PAGES, SEED)
    folder = tmp_path / "corpus"
    write(pages, folder)
    report = markdown_import(source_id="corpus", directory=folder, embed=True)
    assert report.created == PAGES and not report.errors

    # links stored = links written (one relation per distinct target of a page)
    written = {(p.slug, target) for p in pages for target, _typed in p.links}
    stored = _relations("corpus")
    assert {(f, t) for f, t, _type in stored} == written
    assert len(stored) == len(written)
    assert not DanglingLink.objects.filter(source_id="corpus").exists()

    # backlinks per page = typed (non-mentions) links pointing at it in the files
    expected = Counter(t for p in pages for t, typed in p.links if typed)
    ids = dict(Page.objects.filter(source_id="corpus").values_list("slug", "pk"))
    counts = backlink_counts(list(ids.values()))
    assert {slug: counts.get(pk, 0) for slug, pk in ids.items()} == {
        slug: expected.get(slug, 0) for slug in ids
    }
    assert sum(expected.values()) > 0

    # timeline lines became timeline entries in the same write
    lines = sum(p.text.count("\n- **") for p in pages)
    assert TimelineEntry.objects.filter(page__source_id="corpus").count() == lines

    # export -> import gives the same relations
    out = tmp_path / "export"
    markdown_export(source_id="corpus", directory=out)
    markdown_import(source_id="copy", directory=out, embed=False)
    assert _relations("copy") == stored

    # known-item recall@10: hybrid never loses what keyword search finds
    queries = [(p.sentence, p.slug) for p in pages[: min(60, distinct_count())]]
    hybrid = _recall(queries)
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    keyword = _recall(queries)
    print(
        f"links {len(stored)}/{len(written)}; recall@10 hybrid {hybrid}/60, "
        f"keyword {keyword}/60"
    )
    assert hybrid >= keyword
