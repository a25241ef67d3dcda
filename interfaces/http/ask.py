"""``POST /api/ask``: brain_ask over HTTP (``brain.services.ask``)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Field, Router, Schema

from brain.services.ask import brain_ask
from interfaces.http.auth import request_caller
from interfaces.http.schemas import RequestIn

router = Router(tags=["ask"])


class AskIn(RequestIn):
    question: str = Field(
        ..., min_length=1, description="The question to answer from the web."
    )
    save: bool = Field(
        default=False, description="Write the answer as a page (needs write)."
    )
    tags: list[str] | None = Field(None, description="Tags of the saved page.")
    max_searches: int = Field(5, ge=1, le=10, description="Web searches allowed.")


class AskCitationOut(Schema):
    url: str
    title: str
    cited_text: str


class AskSourceOut(Schema):
    url: str
    title: str
    page_age: str | None = None


class AskCostOut(Schema):
    model: str
    input_tokens: int
    output_tokens: int
    web_searches: int
    usd_estimate: float


class AskSavedOut(Schema):
    slug: str
    source_id: str
    operation: str


class AskOut(Schema):
    question: str
    answer: str
    status: str = Field(description="answered | refused | truncated")
    citations: list[AskCitationOut]
    sources: list[AskSourceOut]
    searches: list[str]
    cost: AskCostOut
    saved: AskSavedOut | None = None
    warnings: list[str]
    protocol_version: int


@router.post("/ask", response=AskOut)
def ask(request: HttpRequest, payload: AskIn) -> dict[str, Any]:
    """[EXPENSIVE: one LLM call with web search] Answer a question from the web with
    citations; with `save`, write the answer as a page in the key's write source.
    Without ANTHROPIC_API_KEY on the server: `unavailable`."""
    return brain_ask(caller=request_caller(request), **payload.dict())
