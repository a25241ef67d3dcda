"""Facts find their slot by meaning (SPEC §2.4, revised turn 3; issue 45).

Every test writes through the real service (``fact_remember``) on the real
database with the packaged embedding model; one test per kind of the dev set
(tests/data/facts_dev/pairs.jsonl), with sentences written apart from it, and the
fallback to the rules when no embedding model is configured.
"""

from __future__ import annotations

import json

import pytest

from brain.access import local_caller
from brain.models import Fact
from brain.services import fact_meaning
from brain.services.facts import FactWrite, fact_remember
from tests.brain.conftest import add_page

pytestmark = pytest.mark.django_db


@pytest.fixture
def wilma(default_source):  # type: ignore[no-untyped-def]
    return add_page(default_source, title="Wilma Ostrander", slug="people/wilma")


def remember(
    text: str, *, entity: str = "Wilma Ostrander", kind: str = "fact"
) -> FactWrite:
    return fact_remember(
        caller=local_caller(),
        text=text,
        provenance="test_fact_meaning",
        entity=entity,
        kind=kind,
    )


def live_texts() -> set[str]:
    return set(
        Fact.objects.filter(expired_at__isnull=True).values_list("text", flat=True)
    )


def assert_supersedes(old: str, new: str, *, kind: str = "fact") -> None:
    first = remember(old, kind=kind)
    second = remember(new, kind=kind)
    assert second.status == "superseded", (old, new)
    assert second.superseded is not None and second.superseded.pk == first.fact.pk
    assert second.superseded.superseded_by_id == second.fact.pk
    assert live_texts() == {new}


def assert_both_live(old: str, new: str, *, kind: str = "fact") -> None:
    remember(old, kind=kind)
    assert remember(new, kind=kind).status == "inserted", (old, new)
    assert live_texts() == {old, new}


def test_spec_2_4_price_restated_in_another_shape_supersedes(wilma) -> None:  # type: ignore[no-untyped-def]
    assert_supersedes(
        "Wilma Ostrander's mobile contract is $28 a month",
        "Wilma Ostrander now pays $32 per month for her mobile contract",
    )


def test_spec_2_4_date_moved_supersedes(wilma) -> None:  # type: ignore[no-untyped-def]
    assert_supersedes(
        "Wilma Ostrander's eye exam is on 9 March",
        "Wilma Ostrander will have the eye exam on 23 March instead",
    )


def test_spec_2_4_paraphrase_is_a_duplicate(wilma) -> None:  # type: ignore[no-untyped-def]
    first = remember("Wilma Ostrander is allergic to cats")
    again = remember("Wilma Ostrander has a cat allergy")
    assert again.status == "duplicate" and again.fact.pk == first.fact.pk
    assert Fact.objects.count() == 1


def test_spec_2_4_leaving_a_role_retires_it(wilma) -> None:  # type: ignore[no-untyped-def]
    assert_supersedes(
        "Wilma Ostrander is the chair of the residents' committee",
        "Wilma Ostrander stepped down as chair of the residents' committee",
    )


def test_spec_2_4_a_switch_replaces_a_preference(wilma) -> None:  # type: ignore[no-untyped-def]
    assert_supersedes(
        "Wilma Ostrander uses Chrome",
        "Wilma Ostrander switched to Firefox last week",
        kind="preference",
    )


def test_spec_2_4_different_subjects_never_supersede(wilma, default_source) -> None:  # type: ignore[no-untyped-def]
    add_page(default_source, title="Hugh Ostrander", slug="people/hugh")
    remember("Wilma Ostrander is the chair of the residents' committee")
    other = remember(
        "Hugh Ostrander stepped down as chair of the residents' committee",
        entity="Hugh Ostrander",
    )
    assert other.status == "inserted"
    assert len(live_texts()) == 2


def test_spec_2_4_different_slots_never_supersede(wilma) -> None:  # type: ignore[no-untyped-def]
    assert_both_live(
        "Wilma Ostrander's mobile contract is $28 a month",
        "Wilma Ostrander's sister pays $40 a month for broadband",
    )


def test_spec_2_4_multi_valued_attributes_stay_live(wilma) -> None:  # type: ignore[no-untyped-def]
    assert_both_live("Wilma Ostrander speaks Italian", "Wilma Ostrander speaks Dutch")


def test_spec_2_4_an_unrelated_fact_sharing_a_word_stays_live(wilma) -> None:  # type: ignore[no-untyped-def]
    assert_both_live(
        "Wilma Ostrander uses Chrome",
        "Wilma Ostrander polished the chrome on her bicycle",
    )


def test_spec_2_4_without_embeddings_the_rules_alone_decide(wilma, settings) -> None:  # type: ignore[no-untyped-def]
    """SPEC §2.4: no embedding model → today's rules, no error (a restated price
    is then a plain insert)."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    remember("Wilma Ostrander's mobile contract is $28 a month")
    second = remember("Wilma Ostrander now pays $32 per month for her mobile contract")
    assert second.status == "inserted"
    assert len(live_texts()) == 2


def test_the_shipped_thresholds_are_versioned_and_fitted_on_the_train_half() -> None:
    data = json.loads(fact_meaning.THRESHOLDS_FILE.read_text(encoding="utf-8"))
    assert data["version"] and "train" in data["fitted_on"]
    limits = fact_meaning.thresholds()
    for value in (limits.duplicate, limits.leave, limits.switch, limits.value_change):
        assert 0.0 < value < 1.0
