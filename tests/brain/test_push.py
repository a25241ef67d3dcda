"""SPEC §9 push context: each rule by name, through ``brain.services.push``."""

from __future__ import annotations

import pytest
from django.utils import timezone

from brain.access import Caller, local_caller
from brain.exceptions import InvalidParams, ScopeDenied
from brain.models import Page, PushEvent, Source, Visibility
from brain.services.push import page_confidence, page_synopsis, push_context
from tests.factories import AliasFactory, PageFactory, SourceFactory, page_type

pytestmark = pytest.mark.django_db


def make_page(
    source: Source,
    title: str,
    *aliases: str,
    kind: str = "person",
    slug: str | None = None,
    **extra: object,
) -> Page:
    """A page of ``kind`` with the given aliases (already normalised)."""
    prefix = {"person": "people", "company": "companies", "project": "projects"}.get(
        kind, "notes"
    )
    page = PageFactory(
        source=source,
        type=page_type(kind),
        title=title,
        slug=slug or f"{prefix}/{title.lower().replace(' ', '-')}",
        **extra,
    )
    for alias in aliases:
        AliasFactory(page=page, source=source, alias=alias)
    return page


def slugs(result: dict) -> list[str]:
    return [p["slug"] for p in result["pages"]]


def reasons(result: dict) -> dict[str, str]:
    return {s["mention"]: s["reason"] for s in result["skipped"]}


@pytest.fixture
def cast(default_source: Source) -> dict[str, Page]:
    return {
        "sarah": make_page(
            default_source, "Sarah Chen", "sarah", "@schen", summary="Partnerships."
        ),
        "priya": make_page(default_source, "Priya Raman", "priya"),
        "will": make_page(default_source, "Will Turner", "will"),
        "globex": make_page(default_source, "Globex", kind="company"),
    }


# --- Arms and confidences ---------------------------------------------------------------


def test_resolution_confidence_per_arm(local: Caller, cast: dict[str, Page]) -> None:
    """alias 0.9, exact title 0.8, surname 0.72 as base confidences; a pushed page is
    always mentioned in the newest turn, so it carries the 0.05 salience bonus."""
    for text, arm, confidence in (
        ("Ask Priya about it.", "alias", 0.95),
        ("Ask Globex about it.", "title", 0.85),
        ("Ask Raman about it.", "surname", 0.77),
    ):
        result = push_context(caller=local, turns=["Morning.", text])
        assert [(p["arm"], p["confidence"]) for p in result["pages"]] == [
            (arm, confidence)
        ]
    assert page_confidence([("alias", 0, "Priya")], newest_turn=1) == (0.9, "alias")
    assert page_confidence([("title", 0, "Globex")], newest_turn=1) == (0.8, "title")
    assert page_confidence([("surname", 0, "Raman")], newest_turn=1) == (
        0.72,
        "surname",
    )


def test_salience_bonus_for_newest_turn_or_two_turns() -> None:
    assert page_confidence([("alias", 0, "Priya")], newest_turn=1)[0] == 0.9
    assert page_confidence([("alias", 1, "Priya")], newest_turn=1)[0] == 0.95
    two_turns = [("alias", 0, "Priya"), ("title", 1, "Priya Raman")]
    assert page_confidence(two_turns, newest_turn=2) == (0.95, "alias")


def test_no_late_push_a_page_only_in_older_turns_stays_silent(
    local: Caller, cast: dict[str, Page]
) -> None:
    """SPEC §9: the older turns give context, never a push of their own."""
    result = push_context(caller=local, turns=["Ask Priya.", "Thanks, sounds good."])
    assert result["pages"] == [] and result["skipped"] == []


def test_over_cap_carry_over_four_entities_then_a_silent_turn(
    local: Caller, default_source: Source
) -> None:
    """Regression (issue 18): four people in turn 1 with the cap of 3; the fourth is
    skipped as over the cap on turn 1 only, and turn 3 (no mention) pushes nothing,
    though turn 1 is still inside the 4-turn window."""
    names = ["Odile Fenwick", "Rasmus Quill", "Yara Baptiste", "Tobias Wren"]
    for name in names:
        make_page(default_source, name)
    turns = [f"Set up a call with {', '.join(names[:3])} and {names[3]}."]
    first = push_context(caller=local, turns=turns, session_id="carry")
    assert len(first["pages"]) == 3
    assert [s["reason"] for s in first["skipped"]] == ["over_cap"]
    (dropped,) = [s["mention"] for s in first["skipped"]]
    turns += ["Done: invitations sent.", "Great, book the big room too."]
    third = push_context(caller=local, turns=turns, session_id="carry")
    assert third["pages"] == [] and third["skipped"] == []
    # Named again, the skipped person is pushed on that turn.
    turns.append(f"Actually, send {dropped} the agenda first.")
    fourth = push_context(caller=local, turns=turns, session_id="carry")
    assert slugs(fourth) == [f"people/{dropped.lower().replace(' ', '-')}"]
    assert PushEvent.objects.filter(session_id="carry").count() == 4


