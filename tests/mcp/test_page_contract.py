"""One page contract on both transports (issue 47, SPEC §4): HTTP ``POST /api/pages``
and MCP ``brain_add`` take the same fields with the same types
(``interfaces.page_fields.PageFields``), so the same payload makes the same page.
Before, MCP typed ``provenance`` as a string and took neither ``frontmatter`` nor
``effective_date``."""

from __future__ import annotations

import json
from datetime import date
from typing import TYPE_CHECKING, Any

import anyio
from mcp import Client as McpClient

from brain.models import Page, Source
from interfaces.callers import caller_for_key
from interfaces.mcp.server import build_server
from tests.mcp.conftest import committed_db, payload

if TYPE_CHECKING:
    from collections.abc import Callable

    from django.test import Client

    from accounts.services import IssuedKey

pytestmark = committed_db

# Server-stamped provenance keys: who wrote it and when, never the caller's.
STAMPED = {"key", "client", "at", "actor"}

PAYLOAD: dict[str, Any] = {
    "title": "Harbor crane tender",
    "body": "The harbor crane tender closes on 12 December.",
    "type": "project",
    "tags": ["tender", "harbor"],
    "frontmatter": {"budget_eur": 410000, "owner": "port authority"},
    "effective_date": "2026-11-18",
    "provenance": {"note": "kickoff meeting 2026-11-18", "url": "https://x.test/1"},
}


def _brain_add(key: IssuedKey, arguments: dict[str, Any]) -> dict[str, Any]:
    caller = caller_for_key(key.api_key)
    server = build_server(surface="starter", resolve_caller=lambda ctx: caller)

    async def go() -> dict[str, Any]:
        async with McpClient(server) as client:
            return payload(await client.call_tool("brain_add", arguments))

    return anyio.run(go)


def _the_page(slug: str, source: Source) -> dict[str, Any]:
    page = Page.objects.get(source=source, slug=slug)
    frontmatter = {k: v for k, v in page.frontmatter.items() if k != "provenance"}
    provenance = page.frontmatter.get("provenance") or {}
    return {
        "slug": page.slug,
        "title": page.title,
        "body": page.body,
        "type": page.type.name,
        "tags": page.tags,
        "frontmatter": frontmatter,
        "effective_date": page.effective_date,
        "provenance": {k: v for k, v in provenance.items() if k not in STAMPED},
    }


def test_http_and_mcp_brain_add_take_the_same_page_fields(
    make_key: Callable[..., IssuedKey],
    api_client: Callable[[str | None], Client],
) -> None:
    over_http = Source.objects.create(id="contract-http", name="HTTP", kind="manual")
    over_mcp = Source.objects.create(id="contract-mcp", name="MCP", kind="manual")
    http_key = make_key(over_http)
    mcp_key = make_key(over_mcp)

    posted = api_client(http_key.plaintext).post(
        "/api/pages", data=json.dumps(PAYLOAD), content_type="application/json"
    )
    assert posted.status_code == 201, posted.json()
    added = _brain_add(mcp_key, PAYLOAD)

    http_page = _the_page(posted.json()["slug"], over_http)
    assert http_page["effective_date"] == date(2026, 11, 18)
    assert http_page["provenance"] == PAYLOAD["provenance"]
    assert http_page["frontmatter"]["budget_eur"] == 410000
    assert _the_page(added["slug"], over_mcp) == http_page


def test_mcp_brain_add_publishes_the_http_fields_and_keeps_a_legacy_string_note(
    make_key: Callable[..., IssuedKey],
) -> None:
    """The tool's input schema has exactly add_page's fields with the same JSON
    types; a legacy string provenance is kept as ``{"note": text}``."""
    from interfaces.http.api import api

    http_fields = api.get_openapi_schema()["components"]["schemas"]["PageIn"]
    caller = caller_for_key(make_key(Source.objects.get(id="default")).api_key)
    server = build_server(surface="starter", resolve_caller=lambda ctx: caller)
    tool = server._tool_manager.get_tool("brain_add")
    assert tool is not None
    mcp_fields = tool.parameters["properties"]
    assert set(mcp_fields) == set(http_fields["properties"])
    for name in ("provenance", "frontmatter", "effective_date", "tags", "title"):
        assert _types(mcp_fields[name]) == _types(http_fields["properties"][name]), name

    added = _brain_add(
        make_key(Source.objects.get(id="default")),
        {"title": "Ferry pier", "body": "Pier 3.", "provenance": "user said so"},
    )
    page = Page.objects.get(source_id="default", slug=added["slug"])
    assert page.frontmatter["provenance"]["note"] == "user said so"


def _types(schema: dict[str, Any]) -> set[str]:
    """The JSON types a property schema allows (``anyOf`` flattened)."""
    arms = schema.get("anyOf", [schema])
    return {f"{a.get('type')}:{a.get('format', '')}" for a in arms}
