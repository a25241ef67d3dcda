"""The ``remember`` verb (SPEC §4)."""

from __future__ import annotations

import logging
from typing import Any

from brain.access import Caller
from brain.exceptions import PROTOCOL_VERSION
from brain.services.entities import (
    iso_ms,
)
from brain.services.facts import fact_remember
from brain.services.verbs.common import check_entity_name

logger = logging.getLogger(__name__)

# --- remember / forget -------------------------------------------------------------


def verb_remember(
    *,
    caller: Caller,
    fact: str | None,
    provenance: str | None,
    entity: str | None = None,
    kind: str | None = None,
    ttl: str | None = None,
    visibility: str | None = None,
    slot: str | None = None,
    value: str | None = None,
) -> dict[str, Any]:
    """remember (SPEC §4, §2.4): store one fact in the caller's write source.

    ``slot``/``value`` (optional, beyond the reference contract) name the attribute
    and value when the caller knows them; else they are read from the text.

    Response ``{id, status, status_text, entity_slug, valid_until, degraded_dedup,
    superseded_id, kind, visibility, warnings, protocol_version}``; ``status`` is
    ``inserted``, ``duplicate`` (the existing id) or ``superseded``. ``warnings``
    (strings) says when ``entity`` named no page the caller may read: the fact is
    then kept under that name (``entity_slug``; recall with it finds the fact), not
    linked to a page. Raises ``InvalidParams``
    (missing provenance, bad ttl such as ``P30D``, bad kind), ``ProvenanceRequired``
    (blank provenance), ``ScopeDenied`` (no write scope).
    """
    check_entity_name(entity)
    written = fact_remember(
        caller=caller,
        text=fact,
        provenance=provenance,
        entity=entity,
        kind=kind,
        ttl=ttl,
        visibility=visibility,
        slot=slot,
        value=value,
    )
    warnings = []
    if entity and entity.strip() and written.fact.entity_id is None:
        warnings.append(
            f"No page answers {entity.strip()!r} in the sources this key reads: the "
            f"fact is kept under the name {written.entity_slug!r} (recall with that "
            "entity finds it), not linked to a page. Check the spelling, or add the "
            "page first (e.g. people/<name>) and remember again."
        )
    return {
        "protocol_version": PROTOCOL_VERSION,
        "id": str(written.fact.pk),
        "status": written.status,
        "status_text": written.status_text,
        "entity_slug": written.entity_slug,
        "valid_until": iso_ms(written.fact.valid_until),
        "degraded_dedup": written.degraded_dedup,
        "superseded_id": str(written.superseded.pk) if written.superseded else None,
        "kind": written.fact.kind,
        "visibility": written.fact.visibility,
        "warnings": warnings,
    }
