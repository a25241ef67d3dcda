"""What an unqualified read covers (SPEC §4 recall ``hint``, §8): the federated
sources plus the caller's own write source; matches in other readable sources are
named in a hint, never silently missing."""

from __future__ import annotations

import pytest

from brain.access import local_caller
from brain.hints import unsearched_sources_hint
from tests.brain.conftest import add_page
from tests.factories import SourceFactory

pytestmark = pytest.mark.django_db


def test_a_caller_always_reads_its_own_write_source(make_key, verb, settings) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    notes = SourceFactory(id="harness-notes", federated=False)
    key = make_key(notes).plaintext
    status, made = verb(
        key,
        "remember",
        {"fact": "Odile Fenwick prefers morning calls", "provenance": "user said"},
    )
    assert status == 200
    _, recalled = verb(key, "recall", {"query": "morning calls"})
    assert [f["fact_id"] for f in recalled["facts"]] == [made["id"]]


def test_matches_in_unfederated_readable_sources_are_named_in_a_hint(
    default_source,
) -> None:  # type: ignore[no-untyped-def]
    mailbox = SourceFactory(id="mailbox-x", federated=False)
    add_page(mailbox, title="Odile Fenwick", body="Odile Fenwick runs freight ops.")
    caller = local_caller()
    by_entity = unsearched_sources_hint(
        caller=caller, requested=None, entity="Odile Fenwick"
    )
    by_query = unsearched_sources_hint(caller=caller, requested=None, query="freight")
    assert by_entity["sources"] == by_query["sources"] == ["mailbox-x"]
    assert (
        "source=['mailbox-x']" in by_entity["text"] and "federate" in by_entity["text"]
    )
    # Asked for explicitly, or nothing matching there: no hint.
    assert (
        unsearched_sources_hint(caller=caller, requested=["mailbox-x"], query="freight")
        is None
    )
    assert unsearched_sources_hint(caller=caller, requested=None, query="zebra") is None
    # Once federated, an unqualified read covers it: no hint.
    mailbox.federated = True
    mailbox.save()
    assert (
        unsearched_sources_hint(caller=caller, requested=None, query="freight") is None
    )
