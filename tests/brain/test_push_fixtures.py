"""SPEC §9 quality bar on the conversation fixtures (behaviour, not timing).

Replays every fixture (``tests/data/push_fixtures``: dev and held-back sets) through
the real service and asserts failure to push ≤ 0.02, false push ≤ 0.02, precision
≥ 0.97, recall ≥ 0.92 and zero cross-source or private leaks. Latency is measured by
``benchmarks/push.py``, never asserted here.
"""

from __future__ import annotations

import pytest

from benchmarks.push import describe_failures, load_fixtures, meets_bar, run_suite

pytestmark = pytest.mark.django_db


def test_fixture_suite_has_at_least_60_fixtures_in_every_category() -> None:
    fixtures = load_fixtures()
    assert len(fixtures) >= 60
    assert {f["id"] for f in fixtures}.__len__() == len(fixtures)
    categories = {f["category"] for f in fixtures}
    assert {
        "full_name",
        "alias",
        "handle",
        "surname",
        "lower_case",
        "common_word",
        "re_mention",
        "several_people",
        "two_sources",
    } <= categories
    assert any(f["set"] == "holdout" for f in fixtures)


@pytest.mark.parametrize("fixture_set", ["dev", "holdout"])
def test_push_quality_bar_on_fixtures(fixture_set: str) -> None:
    metrics, results = run_suite((fixture_set,))
    assert metrics["should_retrieve_turns"] > 0 and metrics["silence_turns"] > 0
    misses = meets_bar(metrics)
    assert not misses, f"{misses}\n" + "\n".join(describe_failures(results))
