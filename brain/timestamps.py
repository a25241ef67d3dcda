"""The one range check for timestamp inputs (SPEC §4, §8).

Python's ``datetime`` spans years 1..9999 and PostgreSQL's far more, so a value such
as ``9999-12-31T23:59:59-12:00`` (year 10000 in UTC) would be stored and then break
every later read. Every timestamp a caller sends goes through ``timestamp_in_range``
before anything is written.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time

from brain.exceptions import InvalidParams

# One day inside Python's range on each side, so a value can still be shown in any
# timezone (offsets are at most ±14 h).
MIN_TIMESTAMP = datetime(1, 1, 2, tzinfo=UTC)
MAX_TIMESTAMP = datetime(9999, 12, 30, tzinfo=UTC)
MIN_DATE = MIN_TIMESTAMP.date()
MAX_DATE = MAX_TIMESTAMP.date()


def _refuse(field: str, raw: object) -> InvalidParams:
    return InvalidParams(
        f"'{field}' {raw!s} is outside the supported range "
        f"({MIN_DATE.isoformat()} .. {MAX_DATE.isoformat()}, UTC).",
        suggestion=f"Send '{field}' as a timestamp between years 1 and 9999, "
        "e.g. '2030-01-31T00:00:00Z'.",
        detail={
            "field": field,
            "value": str(raw),
            "min": MIN_TIMESTAMP.isoformat(),
            "max": MAX_TIMESTAMP.isoformat(),
        },
    )


def timestamp_in_range(when: datetime, *, field: str) -> datetime:
    """Return ``when`` as an aware UTC datetime (naive means UTC), or raise
    ``InvalidParams`` when it lies outside ``MIN_TIMESTAMP .. MAX_TIMESTAMP``."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    try:
        utc = when.astimezone(UTC)
    except OverflowError:
        raise _refuse(field, when.isoformat()) from None
    if not MIN_TIMESTAMP <= utc <= MAX_TIMESTAMP:
        raise _refuse(field, when.isoformat())
    return utc


def date_in_range(day: date, *, field: str) -> date:
    """Return ``day`` or raise ``InvalidParams`` outside ``MIN_DATE .. MAX_DATE``."""
    if not MIN_DATE <= day <= MAX_DATE:
        raise _refuse(field, day.isoformat())
    return day


# A replay looks back from ``as_of`` (90 days for a mailbox, SPEC §5.2) and ranks
# against it, so ``as_of`` keeps a year's room above the earliest timestamp.
MIN_AS_OF = datetime(2, 1, 2, tzinfo=UTC)


def as_of_from_text(value: str, *, field: str = "as_of") -> datetime:
    """The replay time a caller typed, as an aware UTC datetime (SPEC §5.5
    ``--as-of``): a date in any ISO 8601 form (``2001-05-15``, ``20010515``,
    ``2001-W20-2``), meaning the end of that day, 23:59:59 UTC; or an ISO 8601 time
    (with an offset or ``Z``; without one it means UTC, as ``timestamp_in_range``
    reads every timestamp). The CLI and the HTTP endpoint read ``as_of`` only
    through this function.

    Raises ``InvalidParams`` for text that is neither, or outside
    ``MIN_AS_OF .. MAX_TIMESTAMP``."""
    text = value.strip()
    try:
        try:
            day = date.fromisoformat(text)
        except ValueError:
            when = datetime.fromisoformat(text)
        else:
            when = datetime.combine(day, time(23, 59, 59), tzinfo=UTC)
    except ValueError:
        raise InvalidParams(
            f"'{field}' {value!r} is not an ISO 8601 time or date.",
            suggestion=f"Send '{field}' as e.g. 2001-05-15T18:00:00+00:00, or a date "
            "2001-05-15 (the end of that day, UTC).",
            detail={"field": field, "value": value},
        ) from None
    when = timestamp_in_range(when, field=field)
    if when < MIN_AS_OF:
        raise InvalidParams(
            f"'{field}' {value!s} is before the earliest replay time "
            f"({MIN_AS_OF.isoformat()}).",
            suggestion=f"Send '{field}' from {MIN_AS_OF.date().isoformat()} on: a "
            "replay looks back 90 days from it.",
            detail={"field": field, "value": value, "min": MIN_AS_OF.isoformat()},
        )
    return when
