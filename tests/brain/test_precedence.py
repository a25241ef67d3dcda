"""The slug and name precedence rule (``brain.precedence``, SPEC §8, §2.1, §4, §9):
trusted-created pages before remote-created ones; then the first holder of a slug,
or SPEC §4's arms (ties to the most recently touched) for a name."""

from __future__ import annotations

import importlib
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from brain.access import Caller, ReadScope, local_caller
from brain.mentions import extract_mentions
from brain.models import Fact, Page
from brain.precedence import trusted_first, trusted_over
from brain.selectors import page_get
from brain.services.entities import entity_resolve
from brain.services.facts import fact_remember
from brain.services.pages import page_add, page_soft_delete, page_update, page_write
from brain.services.push import Lookups, match_span

pytestmark = pytest.mark.django_db


def remote_of(source_id: str) -> Caller:
    """An untrusted key's caller that writes and reads ``source_id``."""
    return Caller(
        actor="key:abcd1234",
        client="probe",
        trusted=False,
        scopes=frozenset({"read", "write"}),
        write_source_id=source_id,
        readable_source_ids=frozenset({source_id}),
    )


def write(source: Any, caller: Caller, title: str, **fields: Any) -> Page:
    fields.setdefault("type_name", "person")
    fields.setdefault("body", f"{title} by {caller.actor}.")
    return page_add(
        source=source, actor=caller, title=title, embed=False, **fields
    ).page


def scope(*sources: Any) -> ReadScope:
    return ReadScope(source_ids=tuple(s.id for s in sources), include_private=True)


@pytest.fixture
def two(source_a, source_b) -> tuple[Any, Any]:  # type: ignore[no-untyped-def]
    return source_a, source_b


# --- the marker --------------------------------------------------------------------


def test_the_write_path_marks_pages_remote_callers_create_and_never_clears_it(  # type: ignore[no-untyped-def]
    default_source,
) -> None:
    remote, local = remote_of("default"), local_caller()
    planted = write(default_source, remote, "Planted Person")
    genuine = write(default_source, local, "Genuine Person")
    assert (planted.created_by_remote, genuine.created_by_remote) == (True, False)
    # Updates never move the mark: not a trusted rewrite, not a remote append.
    page_update(
        source=default_source, actor=local, slug=planted.slug, body="x", mode="replace"
    )
    page_update(source=default_source, actor=remote, slug=genuine.slug, body="y")
    planted.refresh_from_db()
    genuine.refresh_from_db()
    assert (planted.created_by_remote, genuine.created_by_remote) == (True, False)
    # A remote caller reviving a soft-deleted page re-creates it: marked.
    page_soft_delete(page=genuine, actor=local)
    page_write(
        source=default_source,
        actor=remote,
        mode="upsert",
        slug=genuine.slug,
        title="Genuine Person",
        body="revived",
        embed=False,
    )
    genuine.refresh_from_db()
    assert genuine.deleted_at is None and genuine.created_by_remote is True


def test_the_backfill_marks_pages_whose_first_revision_a_remote_caller_stamped(  # type: ignore[no-untyped-def]
    default_source,
) -> None:
    """Migration 0015 reads the server stamp (``provenance.key`` = the revision's
    actor) of each page's first revision; a later remote edit does not count."""
    remote, local = remote_of("default"), local_caller()
    planted = write(default_source, remote, "Planted Person")
    genuine = write(default_source, local, "Genuine Person", provenance={"key": "k"})
    page_update(source=default_source, actor=remote, slug=genuine.slug, body="y")
    Page.objects.update(created_by_remote=False)
    migration = importlib.import_module("brain.migrations.0015_page_created_by_remote")
    with connection.cursor() as cursor:
        cursor.execute(migration.BACKFILL)
    marked = set(
        Page.objects.filter(created_by_remote=True).values_list("pk", flat=True)
    )
    assert marked == {planted.pk}


# --- slugs: trust first, then the first holder -------------------------------------


def test_slug_holder_puts_a_trusted_created_page_before_a_remote_created_one(
    two,
) -> None:  # type: ignore[no-untyped-def]
    a, b = two
    # The remote page is the first holder, in the lower source id, updated last:
    # every other key favours it, and still the trusted page wins.
    planted = write(a, remote_of(a.id), "Greg Thorse")
    genuine = write(b, local_caller(), "Greg Thorse")
    page_update(source=a, actor=remote_of(a.id), slug=planted.slug, body="later")
    assert page_get(scope=scope(a, b), slug=genuine.slug).pk == genuine.pk


def test_slug_holder_is_the_first_holder_not_the_most_recently_updated(two) -> None:  # type: ignore[no-untyped-def]
    a, b = two
    first = write(b, local_caller(), "Greg Thorse")
    second = write(a, local_caller(), "Greg Thorse")
    page_update(source=a, actor=local_caller(), slug=second.slug, body="newer")
    assert page_get(scope=scope(a, b), slug=first.slug).pk == first.pk
    # Same creation instant: the lower source id.
    Page.objects.filter(pk__in=[first.pk, second.pk]).update(created_at=timezone.now())
    assert page_get(scope=scope(a, b), slug=first.slug).pk == second.pk


def test_slug_holder_leaves_explicit_source_scoping_alone(two) -> None:  # type: ignore[no-untyped-def]
    a, b = two
    planted = write(a, remote_of(a.id), "Greg Thorse")
    write(b, local_caller(), "Greg Thorse")
    assert page_get(scope=scope(a, b), slug=planted.slug, source=a.id).pk == planted.pk
    assert page_get(scope=scope(a), slug=planted.slug).pk == planted.pk


