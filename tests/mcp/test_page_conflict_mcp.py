"""Edits never clobber over MCP (issue 46, SPEC §4 ``conflict``): ``brain_update``
takes ``base_revision`` from ``brain_get_page``; a stale one is the ``conflict``
envelope. Appends without a base commute: ten parallel ones are all kept."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
from django.db import connection
from mcp import Client

from brain.access import Caller, local_caller
from brain.models import Page, Source
from brain.services.pages import page_add, page_update
from interfaces.mcp.server import build_server
from tests.mcp.conftest import committed_db, envelope, payload

pytestmark = committed_db

CALLER = local_caller(actor="test")


def _local(ctx: Any) -> Caller:
    return local_caller(actor="agent")


def _mcp(*calls: tuple[str, dict[str, Any]]) -> list[Any]:
    server = build_server(surface="full", resolve_caller=_local)

    async def go() -> list[Any]:
        async with Client(server) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(go)


def test_spec4_conflict_mcp_stale_base_revision_is_the_conflict_envelope(
    settings: Any,
) -> None:
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    source = Source.objects.create(id="conflict-mcp", name="Conflict", kind="manual")
    page_add(
        source=source, slug="notes/plan", title="Plan", body="Lisbon.", actor=CALLER
    )
    (read,) = _mcp(("brain_get_page", {"slug": "notes/plan", "source": source.id}))
    base = payload(read)["revision"]
    page_update(source=source, slug="notes/plan", body="Curator line.", actor=CALLER)
    args = {
        "slug": "notes/plan",
        "source": source.id,
        "provenance": "the user",
        "mode": "replace",
        "body": "Madrid.",
    }
    stale, fresh = _mcp(
        ("brain_update", {**args, "base_revision": base}),
        ("brain_get_page", {"slug": "notes/plan", "source": source.id}),
    )
    body = envelope(stale)
    assert body["error"] == "conflict"
    current = payload(fresh)["revision"]
    detail = json.loads(body["detail"])
    assert detail["current_revision"] == current and "+Curator line." in detail["diff"]
    assert Page.objects.get(source=source, slug="notes/plan").body == (
        "Lisbon.\n\nCurator line."
    )
    (ok,) = _mcp(("brain_update", {**args, "base_revision": current}))
    assert payload(ok)["page"]["body"] == "Madrid."


def test_spec4_conflict_ten_parallel_appends_without_base_are_all_kept(
    settings: Any,
) -> None:
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    source = Source.objects.create(id="conflict-par", name="Parallel", kind="manual")
    page_add(source=source, slug="notes/log", title="Log", body="Start.", actor=CALLER)

    def append(i: int) -> None:
        try:
            page_update(
                source=source.id, slug="notes/log", body=f"Line {i}.", actor=CALLER
            )
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=10) as pool:
        list(pool.map(append, range(10)))
    body = Page.objects.get(source=source, slug="notes/log").body
    assert sorted(body.split("\n\n")[1:]) == sorted(f"Line {i}." for i in range(10))
