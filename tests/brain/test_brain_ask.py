"""brain_ask (seeds): a web answer with citations, saved through the one write
function when asked. The real ``anthropic`` client runs against recorded response
shapes given through ``httpx2.MockTransport`` (tests/data/brain_ask)."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import pytest

from brain.exceptions import ScopeDenied, Unavailable
from brain.models import AuditEvent, Page
from brain.services.ask import ask_spent_today_usd, brain_ask

if TYPE_CHECKING:
    from collections.abc import Callable

    from django.test import Client

    from accounts.services import IssuedKey
    from brain.access import Caller
    from brain.models import Source

pytestmark = pytest.mark.django_db

RECORDED = Path(__file__).parent.parent / "data" / "brain_ask"
QUESTION = "When did the Harbor Line tram in Port Vellam open?"


def recorded(name: str) -> Callable[[httpx2.Request], httpx2.Response]:
    body = json.loads((RECORDED / f"{name}.json").read_text())

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json=body)

    return handler


def test_brain_ask_answers_with_citations(local: Caller, fake_anthropic: Any) -> None:
    seen = fake_anthropic(recorded("answered"))
    out = brain_ask(caller=local, question=QUESTION)

    assert out["status"] == "answered"
    assert out["answer"].startswith("I'll search") or "1911" in out["answer"]
    assert "opened in 1911" in out["answer"]
    assert [c["url"] for c in out["citations"]] == [
        "https://transit.example.org/harbor-line",
        "https://wiki.example.net/Harbor_Line",
    ]
    assert "2 May 1911" in out["citations"][0]["cited_text"]
    assert len(out["sources"]) == 2
    assert out["searches"] == ["Harbor Line tram opening year Port Vellam"]
    assert out["cost"]["web_searches"] == 1
    assert out["saved"] is None
    sent = json.loads(seen[0].content)
    assert sent["tools"][0]["type"] == "web_search_20250305"
    assert sent["tools"][0]["max_uses"] == 5
    assert sent["messages"][0]["content"] == QUESTION


def test_brain_ask_save_writes_a_page_that_brain_search_finds(
    default_source: Source,
    make_key: Callable[..., IssuedKey],
    api_client: Callable[[str | None], Client],
    fake_anthropic: Any,
) -> None:
    fake_anthropic(recorded("answered"))
    key = make_key(default_source, trusted=True)
    client = api_client(key.plaintext)

    response = client.post(
        "/api/ask",
        {"question": QUESTION, "save": True, "tags": ["transit"]},
        content_type="application/json",
    )

    assert response.status_code == 200, response.content
    saved = response.json()["saved"]
    page = Page.objects.get(source=default_source, slug=saved["slug"])
    assert page.frontmatter["sources"] == [
        "https://transit.example.org/harbor-line",
        "https://wiki.example.net/Harbor_Line",
    ]
    assert set(page.tags) >= {"brain-ask", "transit"}
    assert "## Sources" in page.body
    assert page.revisions.first().provenance.get("from") == "brain_ask"
    found = client.get("/api/search", {"query": "Harbor Line tram electrified"}).json()
    assert saved["slug"] in [r["slug"] for r in found["results"]]


def test_brain_ask_refusal_answers_nothing_and_saves_nothing(
    local: Caller, fake_anthropic: Any
) -> None:
    fake_anthropic(recorded("refusal"))
    out = brain_ask(caller=local, question=QUESTION, save=True)
    assert out["status"] == "refused"
    assert out["answer"] == ""
    assert out["saved"] is None
    assert "not saved: the answer is refused" in out["warnings"]


def test_brain_ask_truncated_answer_is_returned_with_a_warning_and_not_saved(
    local: Caller, fake_anthropic: Any
) -> None:
    fake_anthropic(recorded("truncated"))
    before = Page.objects.count()
    out = brain_ask(caller=local, question=QUESTION, save=True)
    assert out["status"] == "truncated"
    assert out["answer"].startswith("The network grew")
    assert any("token limit" in w for w in out["warnings"])
    assert Page.objects.count() == before


def test_brain_ask_tool_error_without_an_answer_is_unavailable(
    local: Caller, fake_anthropic: Any
) -> None:
    fake_anthropic(recorded("tool_error"))
    with pytest.raises(Unavailable, match="too_many_requests"):
        brain_ask(caller=local, question=QUESTION)


def test_brain_ask_without_a_key_names_the_setting(
    default_source: Source,
    make_key: Callable[..., IssuedKey],
    api_client: Callable[[str | None], Client],
    settings: Any,
) -> None:
    settings.ANTHROPIC_API_KEY = ""
    key = make_key(default_source)
    response = api_client(key.plaintext).post(
        "/api/ask", {"question": QUESTION}, content_type="application/json"
    )
    assert response.status_code == 503
    body = response.json()
    assert body["error"] == "unavailable"
    assert "ANTHROPIC_API_KEY" in body["suggestion"]


def test_brain_ask_stops_at_the_daily_budget(
    local: Caller, fake_anthropic: Any, settings: Any
) -> None:
    seen = fake_anthropic(recorded("answered"))
    settings.BRAIN_ASK_MAX_USD_PER_DAY = 0.2
    brain_ask(caller=local, question=QUESTION)
    assert ask_spent_today_usd() > Decimal(0)
    assert AuditEvent.objects.filter(target_type="brain_ask").count() == 1
    settings.BRAIN_ASK_MAX_USD_PER_DAY = float(ask_spent_today_usd()) + 0.01
    with pytest.raises(Unavailable, match="daily budget"):
        brain_ask(caller=local, question=QUESTION)
    assert len(seen) == 1, "no call over the cap"


def test_brain_ask_save_without_write_is_refused_before_any_call(
    default_source: Source,
    make_key: Callable[..., IssuedKey],
    fake_anthropic: Any,
) -> None:
    from interfaces.callers import caller_for_key

    seen = fake_anthropic(recorded("answered"))
    reader = caller_for_key(make_key(default_source, scopes=("read",)).api_key)
    with pytest.raises(ScopeDenied):
        brain_ask(caller=reader, question=QUESTION, save=True)
    assert seen == []


def test_brain_ask_is_an_expensive_mcp_tool_on_starter_and_full() -> None:
    from interfaces.mcp.tools import tools_for_surface

    for surface in ("starter", "full"):
        tool = next(t for t in tools_for_surface(surface) if t.name == "brain_ask")
        assert tool.description.startswith("[EXPENSIVE")
    assert "brain_ask" not in {t.name for t in tools_for_surface("verbs")}
