"""The ``delta`` verb and its session cursors (SPEC §4)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
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
    _check_delta_args(since=since, slug=slug, session_id=session_id)
    budget = _budget(budget_tokens)
    since_at = parse_since(since)
    scope = caller.read_scope(_sources(source))
    now = timezone.now()
    session_key = _session_key(caller) if session_id else None
    position = _DeltaStart(start=EPOCH)
    if session_key is not None:
        position = _session_start(session_key, session_id or "", now, since_at)
    if since_at is not None:
        position.start, position.after_key = since_at, slug or ""
        position.held_until = position.checked_at = since_at
    start, after_key = position.start, position.after_key
    names = _names(entities)
    entity_ids = _entity_ids(scope, names)
    fetch = DELTA_PAGE_LIMIT + 1
    stream = _page_stream(scope, start, after_key, entity_ids, fetch)
    stream += _fact_stream(caller, scope, start, after_key, entity_ids, fetch, now)
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
    if delivered:
        last_ts, last_key = delivered[-1][0], delivered[-1][1]
        next_cursor = {"since": _iso_us(last_ts), "slug": last_key}
    else:
        next_cursor = {"since": _iso_us(start), "slug": after_key}
    forgotten = _forgotten(scope, position, entity_ids, now)
    if session_key is not None:
        _session_save(
            session_key,
            session_id or "",
            position.row,
            next_cursor,
            delivered=bool(delivered),
            now=now,
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
        "has_more": len(stream) > len(delivered),
        "next_cursor": next_cursor,
        "budget_used": used if budget is not None else None,
        "dropped_count": dropped_in_window if budget is not None else None,
    }


_Item = tuple[datetime, str, str, dict[str, Any]]


@dataclass
class _DeltaStart:
    """Where a delta call starts: the keyset ``(start, after_key)``, what the reader
    already holds for ``forgotten`` (facts recorded up to ``held_until``, as of
    ``checked_at``: a session's previous call, or ``since``) and the session's
    cursor row (None without one)."""

    start: datetime
    after_key: str = ""
    held_until: datetime | None = None
    checked_at: datetime | None = None
    row: SessionCursor | None = None


def _check_delta_args(
    *, since: str | None, slug: str | None, session_id: str | None
) -> None:
    """Raise ``InvalidParams`` when neither ``since`` nor ``session_id`` is given,
    ``session_id`` is too long, or ``slug`` comes without ``since``."""
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


def _session_start(
    session_key: tuple[str, str],
    session_id: str,
    now: datetime,
    since_at: datetime | None,
) -> _DeltaStart:
    """The session's cursor (forgotten after ``SESSION_IDLE``); a new session
    starts at the epoch. With ``since_at`` the row is only kept for saving."""
    row = SessionCursor.objects.filter(
        source_id=session_key[0], client=session_key[1], session_id=session_id
    ).first()
    if row is not None and row.touched_at < now - SESSION_IDLE:
        row.delete()
        row = None
    out = _DeltaStart(start=EPOCH, row=row)
    if row is not None and since_at is None:
        position = row.position or {}
        out.start = parse_since(position.get("since")) or EPOCH
        out.after_key = str(position.get("slug") or "")
        out.held_until, out.checked_at = out.start, row.touched_at
    return out


def _entity_ids(scope: ReadScope, names: list[str]) -> list[int] | None:
    """The pages ``names`` resolve to (at most ``PACK_ENTITIES_MAX`` names); None
    when no name narrows the delta."""
    if not names:
        return None
    ids = []
    for name in names[:PACK_ENTITIES_MAX]:
        resolution = entity_resolve(scope=scope, name=name)
        if resolution.page is not None:
            ids.append(resolution.page.pk)
    return ids


def _page_stream(
    scope: ReadScope,
    start: datetime,
    after_key: str,
    entity_ids: list[int] | None,
    fetch: int,
) -> list[_Item]:
    """Pages changed after the keyset ``(start, after_key)`` in the database's own
    ``(updated_at, slug)`` order (``brain_page_delta_keyset``; the redundant
    ``updated_at >= start`` bounds the index scan, the OR alone does not)."""
    pages_qs = scope_queryset(Page.objects.all(), scope).filter(
        Q(updated_at__gt=start) | Q(updated_at=start, slug__gt=after_key),
        updated_at__gte=start,
    )
    if entity_ids is not None:
        pages_qs = pages_qs.filter(pk__in=entity_ids)
    return [
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
        for page in pages_qs.select_related("type").order_by("updated_at", "slug")[
            :fetch
        ]
    ]


def _fact_stream(
    caller: Caller,
    scope: ReadScope,
    start: datetime,
    after_key: str,
    entity_ids: list[int] | None,
    fetch: int,
    now: datetime,
) -> list[_Item]:
    """Live facts recorded after the keyset, oldest first."""
    facts_qs = fact_list_active(scope=scope, entity_ids=entity_ids, now=now).filter(
        after_keyed("created_at", "facts", start, after_key), created_at__gte=start
    )
    return [
        (
            fact.created_at,
            key_for("facts", fact.pk),
            "fact",
            fact_wire(fact, caller=caller),
        )
        for fact in facts_qs.order_by("created_at", "pk")[:fetch]
    ]


def _forgotten(
    scope: ReadScope,
    position: _DeltaStart,
    entity_ids: list[int] | None,
    now: datetime,
) -> list[dict[str, str | None]]:
    """``{fact_id, at}`` of facts the reader already held that expired since its
    previous call (``fact_list_forgotten``); none for a first call."""
    held_until, checked_at = position.held_until, position.checked_at
    if held_until is None or checked_at is None or held_until <= EPOCH:
        return []
    return [
        {"fact_id": str(f.pk), "at": iso_ms(f.expired_at)}
        for f in fact_list_forgotten(
            scope=scope,
            delivered_before=held_until,
            expired_after=checked_at,
            now=now,
            entity_ids=entity_ids,
        )
    ]


def _session_save(
    session_key: tuple[str, str],
    session_id: str,
    row: SessionCursor | None,
    next_cursor: dict[str, str],
    *,
    delivered: bool,
    now: datetime,
) -> None:
    """Store the session's cursor; at-least-once: it advances only past what this
    call delivered."""
    if row is None:
        SessionCursor.objects.update_or_create(
            source_id=session_key[0],
            client=session_key[1],
            session_id=session_id,
            defaults={"position": next_cursor, "touched_at": now},
        )
    else:
        SessionCursor.objects.filter(pk=row.pk).update(
            position=next_cursor if delivered else row.position,
            touched_at=now,
        )
