"""Issue 17 over MCP: remember supersedes by slot, with or without structured
``slot``/``value`` (SPEC §2.4, §4), through the in-process MCP server."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import Client

from brain.access import Caller, local_caller
from interfaces.mcp.server import build_server
from tests.mcp.conftest import committed_db, envelope, payload

pytestmark = committed_db


def _local(ctx: Any) -> Caller:
    return local_caller(actor="test")


def _calls(*calls: tuple[str, dict[str, Any]]) -> list[Any]:
    server = build_server(surface="full", resolve_caller=_local)

    async def go() -> list[Any]:
        async with Client(server) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(go)


def test_a_change_of_value_without_a_cue_word_supersedes_over_mcp() -> None:
    prov = "chat, 2026-11-30"
    first, second, recall = _calls(
        (
            "remember",
            {
                "fact": "Bram Oakes likes coffee",
                "provenance": prov,
                "entity": "Bram Oakes",
                "kind": "preference",
            },
        ),
        (
            "remember",
            {
                "fact": "Bram Oakes likes tea now",
                "provenance": prov,
                "entity": "Bram Oakes",
                "kind": "preference",
            },
        ),
        ("recall", {"entity": "Bram Oakes"}),
    )
    assert payload(first)["status"] == "inserted"
    assert payload(second)["status"] == "superseded"
    assert [f["fact"] for f in payload(recall)["facts"]] == ["Bram Oakes likes tea now"]


def test_structured_slot_and_value_over_mcp() -> None:
    prov = "chat, 2026-11-30"
    first, second, bad = _calls(
        (
            "remember",
            {
                "fact": "Kit is in Ghent",
                "provenance": prov,
                "entity": "Kit Rowe",
                "slot": "location",
                "value": "Ghent",
            },
        ),
        (
            "remember",
            {
                "fact": "Kit is in Bergen",
                "provenance": prov,
                "entity": "Kit Rowe",
                "slot": "location",
                "value": "Bergen",
            },
        ),
        ("remember", {"fact": "Kit is in Oslo", "provenance": prov, "value": "Oslo"}),
    )
    assert payload(first)["status"] == "inserted"
    assert payload(second)["status"] == "superseded"
    assert envelope(bad)["error"] == "invalid_params"