# --- names: trust first, then SPEC §4 ------------------------------------------------


def test_name_rank_puts_a_trusted_page_before_a_remote_page_of_a_stronger_arm(
    two,
) -> None:  # type: ignore[no-untyped-def]
    """Aliases are written by the page's writer, so a remote alias (the strongest
    arm) must not beat a trusted page that only the slug suffix matches."""
    a, b = two
    genuine = write(b, local_caller(), "Apollo Launch", slug="projects/apollo")
    write(a, remote_of(a.id), "Decoy", frontmatter={"aliases": ["apollo"]})
    found = entity_resolve(scope=scope(a, b), name="apollo")
    assert (found.page.pk, found.arm) == (genuine.pk, "slug_suffix")  # type: ignore[union-attr]


def test_name_rank_picks_a_remote_page_when_no_trusted_page_answers(two) -> None:  # type: ignore[no-untyped-def]
    a, b = two
    write(b, local_caller(), "Someone Else")
    planted = write(a, remote_of(a.id), "Greg Thorse")
    assert entity_resolve(scope=scope(a, b), name="Greg Thorse").page.pk == planted.pk  # type: ignore[union-attr]


def test_name_rank_keeps_arms_then_the_most_recently_touched_within_a_tier(two) -> None:  # type: ignore[no-untyped-def]
    a, b = two
    older = write(a, local_caller(), "Greg Thorse")
    newer = write(b, local_caller(), "Greg Thorse")
    Page.objects.filter(pk=older.pk).update(
        updated_at=timezone.now() - timedelta(days=1)
    )
    assert entity_resolve(scope=scope(a, b), name="Greg Thorse").page.pk == newer.pk  # type: ignore[union-attr]
    exact = write(a, local_caller(), "Ada Vance", slug="people/ada")
    write(b, local_caller(), "Other", slug="people/x/ada-vance")
    assert entity_resolve(scope=scope(a, b), name="Ada Vance").page.pk == exact.pk  # type: ignore[union-attr]


def test_name_rank_is_applied_before_the_lookup_limit(two) -> None:  # type: ignore[no-untyped-def]
    """Many fresh remote alias matches cannot push the older trusted one out of
    the resolver's candidate rows."""
    a, b = two
    genuine = write(b, local_caller(), "Greg Thorse")
    for i in range(6):
        write(
            a, remote_of(a.id), f"Decoy {i}", frontmatter={"aliases": ["greg thorse"]}
        )
    assert entity_resolve(scope=scope(a, b), name="Greg Thorse").page.pk == genuine.pk  # type: ignore[union-attr]


def test_trusted_over_lets_a_trusted_page_elsewhere_outrank_a_remote_one_nearby(  # type: ignore[no-untyped-def]
    default_source, source_b
) -> None:
    """remember (SPEC §2.4) resolves its entity in the write source first, but a
    planted copy there does not collect the facts meant for the genuine page."""
    genuine = write(source_b, local_caller(), "Greg Thorse")
    planted = write(default_source, remote_of("default"), "Greg Thorse")
    mine = write(default_source, local_caller(), "Ada Vance")
    assert trusted_over(planted, genuine) == genuine
    assert trusted_over(mine, genuine) == mine
    assert trusted_over(None, planted) == planted
    assert trusted_over(planted, None) == planted
    result = fact_remember(
        caller=local_caller(),
        text="Greg owes the desk report",
        provenance="1:1",
        entity="Greg Thorse",
    )
    assert Fact.objects.get(pk=result.fact.pk).entity_id == genuine.pk


# --- push (SPEC §9): trusted pages first across the arms ---------------------------


def test_trusted_first_runs_the_resolver_over_trusted_pages_then_all() -> None:
    calls: list[frozenset[int]] = []

    def match(skip: Any) -> str | None:
        calls.append(frozenset(skip))
        return None if skip else "any"

    assert trusted_first(match, {7}) == "any" and calls == [{7}, frozenset()]
    calls.clear()
    assert trusted_first(lambda skip: "trusted", {7}) == "trusted"
    assert trusted_first(match, set()) == "any" and calls == [frozenset()]


def _lookups(**tables: dict[str, set[int]]) -> Lookups:
    found = Lookups()
    for name, table in tables.items():
        if name == "remote":
            continue
        getattr(found, name).update(table)
    found.remote = set(tables.get("remote", {}).get("ids", set()))
    return found


def _span(text: str) -> Any:
    return extract_mentions([text]).newest_spans()[0]


def test_push_match_prefers_trusted_pages_across_arms_and_keeps_their_ambiguity() -> (
    None
):
    span = _span("Thorse")
    planted_alias = _lookups(
        alias={"thorse": {1}}, surname={"thorse": {2}}, remote={"ids": {1}}
    )
    assert match_span(span, planted_alias).page_ids == {2}  # type: ignore[union-attr]
    # Two trusted pages: still ambiguous (SPEC §9), the remote one ignored.
    both = _lookups(surname={"thorse": {2, 3, 1}}, remote={"ids": {1}})
    assert match_span(span, both).page_ids == {2, 3}  # type: ignore[union-attr]
    # Only remote pages answer: they still resolve.
    alone = _lookups(alias={"thorse": {1}}, remote={"ids": {1}})
    assert match_span(span, alone).page_ids == {1}  # type: ignore[union-attr]
    # No remote page at all: exactly the SPEC §9 cascade.
    plain = _lookups(alias={"thorse": {1}}, surname={"thorse": {2}})
    assert match_span(span, plain).page_ids == {1}  # type: ignore[union-attr]
