"""One function per operation, returning the wire dict; HTTP (``interfaces.http``)
and MCP (``interfaces.mcp.tools``) both call these, so both transports answer alike
(SPEC §4). The seven memory verbs are ``brain.services.verbs.verb_*`` (they already
return the wire dict); this module holds the others: page search and page shapes,
open loops and the loop writes, push, whoami and the source list.

Each takes the resolved ``Caller`` first (``interfaces.callers``) and raises
``BrainError`` subclasses, which each transport turns into the SPEC §4 envelope.
"""

from __future__ import annotations

from typing import Any

from brain.access import Caller
from brain.exceptions import PROTOCOL_VERSION, InvalidParams
from brain.hints import unsearched_sources_hint
from brain.models import Page, Source
from brain.search import page_search
from brain.services.pages import WriteResult
from brain.services.push import push_context
from loops.models import LoopStatus, LoopType, OpenLoop
from loops.selectors import loop_list
from loops.services import loop_close, loop_get, loop_mute, loop_unmute
from loops.waiting import loop_view

__all__ = [
    "loop_for_write",
    "op_brain_list_sources",
    "op_loops_close",
    "op_loops_mute",
    "op_loops_unmute",
    "op_open_loops",
    "op_push_context",
    "op_search",
    "op_whoami",
    "page_out",
    "write_out",
]


# --- pages --------------------------------------------------------------------------


def page_out(page: Page) -> dict[str, Any]:
    """The ``PageOut`` wire shape of a page (datetimes as ``datetime``; each
    transport serialises them)."""
    return {
        "slug": page.slug,
        "source_id": page.source_id,
        "type": page.type.name,
        "title": page.title,
        "summary": page.summary,
        "tags": list(page.tags),
        "visibility": page.visibility,
        "updated_at": page.updated_at,
        "frontmatter": page.frontmatter,
        "body": page.body,
        "effective_date": page.effective_date,
        "created_at": page.created_at,
        "content_hash": page.content_hash,
        "index_current": page.indexed_hash == page.content_hash,
        "protocol_version": PROTOCOL_VERSION,
    }


def write_out(result: WriteResult) -> dict[str, Any]:
    """The ``WriteOut`` wire shape of a page write: where it landed, whether content
    and index changed, and the page."""
    page = result.page
    return {
        "slug": page.slug,
        "source_id": page.source_id,
        "created": result.created,
        "changed": result.changed,
        "index_current": result.index_current,
        "operation": result.operation,
        "page": page_out(page),
        "protocol_version": PROTOCOL_VERSION,
    }


def op_search(
    caller: Caller,
    *,
    query: str,
    sources: list[str] | None,
    types: list[str] | None,
    limit: int,
    budget_tokens: int | None,
) -> dict[str, Any]:
    """Hybrid page search (SPEC §3) in the caller's read scope over ``sources`` (None:
    the federated sources it may read and its write source): ``{query, results,
    budget_tokens, budget_used, dropped_count, protocol_version}``, plus
    ``search_degraded`` (the reason) only when search is not whole and ``hint`` only
    when readable sources outside the search also match (``brain.hints``)."""
    response = page_search(
        scope=caller.read_scope(sources),
        query=query,
        limit=limit,
        types=types,
        budget_tokens=budget_tokens,
    )
    out: dict[str, Any] = {
        "query": response.query,
        "results": [r.as_dict() for r in response.results],
        "budget_tokens": response.budget_tokens,
        "budget_used": response.budget_used,
        "dropped_count": response.dropped_count,
        "protocol_version": PROTOCOL_VERSION,
    }
    if response.search_degraded:
        out["search_degraded"] = response.search_degraded
    hint = unsearched_sources_hint(caller=caller, requested=sources, query=query)
    if hint:
        out["hint"] = hint
    return out


# --- loops (SPEC §4, §5): remote callers get redacted loops (§5.5) -------------------


def op_open_loops(
    caller: Caller,
    *,
    status: str = LoopStatus.OPEN,
    loop_type: str | None = None,
    counterparty: str | None = None,
    source: str | None = None,
    limit: int = 50,
) -> dict[str, Any]:
    """Flat list of loops in the caller's readable sources (or ``source``):
    ``{loops, count, redacted, protocol_version}``. Raises ``InvalidParams`` for an
    unknown status or loop type, or ``limit`` outside 1..500."""
    if status not in LoopStatus.values:
        raise InvalidParams(
            f"Unknown status '{status}'.",
            suggestion="Use open, done, dropped or stale.",
            detail={"allowed": list(LoopStatus.values)},
        )
    if loop_type and loop_type not in LoopType.values:
        raise InvalidParams(
            f"Unknown loop_type '{loop_type}'.",
            suggestion=f"Use one of {', '.join(LoopType.values)}.",
            detail={"allowed": list(LoopType.values)},
        )
    if not 1 <= limit <= 500:
        raise InvalidParams("limit must be 1..500.", suggestion="Use limit=50.")
    scope = caller.read_scope([source]) if source else caller.all_readable_scope()
    qs = loop_list(
        scope=scope, status=status, loop_type=loop_type, counterparty=counterparty
    )
    return {
        "loops": [
            loop_view(loop).as_dict(trusted=caller.trusted) for loop in qs[:limit]
        ],
        "count": qs.count(),
        "redacted": not caller.trusted,
        "protocol_version": PROTOCOL_VERSION,
    }


