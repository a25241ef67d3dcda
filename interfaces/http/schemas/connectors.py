"""API schemas of the connectors app (STYLE rule 10)."""

from __future__ import annotations

from typing import Any

from ninja import Schema


class SyncReportOut(Schema):
    """What a sync did: counts (messages, threads, pages, people, events,
    contacts, held…), skipped reasons, held items and warnings."""

    source_id: str
    kind: str
    status: str
    counts: dict[str, int]
    skipped: dict[str, int]
    held: list[dict[str, Any]]
    warnings: list[str]
