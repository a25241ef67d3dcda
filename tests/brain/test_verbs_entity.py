"""entity() (SPEC §4): resolution precedence, near misses and the card."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from brain.access import Caller, local_caller
from brain.models import Alias, Page, Relation
from brain.services.entities import (
    entity_card,
    entity_resolve,
    entity_suggestions,
    iso_ms,
)
from brain.services.facts import fact_remember
from brain.services.verbs import verb_entity
from tests.brain.conftest import add_page
from tests.factories import TimelineEntryFactory, relation_type

pytestmark = pytest.mark.django_db

REMOTE = Caller(
    actor="key:remote",
    client="test",
    trusted=False,
    scopes=frozenset({"read", "write"}),
)
REMOTE_DEFAULT = Caller(
    actor="key:remote",
    client="test",
    trusted=False,
    scopes=frozenset({"read"}),
    readable_source_ids=frozenset({"default"}),
)


def test_resolution_precedence_alias_beats_exact_title_beats_slug_suffix(
    default_source,
) -> None:  # type: ignore[no-untyped-def]
    by_suffix = add_page(default_source, title="Someone Else", slug="people/jordan")
    by_title = add_page(
        default_source, title="Jordan", type_name="company", slug="companies/jordan-inc"
    )
    scope = local_caller().read_scope()
    assert entity_resolve(scope=scope, name="Jordan").page == by_title
    by_alias = add_page(default_source, title="Michael J.", slug="people/michael-j")
    Alias.objects.create(source=default_source, page=by_alias, alias="jordan")
    result = entity_resolve(scope=scope, name="Jordan")
    assert result.page == by_alias and result.arm == "alias"
    assert set(result.runners_up) == {by_title, by_suffix}
    Alias.objects.all().delete()
    Page.objects.filter(pk=by_title.pk).update(title="Jordan Incorporated")
    assert entity_resolve(scope=scope, name="Jordan").page == by_suffix


def test_resolution_ties_go_to_the_most_recently_touched(default_source) -> None:  # type: ignore[no-untyped-def]
    a = add_page(default_source, title="Sam Lee", slug="people/sam-lee")
    b = add_page(default_source, title="Sam Lee", slug="people/sam-lee-2")
    Page.objects.filter(pk=b.pk).update(updated_at=timezone.now() - timedelta(days=3))
    scope = local_caller().read_scope()
    assert entity_resolve(scope=scope, name="sam lee").page == a
    Page.objects.filter(pk=b.pk).update(
        last_retrieved_at=timezone.now() + timedelta(seconds=5)
    )
    assert entity_resolve(scope=scope, name="sam lee").page == b


def test_exact_slug_resolves_namespaced_input(default_source) -> None:  # type: ignore[no-untyped-def]
    page = add_page(default_source, title="Alice Example", slug="people/alice-example")
    body = verb_entity(caller=local_caller(), name="people/alice-example")
    assert body["found"] and body["card"]["entity"]["slug"] == page.slug


def test_a_miss_returns_up_to_three_trigram_suggestions(default_source) -> None:  # type: ignore[no-untyped-def]
    for title in ("Margaret Hamilton", "Margarete Hamel", "Margot Hamm", "Marge Ham"):
        add_page(default_source, title=title)
    body = verb_entity(caller=local_caller(), name="Margaret Hamiltn")
    assert body["found"] is False and "card" not in body  # SPEC §4: no card key
    # Four near names exist; near-miss suggestions are capped at three (SPEC §4).
    assert len(body["suggestions"]) == 3
    assert body["suggestions"][0]["slug"] == "people/margaret-hamilton"
    assert body["suggestions"][0]["create_safety"] in {"probable", "unknown"}


def test_remote_callers_never_resolve_private_pages(default_source) -> None:  # type: ignore[no-untyped-def]
    add_page(default_source, title="Secret Person", visibility="private")
    assert verb_entity(caller=REMOTE, name="Secret Person")["found"] is False
    assert verb_entity(caller=REMOTE, name="Secret Persn")["suggestions"] == []
    assert verb_entity(caller=local_caller(), name="Secret Person")["found"] is True


def test_card_edges_skip_mentions_put_outgoing_first_and_cap_at_10(
    default_source,
) -> None:  # type: ignore[no-untyped-def]
    hub = add_page(default_source, title="Hub Person", slug="people/hub-person")
    acme = add_page(default_source, title="Acme", type_name="company")
    Relation.objects.create(
        source=default_source,
        from_page=hub,
        to_page=acme,
        relation_type=relation_type("works_at"),
    )
    for i in range(12):
        fan = add_page(default_source, title=f"Fan {i}")
        Relation.objects.create(
            source=default_source,
            from_page=fan,
            to_page=hub,
            relation_type=relation_type("related_to"),
        )
    noise = add_page(default_source, title="Noise Note", type_name="note")
    Relation.objects.create(
        source=default_source,
        from_page=noise,
        to_page=hub,
        relation_type=relation_type("mentions"),
    )
    card = verb_entity(caller=local_caller(), name="Hub Person")["card"]
    assert len(card["edges"]) == 10
    assert card["edges"][0] == {
        "type": "works_at",
        "direction": "out",
        "slug": acme.slug,
        "title": "Acme",
        "context": "",
    }
    assert all(e["direction"] == "in" for e in card["edges"][1:])
    assert "mentions" not in {e["type"] for e in card["edges"]}
    assert card["backlink_count"] == 12


def test_card_open_threads_commitments_first_then_recent_timeline(
    default_source,
) -> None:  # type: ignore[no-untyped-def]
    page = add_page(default_source, title="Pat Doe")
    today = timezone.now().date()
    TimelineEntryFactory(
        page=page, date=today - timedelta(days=2), summary="Met at the fair"
    )
    TimelineEntryFactory(
        page=page, date=today - timedelta(days=200), summary="Old news"
    )
    fact_remember(
        caller=local_caller(),
        text="Send Pat the contract draft",
        provenance="meeting notes",
        entity=page,
        kind="commitment",
        ttl="7d",
    )
    card = verb_entity(caller=local_caller(), name="Pat Doe")["card"]
    assert [(t["kind"], t["text"]) for t in card["open_threads"]] == [
        ("commitment", "Send Pat the contract draft"),
        ("recent_event", "Met at the fair"),
    ]
    assert card["last_touched"]["last_timeline_date"] == str(today - timedelta(days=2))
    assert card["open_threads"][0]["due"] is not None


def test_card_aka_lists_aliases_and_entity_touch_records_retrieval(
    default_source,
) -> None:  # type: ignore[no-untyped-def]
    page = add_page(
        default_source, title="Robert Tables", frontmatter={"aliases": ["Bobby Tables"]}
    )
    Alias.objects.get_or_create(
        source=default_source, page=page, alias="bobby@example.org"
    )
    body = verb_entity(caller=local_caller(), name="bobby tables")
    assert body["arm"] == "alias"
    assert "bobby@example.org" in body["card"]["aka"]
    page.refresh_from_db()
    assert page.last_retrieved_at is not None
    assert body["latency_ms"] >= 0


def _busy_page(source, title: str, size: int) -> Page:  # type: ignore[no-untyped-def]
    """A page with ``size`` backlinks, outgoing edges, facts, aliases and timeline
    entries each."""
    page = add_page(source, title=title)
    for i in range(size):
        other = add_page(source, title=f"{title} Friend {i}")
        for a, b in ((other, page), (page, other)):
            Relation.objects.create(
                source=source,
                from_page=a,
                to_page=b,
                relation_type=relation_type("related_to"),
            )
        Alias.objects.create(source=source, page=page, alias=f"{title.lower()} {i}")
        TimelineEntryFactory(page=page, summary=f"event {i}")
        fact_remember(
            caller=local_caller(),
            text=f"{title} fact number {i}",
            provenance="test",
            entity=page,
            use_llm=False,
        )
    return page


# A card is the scope check, the resolve, the card's own statement (with the retrieval
# touch, at most once a minute) and the open loops: four statements, whatever its size.
CARD_QUERIES = 4


def test_entity_card_takes_a_fixed_number_of_queries(
    default_source, django_assert_num_queries
) -> None:  # type: ignore[no-untyped-def]
    """Depth-1 reads only: the count does not grow with edges, facts or timeline."""
    _busy_page(default_source, "Quiet Person", 1)
    _busy_page(default_source, "Busy Person", 15)
    for name, backlinks in (("Quiet Person", 1), ("Busy Person", 15)):
        with django_assert_num_queries(CARD_QUERIES):
            body = verb_entity(caller=local_caller(), name=name)
        assert body["card"]["backlink_count"] == backlinks
        assert len(body["card"]["edges"]) == min(10, 2 * backlinks)
        # Asked again within the minute: no touch, the same statements.
        with django_assert_num_queries(CARD_QUERIES):
            verb_entity(caller=local_caller(), name=name)


def test_entity_touch_rides_in_the_card_statement_without_waiting_for_the_wal_flush(
    default_source,
) -> None:  # type: ignore[no-untyped-def]
    """The card records the retrieval in its own statement, at most once a minute,
    and turns synchronous commit off for that transaction only (set_config with
    is_local); updated_at is left alone."""
    page = add_page(default_source, title="Touched Person")
    updated = page.updated_at
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"
    scope = local_caller().read_scope()
    card = entity_card(scope=scope, page=page, touch=True)
    page.refresh_from_db()
    assert page.last_retrieved_at is not None
    assert page.updated_at == updated
    assert card["last_touched"]["last_retrieved_at"] == iso_ms(page.last_retrieved_at)
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "off"
    # Within the minute the touch is not repeated.
    first = page.last_retrieved_at
    entity_card(scope=scope, page=page, touch=True, now=first + timedelta(seconds=30))
    page.refresh_from_db()
    assert page.last_retrieved_at == first
    entity_card(scope=scope, page=page, touch=True, now=first + timedelta(minutes=2))
    page.refresh_from_db()
    assert page.last_retrieved_at == first + timedelta(minutes=2)


def _one_pass_suggestions(name: str) -> list[str]:
    """The near misses the way one wide pass finds them (every title at similarity
    >= 0.3, most similar first): the oracle for the two-pass lookup."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT slug FROM brain_page WHERE deleted_at IS NULL"
            " AND similarity(title, %s) >= 0.3"
            " ORDER BY similarity(title, %s) DESC, slug LIMIT 3",
            [name, name],
        )
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.parametrize(
    "titles",
    [
        # Three close titles: the narrow pass alone answers.
        ("Margaret Hamilton", "Margaret Hamiltons", "Margarett Hamilton", "Marge Ham"),
        # One close title: the wide pass adds the distant ones after it.
        ("Margaret Hamilton", "Margot Hamm", "Marge Ham", "Hamlet Margins"),
    ],
)
def test_two_pass_suggestions_equal_the_one_wide_pass(default_source, titles) -> None:  # type: ignore[no-untyped-def]
    for title in titles:
        add_page(default_source, title=title)
    scope = local_caller().read_scope()
    got = [s["slug"] for s in entity_suggestions(scope=scope, name="Margaret Hamiltn")]
    assert got == _one_pass_suggestions("Margaret Hamiltn")
    assert len(got) >= 2


