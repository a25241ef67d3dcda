"""HTTP endpoints of the loops app (SPEC §4 loop tools, §5.5, §8): ``open_loops``,
``loops_close``, ``loops_mute``, ``loops_unmute``, ``loops_correct_due`` and
``waiting``. Remote (untrusted) callers get redacted loops: counts, counterparty,
summary and due date only. Writes need the caller's write source."""

from __future__ import annotations

from datetime import date  # noqa: TC003 (ninja resolves these at runtime)
from typing import TYPE_CHECKING, Any, Literal

from ninja import Field, Query, Router, Schema
from pydantic import AliasChoices

from brain.exceptions import PROTOCOL_VERSION
from brain.timestamps import date_in_range
from interfaces.http.auth import request_caller
from interfaces.http.schemas import RequestIn
from interfaces.operations import (
    loop_for_write,
    op_loops_close,
    op_loops_mute,
    op_loops_unmute,
    op_open_loops,
    op_waiting,
)
from loops.models import LoopStatus, LoopType
from loops.services import (
    due_end_of_day,
    loop_correct_due,
)
from loops.waiting import loop_view

if TYPE_CHECKING:
    from django.http import HttpRequest


router = Router(tags=["loops"])

StatusParam = Literal[tuple(LoopStatus.values)]  # type: ignore[valid-type]
LoopTypeParam = Literal[tuple(LoopType.values)]  # type: ignore[valid-type]


class LoopsCloseIn(RequestIn):
    id: str
    status: Literal["done", "dropped"] = "done"
    note: str | None = None


class LoopsCloseOut(Schema):
    closed: bool
    id: str
    status: str
    fact_expired: bool
    reason: str | None = None
    protocol_version: int = PROTOCOL_VERSION


class LoopsMuteIn(RequestIn):
    kind: Literal["sender", "thread"]
    value: str = Field(..., min_length=1, max_length=320)
    # ``source`` like every other operation and the MCP tool; ``source_id`` (the
    # first name of this field) still works.
    source_id: str | None = Field(
        None, validation_alias=AliasChoices("source", "source_id")
    )


class LoopsMuteOut(Schema):
    kind: str
    value: str
    source_id: str
    source_ids: list[str] | None = None
    created: bool | None = None
    removed: bool | None = None
    open_loops: dict[str, int] | None = None
    note: str | None = None
    protocol_version: int = PROTOCOL_VERSION


class LoopsCorrectDueIn(RequestIn):
    id: str
    due: date | None = None
    note: str | None = None


class OpenLoopsOut(Schema):
    loops: list[dict[str, Any]] = Field(
        ...,
        description=(
            "The loops, newest activity first; each has snoozed_until (ISO 8601 UTC "
            "while a curator's snooze is ahead, else null)."
        ),
    )
    count: int = Field(..., description="Loops listed before the limit.")
    snoozed_left_out: int = Field(
        0,
        description=(
            "Open loops snoozed into the future and left out (0 with "
            "include_snoozed=true)."
        ),
    )
    note: str | None = Field(
        None, description="How to list the snoozed loops left out, or null."
    )
    redacted: bool
    protocol_version: int = PROTOCOL_VERSION


class WaitingOut(Schema):
    as_of: str
    groups: list[dict[str, Any]]
    no_counterparty: dict[str, Any]
    automated: dict[str, Any] = {}
    count: int
    snoozed: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Open loops left out because a curator snoozed them: loop_count, "
            "next_wake_at, last_wake_at (ISO 8601 UTC or null)."
        ),
    )
    sources: list[str]
    stale: bool
    stale_sources: list[str]
    completeness: str
    clean: bool
    redacted: bool
    warnings: list[str]
    coverage: list[dict[str, Any]] = Field(
        default_factory=list,
        description=(
            "One entry per mail source in scope, at its own clock: source_id, name, "
            "kind, as_of (ISO 8601), messages and in_window (mailbox files, else "
            "null), notes [{code: no_own_mail | sent_missing | sliver, text}], "
            "aged_out_asks (unanswered asks the 90-day window closed as stale)."
        ),
    )
    text: str | None = None
    protocol_version: int = PROTOCOL_VERSION


@router.get("/open_loops", response=OpenLoopsOut)
def open_loops(
    request: HttpRequest,
    status: StatusParam = LoopStatus.OPEN,  # type: ignore[valid-type]
    loop_type: LoopTypeParam | None = None,  # type: ignore[valid-type]
    counterparty: str | None = None,
    source: str | None = None,
    limit: int = Query(50, ge=1, le=500),  # noqa: B008 (ninja's declaration)
    include_snoozed: bool = Query(  # noqa: B008, FBT001 (ninja's declaration)
        False,  # noqa: FBT003 (ninja's declaration)
        description="Also list open loops a curator snoozed into the future.",
    ),
) -> dict[str, Any]:
    """Flat list of loops in the caller's readable sources (SPEC §4 ``open_loops``,
    §5.5); snoozed loops are left out until their date unless ``include_snoozed``
    (``interfaces.operations.op_open_loops``)."""
    return op_open_loops(
        request_caller(request),
        status=status,
        loop_type=loop_type,
        counterparty=counterparty,
        source=source,
        limit=limit,
        include_snoozed=include_snoozed,
    )


@router.post("/loops_close", response=LoopsCloseOut)
def loops_close(request: HttpRequest, payload: LoopsCloseIn) -> dict[str, Any]:
    """Close a loop as done or dropped; expires its commitment fact (SPEC §5.4)."""
    return op_loops_close(
        request_caller(request),
        loop_id=payload.id,
        status=payload.status,
        note=payload.note,
    )


@router.post("/loops_correct_due", response=OpenLoopsOut)
def loops_correct_due(
    request: HttpRequest, payload: LoopsCorrectDueIn
) -> dict[str, Any]:
    """Move a loop's deadline (or clear it); the old value is kept in a LoopEvent."""
    caller = request_caller(request)
    if payload.due is not None:
        date_in_range(payload.due, field="due")
    loop = loop_for_write(caller, payload.id)
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
        "snoozed_left_out": 0,
        "redacted": not caller.trusted,
    }


@router.post("/loops_mute", response=LoopsMuteOut)
def loops_mute(request: HttpRequest, payload: LoopsMuteIn) -> dict[str, Any]:
    """Mute a sender or thread in the caller's write source, and (with no
    ``source_id``) in the other writable sources where it has open loops; ``note``
    says where it applied and that existing loops keep their state (SPEC §5)."""
    return op_loops_mute(
        request_caller(request),
        kind=payload.kind,
        value=payload.value,
        source=payload.source_id,
    )


@router.post("/loops_unmute", response=LoopsMuteOut)
def loops_unmute(request: HttpRequest, payload: LoopsMuteIn) -> dict[str, Any]:
    """Remove a mute; ``removed: false`` when there was none (still success)."""
    return op_loops_unmute(
        request_caller(request),
        kind=payload.kind,
        value=payload.value,
        source=payload.source_id,
    )


@router.get("/waiting", response=WaitingOut)
def waiting(
    request: HttpRequest,
    source: str | None = None,
    as_of: str | None = None,
    top: int | None = Query(None, ge=1, le=50),  # noqa: B008 (ninja's declaration)
) -> dict[str, Any]:
    """The waiting view (SPEC §5.5), redacted for remote callers."""
    return op_waiting(request_caller(request), source=source, as_of=as_of, top=top)
