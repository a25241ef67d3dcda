"""API schemas of the connectors app (STYLE rule 10)."""

from __future__ import annotations

from typing import Any

from ninja import Field, Schema


class SyncReportOut(Schema):
    """What a sync did: counts (messages, threads, pages, people, events,
    contacts, held…), skipped reasons, held items and warnings; ``status``
    ``partial`` with ``unfinished`` naming what the next run goes on with."""

    source_id: str
    kind: str
    status: str
    counts: dict[str, int]
    skipped: dict[str, int]
    held: list[dict[str, Any]]
    warnings: list[str]
    unfinished: list[str] = Field(
        default_factory=list,
        description="What the run did not cover, one sentence each (a Gmail "
        "re-list still going, a configured IMAP folder gone); status is partial.",
    )
