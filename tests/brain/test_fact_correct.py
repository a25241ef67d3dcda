"""``fact_correct`` (issue 47, SPEC §2.4): a curator's correction supersedes the
fact with a new one and names the corrector; nothing is overwritten in place."""

from __future__ import annotations

import pytest

from brain.access import local_caller
from brain.exceptions import InvalidParams
from brain.models import AuditEvent, Fact
from brain.services.facts import fact_correct, fact_forget, fact_remember

pytestmark = pytest.mark.django_db

CURATOR = local_caller(actor="staff:curator")


def _fact(source, text: str) -> Fact:  # type: ignore[no-untyped-def]
    return fact_remember(
        caller=CURATOR, text=text, provenance="test", source=source, use_llm=False
    ).fact


def test_a_correction_supersedes_the_fact_and_names_the_corrector(default_source):
    old = _fact(default_source, "The offsite budget is 12,000 euros")

    new = fact_correct(
        caller=CURATOR, fact_id=old.pk, text="The offsite budget is 15,000 euros"
    )

    old.refresh_from_db()
    assert new.pk != old.pk and new.expired_at is None
    assert old.text == "The offsite budget is 12,000 euros"
    assert old.superseded_by_id == new.pk
    assert old.expired_reason == "corrected by staff:curator"
    assert new.provenance == f"correction of fact #{old.pk}"
    audit = AuditEvent.objects.get(
        action=AuditEvent.Action.FACT_SUPERSEDED, target_id=str(old.pk)
    )
    assert audit.extra_data["corrected_by"] == "staff:curator"


def test_a_correction_of_an_expired_fact_or_to_the_same_text_is_refused(
    default_source,
):
    fact = _fact(default_source, "Omar prefers tea")
    with pytest.raises(InvalidParams, match="says the same"):
        fact_correct(caller=CURATOR, fact_id=fact.pk, text="omar prefers tea.")
    fact_forget(caller=CURATOR, fact_id=fact.pk, reason="wrong")
    with pytest.raises(InvalidParams, match="no longer live"):
        fact_correct(caller=CURATOR, fact_id=fact.pk, text="Omar prefers coffee")
    assert Fact.objects.count() == 1
