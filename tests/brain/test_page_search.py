"""Hybrid search (SPEC §3) on a small real corpus, with the real local embedding model."""

from __future__ import annotations

import pytest

from brain import embeddings
from brain.access import Caller, local_caller
from brain.exceptions import InvalidParams
from brain.models import Relation, RelationType, Source
from brain.search import page_search
from brain.services.pages import page_add, page_soft_delete
from tests.brain.embedding_counter import CachingProvider
from tests.brain.search_corpus import load_corpus

pytestmark = pytest.mark.django_db

KLEZ = "Klez: The Virus That Won't Die"


@pytest.fixture(autouse=True)
def _real_model_memoised(settings, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The real local model, memoised per text across the tests of this module."""
    settings.BRAIN_EMBEDDING_PROVIDER = "local"
    inner = embeddings.get_provider()
    cached = CachingProvider(inner)

    def provider():  # type: ignore[no-untyped-def]
        # Tests that switch the setting to 'none' must see no provider.
        return cached if settings.BRAIN_EMBEDDING_PROVIDER == "local" else None

    monkeypatch.setattr(embeddings, "get_provider", provider)


@pytest.fixture
def corpus(
    default_source: Source, django_capture_on_commit_callbacks
) -> dict[str, str]:  # type: ignore[no-untyped-def]
    with django_capture_on_commit_callbacks(execute=True):
        return load_corpus(default_source)


def trusted_scope(*sources: str):  # type: ignore[no-untyped-def]
    return local_caller().read_scope(list(sources) or ["default"])


def test_exact_title_query_returns_exact_title_match_and_exists(
    corpus: dict[str, str],
) -> None:
    response = page_search(scope=trusted_scope(), query="Moscow bomber")
    top = response.results[0]
    assert top.slug == corpus["Moscow bomber"]
    assert (top.evidence, top.create_safety) == ("exact_title_match", "exists")
    assert response.search_degraded is None  # whole: every chunk embedded


def test_every_result_carries_the_spec_fields(corpus: dict[str, str]) -> None:
    response = page_search(scope=trusted_scope(), query="linux partition")
    assert response.results
    for result in response.results:
        row = result.as_dict()
        assert set(row) >= {
            "slug",
            "title",
            "source_id",
            "chunk",
            "score",
            "similarity",
            "evidence",
            "create_safety",
        }
        assert row["source_id"] == "default" and row["chunk"]
        assert row["create_safety"] in {"exists", "probable", "unknown"}


def test_paraphrase_is_found_through_the_vector_arm(
    corpus: dict[str, str],
) -> None:
    query = "self-replicating malware infecting computers through email for months"
    hybrid = page_search(scope=trusted_scope(), query=query, limit=3)
    top = hybrid.results[0]
    assert top.slug == corpus[KLEZ]
    # The keyword arm ORs the words (issue 26) and may see the page through
    # "email"; the page is first because it is the query's nearest neighbour.
    assert top.similarity is not None
    assert top.similarity == max(r.similarity or 0.0 for r in hybrid.results)


def test_keyword_only_mode_says_search_degraded(
    corpus: dict[str, str], settings
) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    response = page_search(scope=trusted_scope(), query="Eircom NAT VoIP")
    assert response.search_degraded == (
        "vector_search_unavailable: provider none (keyword-only)"
    )
    assert response.results[0].slug == corpus["Eircom aDSL Nat'ing"]
    assert response.results[0].similarity is None


def test_failing_provider_degrades_to_keyword_only(
    corpus: dict[str, str], monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    class Down:
        name, dimensions = "openai:down", 384

        def embed(self, texts: list[str]) -> list[list[float]]:
            raise embeddings.EmbeddingUnavailable("connection refused")

    monkeypatch.setattr(embeddings, "get_provider", lambda: Down())
    response = page_search(scope=trusted_scope(), query="Klez virus")
    assert response.search_degraded.startswith("vector_search_unavailable")
    assert response.results[0].slug == corpus[KLEZ]


def test_search_degraded_names_chunks_still_waiting_for_embeddings(
    corpus: dict[str, str],
) -> None:
    """SPEC §3/§4: a chunk without an embedding is invisible to the vector arm, so
    the answer says how many of the searched chunks are pending."""
    from brain.models import Chunk

    total = Chunk.objects.filter(source_id="default").count()
    pending = Chunk.objects.filter(source_id="default").order_by("pk")[:3]
    Chunk.objects.filter(pk__in=[c.pk for c in pending]).update(embedding=None)
    response = page_search(scope=trusted_scope(), query="Klez virus")
    assert response.search_degraded == f"embeddings_pending: 3 of {total}"
    assert response.results  # keyword and vector arms still answer


def test_a_query_against_an_unrequested_source_returns_nothing_from_it(
    source_a: Source, source_b: Source, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        load_corpus(source_b)
        page_add(
            source=source_a,
            slug="notes/plan",
            title="Offsite plan",
            body="We meet in Lisbon.",
            actor=local_caller(),
        )
    for query in ("Klez virus", "Moscow bomber", "Lisbon", "computer worm"):
        response = page_search(scope=trusted_scope("team-a"), query=query)
        assert {r.source_id for r in response.results} <= {"team-a"}
    # Narrowing with ``sources`` cannot widen the scope either.
    response = page_search(
        scope=trusted_scope("team-a"), query="Klez", sources=["team-b"]
    )
    assert response.results == []


def test_a_private_page_never_reaches_a_remote_caller(
    default_source: Source, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        page_add(
            source=default_source,
            slug="notes/salary",
            title="Salary review",
            body="Confidential compensation numbers for the team.",
            visibility="private",
            actor=local_caller(),
        )
    remote = Caller(
        actor="key:x",
        trusted=False,
        scopes=frozenset({"read"}),
        readable_source_ids=frozenset({"default"}),
    )
    for query in ("Salary review", "compensation", "how much are people paid"):
        assert (
            page_search(scope=remote.read_scope(["default"]), query=query).results == []
        )
    trusted = page_search(scope=trusted_scope(), query="Salary review")
    assert trusted.results[0].slug == "notes/salary"


def test_soft_deleted_pages_never_appear(corpus: dict[str, str]) -> None:
    from brain.models import Page

    page = Page.objects.get(slug=corpus["Moscow bomber"])
    page_soft_delete(page=page, actor=local_caller())
    response = page_search(scope=trusted_scope(), query="Moscow bomber")
    assert corpus["Moscow bomber"] not in [r.slug for r in response.results]


def test_alias_query_returns_alias_hit_and_exists(
    default_source: Source, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        page_add(
            source=default_source,
            slug="people/jane-doe",
            title="Jane Doe",
            body="Runs finance.",
            frontmatter={"aliases": ["JD", "jane@example.org"]},
            actor=local_caller(),
        )
    top = page_search(scope=trusted_scope(), query="jane@example.org").results[0]
    assert (top.slug, top.evidence, top.create_safety) == (
        "people/jane-doe",
        "alias_hit",
        "exists",
    )


def test_at_most_two_chunks_per_page(
    default_source: Source, django_capture_on_commit_callbacks
) -> None:
    body = "\n\n".join(
        f"# Part {i}\n\nThe budget for part {i} is approved." for i in range(6)
    )
    with django_capture_on_commit_callbacks(execute=True):
        page_add(
            source=default_source,
            slug="notes/budget",
            title="Budget",
            body=body,
            actor=local_caller(),
        )
    response = page_search(scope=trusted_scope(), query="budget approved", limit=10)
    assert len(response.results) == 2


def test_backlinks_boost_ranking_but_mentions_do_not_count(
    default_source: Source, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        for slug in ("notes/twin-a", "notes/twin-b", "notes/hub-1", "notes/hub-2"):
            page_add(
                source=default_source,
                slug=slug,
                title=slug.split("/")[1],
                body="Quarterly sourdough baking schedule.",
                actor=local_caller(),
            )
    from brain.models import Page

    pages = {p.slug: p for p in Page.objects.all()}
    related = RelationType.objects.get(name="related_to")
    mentions = RelationType.objects.get(name="mentions")
    Relation.objects.create(
        source=default_source,
        from_page=pages["notes/hub-1"],
        to_page=pages["notes/twin-b"],
        relation_type=related,
    )
    for hub in ("notes/hub-1", "notes/hub-2"):
        Relation.objects.create(
            source=default_source,
            from_page=pages[hub],
            to_page=pages["notes/twin-a"],
            relation_type=mentions,
        )
    ranked = [
        r.slug
        for r in page_search(scope=trusted_scope(), query="sourdough baking").results
    ]
    assert ranked.index("notes/twin-b") < ranked.index("notes/twin-a")


def test_token_budget_keeps_whole_results_within_the_budget(
    corpus: dict[str, str],
) -> None:
    full = page_search(scope=trusted_scope(), query="linux windows file", limit=10)
    response = page_search(
        scope=trusted_scope(), query="linux windows file", limit=10, budget_tokens=300
    )
    assert response.budget_used is not None and response.budget_used <= 300
    assert response.dropped_count == len(full.results) - len(response.results) > 0
    assert [r.chunk for r in response.results] == [
        r.chunk for r in full.results if r.chunk in {x.chunk for x in response.results}
    ]


def test_types_filter_keeps_only_those_types(
    default_source: Source, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        page_add(
            source=default_source,
            slug="people/ann",
            title="Ann",
            body="Likes kayaks.",
            actor=local_caller(),
        )
        page_add(
            source=default_source,
            slug="notes/kayak",
            title="Kayak",
            body="Kayaks.",
            actor=local_caller(),
        )
    response = page_search(scope=trusted_scope(), query="kayaks", types=["person"])
    assert [r.slug for r in response.results] == ["people/ann"]


def test_blank_query_is_refused(default_source: Source) -> None:
    with pytest.raises(InvalidParams, match="empty"):
        page_search(scope=trusted_scope(), query="   ")


def test_a_page_whose_embedding_is_pending_is_ranked_by_its_keyword_evidence(
    corpus: dict[str, str],
    default_source: Source,
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    """A page just written has no embedding until the embed job runs; the vector arm
    has not judged it, so it must not rank as if it were unrelated: the one page
    holding every word of the query comes first, ahead of embedded pages that hold
    one of them (newcomer check: a note ranked 5th for its own title)."""
    from brain.models import Chunk

    with django_capture_on_commit_callbacks(execute=True):
        note = page_add(
            source=default_source,
            slug="notes/walrus",
            title="Quarterly walrus inventory",
            body="The walrus inventory for the quarter is done: 14 walruses counted.",
            actor=local_caller(),
        )
    Chunk.objects.filter(page__slug="notes/walrus").update(embedding=None)
    for n in range(4):
        with django_capture_on_commit_callbacks(execute=True):
            page_add(
                source=default_source,
                slug=f"notes/chairs-{n}",
                title=f"Inventory report {n}",
                body=f"Inventory of office chairs, floor {n}: all present.",
                actor=local_caller(),
            )

    # The other pages are as close to the query as a vector can be.
    query_vector = embeddings.get_provider().embed(["walrus inventory"])[0]
    Chunk.objects.filter(page__slug__startswith="notes/chairs-").update(
        embedding=query_vector
    )

    response = page_search(scope=trusted_scope(), query="walrus inventory")

    assert response.results[0].slug == "notes/walrus", note
