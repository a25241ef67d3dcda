"""``fact_list_forgotten`` (delta's ``forgotten``, SPEC §4): the expired facts whose
lifetime spans the reader's interval — recorded by ``delivered_before`` and expired
after ``expired_after`` (by ``now``) — read through the ``brain_fact_lifetime`` GiST
index expression, with the same answer at every boundary as the plain comparison."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from brain.access import local_caller
from brain.models import Fact, Source
from brain.selectors_facts import fact_list_forgotten

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _fact(
    source: Source, text: str, created: datetime, expired: datetime | None
) -> int:
    fact = Fact.objects.create(
        source=source, text=text, provenance="test", expired_at=expired
    )
    Fact.objects.filter(pk=fact.pk).update(created_at=created)
    return fact.pk


def _forgotten(held: datetime, checked: datetime, now: datetime) -> list[int]:
    scope = local_caller().read_scope(["default"])
    return [
        f.pk
        for f in fact_list_forgotten(
            scope=scope, delivered_before=held, expired_after=checked, now=now
        )
    ]


@pytest.mark.django_db
def test_forgotten_lists_facts_live_across_the_interval_at_its_boundaries(
    default_source: Source,
) -> None:
    held, checked, now = T0, T0 + 2 * HOUR, T0 + 10 * HOUR
    at_held = _fact(default_source, "recorded exactly at the cursor", held, now - HOUR)
    before = _fact(
        default_source, "recorded before, expired after", held - HOUR, checked + HOUR
    )
    _fact(default_source, "recorded after the cursor", held + HOUR, checked + HOUR)
    _fact(default_source, "expired exactly at the last check", held - HOUR, checked)
    _fact(default_source, "expired in between", held - HOUR, held + HOUR)
    _fact(default_source, "expires after now", held - HOUR, now + HOUR)
    _fact(default_source, "still live", held - HOUR, None)
    assert _forgotten(held, checked, now) == [before, at_held]


@pytest.mark.django_db
def test_forgotten_survives_a_fact_that_expired_before_it_was_recorded(
    default_source: Source,
) -> None:
    """An imported fact that had already lapsed (expired_at < created_at) is an empty
    lifetime, not an error, and is never reported."""
    _fact(default_source, "lapsed on import", T0 + HOUR, T0 - HOUR)
    kept = _fact(default_source, "genuinely forgotten", T0 - HOUR, T0 + 3 * HOUR)
    assert _forgotten(T0, T0, T0 + 5 * HOUR) == [kept]


@pytest.mark.django_db
def test_forgotten_with_a_cursor_newer_than_the_last_check(
    default_source: Source,
) -> None:
    """A cursor ahead of the reader's last check (an item stamped in the future) takes
    the plain comparison and gives the same answer."""
    held, checked, now = T0 + 4 * HOUR, T0, T0 + 10 * HOUR
    spans = _fact(default_source, "recorded by the cursor", T0 + HOUR, T0 + 2 * HOUR)
    _fact(default_source, "expired before the check", T0 - 2 * HOUR, T0 - HOUR)
    assert _forgotten(held, checked, now) == [spans]
