"""One function per operation, returning the wire dict; HTTP (``interfaces.http``)
and MCP (``interfaces.mcp.tools``) both call these, so both transports answer alike
(SPEC §4). The seven memory verbs are ``brain.services.verbs.verb_*`` (they already
return the wire dict); this module holds the others: page search and page shapes,
open loops, the waiting view and the loop writes, push, whoami and the source list.

Each takes the resolved ``Caller`` first (``interfaces.callers``) and raises
``BrainError`` subclasses, which each transport turns into the SPEC §4 envelope.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from brain.access import Caller
from brain.exceptions import PROTOCOL_VERSION, InvalidParams, ScopeDenied
from brain.hints import unsearched_sources_hint
from brain.models import Page, Source
from brain.precedence import slug_holder
from brain.search import page_search
from brain.services.pages import WriteResult, page_revision
from brain.services.push import push_context
from brain.timestamps import as_of_from_text
from loops.models import LoopStatus, LoopType, OpenLoop
from loops.selectors import loop_list
from loops.services import loop_close, loop_get, loop_mute, loop_unmute
from loops.waiting import loop_view, waiting_report

__all__ = [
    "loop_for_write",
    "op_brain_list_sources",
    "op_loops_close",
    "op_loops_mute",
    "op_loops_unmute",
    "op_open_loops",
    "op_push_context",
    "op_search",
    "op_waiting",
    "op_whoami",
    "page_out",
    "write_out",
]


# --- pages --------------------------------------------------------------------------


def page_out(page: Page) -> dict[str, Any]:
    """The ``PageOut`` wire shape of a page (datetimes as ``datetime``; each
    transport serialises them). ``revision`` is what a later write sends back as
    ``base_revision`` (SPEC §4)."""
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
        "revision": page_revision(page),
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
    include_snoozed: bool = False,
) -> dict[str, Any]:
    """Flat list of loops in the caller's readable sources (or ``source``), newest
    activity first (SPEC §4 ``open_loops``, §5.5): ``{loops, count,
    snoozed_left_out, note, redacted, protocol_version}``.

    Every loop carries ``snoozed_until`` (ISO 8601 UTC while a curator's snooze is
    ahead, else null). A snoozed loop stays open but is not offered as open work
    until its date: unless ``include_snoozed``, loops snoozed into the future are
    left out, ``snoozed_left_out`` says how many and ``note`` (null when none) how
    to list them. ``count`` counts the loops listed before ``limit``. Remote
    callers get ``id, loop_type, summary, due_at, snoozed_until`` per loop.
    Raises ``InvalidParams`` for an unknown status or loop type, or ``limit``
    outside 1..500; ``ScopeDenied`` for a ``source`` the caller may not read."""
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
    snoozed = Q(status=LoopStatus.OPEN, snoozed_until__gt=timezone.now())
    counts = qs.aggregate(total=Count("id"), snoozed=Count("id", filter=snoozed))
    left_out = 0 if include_snoozed else counts["snoozed"]
    if left_out:
        qs = qs.exclude(snoozed)
    return {
        "loops": [
            loop_view(loop).as_dict(trusted=caller.trusted) for loop in qs[:limit]
        ],
        "count": counts["total"] - left_out,
        "snoozed_left_out": left_out,
        "note": (
            f"{left_out} snoozed loop(s) left out: a curator parked them until a "
            "later date. Pass include_snoozed=true to list them."
            if left_out
            else None
        ),
        "redacted": not caller.trusted,
        "protocol_version": PROTOCOL_VERSION,
    }


WAITING_TOP_MAX = 50


def op_waiting(
    caller: Caller,
    *,
    source: str | None = None,
    as_of: str | None = None,
    top: int | None = None,
) -> dict[str, Any]:
    """The waiting view (SPEC §5.5: loops grouped by counterparty and ranked, the
    "who is waiting on whom" triage list) in the caller's readable sources (or
    ``source``): ``loops.waiting.waiting_report``'s ``{groups, no_counterparty,
    count, stale, stale_sources, completeness, clean, redacted, as_of, sources,
    warnings, coverage, text?}`` plus ``protocol_version``. ``as_of`` is an ISO 8601 date or
    time (``brain.timestamps.as_of_from_text``: a date means the end of that day,
    UTC) to replay; ``top`` keeps the first 1..50 groups (default: all). Remote
    callers get counts, counterparty, summary and due date only. Raises
    ``InvalidParams`` (bad ``as_of`` or ``top``) or ``ScopeDenied`` (a source the
    caller may not read)."""
    if top is not None and not 1 <= top <= WAITING_TOP_MAX:
        raise InvalidParams(
            f"top must be 1..{WAITING_TOP_MAX}.",
            suggestion="Use top=10, or omit it for every group.",
            detail={"field": "top", "value": top},
        )
    report = waiting_report(
        caller=caller,
        sources=[source] if source else None,
        as_of=as_of_from_text(as_of) if as_of else None,
        top=top,
    )
    return {**report, "protocol_version": PROTOCOL_VERSION}


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
    caller.write_source(loop.source_id, item=f"Loop {loop.pk}")
    return loop


def refuse_update_elsewhere(caller: Caller, *, slug: str, write_source_id: str) -> None:
    """After an update found no page ``slug`` in the write source: when the caller
    may read a live page of that slug in another source, raise ``ScopeDenied`` (403)
    naming that source, instead of the ``not_found`` "add_page to create it"
    (SPEC §8: only a page the caller cannot read answers as missing, and this one
    it can read). Several such pages: the one ``brain.precedence.slug_holder`` picks.
    Returns None when there is no such page."""
    scope = caller.all_readable_scope()
    page = slug_holder(
        Page.objects.filter(
            slug=slug,
            source_id__in=[s for s in scope.source_ids if s != write_source_id],
            visibility__in=scope.visibilities,
            deleted_at__isnull=True,
        )
    )
    if page is None:
        return
    raise ScopeDenied(
        f"Page {slug!r} is in source '{page.source_id}', which this key may read "
        f"but not write (it writes only to '{write_source_id}').",
        suggestion=(
            f"Use a key whose write source is '{page.source_id}' (admin → API "
            f"keys), or keep your note in '{write_source_id}' with add_page and "
            "remember (a fact may name this page as its entity)."
        ),
        detail={
            "slug": slug,
            "source": page.source_id,
            "write_source": write_source_id,
        },
    )


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
    """Mute a sender or thread (SPEC §5): ``{kind, value, source_id, source_ids,
    created, open_loops, note, protocol_version}``.

    ``source`` given: that source only (it must be writable). Omitted: the caller's
    write source plus every other source where that sender (or thread) has open
    loops the caller may read *and* write (a local caller: all of them), so the
    mute lands where their mail is. ``source_ids`` lists where it applied,
    ``open_loops`` counts their open loops per readable source, and ``note`` says
    in words what happened: a mute gates new detection only, so those loops keep
    their state, and sources the caller may not write were not muted.
    """
    primary = caller.write_source(source)
    row, created = loop_mute(source=primary, kind=kind, value=value, actor=caller.actor)
    field = "counterparty_email" if kind == "sender" else "thread_id"
    open_loops = {
        sid: count
        for sid, count in _open_loop_counts(caller, field=field, value=row.value)
    }
    muted = [primary.id]
    if source is None:
        for sid in sorted(open_loops):
            if sid != primary.id and caller.may("write", source_id=sid):
                loop_mute(
                    source=caller.write_source(sid),
                    kind=kind,
                    value=row.value,
                    actor=caller.actor,
                )
                muted.append(sid)
    return {
        "kind": row.kind,
        "value": row.value,
        "source_id": primary.id,
        "source_ids": muted,
        "created": created,
        "open_loops": open_loops,
        "note": _mute_note(kind, row.value, muted, open_loops),
        "protocol_version": PROTOCOL_VERSION,
    }


def _open_loop_counts(
    caller: Caller, *, field: str, value: str
) -> list[tuple[str, int]]:
    """(source id, open loops) of one sender or thread in the caller's readable
    sources."""
    scope = caller.all_readable_scope()
    rows = (
        OpenLoop.objects.filter(
            source_id__in=scope.source_ids, status=LoopStatus.OPEN, **{field: value}
        )
        .values("source_id")
        .annotate(n=Count("id"))
        .order_by("source_id")
    )
    return [(r["source_id"], r["n"]) for r in rows]


def _mute_note(
    kind: str, value: str, muted: list[str], open_loops: dict[str, int]
) -> str:
    """The mute's outcome in words: where it applies, and what it does not do."""
    where = ", ".join(f"'{s}'" for s in muted)
    text = f"Muted {kind} {value} in {where}: new mail there opens no loops for it."
    kept = sum(open_loops.values())
    if kept:
        text += (
            f" A mute gates new detection only: the {kept} open loop(s) it has keep "
            "their state (close them with loops_close)."
        )
    elsewhere = sorted(s for s in open_loops if s not in muted)
    if elsewhere:
        names = ", ".join(f"'{s}'" for s in elsewhere)
        text += (
            f" Not muted in {names}, where it has open loops: this key may not write "
            "there (an admin can mute there, or use a key with that write source)."
        )
    return text


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
