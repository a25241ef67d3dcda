"""Recall by meaning (SPEC §2.4: "Facts carry embeddings; recall(query) ranks facts
by meaning (keyword + vector, like pages), within the caller's scope"; issue 45).

Invented people; the questions were written before the change, as an agent asks
them, without the words of the fact they should find.
"""

from __future__ import annotations

import pytest

from brain.access import local_caller
from brain.models import Source
from brain.services.facts import fact_remember
from brain.services.verbs import verb_recall
from tests.brain.conftest import add_page

pytestmark = pytest.mark.django_db

FACTS = {
    "Luka Petrov": [
        ("Prefers email over phone calls; answers within a day", "preference"),
        ("Free for calls on weekday mornings before 10am", "preference"),
        ("Handles the construction loan draws for the Harbor Point project", "fact"),
        ("Has two cats named Pixel and Rye", "fact"),
    ],
    "Marta Quill": [
        ("Reachable on Signal; never leave her a voicemail", "preference"),
        ("Is the site engineer for the Harbor Point project", "fact"),
        ("Allergic to peanuts", "fact"),
    ],
}

QUESTIONS = [
    ("how should I contact Luka Petrov", "Prefers email over phone calls"),
    ("what's the best way to reach Luka?", "Prefers email over phone calls"),
    ("best time to call Luka Petrov", "Free for calls on weekday mornings"),
    ("when can I phone Luka", "Free for calls on weekday mornings"),
    ("who handles the construction loan draws?", "Handles the construction loan"),
    ("who is in charge of the loan disbursements for Harbor Point", "Handles the"),
    ("does Luka have any pets", "Has two cats"),
    ("how do I get hold of Marta Quill", "Reachable on Signal"),
    ("who is the engineer on site at Harbor Point", "Is the site engineer"),
    ("any food allergies for Marta?", "Allergic to peanuts"),
]


@pytest.fixture
def people(default_source):  # type: ignore[no-untyped-def]
    for name, facts in FACTS.items():
        slug = "people/" + name.lower().replace(" ", "-")
        add_page(default_source, title=name, slug=slug)
        for text, kind in facts:
            fact_remember(
                caller=local_caller(),
                text=text,
                provenance="test_fact_recall_meaning",
                entity=name,
                kind=kind,
            )


def first_fact(question: str) -> str:
    facts = verb_recall(caller=local_caller(), query=question)["facts"]
    return facts[0]["fact"] if facts else ""


@pytest.mark.parametrize(
    ("question", "answer"),
    [QUESTIONS[0], QUESTIONS[4], QUESTIONS[7]],
    ids=["contact", "loan-draws", "get-hold-of"],
)
def test_spec_2_4_recall_ranks_facts_by_meaning(people, question, answer) -> None:  # type: ignore[no-untyped-def]
    """The issue's phrasings that found nothing or the wrong fact."""
    assert first_fact(question).startswith(answer)


def test_spec_2_4_recall_by_meaning_finds_most_paraphrased_questions(people) -> None:  # type: ignore[no-untyped-def]
    """At least 8 of the 10 questions get the right fact first (measured: 8; the
    two misses ask when to call, and the email-over-calls fact comes first)."""
    misses = [q for q, a in QUESTIONS if not first_fact(q).startswith(a)]
    assert len(misses) <= 2, misses


def test_spec_2_4_recall_by_meaning_stays_in_the_callers_scope(people) -> None:  # type: ignore[no-untyped-def]
    """A fact of a source the caller does not read is never a candidate, even by
    meaning."""
    other = Source.objects.create(id="elsewhere", name="Elsewhere")
    fact_remember(
        caller=local_caller(),
        text="Handles the construction loan draws for Quarry Lane",
        provenance="test",
        source=other,
    )
    facts = verb_recall(
        caller=local_caller(), query="who handles the construction loan draws?"
    )["facts"]
    assert all("Quarry Lane" not in f["fact"] for f in facts)


def test_recall_by_meaning_without_embeddings_falls_back_to_keywords(
    people, settings
) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    facts = verb_recall(caller=local_caller(), query="construction loan draws")["facts"]
    assert facts and facts[0]["fact"].startswith("Handles the construction loan")
