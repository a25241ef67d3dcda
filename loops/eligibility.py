"""Structural eligibility for commitment extraction (SPEC §5.3): which threads may
reach an extractor at all. No sender, domain, subject or body matching."""

from __future__ import annotations

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

    from loops.detectors import Mutes


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
