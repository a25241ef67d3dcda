"""SPEC §4 / digest §11.2: the MCP surfaces, over both transports.

``verbs`` is exactly the seven memory verbs; ``starter`` adds the page, loop and push
tools; ``full`` adds the admin extras. A tool outside the served surface is unknown,
even when called by name.
"""

from __future__ import annotations

import json

import anyio
from mcp import Client

from brain.access import local_caller
from brain.models import Fact
from brain.services.pages import page_add
from interfaces.mcp.tools import TOOLS, tools_for_surface
from tests.mcp.conftest import (
    committed_db,
    envelope,
    http_client,
    manage_mcp,
    payload,
)

VERBS = {
    "recall",
    "remember",
    "entity",
    "synthesize",
    "forget",
    "context_pack",
    "delta",
}
BRAIN_TOOLS = {
    "brain_search",
    "brain_get_page",
    "brain_add",
    "brain_update",
    "brain_query",
    "brain_ask",
    "brain_list_pages",
}
LOOP_TOOLS = {"open_loops", "waiting", "loops_close", "loops_mute", "loops_unmute"}
PUSH_TOOLS = {"push_context"}
ADMIN_TOOLS = {"whoami", "brain_list_sources"}
EXPECTED = {
    "verbs": VERBS,
    "starter": VERBS | BRAIN_TOOLS | LOOP_TOOLS | PUSH_TOOLS,
    "full": VERBS | BRAIN_TOOLS | LOOP_TOOLS | PUSH_TOOLS | ADMIN_TOOLS,
}


def test_registry_surfaces_nest_verbs_in_starter_in_full() -> None:
    names = {s: {t.name for t in tools_for_surface(s)} for s in EXPECTED}
    assert names == EXPECTED
    assert len({t.name for t in TOOLS}) == len(TOOLS)


def test_tool_descriptions_tell_agents_to_search_first_update_and_give_provenance() -> (
    None
):
    by_name = {t.name: t.description.lower() for t in TOOLS}
    assert "search" in by_name["brain_add"] and "brain_update" in by_name["brain_add"]
    assert "provenance" in by_name["brain_add"]
    assert "instead of" in by_name["brain_update"]
    assert "provenance" in by_name["remember"]


@committed_db
def test_http_lists_each_surface_and_refuses_tools_outside_it(  # type: ignore[no-untyped-def]
    live_asgi, make_key, default_source, no_embeddings
) -> None:
    key = make_key(default_source).plaintext

    async def go() -> dict[str, object]:
        seen: dict[str, object] = {}
        for surface in EXPECTED:
            async with http_client(f"{live_asgi}/mcp/{surface}", key) as client:
                seen[surface] = {t.name for t in (await client.list_tools()).tools}
                seen[surface + ":search"] = await client.call_tool(
                    "brain_search", {"query": "anything"}
                )
        async with http_client(f"{live_asgi}/mcp", key) as client:
            seen["default"] = {t.name for t in (await client.list_tools()).tools}
        return seen

    seen = anyio.run(go)
    for surface, names in EXPECTED.items():
        assert seen[surface] == names
    assert seen["default"] == EXPECTED["full"]
    refused = envelope(seen["verbs:search"])  # type: ignore[arg-type]
    assert refused["error"] == "invalid_params"
    assert json.loads(refused["detail"])["reason"] == "unknown_tool"
    assert json.loads(refused["detail"])["available"] == sorted(VERBS)
    assert not seen["starter:search"].is_error  # type: ignore[attr-defined]


@committed_db
def test_stdio_verbs_surface_serves_only_the_verbs_scoped_to_its_source(  # type: ignore[no-untyped-def]
    no_embeddings, source_a, source_b
) -> None:
    """``manage.py mcp --surface verbs --source team-a``: the seven verbs only, reads
    and writes limited to team-a (SPEC §8: one scoping function for every caller)."""
    page_add(
        source=source_b,
        actor=local_caller(),
        title="Beta Rollout Plan",
        type_name="project",
        body="Rollout plan for beta.",
    )

    async def go():  # type: ignore[no-untyped-def]
        async with Client(manage_mcp("--surface", "verbs", "--source", "team-a")) as c:
            return (
                {t.name for t in (await c.list_tools()).tools},
                await c.call_tool("brain_add", {"title": "x", "body": "y"}),
                await c.call_tool("entity", {"name": "Beta Rollout Plan"}),
                await c.call_tool(
                    "entity", {"name": "Beta Rollout Plan", "source": "team-b"}
                ),
                await c.call_tool(
                    "remember", {"fact": "Team A ships Fridays.", "provenance": "test"}
                ),
            )

    names, hidden, miss, denied, remembered = anyio.run(go)
    assert names == VERBS
    body = envelope(hidden)
    assert body["error"] == "invalid_params"
    assert body["message"] == "Unknown tool 'brain_add' on the 'verbs' surface."
    assert payload(miss)["found"] is False
    assert envelope(denied)["error"] == "scope_denied"
    fact = Fact.objects.get(pk=payload(remembered)["id"])
    assert fact.source_id == "team-a" and fact.text == "Team A ships Fridays."
