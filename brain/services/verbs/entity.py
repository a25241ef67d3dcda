"""The ``entity`` verb (SPEC §4)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from brain.access import Caller
from brain.exceptions import PROTOCOL_VERSION
from brain.hints import unsearched_sources_hint
from brain.services.entities import (
    entity_card,
    entity_resolve,
    entity_suggestions,
    page_type_name,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
from brain.services.verbs.common import _sources, check_entity_name

logger = logging.getLogger(__name__)

# --- entity --------------------------------------------------------------------------


def verb_entity(
    *, caller: Caller, name: str | None, source: str | Sequence[str] | None = None
) -> dict[str, Any]:
    """entity (SPEC §4): resolve ``name`` and return its card.

    Found: ``{found: true, card, arm, suggestions[runners-up, create_safety exists]}``.
    Miss (never an error): ``{found: false, suggestions[≤3 near misses]}`` with no
    ``card`` key, plus a ``hint`` when the name resolves in a readable source the
    read did not cover. Always ``latency_ms``: server time to answer, whole ms.
    A name over ``ENTITY_NAME_MAX_CHARS`` is ``InvalidParams``.
    """
    started = time.perf_counter()
    check_entity_name(name, field="name")
    scope = caller.read_scope(_sources(source))
    resolution = entity_resolve(scope=scope, name=name or "")
    if resolution.page is None:
        card = None
        suggestions = entity_suggestions(scope=scope, name=name or "")
    else:
        card = entity_card(scope=scope, page=resolution.page, touch=True)
        suggestions = [
            {
                "slug": p.slug,
                "title": p.title,
                "type": page_type_name(p),
                "create_safety": "exists",
            }
            for p in resolution.runners_up
        ]
    out: dict[str, Any] = {
        "protocol_version": PROTOCOL_VERSION,
        "name": name,
        "found": card is not None,
        "arm": resolution.arm,
        "suggestions": suggestions,
    }
    if card is not None:
        out["card"] = card
    else:
        hint = unsearched_sources_hint(
            caller=caller, requested=_sources(source), entity=name
        )
        if hint:
            out["hint"] = hint
    out["latency_ms"] = round((time.perf_counter() - started) * 1000)
    return out
