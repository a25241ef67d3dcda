"""Structural eligibility for commitment extraction (SPEC §5.3): which threads may
reach an extractor at all. No sender, domain, subject or body matching."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from loops.definitions import (
    in_bulk_category,
    is_calendar_mail,
    is_mine,
    is_substantive,
)
from loops.message import SPAM, TRASH, MailMessage

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence
    from datetime import datetime

    from loops.detectors import Mutes

# Extractors read only threads whose newest message is this close to the newest
# message of the source (SPEC §5.3), so a historical mailbox behaves like a live one.
EXTRACTION_WINDOW = timedelta(days=30)


def revision_key(
    *, extractor: str, source_id: str, thread_id: str, messages: Sequence[MailMessage]
) -> str:
    """Idempotency key per thread revision (SPEC §5.3): extractor, source, thread,
    the newest message's time in ms (0 when none is dated)."""
    newest = max((m.date for m in messages if m.date), default=None)
    stamp = int(newest.timestamp() * 1000) if newest else 0
    return f"{extractor}:{source_id}:{thread_id}:{stamp}"


def extraction_gate(
    messages: Sequence[MailMessage],
    *,
    owner_addresses: Collection[str],
    mutes: Mutes,
    thread_id: str,
    source_newest: datetime,
) -> tuple[bool, str]:
    """``extraction_eligibility``, then the 30-day window: an eligible thread whose
    newest message is undated or older than ``EXTRACTION_WINDOW`` before
    ``source_newest`` is ``(False, "outside_30_day_window")``."""
    eligible, reason = extraction_eligibility(
        messages, owner_addresses=owner_addresses, mutes=mutes, thread_id=thread_id
    )
    newest = max((m.date for m in messages if m.date), default=None)
    if eligible and (newest is None or newest < source_newest - EXTRACTION_WINDOW):
        return False, "outside_30_day_window"
    return eligible, reason


def extraction_eligibility(
    messages: Sequence[MailMessage],
    *,
    owner_addresses: Collection[str],
    mutes: Mutes,
    thread_id: str,
) -> tuple[bool, str]:
    """Return ``(eligible, reason)``; first matching rule wins: spam/trash → no; no
    substantive message → no; muted thread or any muted author → no (before any
    model call); I wrote a substantive message → yes (``owner_participated``); bulk
    category → no; every substantive message has List-Unsubscribe → no; else yes
    (``human_correspondence``)."""
    owners = {a.lower() for a in owner_addresses}
    if not messages:
        return False, "no_substantive_messages"
    if any(label in (SPAM, TRASH) for m in messages for label in m.labels):
        return False, "spam_or_trash"
    subs = [m for m in messages if is_substantive(m)]
    if not subs:
        return False, "no_substantive_messages"
    if mutes.thread_muted(thread_id) or any(
        mutes.sender_muted(m.from_addr) for m in subs if not is_mine(m, owners)
    ):
        return False, "suppressed"
    if any(is_mine(m, owners) and not is_calendar_mail(m) for m in subs):
        return True, "owner_participated"
    if in_bulk_category(messages):
        return False, "bulk_category"
    if all(m.list_unsubscribe for m in subs):
        return False, "list_mail"
    return True, "human_correspondence"