def test_gate_drops_slug_suffix_matches_below_0_7(
    local: Caller, default_source: Source
) -> None:
    """Slug suffix (0.6, +0.05 at most) never reaches the 0.7 gate."""
    make_page(
        default_source, "Q2 board pack", kind="note", slug="notes/quarterly-review"
    )
    result = push_context(caller=local, turns=["Prepare the Quarterly Review agenda."])
    assert result["pages"] == []
    assert reasons(result) == {"Quarterly Review": "below_gate"}


def test_surname_arm_only_when_exactly_one_person_has_it(
    local: Caller, default_source: Source, cast: dict[str, Page]
) -> None:
    # A company whose title ends in the same word does not make the surname ambiguous.
    make_page(default_source, "Chen Holdings", kind="company")
    assert slugs(push_context(caller=local, turns=["Chen sent the draft."])) == [
        "people/sarah-chen"
    ]
    make_page(default_source, "David Chen")
    result = push_context(caller=local, turns=["Chen sent the draft."])
    assert result["pages"] == []
    assert reasons(result) == {"Chen": "ambiguous"}


def test_ambiguity_silence_when_an_alias_names_two_pages(
    local: Caller, default_source: Source
) -> None:
    make_page(default_source, "Samantha Rivera", "sam")
    make_page(default_source, "Samuel Oduya", "sam")
    result = push_context(caller=local, turns=["Ask Sam to book the room."])
    assert result["pages"] == []
    assert reasons(result) == {"Sam": "ambiguous"}


def test_ambiguity_silence_when_two_pages_share_a_title(
    local: Caller, default_source: Source
) -> None:
    make_page(default_source, "Alex Kim", slug="people/alex-kim")
    make_page(default_source, "Alex Kim", slug="people/alex-kim-2")
    result = push_context(caller=local, turns=["Send Alex Kim the contract."])
    assert result["pages"] == []
    assert reasons(result)["Alex Kim"] == "ambiguous"


def test_ambiguity_silence_when_alias_and_title_disagree(
    local: Caller, default_source: Source
) -> None:
    make_page(default_source, "Apple", kind="company")
    make_page(default_source, "Apple Orchard Notes", "apple", kind="note")
    result = push_context(caller=local, turns=["Has Apple replied?"])
    assert result["pages"] == []


def test_longest_match_wins_within_a_run(local: Caller, cast: dict[str, Page]) -> None:
    """'Sarah Chen' is one title mention, not the alias 'Sarah' plus the surname."""
    result = push_context(caller=local, turns=["Email Sarah Chen today."])
    assert [(p["slug"], p["arm"], p["mention"]) for p in result["pages"]] == [
        ("people/sarah-chen", "title", "Sarah Chen")
    ]


def test_partial_name_of_another_person_is_silence(
    local: Caller, cast: dict[str, Page]
) -> None:
    result = push_context(caller=local, turns=["Sarah Johnson from the bank called."])
    assert result["pages"] == []
    assert reasons(result) == {"Sarah": "partial_name"}


# --- Mentions ----------------------------------------------------------------------------


def test_handles_and_email_addresses_resolve_through_aliases(
    local: Caller, default_source: Source, cast: dict[str, Page]
) -> None:
    AliasFactory(page=cast["priya"], source=default_source, alias="priya@lumen.example")
    result = push_context(
        caller=local, turns=["@schen asked; forward it to priya@lumen.example"]
    )
    assert sorted(slugs(result)) == ["people/priya-raman", "people/sarah-chen"]
    assert {p["arm"] for p in result["pages"]} == {"alias"}


def test_lower_case_words_only_through_exact_alias(
    local: Caller, cast: dict[str, Page]
) -> None:
    # 'priya' is an alias; 'globex' is only a title; 'raman' only a surname.
    assert slugs(push_context(caller=local, turns=["did priya reply?"])) == [
        "people/priya-raman"
    ]
    assert push_context(caller=local, turns=["any news from globex?"])["pages"] == []
    assert push_context(caller=local, turns=["raman said yes"])["pages"] == []


