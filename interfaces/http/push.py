"""HTTP endpoint of push context (SPEC §9): ``POST /api/push_context``."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from interfaces.http.auth import request_caller
from interfaces.http.schemas.push import PushContextIn, PushContextOut
from interfaces.operations import op_push_context

router = Router(tags=["push"])


@router.post("/push_context", response=PushContextOut)
def push_context(request: HttpRequest, payload: PushContextIn) -> dict[str, Any]:
    """Volunteer the pages the conversation needs now, with no LLM (SPEC §9).

    Send the last few turns (oldest first) and a ``session_id`` so pages already
    pushed in the session are not pushed again. Remote keys see world pages only.
    """
    turns = [
        t if isinstance(t, str) else {"role": t.role, "text": t.text}
        for t in payload.turns
    ]
    return op_push_context(
        request_caller(request),
        turns=turns,
        session_id=payload.session_id,
        source=payload.source,
        max_pages=payload.max_pages,
    )
