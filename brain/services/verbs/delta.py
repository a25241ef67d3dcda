"""The ``delta`` verb and its session cursors (SPEC §4)."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db.models import Q
from django.utils import timezone

from brain.access import DEFAULT_SOURCE_ID, Caller, ReadScope, scope_queryset
from brain.exceptions import PROTOCOL_VERSION, InvalidParams
from brain.extensions import loop_views
from brain.models import Fact, Page, SessionCursor, Source
from brain.selectors_facts import fact_list_active, fact_list_forgotten
from brain.services.entities import (
    entity_resolve,
    iso_ms,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
from brain.services.verbs.common import (
    DELTA_PAGE_LIMIT,
    EPOCH,
    PACK_ENTITIES_MAX,
    SESSION_IDLE,
    _budget,
    _iso_us,
    _names,
    _pack,
    _sources,
    fact_wire,
    parse_since,
)

logger = logging.getLogger(__name__)

# --- delta -----------------------------------------------------------------------------


def _session_key(caller: Caller) -> tuple[str, str]:
    source_id = caller.write_source_id or DEFAULT_SOURCE_ID
    if not Source.objects.filter(id=source_id).exists():
        source_id = DEFAULT_SOURCE_ID
    client = caller.actor + (f"/{caller.client}" if caller.client else "")
    return source_id, client[:200]


def session_cursor_purge(*, now: datetime | None = None) -> int:
    """Delete delta session cursors idle for more than 7 days (SPEC §4). Returns the
    number removed."""
    now = now or timezone.now()
    deleted, _ = SessionCursor.objects.filter(
        touched_at__lt=now - SESSION_IDLE
    ).delete()
    return deleted


def key_for(prefix: str, pk: int) -> str:
    return f"{prefix}/{pk:012d}"


def after_keyed(ts_field: str, prefix: str, since: datetime, after_key: str) -> Q:
    """Keyset condition ``(ts, key) > (since, after_key)`` for a stream whose key is
    ``<prefix>/<12-digit id>``."""
    mine = prefix + "/"
    if after_key.startswith(mine):
        try:
            last_id = int(after_key[len(mine) :])
        except ValueError:
            last_id = 0
        return Q(**{f"{ts_field}__gt": since}) | Q(
            **{ts_field: since, "pk__gt": last_id}
        )
    if after_key < mine:
        return Q(**{f"{ts_field}__gte": since})
    return Q(**{f"{ts_field}__gt": since})


def _loop_stream(
    *,
    scope: ReadScope,
    since: datetime,
    after_key: str,
    entity_ids: list[int] | None,
    limit: int,
) -> list[tuple[datetime, str, dict[str, Any]]]:
    """Loop changes after the cursor (``loops.brain_views.delta_stream``); ``[]``
    while no app above brain has registered loop views (``brain.extensions``)."""
    views = loop_views()
    if views is None:
        return []
    return views.delta_stream(
        scope=scope,
        since=since,
        after_key=after_key,
        entity_ids=entity_ids,
        limit=limit,
    )


def delta_threads(packed: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The delivered delta items as threads ``{kind, text, date}`` (SPEC §4, the
    card's thread shape), oldest first: commitment facts and loop changes as
    ``commitment`` (loops add ``loop_id, status, due, counterparty``; facts add
    ``fact_id, entity_slug``), page changes as ``recent_event`` ("<title>: created")."""
    threads: list[dict[str, Any]] = []
    for kind, item in packed:
        if kind == "fact" and item["kind"] == Fact.Kind.COMMITMENT:
            threads.append(
                {
                    "kind": "commitment",
                    "text": item["fact"],
                    "date": item["created_at"],
                    "fact_id": item["fact_id"],
                    "entity_slug": item["entity_slug"],
                }
            )
        elif kind == "loop":
            threads.append(
                {
                    "kind": "commitment",
                    "text": item["summary"],
                    "date": item["updated_at"],
                    "loop_id": item["loop_id"],
                    "status": item["status"],
                    "due": item["due"],
                    "counterparty": item["counterparty"],
                }
            )
        elif kind == "page":
            threads.append(
                {
                    "kind": "recent_event",
                    "text": f"{item['title']}: {item['change']}",
                    "date": item["updated_at"],
                    "slug": item["slug"],
                }
            )
    return threads