def test_lower_case_dictionary_words_never_match_an_alias(
    local: Caller, default_source: Source
) -> None:
    make_page(default_source, "Apple", "apple", kind="company")
    assert push_context(caller=local, turns=["grab me an apple please"])["pages"] == []
    assert slugs(push_context(caller=local, turns=["Has Apple replied?"])) == [
        "companies/apple"
    ]


def test_stopwords_never_count(local: Caller, default_source: Source) -> None:
    make_page(default_source, "This", "this", kind="note", slug="notes/this")
    make_page(default_source, "The", "the", kind="note", slug="notes/the")
    result = push_context(
        caller=local, turns=["This is The plan, and the rest of this is fine."]
    )
    assert result["pages"] == []
    assert result["skipped"] == []


def test_sentence_initial_common_words_are_dropped(
    local: Caller, cast: dict[str, Page]
) -> None:
    """'Will you…' is a question, 'ask Will' is a person."""
    assert (
        push_context(caller=local, turns=["Will you send the agenda?"])["pages"] == []
    )
    assert slugs(push_context(caller=local, turns=["Please ask Will first."])) == [
        "people/will-turner"
    ]


def test_only_the_last_4_turns_are_read(local: Caller, cast: dict[str, Page]) -> None:
    turns = ["Ask Priya.", "ok", "ok", "ok", "ok"]
    assert push_context(caller=local, turns=turns)["pages"] == []
    assert slugs(push_context(caller=local, turns=turns[1:] + ["Ask Priya."])) == [
        "people/priya-raman"
    ]


def test_turns_may_be_role_text_objects(local: Caller, cast: dict[str, Page]) -> None:
    turns = [
        {"role": "assistant", "text": "Anything else?"},
        {"role": "user", "text": "Ask Priya."},
    ]
    assert slugs(push_context(caller=local, turns=turns)) == ["people/priya-raman"]
    turns.append({"role": "assistant", "text": "Sure."})
    assert push_context(caller=local, turns=turns)["pages"] == []


def test_zero_candidates_returns_silence(local: Caller, cast: dict[str, Page]) -> None:
    result = push_context(caller=local, turns=["ok, thanks!"], session_id="s")
    assert result["pages"] == [] and result["skipped"] == []
    assert result["protocol_version"] == 1 and result["session_id"] == "s"


# --- Cap and suppression ------------------------------------------------------------------


def test_default_cap_is_3_pages(local: Caller, default_source: Source) -> None:
    names = ["Ana Lima", "Ben Ode", "Cleo Park", "Dev Rao"]
    for name in names:
        make_page(default_source, name)
    result = push_context(caller=local, turns=[f"Invite {', '.join(names)}."])
    assert len(result["pages"]) == 3
    assert list(reasons(result).values()) == ["over_cap"]


def test_hard_cap_5_pages(local: Caller, default_source: Source) -> None:
    names = [
        "Ana Lima",
        "Ben Ode",
        "Cleo Park",
        "Dev Rao",
        "Eva Moss",
        "Finn Roe",
        "Gus Tan",
    ]
    for name in names:
        make_page(default_source, name)
    result = push_context(
        caller=local, turns=[f"Invite {', '.join(names)}."], max_pages=10
    )
    assert len(result["pages"]) == 5
    assert result["max_pages"] == 5
    assert list(reasons(result).values()) == ["over_cap", "over_cap"]


def test_suppression_per_session(local: Caller, cast: dict[str, Page]) -> None:
    first = push_context(caller=local, turns=["Ask Priya."], session_id="s1")
    again = push_context(
        caller=local, turns=["Ask Priya.", "And Priya again."], session_id="s1"
    )
    other_session = push_context(caller=local, turns=["Ask Priya."], session_id="s2")
    no_session = push_context(caller=local, turns=["Ask Priya."])
    assert slugs(first) == ["people/priya-raman"]
    assert again["pages"] == [] and reasons(again) == {"Priya": "already_pushed"}
    assert slugs(other_session) == ["people/priya-raman"]
    assert slugs(no_session) == ["people/priya-raman"]
    event = PushEvent.objects.get(session_id="s1")
    assert (event.page_id, event.arm, event.confidence, event.client) == (
        cast["priya"].pk,
        "alias",
        0.95,
        "cli",
    )
    assert PushEvent.objects.count() == 2