def test_card_open_threads_put_open_loops_first_with_loop_fields(
    default_source,
) -> None:  # type: ignore[no-untyped-def]
    from loops.models import OpenLoop

    page = add_page(default_source, title="Loop Person")
    fact_remember(
        caller=local_caller(),
        text="Send Loop Person the deck",
        provenance="t",
        entity=page,
        kind="commitment",
    )
    due = timezone.now() + timedelta(days=2)
    loop = OpenLoop.objects.create(
        source=default_source,
        dedup_key="thread:t1:commitment_owed_by_me",
        loop_type="commitment_owed_by_me",
        counterparty=page,
        summary="Reply to Loop Person about the budget",
        due_at=due,
        detector="manual",
    )
    OpenLoop.objects.create(
        source=default_source,
        dedup_key="thread:t2:unanswered_inbound",
        loop_type="unanswered_inbound",
        counterparty=page,
        summary="Closed one",
        status="done",
        closed_at=timezone.now(),
        detector="manual",
    )
    threads = verb_entity(caller=REMOTE_DEFAULT, name="Loop Person")["card"][
        "open_threads"
    ]
    assert threads[0] == {
        "kind": "commitment",
        "text": "Reply to Loop Person about the budget",
        "date": threads[0]["date"],
        "direction": "owed_by_me",
        "due": threads[0]["due"],
        "counterparty": page.slug,
        "status": "open",
        "loop_id": str(loop.pk),
    }
    assert threads[0]["due"].startswith(due.strftime("%Y-%m-%d"))
    assert [t["text"] for t in threads[1:]] == ["Send Loop Person the deck"]
