"""The cross-thread settling passes read "the messages after a moment, outside this
thread" as a suffix of the oldest-first list (loops.pipeline._later_elsewhere)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from loops.message import MailMessage
from loops.pipeline import _later_elsewhere

T0 = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


def test_later_elsewhere_is_the_scan_it_replaced() -> None:
    """Strictly later (a message at the moment itself is not), other threads only,
    oldest first; ties in date keep their order."""
    minutes = [0, 5, 5, 5, 9, 12, 12, 30]
    messages = [
        MailMessage(
            message_id=f"<m{i}@x>",
            thread_id=f"t{i % 3}",
            date=T0 + timedelta(minutes=m),
        )
        for i, m in enumerate(minutes)
    ]
    sent = [m.sent_at for m in messages]
    for moment in [T0 - timedelta(minutes=1)] + [
        T0 + timedelta(minutes=m) for m in (0, 5, 6, 12, 30, 31)
    ]:
        for thread in ("t0", "t1", "t2", "t9"):
            scan = [m for m in messages if m.sent_at > moment and m.thread_id != thread]
            assert _later_elsewhere(messages, sent, moment, thread) == scan