def test_suppression_is_per_caller(local: Caller, cast: dict[str, Page]) -> None:
    other = local_caller(actor="other-harness")
    push_context(caller=local, turns=["Ask Priya."], session_id="shared")
    assert slugs(
        push_context(caller=other, turns=["Ask Priya."], session_id="shared")
    ) == ["people/priya-raman"]


def test_suppression_applies_before_the_cap(
    local: Caller, cast: dict[str, Page]
) -> None:
    """A page already pushed cannot take the only slot."""
    push_context(caller=local, turns=["Ask Priya."], session_id="s", max_pages=1)
    result = push_context(
        caller=local, turns=["Ask Priya and Sarah Chen."], session_id="s", max_pages=1
    )
    assert slugs(result) == ["people/sarah-chen"]


# --- Scoping (SPEC §8) ------------------------------------------------------------------


def test_source_isolation_nothing_from_an_inactive_source(
    local: Caller, default_source: Source
) -> None:
    team_b = SourceFactory(id="team-b", federated=True)
    personal = SourceFactory(id="personal", federated=False)
    make_page(team_b, "Felix Brandt", "felix")
    make_page(personal, "Lena Fischer", "lena")
    make_page(default_source, "Sarah Chen", "sarah")
    turns = ["Can Felix Brandt, Lena Fischer and Sarah Chen meet?"]
    federated = push_context(caller=local, turns=turns)
    only_b = push_context(caller=local, turns=turns, source="team-b")
    only_personal = push_context(caller=local, turns=turns, source="personal")
    assert sorted(slugs(federated)) == ["people/felix-brandt", "people/sarah-chen"]
    assert [(p["source_id"], p["slug"]) for p in only_b["pages"]] == [
        ("team-b", "people/felix-brandt")
    ]
    assert [(p["source_id"], p["slug"]) for p in only_personal["pages"]] == [
        ("personal", "people/lena-fischer")
    ]


def test_source_isolation_unreadable_source_is_refused(default_source: Source) -> None:
    SourceFactory(id="team-b", federated=True)
    remote = Caller(actor="key:x", readable_source_ids=frozenset({"default"}))
    with pytest.raises(ScopeDenied, match=r"not readable with this key"):
        push_context(caller=remote, turns=["Ask Priya."], source="team-b")


def test_source_isolation_remote_key_reads_only_its_sources(
    default_source: Source,
) -> None:
    team_b = SourceFactory(id="team-b", federated=True)
    make_page(team_b, "Felix Brandt", "felix")
    remote = Caller(actor="key:x", readable_source_ids=frozenset({"default"}))
    assert push_context(caller=remote, turns=["Ask Felix Brandt."])["pages"] == []


def test_private_pages_hidden_from_remote_callers(
    default_source: Source, local: Caller
) -> None:
    make_page(default_source, "Nadia Petrov", "nadia", visibility=Visibility.PRIVATE)
    remote = Caller(actor="key:x", readable_source_ids=frozenset({"default"}))
    turns = ["Schedule the interview with Nadia Petrov.", "did nadia reply?"]
    assert push_context(caller=remote, turns=turns)["pages"] == []
    assert push_context(caller=remote, turns=turns)["skipped"] == []
    assert slugs(push_context(caller=local, turns=turns)) == ["people/nadia-petrov"]


def test_deleted_pages_are_never_pushed(local: Caller, cast: dict[str, Page]) -> None:
    Page.objects.filter(pk=cast["priya"].pk).update(deleted_at=timezone.now())
    assert push_context(caller=local, turns=["Ask Priya Raman."])["pages"] == []


# --- Output -----------------------------------------------------------------------------


def test_pushed_page_shape(local: Caller, cast: dict[str, Page]) -> None:
    page = push_context(caller=local, turns=["Email Sarah Chen."])["pages"][0]
    assert page == {
        "slug": "people/sarah-chen",
        "title": "Sarah Chen",
        "source_id": "default",
        "type": "person",
        "confidence": 0.85,
        "arm": "title",
        "mention": "Sarah Chen",
        "synopsis": "Partnerships.",
        "loops": [],
    }


