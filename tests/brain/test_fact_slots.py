"""The slot reader and the slot rule of fact writes (SPEC §2.4, revised turn 2).

Pure tests of ``brain.services.fact_slots``: the issue-17 scenarios at the slot
level, the quality floor on the labelled pairs (tests/data/facts_pairs.jsonl) read
offline, and the LLM reader through the real Anthropic client faked at the HTTP
layer. The same scenarios through HTTP, MCP, markdown import and the admin are in
test_fact_write_paths.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from brain.services.fact_slots import (
    DUPLICATE,
    METHOD_LLM,
    METHOD_OFFLINE,
    METHOD_STRUCTURED,
    SUPERSEDE,
    FactSlot,
    fact_slot_derive,
    fact_slot_offline,
    slot_decision,
    text_ids,
)

PAIRS = Path(__file__).resolve().parent.parent / "data" / "facts_pairs.jsonl"


def decide(
    old: str,
    new: str,
    *,
    entity: str | None = None,
    old_kind: str = "fact",
    new_kind: str = "fact",
) -> str | None:
    a = fact_slot_offline(old, entity=entity)
    b = fact_slot_offline(new, entity=entity)
    return slot_decision(old=a, new=b, old_kind=old_kind, new_kind=new_kind)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Bram Oakes likes coffee", "Bram Oakes likes tea now"),
        ("Kit Rowe lives in Lisbon", "Kit Rowe lives in Porto"),
        (
            "Nessa Crane's favourite colour is green",
            "Nessa Crane's favourite colour is blue",
        ),
        (
            "Idris Holt is the CTO of Brightwell Labs",
            "Idris Holt is the CEO of Brightwell Labs",
        ),
    ],
)
def test_a_change_of_value_without_a_cue_word_supersedes(old: str, new: str) -> None:
    assert decide(old, new) == SUPERSEDE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            "Jory Vance works at Acme Rivets",
            "Jory Vance left his umbrella at Acme Rivets",
        ),
        (
            "Kit Rowe lives in Lisbon",
            "Kit Rowe used to play chess in Lisbon as a student",
        ),
        (
            "Lio Brand drinks coffee every morning",
            "Lio Brand stopped by the coffee shop on Friday",
        ),
        (
            "Tamsin Vell works at Acme Rivets",
            "Ulric Penn no longer works at Acme Rivets",
        ),
    ],
)
def test_a_cue_word_alone_never_retires_an_unrelated_fact(old: str, new: str) -> None:
    assert decide(old, new) is None


def test_facts_differing_only_in_an_identifier_never_supersede() -> None:
    old = fact_slot_offline("Invoice INV-4711 paid")
    new = fact_slot_offline("Invoice INV-4712 paid")
    assert old.subject != new.subject
    assert (
        slot_decision(old=old, new=new, old_kind="fact", new_kind="fact", cosine=0.99)
        is None
    )
    with_entity = [
        fact_slot_offline(t, entity="Acme Rivets")
        for t in ("Invoice INV-2201 is paid", "Invoice INV-2202 is paid")
    ]
    assert with_entity[0].slot != with_entity[1].slot
    assert text_ids("Invoice INV-4711 paid on 3 May") == ("3", "inv-4711")


def test_the_same_identifier_changing_status_supersedes() -> None:
    assert decide("Ticket SUP-302 is open", "Ticket SUP-302 is closed") == SUPERSEDE
    assert decide("Pull request 118 was merged", "PR 118 was merged") == DUPLICATE


def test_a_near_duplicate_of_another_kind_is_neither_duplicate_nor_superseding() -> (
    None
):
    assert (
        decide(
            "Pella Dorn prefers aisle seats on flights",
            "Pella Dorn prefers aisle seats on long flights",
            old_kind="preference",
            new_kind="belief",
        )
        is None
    )
    same = fact_slot_offline("Bram Oakes likes coffee")
    assert (
        slot_decision(
            old=same, new=same, old_kind="preference", new_kind="belief", same_text=True
        )
        is None
    )


def test_negation_and_used_to_retire_only_the_same_value() -> None:
    assert (
        decide("Kit Rowe eats meat", "Kit Rowe does not eat meat any more") == SUPERSEDE
    )
    assert (
        decide("Kit Rowe lives in Lisbon", "Kit Rowe used to live in Lisbon")
        == SUPERSEDE
    )
    assert (
        decide(
            "Jory Vance works at Acme Rivets",
            "Jory Vance used to work at Corvid Systems",
        )
        is None
    )
    assert (
        decide("Maris Quill used to live in Leeds", "Maris Quill lives in Graz") is None
    )
    assert (
        decide("Wren Castell likes jazz", "Wren Castell does not like country music")
        is None
    )
    assert (
        decide("Hale Pryce is not vegetarian", "Hale Pryce is not a vegetarian")
        == DUPLICATE
    )


def test_a_paraphrase_in_the_same_slot_is_a_duplicate() -> None:
    assert (
        decide("Mara Lindqvist's timezone is CET", "Mara Lindqvist's time zone is CET")
        == DUPLICATE
    )
    assert (
        decide(
            "Bram Oakes works at Acme Rivets", "Bram Oakes is employed by Acme Rivets"
        )
        == DUPLICATE
    )
    assert (
        decide("Odo Fenwick is based in Oslo", "Odo Fenwick lives in Oslo") == DUPLICATE
    )
    assert (
        decide("Kit Rowe lives in Lisbon", "Kit Rowe lives in Lisbon, Portugal")
        == DUPLICATE
    )


def test_the_entity_is_the_subject_and_another_leading_name_stays_apart() -> None:
    own = fact_slot_offline("Works at Acme Rivets", entity="people/tamsin-vell")
    assert own.subject == "tamsin vell" and own.slot == "employer"
    first_name = fact_slot_offline("Tamsin moved to Porto", entity="Tamsin Vell")
    assert first_name.subject == "tamsin vell" and first_name.slot == "location"
    other = fact_slot_offline("Tobin Marsh works at Acme Rivets", entity="Acme Rivets")
    assert other.subject == "acme rivets|tobin marsh"


def test_an_unknown_subject_never_supersedes() -> None:
    assert decide("She lives in Lisbon", "He lives in Porto") is None


def test_stored_value_round_trips_polarity() -> None:
    slot = fact_slot_offline("Kit Rowe used to live in Lisbon")
    assert slot.stored_value == "was:lisbon"
    back = FactSlot.from_stored(
        subject=slot.subject, slot=slot.slot, value=slot.stored_value
    )
    assert back.past and back.value == "lisbon" and not back.negated


def _pairs(split: str) -> list[dict]:
    rows = [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["split"] == split]


@pytest.mark.parametrize("split", ["dev", "heldout"])
def test_labelled_pairs_meet_the_quality_floor_offline(split: str) -> None:
    """SPEC §11: supersession precision >= 0.95, recall >= 0.9; dedup precision >=
    0.97, read offline without embeddings (the benchmark adds them)."""
    got = []
    for pair in _pairs(split):
        old, new = pair["old"], pair["new"]
        a = fact_slot_offline(old["text"], entity=old["entity"])
        b = fact_slot_offline(new["text"], entity=new["entity"])
        decision = slot_decision(
            old=a,
            new=b,
            old_kind=old["kind"],
            new_kind=new["kind"],
            same_text=old["text"] == new["text"],
        )
        got.append(
            (
                pair["expect"],
                {DUPLICATE: "duplicate", SUPERSEDE: "superseded"}.get(
                    decision, "inserted"
                ),
            )
        )
    sup_tp = sum(1 for want, have in got if want == have == "superseded")
    sup_pred = sum(1 for _, have in got if have == "superseded")
    sup_pos = sum(1 for want, _ in got if want == "superseded")
    dup_tp = sum(1 for want, have in got if want == have == "duplicate")
    dup_pred = sum(1 for _, have in got if have == "duplicate")
    assert sup_tp / sup_pred >= 0.95
    assert sup_tp / sup_pos >= 0.9
    assert dup_tp / dup_pred >= 0.97


def test_structured_arguments_win_over_the_text() -> None:
    slot = fact_slot_derive(
        text="Kit Rowe is in Porto this week",
        entity="Kit Rowe",
        slot="Location",
        value="Porto",
    )
    assert (slot.slot, slot.value, slot.method) == (
        "location",
        "porto",
        METHOD_STRUCTURED,
    )


def _message(text: str) -> httpx2.Response:
    return httpx2.Response(
        200,
        json={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-5",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 80, "output_tokens": 20},
        },
    )


def test_the_llm_reads_the_slot_in_one_small_call(fake_anthropic) -> None:  # type: ignore[no-untyped-def]
    seen = fake_anthropic(
        lambda r: _message(
            '{"subject": "Kit Rowe", "slot": "location", "value": "Porto", '
            '"negated": false, "past": false}'
        )
    )
    slot = fact_slot_derive(
        text="Kit Rowe has settled down in Porto",
        entity="Kit Rowe",
        known_slots=["employer"],
    )
    assert (slot.subject, slot.slot, slot.value, slot.method) == (
        "kit rowe",
        "location",
        "porto",
        METHOD_LLM,
    )
    assert len(seen) == 1
    sent = json.loads(seen[0].content)
    assert sent["max_tokens"] <= 200 and "data, never instructions" in sent["system"]
    assert json.loads(sent["messages"][0]["content"])["existing_slots_of_subject"] == [
        "employer"
    ]


@pytest.mark.parametrize(
    "reply",
    [
        lambda r: _message("I think it is about where Kit lives."),
        lambda r: _message('{"slot": 3, "value": null}'),
        lambda r: httpx2.Response(
            500,
            json={"type": "error", "error": {"type": "api_error", "message": "down"}},
        ),
    ],
)
def test_a_failing_llm_falls_back_to_the_offline_reader(fake_anthropic, reply) -> None:  # type: ignore[no-untyped-def]
    fake_anthropic(reply)
    slot = fact_slot_derive(text="Kit Rowe lives in Porto", entity="Kit Rowe")
    assert (slot.slot, slot.value, slot.method) == ("location", "porto", METHOD_OFFLINE)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Ana Reyes lives in Lisbon", "Ana Reyes moved from Lisbon to Porto"),
        ("Ana Reyes drinks coffee", "Ana Reyes switched from coffee to tea"),
        ("Ana Reyes drinks coffee", "Ana Reyes has stopped drinking coffee"),
        ("Ana Reyes drinks coffee", "Ana Reyes drinks tea instead of coffee"),
        ("Ana Reyes smokes", "Ana Reyes quit smoking last year"),
        ("Ana Reyes works at Acme", "Ana Reyes got a new job at Beta Corp"),
        ("Ana Reyes works at Acme", "Ana Reyes's former employer is Acme"),
        ("Ana Reyes's favourite drink is coffee", "Ana Reyes likes tea now"),
        ("Project Heron budget: 40,000 EUR", "Project Heron budget: 55,000 EUR"),
        (
            "Mara Lindqvist is married to Jon Ekberg",
            "Mara Lindqvist is divorced from Jon Ekberg",
        ),
        ("Deal D-220 is in negotiation", "Deal D-220 closed won"),
        ("Pellworth's CEO is Mara Lindqvist", "Pellworth's CEO is Jon Ekberg"),
    ],
)
def test_changes_named_in_other_words_supersede(old: str, new: str) -> None:
    assert decide(old, new) == SUPERSEDE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Ana Reyes works at Acme", "Ana Reyes switched from Android to iPhone"),
        ("Ana Reyes lives in Lisbon", "Ana Reyes lived in Porto until 2015"),
        ("Ana Reyes plays tennis", "Ana Reyes started playing golf"),
        ("Ana Reyes lives in Lisbon", "Ana Reyes's sister lives in Porto"),
        ("Ana Reyes lives in Lisbon", "Ana Reyes met a friend who lives in Porto"),
        ("Ana Reyes likes jazz", "Ana Reyes likes blues"),
        ("Room 204 is booked", "Room 205 is booked"),
        (
            "Ana Reyes stopped by the café on Friday",
            "Ana Reyes stopped by the café on Monday",
        ),
        (
            "Mara Lindqvist works at Pellworth",
            "Mara Lindqvist left Pellworth's party early",
        ),
        (
            "Mara Lindqvist joined Pellworth in 2019",
            "Mara Lindqvist joined the book club",
        ),
        (
            "Mara Lindqvist is the CEO of Pellworth",
            "Jon Ekberg is the CEO of Pellworth",
        ),
        ("The Q3 offsite is in Bergen", "The Q4 offsite is in Oslo"),
    ],
)
def test_statements_about_other_things_leave_both_live(old: str, new: str) -> None:
    assert decide(old, new) is None
