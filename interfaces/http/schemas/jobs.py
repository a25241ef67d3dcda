"""Request and response shapes of the jobs API (SPEC §7)."""

from __future__ import annotations

from datetime import datetime  # noqa: TC003 - pydantic resolves it at runtime
from typing import Any

from ninja import Field, FilterSchema, Schema

from interfaces.http.schemas import RequestIn


class JobIn(RequestIn):
    kind: str = Field(..., description="sync_source, extract_loops, loops_sweep, ...")
    params: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: str | None = Field(
        None, max_length=255, description="Same key twice: the first job is returned."
    )
    max_attempts: int | None = Field(None, ge=1, le=20)


class JobOut(Schema):
    id: int
    kind: str
    params: dict[str, Any]
    status: str
    attempts: int
    max_attempts: int
    idempotency_key: str | None
    progress: dict[str, Any]
    checkpoint: dict[str, Any]
    result: Any = None
    error: str
    run_after: datetime | None
    started_at: datetime | None
    heartbeat_at: datetime | None
    finished_at: datetime | None
    created_at: datetime
    created_by: str
    parent_id: int | None


class JobEnqueueOut(Schema):
    created: bool = Field(..., description="False when an existing job was returned.")
    job: JobOut


class JobFilter(FilterSchema):
    kind: str | None = None
    status: str | None = None
