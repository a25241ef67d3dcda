"""Body wiki-links become relations on every page write (SPEC §2.3; GBrain's
auto-link): each rule is a test named after it."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from brain.access import Caller, local_caller
from brain.links import parse_wikilinks
from brain.models import AuditEvent, DanglingLink, Page, Relation, Source
from brain.selectors import backlink_counts
from brain.services.pages import PageInput, page_add, page_update, pages_write
from brain.services.verbs import verb_entity

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_embeddings(settings) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"


def _add(source: Source, **kw):  # type: ignore[no-untyped-def]
    kw.setdefault("actor", local_caller())
    return page_add(source=source, **kw)


def _edges(page: Page) -> set[tuple[str, str]]:
    return set(
        Relation.objects.filter(from_page=page).values_list(
            "to_page__slug", "relation_type__name"
        )
    )


def test_wikilink_forms_slug_label_and_title_are_parsed() -> None:
    links = parse_wikilinks(
        "See [[people/ada-quill]], [[companies/zinc-works|Zinc]] and [[Orbit Plan]]."
    )
    assert [(link.key, link.label) for link in links] == [
        ("people/ada-quill", ""),
        ("companies/zinc-works", "Zinc"),
        ("orbit plan", ""),
    ]


def test_wikilinks_inside_code_are_not_links() -> None:
    body = "Use `[[people/x]]` literally.\n\n```\n[[people/y]]\n```\n"
    assert parse_wikilinks(body) == []


def test_wikilink_resolves_by_slug_alias_and_title_as_mentions(
    default_source: Source,
) -> None:
    ada = _add(default_source, title="Ada Quill", body="Engineer.", type_name="person")
    zinc = _add(
        default_source,
        title="Zinc Works",
        body="A company.",
        type_name="company",
        frontmatter={"aliases": ["Zinc"]},
    )
    plan = _add(default_source, title="Orbit Plan", body="A plan.", type_name="project")
    note = _add(
        default_source,
        title="Kickoff",
        body=f"Met [[{ada.page.slug}|Ada]] about [[Orbit Plan]]; [[zinc]] pays.",
    )
    assert _edges(note.page) == {
        (ada.page.slug, "mentions"),
        (plan.page.slug, "mentions"),
        (zinc.page.slug, "mentions"),
    }
    relation = Relation.objects.filter(from_page=note.page).first()
    assert relation.provenance["link_source"] == "wikilink"
    assert AuditEvent.objects.filter(
        action=AuditEvent.Action.RELATION_ADDED, target_id=str(relation.pk)
    ).exists()


def test_wikilink_type_is_inferred_from_context_when_the_schema_allows_it(
    default_source: Source,
) -> None:
    zinc = _add(default_source, title="Zinc Works", body="Co.", type_name="company")
    orbit = _add(default_source, title="Orbit Plan", body="P.", type_name="project")
    ada = _add(
        default_source,
        title="Ada Quill",
        body=f"Ada works at [[{zinc.page.slug}]] and joined [[{orbit.page.slug}]].",
        type_name="person",
    )
    # works_at person->company is allowed; person->project works_at is not.
    assert _edges(ada.page) == {
        (zinc.page.slug, "works_at"),
        (orbit.page.slug, "mentions"),
    }


def test_typed_wikilinks_count_as_backlinks_and_show_on_the_entity_card(
    default_source: Source,
) -> None:
    zinc = _add(default_source, title="Zinc Works", body="Co.", type_name="company")
    for name in ("Ada Quill", "Bo Lantern"):
        _add(
            default_source,
            title=name,
            body=f"{name} works at [[Zinc Works]].",
            type_name="person",
        )
    _add(default_source, title="Memo", body="About [[Zinc Works]].")
    assert backlink_counts([zinc.page.pk]) == {zinc.page.pk: 2}  # mentions excluded
    card = verb_entity(caller=local_caller(), name=zinc.page.slug)["card"]
    assert card["backlink_count"] == 2
    assert {(e["type"], e["direction"]) for e in card["edges"]} == {("works_at", "in")}


def test_removing_a_wikilink_removes_its_relation_on_the_next_write(
    default_source: Source,
) -> None:
    ada = _add(default_source, title="Ada Quill", body="E.", type_name="person")
    bo = _add(default_source, title="Bo Lantern", body="E.", type_name="person")
    note = _add(default_source, title="Memo", body="[[Ada Quill]] and [[Bo Lantern]]")
    page_update(
        source=default_source,
        actor=local_caller(),
        slug=note.page.slug,
        mode="replace",
        body="Only [[Bo Lantern]] now.",
    )
    assert _edges(note.page) == {(bo.page.slug, "mentions")}
    assert AuditEvent.objects.filter(action=AuditEvent.Action.RELATION_REMOVED).exists()
    page_update(
        source=default_source,
        actor=local_caller(),
        slug=note.page.slug,
        mode="replace",
        body="No links.",
    )
    assert _edges(note.page) == set()
    assert ada.page.pk  # the target pages are untouched
    assert Page.objects.filter(pk=ada.page.pk, deleted_at__isnull=True).exists()


def test_explicit_relations_survive_wikilink_reconciliation(
    default_source: Source,
) -> None:
    ada = _add(default_source, title="Ada Quill", body="E.", type_name="person")
    note = _add(
        default_source,
        title="Memo",
        body="No links yet [[nobody]].",
        relations=[{"type": "mentions", "to_slug": ada.page.slug}],
    )
    page_update(
        source=default_source,
        actor=local_caller(),
        slug=note.page.slug,
        mode="replace",
        body="Still none.",
    )
    assert _edges(note.page) == {(ada.page.slug, "mentions")}


def test_unresolved_wikilink_is_kept_dangling_and_resolves_when_the_target_appears(
    default_source: Source,
) -> None:
    note = _add(default_source, title="Memo", body="Ask [[Cy Marrow]] about it.")
    dangling = DanglingLink.objects.get(from_page=note.page)
    assert (dangling.target, dangling.key) == ("Cy Marrow", "cy marrow")
    assert _edges(note.page) == set()
    cy = _add(default_source, title="Cy Marrow", body="Person.", type_name="person")
    assert _edges(note.page) == {(cy.page.slug, "mentions")}
    assert not DanglingLink.objects.exists()


def test_remote_writers_bodies_do_not_create_links(default_source: Source) -> None:
    _add(default_source, title="Ada Quill", body="E.", type_name="person")
    remote = Caller(actor="key:abc", trusted=False, scopes=frozenset({"read", "write"}))
    note = _add(
        default_source, title="Memo", body="Planted [[Ada Quill]].", actor=remote
    )
    assert _edges(note.page) == set()


def test_batched_writes_resolve_links_with_a_constant_number_of_queries(
    default_source: Source,
) -> None:
    def batch(prefix: str, n: int) -> int:
        items = [
            PageInput(
                mode="create",
                type_name="note",
                title=f"{prefix} {i}",
                body=f"Links [[{prefix} {(i + 1) % n}]] and [[missing {i}]].",
            )
            for i in range(n)
        ]
        with CaptureQueriesContext(connection) as ctx:
            pages_write(source=default_source, actor=local_caller(), items=items)
        return len(ctx.captured_queries)

    small, large = batch("alpha", 3), batch("beta", 30)
    assert small == large
    assert Relation.objects.filter(from_page__title__startswith="beta").count() == 30
    assert DanglingLink.objects.filter(key__startswith="missing").count() == 33