def verb_delta(
    *,
    caller: Caller,
    since: str | None = None,
    slug: str | None = None,
    session_id: str | None = None,
    entities: str | Sequence[str] | None = None,
    budget_tokens: int | None = None,
    source: str | Sequence[str] | None = None,
) -> dict[str, Any]:
    """delta (SPEC §4): pages changed, facts recorded and loop changes after a cursor,
    oldest first, at most 50 items per call.

    The cursor is ``since`` (ISO; echoed normalised to millisecond UTC) or the session
    cursor of ``session_id``, keyed by (source, client, session) and forgotten after 7
    idle days; a new session starts at the epoch. Keyset ``(updated_at, slug)``:
    ``has_more`` and ``next_cursor{since, slug}`` continue exactly: send both back
    (``since`` and ``slug``; ``slug`` alone is ``InvalidParams``). At-least-once: the
    session cursor advances only to the newest delivered item. ``entities`` (comma
    list) narrows to those pages, their facts and loops. ``forgotten`` lists
    ``{fact_id, at}`` for facts this reader already received (recorded before its
    cursor) that expired since its previous call (or since ``since``): forgotten,
    superseded, or gone with a deleted page. Raises ``InvalidParams`` when neither
    ``since`` nor ``session_id`` is given, or ``session_id`` is over 200 characters.
    ``threads`` restates the delivered items
    as ``{kind, text, date}`` (``delta_threads``).
    """
    if (since is None or not str(since).strip()) and not (session_id or "").strip():
        raise InvalidParams(
            "delta needs 'since' or 'session_id'.",
            suggestion="Send since: '1970-01-01T00:00:00Z' for everything, or a "
            "session_id to let the brain remember where you are.",
            detail={"fields": ["since", "session_id"]},
        )
    longest = SessionCursor._meta.get_field("session_id").max_length or 200
    if session_id and len(session_id) > longest:
        raise InvalidParams(
            f"session_id is {len(session_id)} characters; at most {longest}.",
            suggestion="Send a short, stable id for the conversation, e.g. a UUID.",
            detail={"fields": [{"field": "session_id", "problem": "too long"}]},
        )
    if slug and (since is None or not str(since).strip()):
        raise InvalidParams(
            "delta's 'slug' continues a 'since' cursor; no 'since' was given.",
            suggestion="Send next_cursor back whole: its 'since' and its 'slug'.",
            detail={"fields": ["since", "slug"]},
        )
    budget = _budget(budget_tokens)
    since_at = parse_since(since)
    scope = caller.read_scope(_sources(source))
    now = timezone.now()

    cursor_row: SessionCursor | None = None
    start, after_key = EPOCH, ""
    # What this reader already holds, for ``forgotten``: facts recorded up to
    # ``held_until``, as of ``checked_at`` (a session's previous call, or ``since``).
    held_until: datetime | None = None
    checked_at: datetime | None = None
    session_key = _session_key(caller) if session_id else None
    if session_key is not None:
        cursor_row = SessionCursor.objects.filter(
            source_id=session_key[0], client=session_key[1], session_id=session_id
        ).first()
        if cursor_row is not None and cursor_row.touched_at < now - SESSION_IDLE:
            cursor_row.delete()
            cursor_row = None
        if cursor_row is not None and since_at is None:
            position = cursor_row.position or {}
            start = parse_since(position.get("since")) or EPOCH
            after_key = str(position.get("slug") or "")
            held_until, checked_at = start, cursor_row.touched_at
    if since_at is not None:
        start, after_key = since_at, slug or ""
        held_until, checked_at = since_at, since_at

    entity_ids: list[int] | None = None
    names = _names(entities)
    if names:
        entity_ids = []
        for name in names[:PACK_ENTITIES_MAX]:
            resolution = entity_resolve(scope=scope, name=name)
            if resolution.page is not None:
                entity_ids.append(resolution.page.pk)

    fetch = DELTA_PAGE_LIMIT + 1
    # Keyset (updated_at, slug) in the database's own order; brain_page_delta_keyset.
    # The redundant ``updated_at >= start`` bounds the index scan; the OR alone does not.
    pages_qs = scope_queryset(Page.objects.all(), scope).filter(
        Q(updated_at__gt=start) | Q(updated_at=start, slug__gt=after_key),
        updated_at__gte=start,
    )
    if entity_ids is not None:
        pages_qs = pages_qs.filter(pk__in=entity_ids)
    stream: list[tuple[datetime, str, str, dict[str, Any]]] = []
    for page in pages_qs.select_related("type").order_by("updated_at", "slug")[:fetch]:
        stream.append(
            (
                page.updated_at,
                page.slug,
                "page",
                {
                    "slug": page.slug,
                    "title": page.title,
                    "type": page.type.name,
                    "source_id": page.source_id,
                    "updated_at": iso_ms(page.updated_at),
                    "deleted": page.deleted_at is not None,
                    "change": "deleted"
                    if page.deleted_at
                    else ("created" if page.created_at >= start else "updated"),
                },
            )
        )
    facts_qs = fact_list_active(scope=scope, entity_ids=entity_ids, now=now).filter(
        after_keyed("created_at", "facts", start, after_key), created_at__gte=start
    )
    for fact in facts_qs.order_by("created_at", "pk")[:fetch]:
        stream.append(
            (
                fact.created_at,
                key_for("facts", fact.pk),
                "fact",
                fact_wire(fact, caller=caller),
            )
        )
    for ts, key, item in _loop_stream(
        scope=scope,
        since=start,
        after_key=after_key,
        entity_ids=entity_ids,
        limit=fetch,
    ):
        stream.append((ts, key, "loop", item))

    stream.sort(key=lambda s: (s[0], s[1]))
    window = stream[:DELTA_PAGE_LIMIT]
    packed, used, dropped_in_window = _pack([(k, i) for _, _, k, i in window], budget)
    delivered = window[: len(packed)]
    has_more = len(stream) > len(delivered)
    if delivered:
        last_ts, last_key = delivered[-1][0], delivered[-1][1]
        next_cursor = {"since": _iso_us(last_ts), "slug": last_key}
    else:
        next_cursor = {"since": _iso_us(start), "slug": after_key}

    forgotten = []
    if held_until is not None and checked_at is not None and held_until > EPOCH:
        forgotten = [
            {"fact_id": str(f.pk), "at": iso_ms(f.expired_at)}
            for f in fact_list_forgotten(
                scope=scope,
                delivered_before=held_until,
                expired_after=checked_at,
                now=now,
                entity_ids=entity_ids,
            )
        ]

    if session_key is not None:
        if cursor_row is None:
            SessionCursor.objects.update_or_create(
                source_id=session_key[0],
                client=session_key[1],
                session_id=session_id,
                defaults={"position": next_cursor, "touched_at": now},
            )
        else:
            # At-least-once: advance only past what this call delivered.
            SessionCursor.objects.filter(pk=cursor_row.pk).update(
                position=next_cursor if delivered else cursor_row.position,
                touched_at=now,
            )
    return {
        "protocol_version": PROTOCOL_VERSION,
        "since": iso_ms(since_at) if since_at else None,
        "session_id": session_id,
        "entities": names or None,
        "budget_tokens": budget,
        "pages": [i for k, i in packed if k == "page"],
        "facts": [i for k, i in packed if k == "fact"],
        "loop_events": [i for k, i in packed if k == "loop"],
        "forgotten": forgotten,
        "threads": delta_threads(packed),
        "has_more": has_more,
        "next_cursor": next_cursor,
        "budget_used": used if budget is not None else None,
        "dropped_count": dropped_in_window if budget is not None else None,
    }
