"""Say when an answer is missing what the caller may read (SPEC §4 recall ``hint``).

An unqualified read covers the federated sources plus the caller's own write source
(``Caller.read_scope``). A caller may also read sources that are not federated (an
imported mailbox, until an admin federates it); when something there matches, the
answer carries a ``hint`` naming those sources and how to include them, instead of
an empty brain that says nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection

from brain.access import Caller, ReadScope
from brain.services.entities import entity_resolve
from brain.text import bounded_query

if TYPE_CHECKING:
    from collections.abc import Sequence

# Chunks probed per unsearched source set before giving up (the probe only needs one).
_PROBE_LIMIT = 50

_CHUNK_PROBE_SQL = """
SELECT DISTINCT source_id FROM (
    SELECT source_id FROM brain_chunk
    WHERE source_id = ANY(%(sources)s) AND visibility = ANY(%(visibilities)s)
      AND tsv @@ websearch_to_tsquery(%(lang)s::regconfig, %(q)s)
    LIMIT %(limit)s
) hits
"""


def unsearched_sources_hint(
    *,
    caller: Caller,
    requested: Sequence[str] | None,
    query: str | None = None,
    entity: str | None = None,
) -> dict[str, Any] | None:
    """A ``hint`` when ``query`` or ``entity`` matches in sources the caller may read
    but an unqualified read did not search; None otherwise (also when the caller
    named its sources: then it searched exactly what it asked for).

    ``entity`` is resolved like ``entity()``; ``query`` is probed with the keyword
    arm's full-text match (one bounded index probe). Returns ``{"sources": [ids],
    "text": how to include them}``.
    """
    if requested or not (query or entity):
        return None
    searched = set(caller.read_scope(None).source_ids)
    readable = caller.all_readable_scope()
    other = tuple(s for s in readable.source_ids if s not in searched)
    if not other:
        return None
    scope = ReadScope(source_ids=other, include_private=readable.include_private)
    found: set[str] = set()
    if entity and entity.strip():
        resolution = entity_resolve(scope=scope, name=entity)
        if resolution.page is not None:
            found.add(resolution.page.source_id)
    if query and query.strip():
        with connection.cursor() as cursor:
            cursor.execute(
                _CHUNK_PROBE_SQL,
                {
                    "sources": list(other),
                    "visibilities": list(scope.visibilities),
                    "lang": settings.BRAIN_FTS_LANGUAGE,
                    "q": bounded_query(query),
                    "limit": _PROBE_LIMIT,
                },
            )
            found.update(row[0] for row in cursor.fetchall())
    if not found:
        return None
    ids = sorted(found)
    return {
        "sources": ids,
        "text": (
            f"Matches also exist in {', '.join(ids)}: source(s) you may read that "
            "unqualified searches do not cover (not federated). Pass "
            f"source={ids!r} to include them, or ask an admin to federate them "
            "(admin → Sources → federated)."
        ),
    }
