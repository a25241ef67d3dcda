"""Request and response shapes of ``POST /api/push_context`` (SPEC §9)."""

from __future__ import annotations

from datetime import datetime

from ninja import Field, Schema

from brain.exceptions import PROTOCOL_VERSION
from interfaces.http.schemas import MAX_REQUESTED, RequestIn


class PushTurnIn(Schema):
    """One conversation turn: who spoke and what was said."""

    role: str = "user"
    text: str


class PushContextIn(RequestIn):
    """The last few turns, oldest first (the last 4 are read)."""

    turns: list[PushTurnIn | str] = Field(..., max_length=50)
    session_id: str | None = Field(None, max_length=200)
    source: str | None = Field(None, max_length=32)
    max_pages: int = Field(
        3,
        ge=1,
        le=MAX_REQUESTED,
        description="Default 3; values above 5 are capped at 5.",
    )


class PushLoopOut(Schema):
    """A due open loop with the pushed person (no quotes: SPEC §5.5 remote fields)."""

    loop_id: str
    loop_type: str
    summary: str
    due_at: datetime | None
    overdue: bool


class PushPageOut(Schema):
    """One volunteered page."""

    slug: str
    title: str
    source_id: str
    type: str
    confidence: float
    arm: str
    mention: str
    synopsis: str
    loops: list[PushLoopOut]


class PushSkipOut(Schema):
    """A mention that matched something but was not pushed, and why."""

    mention: str
    reason: str


class PushContextOut(Schema):
    """The pages to volunteer now (possibly none: silence is an answer)."""

    pages: list[PushPageOut]
    skipped: list[PushSkipOut]
    session_id: str | None
    source: str | None
    max_pages: int
    latency_ms: float
    protocol_version: int = PROTOCOL_VERSION
