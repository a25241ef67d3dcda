"""HTTP endpoints of the connectors app: trigger a sync (SPEC §6)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from brain.access import Caller
from connectors.dispatch import source_sync
from interfaces.http.auth import request_caller
from interfaces.http.schemas.connectors import SyncReportOut

router = Router(tags=["connectors"])


@router.post("/sources/{source_id}/sync", response=SyncReportOut)
def sync_source_now(request: HttpRequest, source_id: str) -> dict[str, Any]:
    """Sync a source now and return the report (admin scope, and the source must be
    one the key may write: a sync writes into it, SPEC §8). Idempotent: a second
    call imports nothing new. Long syncs belong in the ``sync_source`` job."""
    caller: Caller = request_caller(request)
    caller.require("admin")
    caller.write_source(source_id)
    report = source_sync(source_id=source_id, actor=f"api:{caller.actor}")
    return report.as_dict()