def loop_for_write(caller: Caller, loop_id: str) -> OpenLoop:
    """The loop ``loop_id`` among the caller's readable sources, after checking the
    caller may write its source (a read grant never authorises a write). Raises
    ``NotFound`` or ``ScopeDenied``."""
    readable = (
        None
        if caller.readable_source_ids is None
        else tuple(caller.readable_source_ids)
    )
    loop = loop_get(loop_id=loop_id, source_ids=readable)
    caller.write_source(loop.source_id)
    return loop


def op_loops_close(
    caller: Caller, *, loop_id: str, status: str, note: str | None
) -> dict[str, Any]:
    """Close a loop as done or dropped; expires its commitment fact (SPEC §5.4):
    ``{closed, id, status, fact_expired, reason, protocol_version}``."""
    loop = loop_for_write(caller, loop_id)
    result = loop_close(loop=loop, status=status, actor=caller.actor, note=note or "")
    return {**result, "protocol_version": PROTOCOL_VERSION}


def op_loops_mute(
    caller: Caller, *, kind: str, value: str, source: str | None
) -> dict[str, Any]:
    """Mute a sender or thread in the caller's write source (SPEC §5):
    ``{kind, value, source_id, created, protocol_version}``."""
    src = caller.write_source(source)
    row, created = loop_mute(source=src, kind=kind, value=value, actor=caller.actor)
    return {
        "kind": row.kind,
        "value": row.value,
        "source_id": src.id,
        "created": created,
        "protocol_version": PROTOCOL_VERSION,
    }


def op_loops_unmute(
    caller: Caller, *, kind: str, value: str, source: str | None
) -> dict[str, Any]:
    """Remove a mute: ``{kind, value, source_id, removed, protocol_version}``;
    ``removed: false`` when there was none (still success)."""
    src = caller.write_source(source)
    removed = loop_unmute(source=src, kind=kind, value=value, actor=caller.actor)
    return {
        "kind": kind,
        "value": value.strip().lower(),
        "source_id": src.id,
        "removed": removed,
        "protocol_version": PROTOCOL_VERSION,
    }


# --- push (SPEC §9) -----------------------------------------------------------------


def op_push_context(
    caller: Caller,
    *,
    turns: list[str | dict[str, str]],
    session_id: str | None,
    source: str | None,
    max_pages: int,
) -> dict[str, Any]:
    """Push context (``brain.services.push.push_context``): the pages the last turns
    need now, with no LLM."""
    return push_context(
        caller=caller,
        turns=turns,
        session_id=session_id,
        source=source,
        max_pages=max_pages,
    )


# --- whoami and sources -------------------------------------------------------------


def op_whoami(caller: Caller) -> dict[str, Any]:
    """The caller: ``{actor, client, trusted, remote, scopes, write_source,
    readable_sources (null = all), protocol_version}``."""
    return {
        "actor": caller.actor,
        "client": caller.client,
        "trusted": caller.trusted,
        "remote": caller.remote,
        "scopes": sorted(caller.scopes),
        "write_source": caller.write_source_id,
        "readable_sources": (
            sorted(caller.readable_source_ids)
            if caller.readable_source_ids is not None
            else None
        ),
        "protocol_version": PROTOCOL_VERSION,
    }


def op_brain_list_sources(caller: Caller) -> dict[str, Any]:
    """The sources the caller may read, with kind, federation and sync state."""
    scope = caller.all_readable_scope()
    sources = Source.objects.filter(id__in=scope.source_ids).order_by("id")
    return {
        "sources": [
            {
                "id": s.id,
                "name": s.name,
                "kind": s.kind,
                "federated": s.federated,
                "writable": s.id == caller.write_source_id and caller.can("write"),
                "last_success_at": (
                    s.last_success_at.isoformat() if s.last_success_at else None
                ),
            }
            for s in sources
        ],
        "protocol_version": PROTOCOL_VERSION,
    }
