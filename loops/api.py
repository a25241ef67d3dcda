"""HTTP endpoints of the loops app (SPEC §4 loop tools, §5.5, §8): ``open_loops``,
``loops_close``, ``loops_mute``, ``loops_unmute``, ``loops_correct_due`` and
``waiting``. Remote (untrusted) callers get redacted loops: counts, counterparty,
summary and due date only. Writes need the caller's write source."""

from __future__ import annotations

from datetime import date, datetime  # noqa: TC003 (ninja resolves these at runtime)
from typing import TYPE_CHECKING, Any, Literal

from ninja import Field, Router, Schema

from brain.exceptions import InvalidParams
from loops.models import LoopStatus, LoopType
from loops.selectors import loop_list
from loops.services import (
    due_end_of_day,
    loop_close,
    loop_correct_due,
    loop_get,
    loop_mute,
    loop_unmute,
)
from loops.waiting import loop_view, waiting_report

if TYPE_CHECKING:
    from django.http import HttpRequest

    from brain.access import Caller

router = Router(tags=["loops"])


class LoopsCloseIn(Schema):
    id: str
    status: Literal["done", "dropped"] = "done"
    note: str | None = None


class LoopsCloseOut(Schema):
    closed: bool
    id: str
    status: str
    fact_expired: bool
    reason: str | None = None
    protocol_version: int = 1


class LoopsMuteIn(Schema):
    kind: Literal["sender", "thread"]
    value: str = Field(..., min_length=1, max_length=320)
    source_id: str | None = None


class LoopsMuteOut(Schema):
    kind: str
    value: str
    source_id: str
    created: bool | None = None
    removed: bool | None = None
    protocol_version: int = 1


class LoopsCorrectDueIn(Schema):
    id: str
    due: date | None = None
    note: str | None = None


class OpenLoopsOut(Schema):
    loops: list[dict[str, Any]]
    count: int
    redacted: bool
    protocol_version: int = 1


class WaitingOut(Schema):
    as_of: str
    groups: list[dict[str, Any]]
    no_counterparty: dict[str, Any]
    count: int
    sources: list[str]
    stale: bool
    stale_sources: list[str]
    completeness: str
    clean: bool
    redacted: bool
    warnings: list[str]
    text: str | None = None
    protocol_version: int = 1


def _caller(request: HttpRequest) -> Caller:
    return request.auth  # type: ignore[attr-defined,no-any-return]


@router.get("/open_loops", response=OpenLoopsOut)
def open_loops(
    request: HttpRequest,
    status: str = LoopStatus.OPEN,
    loop_type: str | None = None,
    counterparty: str | None = None,
    source: str | None = None,
    limit: int = 50,
) -> dict[str, Any]:
    """Flat list of loops in the caller's readable sources (SPEC §4 ``open_loops``)."""
    caller = _caller(request)
    if status not in LoopStatus.values:
        raise InvalidParams(
            f"Unknown status '{status}'.",
            suggestion="Use open, done, dropped or stale.",
            detail={"allowed": LoopStatus.values},
        )
    if loop_type and loop_type not in LoopType.values:
        raise InvalidParams(
            f"Unknown loop_type '{loop_type}'.",
            suggestion=f"Use one of {', '.join(LoopType.values)}.",
            detail={"allowed": LoopType.values},
        )
    if not 1 <= limit <= 500:
        raise InvalidParams("limit must be 1..500.", suggestion="Use limit=50.")
    scope = caller.read_scope([source]) if source else caller.all_readable_scope()
    qs = loop_list(
        scope=scope, status=status, loop_type=loop_type, counterparty=counterparty
    )
    total = qs.count()
    rows = [loop_view(loop).as_dict(trusted=caller.trusted) for loop in qs[:limit]]
    return {"loops": rows, "count": total, "redacted": not caller.trusted}


def _loop_for_write(caller: Caller, loop_id: str):  # type: ignore[no-untyped-def]
    readable = (
        None
        if caller.readable_source_ids is None
        else tuple(caller.readable_source_ids)
    )
    loop = loop_get(loop_id=loop_id, source_ids=readable)
    caller.write_source(loop.source_id)  # a read grant never authorises a write
    return loop


@router.post("/loops_close", response=LoopsCloseOut)
def loops_close(request: HttpRequest, payload: LoopsCloseIn) -> dict[str, Any]:
    """Close a loop as done or dropped; expires its commitment fact (SPEC §5.4)."""
    caller = _caller(request)
    loop = _loop_for_write(caller, payload.id)
    return loop_close(
        loop=loop, status=payload.status, actor=caller.actor, note=payload.note or ""
    )


@router.post("/loops_correct_due", response=OpenLoopsOut)
def loops_correct_due(
    request: HttpRequest, payload: LoopsCorrectDueIn
) -> dict[str, Any]:
    """Move a loop's deadline (or clear it); the old value is kept in a LoopEvent."""
    caller = _caller(request)
    loop = _loop_for_write(caller, payload.id)
    loop = loop_correct_due(
        loop=loop,
        due_at=due_end_of_day(payload.due) if payload.due else None,
        actor=caller.actor,
        evidence={"note": payload.note or "", "by": caller.actor},
    )
    loop.refresh_from_db()
    return {
        "loops": [loop_view(loop).as_dict(trusted=caller.trusted)],
        "count": 1,
        "redacted": not caller.trusted,
    }


@router.post("/loops_mute", response=LoopsMuteOut)
def loops_mute(request: HttpRequest, payload: LoopsMuteIn) -> dict[str, Any]:
    """Mute a sender or thread in the caller's write source (SPEC §5)."""
    caller = _caller(request)
    source = caller.write_source(payload.source_id)
    row, created = loop_mute(
        source=source, kind=payload.kind, value=payload.value, actor=caller.actor
    )
    return {
        "kind": row.kind,
        "value": row.value,
        "source_id": source.id,
        "created": created,
    }


@router.post("/loops_unmute", response=LoopsMuteOut)
def loops_unmute(request: HttpRequest, payload: LoopsMuteIn) -> dict[str, Any]:
    """Remove a mute; ``removed: false`` when there was none (still success)."""
    caller = _caller(request)
    source = caller.write_source(payload.source_id)
    removed = loop_unmute(
        source=source, kind=payload.kind, value=payload.value, actor=caller.actor
    )
    return {
        "kind": payload.kind,
        "value": payload.value.strip().lower(),
        "source_id": source.id,
        "removed": removed,
    }


@router.get("/waiting", response=WaitingOut)
def waiting(
    request: HttpRequest,
    source: str | None = None,
    as_of: datetime | None = None,
    top: int | None = None,
) -> dict[str, Any]:
    """The waiting view (SPEC §5.5), redacted for remote callers."""
    caller = _caller(request)
    if top is not None and not 1 <= top <= 50:
        raise InvalidParams("top must be 1..50.", suggestion="Use top=10.")
    return waiting_report(
        caller=caller, sources=[source] if source else None, as_of=as_of, top=top
    )