def test_synopsis_length_is_at_most_160_chars(
    local: Caller, default_source: Source
) -> None:
    long = "Runs partnerships across the northern region and " * 10
    make_page(default_source, "Sarah Chen", summary=long)
    synopsis = push_context(caller=local, turns=["Email Sarah Chen."])["pages"][0][
        "synopsis"
    ]
    assert len(synopsis) <= 160
    assert synopsis.endswith("…")
    assert synopsis.startswith("Runs partnerships across the northern region")


def test_synopsis_from_first_prose_line_of_body() -> None:
    body = (
        "<!-- imported -->\n# Priya Raman\n\n```\nsecret: code\n```\n"
        "- CTO of Lumen Labs.\nMore text.\n"
    )
    assert (
        page_synopsis(summary="", frontmatter_summary=None, body=body) == "Priya Raman"
    )
    body_no_heading = "\n\n```\nnot this\n```\n> CTO of   Lumen Labs.\n"
    assert (
        page_synopsis(summary="", frontmatter_summary=None, body=body_no_heading)
        == "CTO of Lumen Labs."
    )
    assert page_synopsis(
        summary="", frontmatter_summary="From frontmatter.", body="x"
    ) == ("From frontmatter.")


def test_invalid_params_are_refused(local: Caller) -> None:
    with pytest.raises(InvalidParams, match=r"max_pages must be a positive integer"):
        push_context(caller=local, turns=["hi"], max_pages=0)
    with pytest.raises(InvalidParams, match=r"turns must be a list"):
        push_context(caller=local, turns="Ask Priya")  # type: ignore[arg-type]
    with pytest.raises(InvalidParams, match=r"turns\[1\] is neither"):
        push_context(caller=local, turns=["ok", {"role": "user"}])


def test_a_turn_costs_a_handful_of_queries(
    local: Caller, cast: dict[str, Page], django_assert_max_num_queries
) -> None:
    """Scope, one lookup for every candidate, the push log (loops only for people)."""
    turns = [
        "Raman and @schen, then globex and Atlas Holdings.",
        "Sarah Chen, Priya, Will Turner and Globex.",
    ]
    with django_assert_max_num_queries(4):
        result = push_context(caller=local, turns=turns, session_id="q")
    assert len(result["pages"]) == 3


# --- Pages written through the one write path (SPEC §2.3) ---------------------------


def test_title_alias_from_the_write_path_counts_as_the_title_arm(
    local: Caller, default_source: Source, settings
) -> None:
    """``page_write`` stores the title as an alias; that row is the exact-title arm
    (0.8) and never lets a lower-case word through."""
    from brain.services.pages import page_add

    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    page_add(
        source=default_source,
        actor=local,
        title="Globex",
        body="Prospect in logistics; pilot under negotiation.",
        type_name="company",
        frontmatter={"aliases": ["Globex Corporation", "gx-logistics"]},
    )
    titled = push_context(caller=local, turns=["OK.", "Ask Globex."])
    assert [(p["slug"], p["arm"], p["confidence"]) for p in titled["pages"]] == [
        ("companies/globex", "title", 0.85)
    ]
    assert (
        titled["pages"][0]["synopsis"]
        == "Prospect in logistics; pilot under negotiation."
    )
    assert push_context(caller=local, turns=["any news from globex?"])["pages"] == []
    aliased = push_context(caller=local, turns=["did gx-logistics sign?"])
    assert [(p["slug"], p["arm"]) for p in aliased["pages"]] == [
        ("companies/globex", "alias")
    ]


def test_a_pasted_transcript_is_split_into_turns(
    local: Caller, cast: dict[str, Page]
) -> None:
    transcript = "user: Ask Priya.\nassistant: Sure.\nuser: ok\nassistant: ok\nuser: ok"
    assert push_context(caller=local, turns=[transcript])["pages"] == []
    short = "user: Hi.\nassistant: Hello,\nhow can I help?\nuser: Ask Priya."
    assert slugs(push_context(caller=local, turns=[short])) == ["people/priya-raman"]


def test_older_turns_silence_a_partial_name_but_never_push(
    local: Caller, cast: dict[str, Page]
) -> None:
    """An earlier "Sarah Johnson" (someone else) keeps a later bare "Sarah" silent;
    an earlier "Sarah Chen" lets a later "sarah" through."""
    other = push_context(
        caller=local, turns=["Sarah Johnson called.", "Tell Sarah yes."]
    )
    assert other["pages"] == [] and reasons(other) == {"Sarah": "partial_name"}
    same = push_context(caller=local, turns=["Sarah Chen called.", "tell sarah yes"])
    assert slugs(same) == ["people/sarah-chen"]
