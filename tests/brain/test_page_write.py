"""The one write path for pages (SPEC §2.3): each rule is a test named after it."""

from __future__ import annotations

import importlib

import pytest
from django.db import connection
from django.utils import timezone

from brain.access import Caller, local_caller
from brain.exceptions import AlreadyExists, InvalidParams, NotFound, SchemaViolation
from brain.models import (
    Alias,
    AuditEvent,
    Chunk,
    Page,
    PageRevision,
    RawRecord,
    Source,
    TitleWord,
)
from brain.services.pages import (
    RawInput,
    RelationInput,
    page_add,
    page_restore,
    page_soft_delete,
    page_update,
    page_write,
    title_words_add,
)
from tests.factories import PageFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_embeddings(settings) -> None:  # type: ignore[no-untyped-def]
    """Write-rule tests do not need vectors; the embedding tests live elsewhere."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"


@pytest.fixture
def remote() -> Caller:
    """An untrusted HTTP caller (SPEC §8)."""
    return Caller(
        actor="key:abc123",
        client="claude-code",
        trusted=False,
        scopes=frozenset({"read", "write"}),
    )


def _add(source: Source, **kw):  # type: ignore[no-untyped-def]
    kw.setdefault("actor", local_caller())
    return page_add(source=source, **kw)


# --- sanitising -------------------------------------------------------------------------


def test_title_is_sanitised_into_a_slug_under_the_type_prefix(
    default_source: Source,
) -> None:
    result = _add(
        default_source, title="Jane Doe (CFO)", body="Finance lead.", type_name="person"
    )
    assert result.page.slug == "people/jane-doe-cfo"
    assert result.page.type.name == "person"


@pytest.mark.parametrize(
    ("title", "expected"),
    [("../../etc/passwd", "notes/etcpasswd"), ("a/b\\c", "notes/abc")],
)
def test_hostile_titles_are_sanitised_and_stay_in_their_namespace(
    default_source: Source, title: str, expected: str
) -> None:
    result = _add(default_source, title=title, body="x", type_name="note")
    assert result.page.slug == expected
    assert ".." not in result.page.slug and "\\" not in result.page.slug
    assert result.page.title == title  # the title itself is kept verbatim


def test_title_slug_is_cut_at_80_characters(default_source: Source) -> None:
    result = _add(default_source, title="word " * 40, body="x", type_name="note")
    segment = result.page.slug.split("/", 1)[1]
    assert len(segment) <= 80 and not segment.endswith("-")


@pytest.mark.parametrize(
    "slug", ["../etc/passwd", "/abs", "a\\b", "notes//x", "a\u202eb"]
)
def test_unsafe_explicit_slug_is_refused(default_source: Source, slug: str) -> None:
    with pytest.raises(InvalidParams, match="Slug"):
        _add(default_source, slug=slug, title="t", body="x")
    assert not Page.objects.exists()


def test_type_is_inferred_from_the_slug_prefix(default_source: Source) -> None:
    result = _add(default_source, slug="people/ann-lee", title="Ann Lee", body="Hi.")
    assert result.page.type.name == "person"


def test_unknown_type_is_refused_listing_the_allowed_types(
    default_source: Source,
) -> None:
    with pytest.raises(SchemaViolation, match="Allowed: .*person"):
        _add(default_source, title="x", body="y", type_name="spaceship")


# --- frontmatter ---------------------------------------------------------------------------


def test_frontmatter_gets_title_summary_and_tags(default_source: Source) -> None:
    result = _add(
        default_source,
        title="Launch plan",
        body="\n\n# Goals\nShip in May.\n",
        tags=["plans"],
    )
    page = result.page
    assert page.frontmatter["title"] == "Launch plan"
    assert (
        page.frontmatter["summary"] == "Goals"
    )  # first non-empty line, heading marks off
    assert page.summary == "Goals"
    assert page.frontmatter["tags"] == ["plans"] == page.tags


def test_append_keeps_frontmatter(default_source: Source) -> None:
    _add(
        default_source,
        slug="notes/plan",
        title="Plan",
        body="First.",
        summary="S",
        tags=["a"],
        frontmatter={"owner": "ann"},
    )
    result = page_update(
        source=default_source, slug="notes/plan", body="Second.", actor=local_caller()
    )
    page = result.page
    assert result.operation == "append"
    assert page.body == "First.\n\nSecond."
    assert page.frontmatter["owner"] == "ann"
    assert (page.title, page.summary, page.tags) == ("Plan", "S", ["a"])


def test_replace_keeps_frontmatter(default_source: Source) -> None:
    _add(
        default_source,
        slug="notes/plan",
        title="Plan",
        body="First.",
        summary="S",
        tags=["a"],
        frontmatter={"owner": "ann"},
    )
    result = page_update(
        source=default_source,
        slug="notes/plan",
        body="Only this.",
        mode="replace",
        actor=local_caller(),
    )
    page = result.page
    assert page.body == "Only this."
    assert page.frontmatter["owner"] == "ann"
    assert (page.title, page.summary, page.tags) == ("Plan", "S", ["a"])


def test_replace_takes_new_title_summary_and_tags_when_given(
    default_source: Source,
) -> None:
    _add(default_source, slug="notes/plan", title="Plan", body="First.", tags=["a"])
    page = page_update(
        source=default_source,
        slug="notes/plan",
        body="B",
        mode="replace",
        title="Plan v2",
        summary="new",
        tags=["b"],
        actor=local_caller(),
    ).page
    assert (page.title, page.summary, page.tags) == ("Plan v2", "new", ["b"])
    assert page.slug == "notes/plan"


def test_required_frontmatter_of_the_type_is_checked(default_source: Source) -> None:
    from brain.models import PageType

    PageType.objects.filter(name="deal").update(required_fields=["stage"])
    with pytest.raises(SchemaViolation, match="stage"):
        _add(default_source, title="Acme seed", body="x", type_name="deal")
    assert _add(
        default_source,
        title="Acme seed",
        body="x",
        type_name="deal",
        frontmatter={"stage": "seed"},
    ).created


# --- refusals ------------------------------------------------------------------------------


def test_missing_page_update_is_refused_suggesting_add(default_source: Source) -> None:
    with pytest.raises(NotFound) as exc:
        page_update(
            source=default_source, slug="notes/nope", body="x", actor=local_caller()
        )
    assert "add_page" in exc.value.suggestion
    assert not RawRecord.objects.exists()


def test_duplicate_slug_add_is_refused_pointing_at_update(
    default_source: Source,
) -> None:
    _add(default_source, slug="notes/plan", title="Plan", body="First.")
    with pytest.raises(AlreadyExists) as exc:
        _add(default_source, slug="notes/plan", title="Plan", body="Again.")
    assert "update_page" in exc.value.suggestion
    assert Page.objects.get().body == "First."


def test_same_slug_in_another_source_is_a_different_page(
    default_source: Source, source_a: Source
) -> None:
    _add(default_source, slug="notes/plan", title="Plan", body="A")
    assert _add(source_a, slug="notes/plan", title="Plan", body="B").created


def test_empty_overwrite_is_refused_unless_allowed(default_source: Source) -> None:
    _add(default_source, slug="notes/plan", title="Plan", body="Content.")
    with pytest.raises(InvalidParams, match="empty"):
        page_update(
            source=default_source,
            slug="notes/plan",
            body="  ",
            mode="replace",
            actor=local_caller(),
        )
    assert Page.objects.get().body == "Content."
    page = page_update(
        source=default_source,
        slug="notes/plan",
        body="",
        mode="replace",
        allow_empty=True,
        actor=local_caller(),
    ).page
    assert page.body == ""


def test_unknown_mode_is_refused(default_source: Source) -> None:
    with pytest.raises(InvalidParams, match="mode"):
        page_write(
            source=default_source,
            mode="merge",
            slug="notes/x",
            title="x",
            actor=local_caller(),
        )


# --- both layers together -----------------------------------------------------------------


def test_both_layers_change_together(default_source: Source) -> None:
    result = _add(
        default_source,
        slug="notes/plan",
        title="Plan",
        body="First.",
        raws=[
            RawInput(
                external_id="file:plan.md",
                kind=RawRecord.Kind.MARKDOWN,
                content="First.",
            )
        ],
    )
    raw = RawRecord.objects.get()
    assert raw.page_id == result.page.pk and result.raw_records == [raw]
    revision = PageRevision.objects.get()
    assert revision.raw_record_id == raw.pk and revision.operation == "create"


def test_failure_after_the_wiki_write_leaves_neither_layer_changed(
    default_source: Source,
) -> None:
    """GIVEN a page, WHEN an update fails after the page row and revision were written
    (its relation target does not exist), THEN neither the raw nor the wiki layer, nor
    the revisions, aliases or chunks changed."""
    _add(default_source, slug="notes/plan", title="Plan", body="First.")
    before = (
        RawRecord.objects.count(),
        PageRevision.objects.count(),
        Alias.objects.count(),
        list(Chunk.objects.values_list("text", flat=True)),
    )
    with pytest.raises(NotFound, match="notes/ghost"):
        page_update(
            source=default_source,
            slug="notes/plan",
            body="Second.",
            title="Plan B",
            raws=[
                RawInput(external_id="mail:1", kind=RawRecord.Kind.RFC822, content="x")
            ],
            relations=[RelationInput(type="related_to", to_slug="notes/ghost")],
            actor=local_caller(),
        )
    page = Page.objects.get()
    assert (page.body, page.title) == ("First.", "Plan")
    after = (
        RawRecord.objects.count(),
        PageRevision.objects.count(),
        Alias.objects.count(),
        list(Chunk.objects.values_list("text", flat=True)),
    )
    assert after == before
    assert not RawRecord.objects.filter(external_id="mail:1").exists()


def test_raw_records_are_immutable_and_reused(default_source: Source) -> None:
    raw = RawInput(external_id="msg-1", kind=RawRecord.Kind.RFC822, content="original")
    _add(default_source, slug="notes/t", title="T", body="one", raws=[raw])
    changed = RawInput(
        external_id="msg-1", kind=RawRecord.Kind.RFC822, content="tampered"
    )
    page_update(
        source=default_source,
        slug="notes/t",
        body="two",
        raws=[changed],
        actor=local_caller(),
    )
    assert RawRecord.objects.get().content == "original"


def test_write_without_raws_stores_the_submitted_text_as_agent_input(
    default_source: Source,
) -> None:
    _add(default_source, slug="notes/t", title="T", body="Exactly this.")
    raw = RawRecord.objects.get()
    assert raw.kind == RawRecord.Kind.AGENT_INPUT and raw.content == "Exactly this."


def test_unchanged_resave_writes_no_revision(default_source: Source) -> None:
    _add(default_source, slug="notes/t", title="T", body="Same.")
    result = page_write(
        source=default_source,
        mode="upsert",
        slug="notes/t",
        title="T",
        body="Same.",
        actor=local_caller(),
    )
    assert (result.changed, result.operation) == (False, "noop")
    assert PageRevision.objects.count() == 1


def test_revision_keeps_the_previous_body_and_frontmatter(
    default_source: Source,
) -> None:
    _add(default_source, slug="notes/t", title="T", body="Old.", frontmatter={"k": 1})
    page_update(
        source=default_source,
        slug="notes/t",
        body="New.",
        mode="replace",
        frontmatter={"k": 2},
        actor=local_caller(),
    )
    latest = PageRevision.objects.filter(operation="replace").get()
    assert latest.previous_body == "Old."
    assert latest.previous_frontmatter["k"] == 1


# --- agents and provenance ------------------------------------------------------------------


def test_remote_writes_carry_agent_input_tag_and_server_stamped_provenance(
    default_source: Source, remote: Caller
) -> None:
    result = page_add(
        source=default_source,
        title="Note",
        body="x",
        actor=remote,
        provenance={"key": "forged", "why": "meeting"},
    )
    page = result.page
    assert "agent-input" in page.tags
    stamp = page.frontmatter["provenance"]
    assert stamp["key"] == "key:abc123" and stamp["client"] == "claude-code"
    assert stamp["why"] == "meeting" and stamp["at"]
    assert PageRevision.objects.get().provenance["key"] == "key:abc123"


def test_trusted_writes_do_not_get_the_agent_input_tag(default_source: Source) -> None:
    assert "agent-input" not in _add(default_source, title="N", body="x").page.tags


# --- aliases -----------------------------------------------------------------------------------


def test_title_and_frontmatter_aliases_become_normalised_aliases(
    default_source: Source,
) -> None:
    _add(
        default_source,
        title="Jane  DOE",
        body="x",
        type_name="person",
        frontmatter={"aliases": ['"JD"', "jane@example.org", "@jdoe"]},
    )
    got = dict(Alias.objects.values_list("alias", "kind"))
    assert got == {
        "jane doe": "name",
        "jd": "name",
        "jane@example.org": "email",
        "@jdoe": "handle",
    }


# --- relations ------------------------------------------------------------------------------------


def test_explicit_relations_are_schema_checked(default_source: Source) -> None:
    _add(default_source, slug="companies/acme", title="Acme", body="x")
    result = _add(
        default_source,
        slug="people/ann",
        title="Ann",
        body="x",
        relations=[RelationInput(type="works_at", to_slug="companies/acme")],
    )
    assert result.page.outgoing_relations.get().to_page.slug == "companies/acme"
    with pytest.raises(SchemaViolation):
        _add(
            default_source,
            slug="people/bob",
            title="Bob",
            body="x",
            relations=[RelationInput(type="works_at", to_slug="people/ann")],
        )


# --- soft delete and restore --------------------------------------------------------------------


def test_soft_delete_and_restore_are_audited_and_idempotent(
    default_source: Source,
) -> None:
    page = _add(default_source, slug="notes/t", title="T", body="Body.").page
    assert page_soft_delete(page=page, actor=local_caller(), reason="dup") is True
    assert page_soft_delete(page=page, actor=local_caller()) is False
    assert not Chunk.objects.filter(page=page).exists()
    assert page_restore(page=page, actor=local_caller()) is True
    assert page_restore(page=page, actor=local_caller()) is False
    assert Chunk.objects.filter(page=page).exists()
    actions = list(AuditEvent.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["page_deleted", "page_restored"]


def test_update_of_a_deleted_page_is_refused_as_missing(default_source: Source) -> None:
    page = _add(default_source, slug="notes/t", title="T", body="Body.").page
    page_soft_delete(page=page, actor=local_caller())
    with pytest.raises(NotFound):
        page_update(
            source=default_source, slug="notes/t", body="x", actor=local_caller()
        )
    with pytest.raises(AlreadyExists, match="deleted"):
        _add(default_source, slug="notes/t", title="T", body="x")


def test_upsert_revives_a_deleted_page(default_source: Source) -> None:
    page = _add(default_source, slug="notes/t", title="T", body="Body.").page
    page_soft_delete(page=page, actor=local_caller())
    result = page_write(
        source=default_source,
        mode="upsert",
        slug="notes/t",
        title="T",
        body="Body.",
        actor=local_caller(),
    )
    assert result.page.deleted_at is None and result.changed


# --- keyword index is written with the page ------------------------------------------------------


def test_chunks_with_tsvector_are_written_in_the_same_transaction(
    default_source: Source,
) -> None:
    body = "# Intro\n\nAlpha paragraph.\n\n# Details\n\nBeta paragraph."
    page = _add(default_source, slug="notes/t", title="Topic", body=body).page
    chunks = list(Chunk.objects.filter(page=page).order_by("ordinal"))
    assert [c.text for c in chunks] == [
        "# Intro\n\nAlpha paragraph.",
        "# Details\n\nBeta paragraph.",
    ]
    assert all(c.tsv for c in chunks)
    assert all(c.visibility == "world" and c.source_id == "default" for c in chunks)


def test_visibility_change_reaches_the_chunks(default_source: Source) -> None:
    _add(default_source, slug="notes/t", title="T", body="Body.")
    page_update(
        source=default_source,
        slug="notes/t",
        body=None,
        mode="replace",
        visibility="private",
        actor=local_caller(),
    )
    assert set(Chunk.objects.values_list("visibility", flat=True)) == {"private"}


def test_remote_resave_of_the_same_content_is_a_noop(
    default_source: Source, remote: Caller
) -> None:
    page_add(
        source=default_source, slug="notes/n", title="N", body="Same.", actor=remote
    )
    again = page_write(
        source=default_source,
        mode="upsert",
        slug="notes/n",
        title="N",
        body="Same.",
        actor=remote,
    )
    assert (again.changed, again.operation) == (False, "noop")


# --- the title lexicon (entity near-miss suggestions) -----------------------------------


def _words(source: Source) -> set[str]:
    return set(TitleWord.objects.filter(source=source).values_list("word", flat=True))


def test_writes_keep_the_title_word_lexicon_of_their_source(
    default_source: Source, source_a: Source
) -> None:
    """GIVEN pages created and renamed through the write path, THEN the source's
    lexicon holds every word of every title it had (lower-cased, as
    ``to_tsvector('simple')`` splits them), and no other source's does."""
    _add(default_source, slug="people/quinn", title="Quinn O'Brien-Harlow", body="Q.")
    page_update(
        source=default_source,
        slug="people/quinn",
        body="Q.",
        mode="replace",
        title="Quinn Harlow 2nd",
        actor=local_caller(),
    )
    assert {"quinn", "o", "brien-harlow", "brien", "harlow", "2nd"} <= _words(
        default_source
    )
    assert _words(source_a) == set()
    _add(source_a, slug="people/quinn", title="Quinn", body="Q.")
    assert _words(source_a) == {"quinn"}


def test_title_words_add_skips_words_already_there(source_a: Source) -> None:
    title_words_add(source_id=source_a.id, titles=["Ada Lovelace", "Ada Byron"])
    title_words_add(source_id=source_a.id, titles=["ada lovelace"])
    assert sorted(
        TitleWord.objects.filter(source=source_a).values_list("word", flat=True)
    ) == ["ada", "byron", "lovelace"]


def test_the_migration_fills_the_lexicon_from_the_stored_titles(
    source_a: Source,
) -> None:
    """brain 0014 fills ``TitleWord`` from the pages stored before it (soft-deleted
    ones too), with the write path's split into words."""
    migration = importlib.import_module("brain.migrations.0014_title_words")
    PageFactory(source=source_a, title="Ada Lovelace-Byron")
    PageFactory(source=source_a, title="Old Name", deleted_at=timezone.now())
    TitleWord.objects.all().delete()
    with connection.cursor() as cursor:
        cursor.execute(migration.FILL_TITLE_WORDS)
    assert _words(source_a) == {
        "ada",
        "lovelace-byron",
        "lovelace",
        "byron",
        "old",
        "name",
    }
