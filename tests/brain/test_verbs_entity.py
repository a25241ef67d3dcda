"""entity() (SPEC §4): resolution precedence, near misses and the card."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from brain.access import Caller, local_caller
from brain.models import Alias, Page, Relation
from brain.services.entities import (
    _CANDIDATES_SQL,
    entity_card,
    entity_resolve,
    entity_suggestions,
    iso_ms,
)
from brain.services.facts import fact_remember
from brain.services.pages import PageInput, pages_write
from brain.services.verbs import verb_context_pack, verb_entity
from tests.brain.conftest import add_page
from tests.factories import TimelineEntryFactory, page_type, relation_type

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


def test_a_miss_suggests_at_most_three_titles_holding_its_words_most_similar_first(
    default_source,
) -> None:  # type: ignore[no-untyped-def]
    for title in (
        "Margaret Hamilton",
        "Margaret Hamilton Jr",
        "Margaret Hamilton Sr",
        "Margaret Hamilton III",
        "Margot Hamm",
    ):
        add_page(default_source, title=title)
    body = verb_entity(caller=local_caller(), name="Margaret Hamiltn")
    assert body["found"] is False and "card" not in body  # SPEC §4: no card key
    got = body["suggestions"]
    # Four titles hold "margaret" and a form of "hamiltn"; three are suggested.
    assert len(got) == 3
    assert got[0]["slug"] == "people/margaret-hamilton"
    assert got[0]["create_safety"] == "probable"  # similarity 0.75
    assert [s["similarity"] for s in got] == sorted(
        (s["similarity"] for s in got), reverse=True
    )
    assert "people/margot-hamm" not in {s["slug"] for s in got}


def test_titles_holding_every_word_outrank_more_similar_titles_holding_fewer(
    default_source,
) -> None:  # type: ignore[no-untyped-def]
    """GIVEN a long title holding every word of the name and a shorter one missing a
    word, WHEN the name misses, THEN only the first tier (every word) answers, though
    the shorter title is more similar by trigrams."""
    add_page(
        default_source,
        title="Acme Rocket Works International Holdings",
        type_name="company",
    )
    add_page(default_source, title="Acme Rocket Work", type_name="company")
    scope = local_caller().read_scope()
    got = entity_suggestions(scope=scope, name="Acme Rocket Works")
    assert [s["slug"] for s in got] == [
        "companies/acme-rocket-works-international-holdings"
    ]
    assert got[0]["create_safety"] == "unknown"


FIRST_NAMES = "John Peter Sarah Mary David Anna James Linda Robert Susan".split()
SURNAMES = "Smith Jones Brown Taylor Wilson Davies Evans Thomas Roberts Walker".split()


@pytest.fixture
def crowded_brain(default_source):  # type: ignore[no-untyped-def]
    """A hundred people sharing ten first names and ten surnames, plus the pages the
    misses aim at."""
    pages_write(
        source=default_source,
        actor=local_caller(),
        items=[
            PageInput(
                mode="create",
                title=f"{first} {last}",
                type_name="person",
                body=f"{first} {last} works here.",
            )
            for first in FIRST_NAMES
            for last in SURNAMES
        ]
        + [
            PageInput(mode="create", title=title, type_name=kind, body=f"{title}.")
            for title, kind in (
                ("John Shackleton", "person"),
                ("Sara Whitfield", "person"),
                ("Quinn Avery Harlow", "person"),
                ("Acme Rocket Works", "company"),
            )
        ],
        embed=False,
    )
    return default_source


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("John Shakleton", "people/john-shackleton"),  # a letter dropped
        ("Jhon Shackleton", "people/john-shackleton"),  # short word, swapped letters
        ("Peter Shackleton", "people/john-shackleton"),  # one word changed
        ("Sara Whitfeld", "people/sara-whitfield"),
        ("Sarah Whitfield", "people/sara-whitfield"),  # typo making another name
        ("Quinn Harlow", "people/quinn-avery-harlow"),  # a word dropped
        ("Quinn Avery Harlow Jones", "people/quinn-avery-harlow"),  # a word added
        ("Quin Avery Harlowe", "people/quinn-avery-harlow"),  # two typos
        ("Acme Rockett Works", "companies/acme-rocket-works"),
    ],
)
def test_realistic_misses_suggest_the_page_they_aim_at_first(
    crowded_brain, name, slug
) -> None:  # type: ignore[no-untyped-def]
    scope = local_caller().read_scope()
    assert entity_resolve(scope=scope, name=name).page is None
    got = entity_suggestions(scope=scope, name=name)
    assert got and got[0]["slug"] == slug, got


@pytest.mark.parametrize(
    ("title", "name"),
    [
        ("al.pollard@newpower.com", "al.polard@newpower.com"),  # an address page
        ("Mary-Kate Olsen", "Mary-Kate Olsn"),  # a hyphenated first name
    ],
)
def test_a_typo_of_an_address_or_hyphenated_title_still_finds_it(
    default_source, title, name
) -> None:  # type: ignore[no-untyped-def]
    """The lexicon holds the words of PostgreSQL's ``simple`` parser, which keeps an
    address as one token and a hyphenated word as the whole plus its parts, while
    the name is split on every non-letter: the name's parts still reach such a
    title through their nearest lexicon words."""
    page = add_page(default_source, title=title)
    scope = local_caller().read_scope()
    got = entity_suggestions(scope=scope, name=name)
    assert got and got[0]["slug"] == page.slug, got


def test_an_unknown_name_gets_no_suggestions(crowded_brain) -> None:  # type: ignore[no-untyped-def]
    scope = local_caller().read_scope()
    assert entity_suggestions(scope=scope, name="Zebedee Quackenbush") == []


def test_suggestion_candidates_come_from_the_title_words_index(default_source) -> None:  # type: ignore[no-untyped-def]
    """The candidate tiers' ``@@`` is answered by ``brain_page_title_words``: the
    query's expression must be the index's exactly, or every tier reads the table."""
    params = {
        "name": "Margaret Hamiltn",
        "queries": ["'margaret' & 'hamilton'"],
        "sources": ["default"],
        "visibilities": ["world"],
        "candidates": 200,
        "min": 0.3,
        "n": 3,
    }
    person = page_type("person")
    Page.objects.bulk_create(
        Page(source=default_source, type=person, slug=f"people/p{i}", title=f"P {i}")
        for i in range(3000)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE brain_page")
        cursor.execute("EXPLAIN " + _CANDIDATES_SQL, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "brain_page_title_words" in plan


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
        "fact_id": None,
    }
    assert threads[0]["due"].startswith(due.strftime("%Y-%m-%d"))
    assert [t["text"] for t in threads[1:]] == ["Send Loop Person the deck"]


def test_a_loop_and_the_commitment_fact_it_projected_are_one_open_thread(
    default_source,
) -> None:  # type: ignore[no-untyped-def]
    """A commitment loop projects a commitment fact (SPEC §5.3): the card listed
    the promise twice (the loop, then its fact) and context_pack's text three times
    ("open:" twice and "fact [commitment]"), newcomer."""
    from loops.models import OpenLoop

    page = add_page(default_source, title="Promise Person")
    text = "I promised Promise Person: I will send the deck."
    fact = fact_remember(
        caller=local_caller(),
        text=text,
        provenance="t",
        entity=page,
        kind="commitment",
    )
    loop = OpenLoop.objects.create(
        source=default_source,
        dedup_key="commit:deadbeef",
        loop_type="commitment_owed_by_me",
        counterparty=page,
        summary=text,
        detector="rule_extract",
        fact_id=fact.fact.pk,
    )
    card = verb_entity(caller=local_caller(), name="Promise Person")["card"]
    assert [t.get("loop_id") for t in card["open_threads"]] == [str(loop.pk)]
    assert card["open_threads"][0]["fact_id"] == str(fact.fact.pk)
    pack = verb_context_pack(caller=local_caller(), entities="Promise Person")
    assert pack["text"].count("I will send the deck") == 1, pack["text"]
