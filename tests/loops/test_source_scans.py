"""An import's whole-source reads (``answers_visible``, ``undeliverable``,
``mail_coverage``) are kept
from batch to batch (``loops.selectors.SourceScans``, SPEC §11 ingest rate): each
batch reads only the records added since, and answers what a fresh read of the
whole source answers (SPEC §5.1a), also after a batch that rolled back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from django.db import transaction

from brain.models import RawRecord, Source
from loops.definitions import MailCoverage
from loops.message import MailMessage
from loops.selectors import SourceScans, answers_visible, mail_coverage, undeliverable

if TYPE_CHECKING:
    from collections.abc import Callable

pytestmark = pytest.mark.django_db

OWNER = "me@scans.example"
START = datetime(2024, 3, 1, tzinfo=UTC)


class _RolledBack(Exception):
    """Raised inside a batch's transaction to roll it back on purpose."""


def _add(source: Source, first: int, count: int) -> None:
    """``count`` records from ``first`` on: every third mine, every fifth a
    delivery-failure notice for ``p<n>@x.example``, the rest from others."""
    rows = []
    for n in range(first, first + count):
        if n % 5 == 0:
            sender, to, subject = "mailer-daemon@mx.example", [OWNER], "Undeliverable"
            failed = [f"p{n}@x.example"]
        elif n % 3 == 0:
            sender, to, subject, failed = OWNER, [f"p{n}@x.example"], "Ask", []
        else:
            sender, to, subject, failed = f"p{n}@x.example", [OWNER], "Re: Ask", []
        message = MailMessage(
            message_id=f"<m{n}@x>",
            thread_id=f"t{n}",
            subject=subject,
            from_addr=sender,
            to=to,
            date=START + timedelta(hours=n),
            is_mine=sender == OWNER,
            failed_recipients=failed,
        )
        rows.append(
            RawRecord(
                source=source,
                external_id=f"m{n}",
                kind=RawRecord.Kind.RFC822,
                metadata=message.to_metadata(),
            )
        )
    RawRecord.objects.bulk_create(rows)


def _fresh(
    source: Source,
) -> tuple[bool, dict[str, list[datetime]], MailCoverage]:
    return (
        answers_visible(source_id=source.id, owners=[OWNER]),
        {
            a: sorted(w)
            for a, w in undeliverable(source_id=source.id, owners=[OWNER]).items()
        },
        mail_coverage(source_id=source.id, owners=[OWNER]),
    )


def _kept(
    scans: SourceScans,
) -> tuple[bool, dict[str, list[datetime]], MailCoverage]:
    return (
        scans.answers_visible(),
        {a: sorted(w) for a, w in scans.undeliverable().items()},
        scans.coverage(),
    )


def test_source_scans_answer_as_a_fresh_read_batch_after_batch_and_after_a_rollback(
    django_capture_on_commit_callbacks: Callable[..., object],
) -> None:
    source = Source.objects.create(
        id="scans", kind=Source.Kind.MAILBOX, owner_addresses=[OWNER]
    )
    scans = SourceScans(source_id=source.id)
    _add(source, 0, 30)
    with django_capture_on_commit_callbacks(execute=True):  # type: ignore[attr-defined]
        scans.refresh([OWNER])
    assert _kept(scans) == _fresh(source)
    with django_capture_on_commit_callbacks(execute=True):  # type: ignore[attr-defined]
        with pytest.raises(_RolledBack), transaction.atomic():
            _add(source, 30, 40)
            scans.refresh([OWNER])
            assert _kept(scans) == _fresh(source)
            raise _RolledBack
    # The batch rolled back; written again, its records are read once.
    _add(source, 30, 40)
    with django_capture_on_commit_callbacks(execute=True):  # type: ignore[attr-defined]
        scans.refresh([OWNER])
    assert _kept(scans) == _fresh(source)
    assert scans.answers_visible() is True
    assert len(scans.undeliverable()) == 14
    # A source of nearly only my mail: the answers are no longer visible.
    RawRecord.objects.bulk_create(
        RawRecord(
            source=source,
            external_id=f"mine{n}",
            kind=RawRecord.Kind.RFC822,
            metadata={"from_addr": OWNER, "is_mine": True, "labels": ["SENT"]},
        )
        for n in range(3000)
    )
    with django_capture_on_commit_callbacks(execute=True):  # type: ignore[attr-defined]
        scans.refresh([OWNER])
    assert _kept(scans) == _fresh(source)
    assert scans.answers_visible() is False


def test_mail_coverage_counts_my_mail_and_others_per_utc_day() -> None:
    source = Source.objects.create(
        id="coverage", kind=Source.Kind.MAILBOX, owner_addresses=[OWNER]
    )
    _add(source, 0, 48)  # two days, hourly: n % 3 == 0 mine (n % 5 == 0 a notice)
    coverage = mail_coverage(source_id=source.id, owners=[OWNER])
    assert coverage.days == ("2024-03-01", "2024-03-02")
    mine_day1 = sum(1 for n in range(24) if n % 3 == 0 and n % 5)
    assert coverage.mine[0] == mine_day1 and coverage.others[0] == 24 - mine_day1
    assert coverage.mine[-1] + coverage.others[-1] == 48
    assert coverage.whole is True
