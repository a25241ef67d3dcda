"""``as_of`` as callers type it (SPEC §5.5): ``brain.timestamps.as_of_from_text``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from brain.exceptions import InvalidParams
from brain.timestamps import MIN_AS_OF, as_of_from_text


@pytest.mark.parametrize("text", ["2002-01-01", "20020101", "2002-W01-2"])
def test_a_date_in_any_iso_form_is_the_end_of_that_day(text: str) -> None:
    """The basic form ``20020101`` read as midnight while ``2002-01-01`` read as the
    end of the day: one date, two replays."""
    assert as_of_from_text(text) == datetime(2002, 1, 1, 23, 59, 59, tzinfo=UTC)


def test_a_time_without_offset_is_utc_and_an_offset_is_converted() -> None:
    assert as_of_from_text("2002-01-01T12:00") == datetime(2002, 1, 1, 12, tzinfo=UTC)
    assert as_of_from_text("2002-01-01T12:00-06:00") == datetime(
        2002, 1, 1, 18, tzinfo=UTC
    )


@pytest.mark.parametrize(
    "text", ["0001-01-02", "0001-02-15", "0001-01-02T00:00-01:00", "9999-12-30"]
)
def test_as_of_without_room_for_the_replay_window_is_refused(text: str) -> None:
    """A replay looks back 90 days from ``as_of``: near year 1 that overflowed into
    a 500, and the end of 9999-12-30 is past the last supported timestamp."""
    with pytest.raises(InvalidParams):
        as_of_from_text(text)
    assert as_of_from_text(MIN_AS_OF.isoformat()) == MIN_AS_OF


def test_text_that_is_no_time_is_refused_with_the_forms_it_takes() -> None:
    with pytest.raises(InvalidParams, match="not an ISO 8601 time or date") as err:
        as_of_from_text("last tuesday")
    assert "2001-05-15" in err.value.suggestion
