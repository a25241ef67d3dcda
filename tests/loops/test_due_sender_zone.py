"""Times in the writer's zone (issue 46): a relative deadline in mail ("by
tomorrow", "by Friday", "end of day") is read on the sender's calendar, from the
offset of the message's Date header, not on UTC's. Real RFC 822 files go through
the mailbox import and the loop pipeline; the due day is the loop's ``due_at``
(23:59:59 in the owner's zone, ``loops.services.due_end_of_day``)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.conf import settings

from brain.models import RawRecord
from connectors.mailbox.sync import mailbox_import
from loops.models import LoopType, OpenLoop
from tests.loops.shapes import JEFF, msg
from tests.loops.test_llm_extractor import extract_loops, reply, user_content

pytestmark = pytest.mark.django_db

ROBIN = "robin@example.org"
DANA = "dana@example.com"


def _ask(folder: Path, n: int, date_header: str, text: str) -> None:
    """A thread: my note to Dana (a day earlier, UTC), then her reply to me asking
    a question with a deadline, dated ``date_header``."""
    (folder / f"{n}a.eml").write_text(
        f"From: Robin Vale <{ROBIN}>\nTo: Dana Okafor <{DANA}>\n"
        f"Subject: Lease question {n}\nDate: {_day_before(date_header)}\n"
        f"Message-ID: <{n}a.zone@example>\n\n"
        "Dana,\n\nThe lease draft is ready on my side.\n\nRobin\n"
    )
    (folder / f"{n}b.eml").write_text(
        f"From: Dana Okafor <{DANA}>\nTo: Robin Vale <{ROBIN}>\n"
        f"Subject: Re: Lease question {n}\nDate: {date_header}\n"
        f"Message-ID: <{n}b.zone@example>\nIn-Reply-To: <{n}a.zone@example>\n"
        f"References: <{n}a.zone@example>\n\n"
        f"Robin,\n\n{text}\n\nDana\n"
    )


def _clock(folder: Path, date_header: str) -> None:
    """A later unrelated message of mine: a mailbox's clock is its newest message,
    and a reply-owed loop opens once its grace has passed on that clock."""
    (folder / "clock.eml").write_text(
        f"From: Robin Vale <{ROBIN}>\nTo: Lee Park <lee@example.net>\n"
        f"Subject: Parking\nDate: {date_header}\nMessage-ID: <clock@example>\n\n"
        "Lee,\n\nThe garage is open again.\n\nRobin\n"
    )


def _day_before(date_header: str) -> str:
    sent = parsedate_to_datetime(date_header)
    return format_datetime((sent - timedelta(days=1)).astimezone(UTC))


def _due(n: int) -> date:
    """The due day of the reply-owed loop of message ``n``'s thread."""
    loop = OpenLoop.objects.get(
        source_id="robin-zones",
        loop_type=LoopType.UNANSWERED_INBOUND,
        summary__contains=f"Lease question {n}",
    )
    assert loop.due_at is not None
    return loop.due_at.astimezone(ZoneInfo(settings.BRAIN_TIME_ZONE)).date()


def _import(folder: Path) -> None:
    report = mailbox_import(source_id="robin-zones", path=folder, owners=[ROBIN])
    assert report.counts.get("lost", 0) == 0


def test_by_tomorrow_sent_thursday_evening_minus_8_is_due_the_senders_friday(
    tmp_path: Path,
) -> None:
    """Thursday 21:30 -08:00 is Friday 05:30 UTC: read in UTC "tomorrow" was
    Saturday."""
    _ask(
        tmp_path,
        1,
        "Thu, 03 Dec 2026 21:30:00 -0800",
        "Can you send me the signed lease by tomorrow?",
    )
    _clock(tmp_path, "Mon, 07 Dec 2026 09:00:00 +0000")
    _import(tmp_path)
    assert _due(1) == date(2026, 12, 4)


def test_by_tomorrow_from_a_plus_9_sender_is_due_the_senders_next_day(
    tmp_path: Path,
) -> None:
    """Thursday 21:30 +09:00 is Thursday in UTC too: Friday. Friday 07:30 +09:00
    is Thursday 22:30 UTC: the sender's tomorrow is Saturday, not Friday."""
    _ask(
        tmp_path,
        1,
        "Thu, 03 Dec 2026 21:30:00 +0900",
        "Can you send me the signed lease by tomorrow?",
    )
    _ask(
        tmp_path,
        2,
        "Fri, 04 Dec 2026 07:30:00 +0900",
        "Can you send me the bank letter by tomorrow?",
    )
    _clock(tmp_path, "Mon, 07 Dec 2026 09:00:00 +0000")
    _import(tmp_path)
    assert _due(1) == date(2026, 12, 4)
    assert _due(2) == date(2026, 12, 5)


def test_deadlines_across_the_dst_change_follow_each_date_headers_offset(
    tmp_path: Path,
) -> None:
    """America/Los_Angeles left daylight time on Sunday 1 November 2026: a message
    of Saturday 31 October 22:30 -07:00 (PDT) and one of Sunday 1 November 22:30
    -08:00 (PST), both after 05:00 UTC of the next day. "end of day" is the
    sender's day, "by tomorrow" the day after it."""
    _ask(
        tmp_path,
        1,
        "Sat, 31 Oct 2026 22:30:00 -0700 (PDT)",
        "Can you send me the signed lease by end of day?",
    )
    _ask(
        tmp_path,
        2,
        "Sun, 01 Nov 2026 22:30:00 -0800 (PST)",
        "Can you send me the bank letter by tomorrow?",
    )
    _clock(tmp_path, "Wed, 04 Nov 2026 09:00:00 +0000")
    _import(tmp_path)
    assert _due(1) == date(2026, 10, 31)
    assert _due(2) == date(2026, 11, 2)


def test_the_llm_extractor_is_shown_each_date_in_its_senders_zone(
    mailbox: Any, store: Any, fake_anthropic: Any
) -> None:
    """The LLM resolves "tomorrow" from the date it is shown: the writer's local
    time with its offset (Thursday 21:30 -08:00), not UTC's Friday 05:30."""
    body = "Phillip,\n\nCan you send me the signed lease by tomorrow?\n\nJeff"
    (message,) = store(
        mailbox,
        [msg(1, at=datetime(2026, 12, 4, 5, 30, tzinfo=UTC), body=body, thread="t-z")],
    )
    RawRecord.objects.filter(pk=message.raw_record_id).update(
        content=f"Date: Thu, 03 Dec 2026 21:30:00 -0800\nFrom: {JEFF}\n\n{body}"
    )
    seen = fake_anthropic(
        lambda request: reply({"commitments": [], "decisions_pending": []})
    )
    extract_loops(mailbox.id, "t-z")
    assert len(seen) == 1
    shown = user_content(seen[0])
    assert "Date: 2026-12-03T21:30:00-08:00" in shown and "05:30" not in shown
