"""Memory verbs v1 over HTTP, beyond the reference cases (SPEC §4; digest §7): exact
values the cases only type-check (string ids, null echoes of omitted inputs, fields
absent unless asked for, budget arithmetic, since normalisation, card counts), with a
remote (untrusted) key. The reference cases themselves run on every transport in
``tests/mcp/test_conformance.py``."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.brain.conftest import add_page

pytestmark = pytest.mark.django_db

MARKER = "m7q2"
ERROR_CODES = {
    "invalid_params",
    "provenance_required",
    "not_found",
    "scope_denied",
    "unavailable",
    "budget_unsatisfiable",
    "internal",
}
FACT_KINDS = {"event", "preference", "commitment", "belief", "fact"}
EVIDENCE = {
    "alias_hit",
    "exact_title_match",
    "high_vector_match",
    "keyword_exact",
    "weak_semantic",
}
CREATE_SAFETY = {"exists", "probable", "unknown"}
ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


@pytest.fixture
def world(make_key, source_a):  # type: ignore[no-untyped-def]
    """A remote key on source A and the seeded entity ``people/conformance-<marker>``."""
    page = add_page(
        source_a,
        title=f"Conformance {MARKER}",
        slug=f"people/conformance-{MARKER}",
        body=f"Conformance {MARKER} is the seeded entity.",
    )
    return {"key": make_key(source_a).plaintext, "slug": page.slug}


def assert_error(
    status: int, body: dict[str, Any], code: str, *, suggestion: bool = True
) -> None:
    assert status >= 400
    assert set(body) == {"error", "message", "suggestion", "detail", "protocol_version"}
    assert body["error"] == code and body["error"] in ERROR_CODES
    assert body["protocol_version"] == 1
    assert isinstance(body["detail"], str)  # SPEC §4: detail is a string
    if suggestion:
        assert body["suggestion"].strip()


def remember(verb, world, **params: Any) -> tuple[int, dict[str, Any]]:  # type: ignore[no-untyped-def]
    body = {
        "fact": f"Conformance {MARKER} likes green tea",
        "provenance": "conformance run",
        "entity": world["slug"],
        "kind": "fact",
        **params,
    }
    return verb(world["key"], "remember", body)


def test_case_02_remember_without_provenance_is_invalid_params(verb, world) -> None:  # type: ignore[no-untyped-def]
    status, body = verb(
        world["key"], "remember", {"fact": "x", "entity": world["slug"]}
    )
    assert_error(status, body, "invalid_params", suggestion=False)


def test_case_02_blank_provenance_is_provenance_required_with_suggestion(
    verb, world
) -> None:  # type: ignore[no-untyped-def]
    status, body = remember(verb, world, provenance="   ")
    assert_error(status, body, "provenance_required")


def test_case_03_iso_duration_ttl_is_refused_with_a_30d_suggestion(verb, world) -> None:  # type: ignore[no-untyped-def]
    status, body = remember(verb, world, ttl="P30D")
    assert_error(status, body, "invalid_params")
    assert "30d" in body["suggestion"]


def test_case_04_remember_returns_string_id_status_and_null_echoes(verb, world) -> None:  # type: ignore[no-untyped-def]
    status, body = remember(verb, world)
    assert status == 200
    assert isinstance(body["id"], str) and body["id"].isdigit()
    assert body["status"] in {"inserted", "duplicate", "superseded"}
    assert body["protocol_version"] == 1
    for key in ("id", "status", "status_text", "entity_slug", "valid_until"):
        assert key in body
    assert body["entity_slug"] == world["slug"]
    assert body["valid_until"] is None  # no ttl given: echoed as null


def test_case_05_ttl_30d_returns_valid_until_as_iso_string(verb, world) -> None:  # type: ignore[no-untyped-def]
    status, body = remember(verb, world, fact="Conformance ttl fact", ttl="30d")
    assert status == 200
    assert isinstance(body["valid_until"], str) and ISO.match(body["valid_until"])


def test_case_06_private_commitment_never_reaches_a_remote_card(verb, world) -> None:  # type: ignore[no-untyped-def]
    status, _ = remember(
        verb,
        world,
        fact="PRIVATE-SENTINEL promise to call back",
        kind="commitment",
        visibility="private",
    )
    assert status == 200
    status, body = verb(world["key"], "entity", {"name": world["slug"]})
    assert status == 200 and body["found"] is True
    assert "PRIVATE-SENTINEL" not in str(body["card"]["open_threads"])
    assert body["card"]["active_fact_count"] == 0


def test_case_07_recall_by_entity_returns_string_fact_ids(verb, world) -> None:  # type: ignore[no-untyped-def]
    remember(verb, world)
    status, body = verb(world["key"], "recall", {"entity": world["slug"]})
    assert status == 200 and body["total"] >= 1
    fact = body["facts"][0]
    assert isinstance(fact["id"], int) and fact["fact_id"] == str(fact["id"])
    assert isinstance(fact["provenance"], str) and fact["kind"] in FACT_KINDS
    for key in ("fact", "entity_slug", "valid_until", "visibility"):
        assert key in fact


def test_case_08_recall_budget_echo_and_arithmetic(verb, world) -> None:  # type: ignore[no-untyped-def]
    remember(verb, world)
    status, body = verb(
        world["key"], "recall", {"entity": world["slug"], "budget_tokens": 10000}
    )
    assert status == 200 and body["total"] >= 1
    assert body["budget_tokens"] == 10000
    assert 0 <= body["budget_used"] <= 10000
    assert body["dropped_count"] == 0  # everything fits in 10,000 tokens
    assert body["budget_used"] > 0 and body["total"] == len(body["facts"]) >= 1


def test_case_09_budget_smaller_than_first_item_drops_everything(verb, world) -> None:  # type: ignore[no-untyped-def]
    remember(verb, world)
    status, body = verb(
        world["key"], "recall", {"entity": world["slug"], "budget_tokens": 1}
    )
    assert status == 200
    assert body["total"] == 0 and body["facts"] == [] and body["results"] == []
    assert body["dropped_count"] >= 1 and body["budget_used"] == 0


def test_case_10_recall_query_returns_results_with_frozen_enums(verb, world) -> None:  # type: ignore[no-untyped-def]
    status, body = verb(
        world["key"],
        "recall",
        {"query": f"conformance {MARKER}", "budget_tokens": 8000},
    )
    assert status == 200 and isinstance(body["results"], list)
    assert world["slug"] in {r["slug"] for r in body["results"]}
    for result in body["results"]:
        for key in ("slug", "title", "evidence", "create_safety", "provenance"):
            assert key in result
        assert (
            result["evidence"] in EVIDENCE and result["create_safety"] in CREATE_SAFETY
        )
        assert isinstance(result["provenance"], str)


def test_case_11_entity_card_has_every_schema_field(verb, world, source_a) -> None:  # type: ignore[no-untyped-def]
    # Something in every list the card shows: a commitment fact (an open thread), a
    # typed link from a colleague (an incoming edge and a backlink) and a mention
    # (neither an edge nor a backlink, SPEC §2.3).
    remember(verb, world, kind="commitment")
    add_page(
        source_a,
        title=f"Colleague {MARKER}",
        relations=[{"type": "related_to", "to_slug": world["slug"]}],
    )
    add_page(
        source_a,
        title=f"Minutes {MARKER}",
        type_name="note",
        relations=[{"type": "mentions", "to_slug": world["slug"]}],
    )
    status, body = verb(world["key"], "entity", {"name": world["slug"]})
    assert status == 200
    assert {"protocol_version", "found", "latency_ms"} <= set(body)
    assert body["found"] is True and body["protocol_version"] == 1
    card = body["card"]
    assert card["entity"]["slug"] == world["slug"]
    assert set(card["entity"]) == {"slug", "title", "type"}
    assert set(card["last_touched"]) == {
        "updated_at",
        "last_retrieved_at",
        "last_timeline_date",
    }
    assert isinstance(card["aka"], list) and isinstance(card["summary"], str)
    assert card["backlink_count"] == 1 and card["active_fact_count"] == 1
    assert [t["kind"] for t in card["open_threads"]] == ["commitment"]
    assert [(e["direction"], e["type"]) for e in card["edges"]] == [
        ("in", "related_to")
    ]
    assert isinstance(body["latency_ms"], int)


def test_case_12_entity_miss_is_found_false_with_suggestions_array(verb, world) -> None:  # type: ignore[no-untyped-def]
    status, body = verb(world["key"], "entity", {"name": f"Conformence {MARKER}x"})
    assert status == 200
    assert body["found"] is False and "card" not in body  # a miss has no card key
    assert [s["slug"] for s in body["suggestions"]] == [world["slug"]]
    for suggestion in body["suggestions"]:
        assert {"slug", "title", "create_safety"} <= set(suggestion)
    status, body = verb(world["key"], "entity", {"name": "zzqxv-nothing-like-it"})
    assert body["found"] is False and body["suggestions"] == []


def test_case_13_forget_is_idempotent_and_unknown_ids_are_not_found(
    verb, world
) -> None:  # type: ignore[no-untyped-def]
    _, made = remember(verb, world, fact="Conformance ttl fact", ttl="30d")
    status, body = verb(
        world["key"], "forget", {"id": made["id"], "reason": "conformance"}
    )
    assert status == 200
    assert body == {
        "protocol_version": 1,
        "id": made["id"],
        "expired": True,
        "reason": "conformance",
    }
    status, body = verb(
        world["key"], "forget", {"id": made["id"], "reason": "conformance"}
    )
    assert status == 200 and body["expired"] is False
    status, body = verb(world["key"], "forget", {"id": "999999999"})
    assert_error(status, body, "not_found")


def test_case_14_synthesize_without_llm_is_unavailable(verb, world) -> None:  # type: ignore[no-untyped-def]
    status, body = verb(
        world["key"], "synthesize", {"question": "What is conformance?"}
    )
    assert_error(status, body, "unavailable")


def test_case_15_context_pack_of_unknown_entity_is_schema_valid_success(
    verb, world
) -> None:  # type: ignore[no-untyped-def]
    status, body = verb(
        world["key"],
        "context_pack",
        {"entities": "<nonexistent>", "budget_tokens": 500},
    )
    assert status == 200 and body["protocol_version"] == 1
    assert body["cards"] == [] and body["open_threads"] == [] and body["facts"] == []
    assert body["entities"] == ["<nonexistent>"] and body["missing"] == [
        "<nonexistent>"
    ]


def test_case_15_context_pack_cards_carry_required_fields(verb, world) -> None:  # type: ignore[no-untyped-def]
    status, body = verb(world["key"], "context_pack", {"entities": world["slug"]})
    assert status == 200
    assert {"slug", "title", "summary", "open_threads"} <= set(body["cards"][0])


def test_case_16_delta_echoes_since_normalised_to_milliseconds(verb, world) -> None:  # type: ignore[no-untyped-def]
    status, body = verb(
        world["key"], "delta", {"since": "1970-01-01T00:00:00Z", "budget_tokens": 500}
    )
    assert status == 200 and body["since"] == "1970-01-01T00:00:00.000Z"


def test_delta_threads_restate_commitments_and_page_changes(verb, world) -> None:  # type: ignore[no-untyped-def]
    """SPEC §4 delta ``threads: [{kind, text, date}]`` (the card's thread shape)."""
    remember(verb, world, kind="commitment", fact="Conformance will send the deck")
    remember(verb, world, fact="Conformance likes green tea")
    _, body = verb(world["key"], "delta", {"since": "1970-01-01T00:00:00Z"})
    threads = [(t["kind"], t["text"]) for t in body["threads"]]
    assert threads == [
        ("recent_event", f"Conformance {MARKER}: created"),
        ("commitment", "Conformance will send the deck"),
    ]
    assert all(ISO.match(t["date"]) for t in body["threads"])


def test_case_17_delta_without_since_or_session_is_invalid_params(verb, world) -> None:  # type: ignore[no-untyped-def]
    status, body = verb(world["key"], "delta", {})
    assert_error(status, body, "invalid_params")


def test_case_18_every_error_is_the_envelope(verb, world) -> None:  # type: ignore[no-untyped-def]
    cases = [
        (
            "remember",
            {"fact": "x", "provenance": "p", "kind": "rumour"},
            "invalid_params",
        ),
        ("recall", {"limit": 0}, "invalid_params"),
        ("delta", {"since": "not a date"}, "invalid_params"),
        ("forget", {"id": "abc"}, "not_found"),
        ("recall", {"source": "team-b"}, "scope_denied"),
    ]
    for name, params, code in cases:
        status, body = verb(world["key"], name, params)
        assert_error(status, body, code)


def test_omitted_optionals_echo_as_null(verb, world) -> None:  # type: ignore[no-untyped-def]
    _, recall = verb(world["key"], "recall", {"entity": world["slug"]})
    for key in ("query", "since", "limit", "session_id"):
        assert recall[key] is None
    # SPEC §4: budget accounting only when a budget is given; search_degraded only
    # when search is not whole (no query here, so no search ran).
    for key in ("budget_tokens", "budget_used", "dropped_count", "search_degraded"):
        assert key not in recall
    _, pack = verb(world["key"], "context_pack", {"entities": world["slug"]})
    assert pack["budget_tokens"] is None and pack["since"] is None
    assert pack["include_private"] is None
    _, forget_body = verb(
        world["key"], "forget", {"id": remember(verb, world)[1]["id"]}
    )
    assert forget_body["reason"] is None


def test_recall_limit_defaults_to_50_and_caps_at_100(verb, world, local) -> None:  # type: ignore[no-untyped-def]
    from brain.models import Fact, Source

    source = Source.objects.get(id="team-a")
    Fact.objects.bulk_create(
        Fact(source=source, text=f"bulk fact {i}", provenance="bulk")
        for i in range(120)
    )
    _, default = verb(world["key"], "recall", {})
    assert len(default["facts"]) == 50
    _, capped = verb(world["key"], "recall", {"limit": 500})
    assert len(capped["facts"]) == 100 and capped["limit"] == 500


def test_every_response_carries_protocol_version_1(verb, world) -> None:  # type: ignore[no-untyped-def]
    made = remember(verb, world)[1]
    bodies = [
        made,
        verb(world["key"], "recall", {"entity": world["slug"]})[1],
        verb(world["key"], "entity", {"name": world["slug"]})[1],
        verb(world["key"], "context_pack", {"entities": world["slug"]})[1],
        verb(world["key"], "delta", {"since": "2000-01-01T00:00:00Z"})[1],
        verb(world["key"], "forget", {"id": made["id"]})[1],
    ]
    assert [b["protocol_version"] for b in bodies] == [1] * len(bodies)
