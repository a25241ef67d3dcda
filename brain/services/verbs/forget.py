"""The ``forget`` verb (SPEC §4)."""

from __future__ import annotations

import logging
from typing import Any

from brain.access import Caller
from brain.exceptions import PROTOCOL_VERSION
from brain.services.facts import fact_forget

logger = logging.getLogger(__name__)


def verb_forget(
    *,
    caller: Caller,
    id: str | int,
    reason: str | None = None,  # noqa: A002
) -> dict[str, Any]:
    """forget (SPEC §4): expire a fact (never delete). ``{id, expired, reason}``;
    forgetting again returns ``expired: false``. Raises ``NotFound`` for unknown or
    unreadable ids, ``ScopeDenied`` without write access to the fact's source."""
    found, expired = fact_forget(caller=caller, fact_id=id, reason=reason)
    return {
        "protocol_version": PROTOCOL_VERSION,
        "id": str(found.pk),
        "expired": expired,
        "reason": reason,
    }
