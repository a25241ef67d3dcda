"""HTTP endpoints of the memory verbs v1 (SPEC §4): ``POST /api/<verb>`` with a JSON
body that mirrors the MCP tool arguments. Each handler only calls its service in
``brain.services.verbs``; errors become the SPEC §4 envelope in ``interfaces.http.api``.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from brain.services.verbs import (
    verb_context_pack,
    verb_delta,
    verb_entity,
    verb_forget,
    verb_recall,
    verb_remember,
    verb_synthesize,
)
from interfaces.http.auth import request_caller
from interfaces.http.schemas.verbs import (
    ContextPackIn,
    ContextPackOut,
    DeltaIn,
    DeltaOut,
    EntityIn,
    EntityOut,
    ForgetIn,
    ForgetOut,
    RecallIn,
    RecallOut,
    RememberIn,
    RememberOut,
    SynthesizeIn,
    SynthesizeOut,
)

router = Router(tags=["verbs"])


@router.post("/recall", response=RecallOut, exclude_unset=True)
def recall(request: HttpRequest, payload: RecallIn) -> dict[str, Any]:
    """Facts about an entity or matching a query, plus hybrid page search results."""
    return verb_recall(caller=request_caller(request), **payload.dict())


@router.post("/remember", response=RememberOut)
def remember(request: HttpRequest, payload: RememberIn) -> dict[str, Any]:
    """Store a fact (dedup and supersession by embedding similarity)."""
    return verb_remember(caller=request_caller(request), **payload.dict())


@router.post("/entity", response=EntityOut, exclude_unset=True)
def entity(request: HttpRequest, payload: EntityIn) -> dict[str, Any]:
    """Resolve a name to a page and return its entity card, or near-miss suggestions."""
    return verb_entity(caller=request_caller(request), **payload.dict())


@router.post("/synthesize", response=SynthesizeOut)
def synthesize(request: HttpRequest, payload: SynthesizeIn) -> dict[str, Any]:
    """[EXPENSIVE: one LLM call, costs money] Answer a question from retrieved pages
    and facts, citing them; ``unavailable`` when no LLM is configured."""
    return verb_synthesize(caller=request_caller(request), **payload.dict())


@router.post("/forget", response=ForgetOut)
def forget(request: HttpRequest, payload: ForgetIn) -> dict[str, Any]:
    """Expire a fact (never deleted); idempotent."""
    return verb_forget(caller=request_caller(request), **payload.dict())


@router.post("/context_pack", response=ContextPackOut, exclude_unset=True)
def context_pack(request: HttpRequest, payload: ContextPackIn) -> dict[str, Any]:
    """Cards, open threads and hot facts for up to 8 entities, plus a text block."""
    return verb_context_pack(caller=request_caller(request), **payload.dict())


@router.post("/delta", response=DeltaOut, exclude_unset=True)
def delta(request: HttpRequest, payload: DeltaIn) -> dict[str, Any]:
    """What changed after a cursor (since or a session), oldest first."""
    return verb_delta(caller=request_caller(request), **payload.dict())
