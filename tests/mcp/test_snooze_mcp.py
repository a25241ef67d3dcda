"""Snoozed loops over MCP (issue 47, SPEC §4 ``open_loops``, §5.5): the tool takes
and answers the same snooze fields as ``GET /api/open_loops``
(tests/loops/test_snooze_contract.py), through the in-process MCP server."""

from __future__ import annotations

from datetime import UTC
from typing import Any

import anyio
from mcp import Client

from brain.access import Caller, local_caller
from brain.models import Source
from interfaces.mcp.server import build_server
from tests.loops.test_snooze_contract import parked_pair
from tests.mcp.conftest import committed_db, payload

pytestmark = committed_db


def _local(ctx: Any) -> Caller:
    return local_caller(actor="test")


def _mcp(*calls: tuple[str, dict[str, Any]]) -> list[Any]:
    server = build_server(surface="full", resolve_caller=_local)

    async def go() -> list[Any]:
        async with Client(server) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(go)


def test_mcp_open_loops_takes_and_answers_the_same_snooze_fields() -> None:
    source = Source.objects.create(id="snooze-mail", name="Mail", kind="mailbox")
    awake, parked, until = parked_pair(source)
    default, every, waiting = _mcp(
        ("open_loops", {"source": source.id}),
        ("open_loops", {"source": source.id, "include_snoozed": True}),
        ("waiting", {"source": source.id}),
    )
    default = payload(default)
    assert [str(lp["id"]) for lp in default["loops"]] == [str(awake.pk)]
    assert default["snoozed_left_out"] == 1 and "include_snoozed" in default["note"]
    every = payload(every)
    snoozed = {str(lp["id"]): lp["snoozed_until"] for lp in every["loops"]}
    assert snoozed == {
        str(awake.pk): None,
        str(parked.pk): until.astimezone(UTC).isoformat(),
    }
    assert payload(waiting)["snoozed"]["loop_count"] == 1
