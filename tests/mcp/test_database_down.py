"""Database down (issue 46): every ``/api/`` route, ``/api/health`` and ``/mcp``
answer 503 ``unavailable`` naming the database, in the SPEC §4 envelope, instead
of a generic or plain-text 500.

Nothing is mocked: the test points the default database's settings at a closed
port of this machine, so every thread's next connection is really refused by the
operating system; the settings are put back (and the embedded server never
stopped) before the test ends, so other tests are untouched."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx2
from django.db import connection, connections
from django.test import Client
from mcp import Client as McpClient

from brain.access import Caller, local_caller
from interfaces.mcp.server import build_server
from tests.mcp.conftest import committed_db, envelope

pytestmark = committed_db

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@contextmanager
def database_unreachable() -> Iterator[str]:
    """Point the default database at a port nothing listens on until the block
    ends (every thread's connection shares this settings dict); yields
    ``host:port``."""
    db = connections.settings["default"]
    assert connection.settings_dict is db  # one dict for every thread's wrapper
    saved = (db["HOST"], db["PORT"])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    connection.close()
    db["HOST"], db["PORT"] = "127.0.0.1", str(port)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        connection.close()
        db["HOST"], db["PORT"] = saved


def _is_database_unavailable(body: dict[str, Any], where: str) -> None:
    assert set(body) == {"error", "message", "suggestion", "detail", "protocol_version"}
    assert body["error"] == "unavailable" and body["suggestion"]
    assert "database is unavailable" in body["message"] and where in body["message"]
    assert json.loads(body["detail"])["component"] == "database"


def test_database_down_api_routes_and_health_answer_503_unavailable(
    api_client: Any, make_key: Any, default_source: Any
) -> None:
    key = make_key(default_source).plaintext
    with database_unreachable() as where:
        pages = api_client(key).get("/api/pages")
        recall = api_client(key).post(
            "/api/recall", {"query": "lease"}, content_type="application/json"
        )
        health = Client().get("/api/health")
    for response in (pages, recall, health):
        assert response.status_code == 503, response.content[:300]
        _is_database_unavailable(response.json(), where)
    assert Client().get("/api/health").status_code == 200


def test_database_down_mcp_over_http_answers_503_unavailable(
    live_asgi: str, make_key: Any, default_source: Any
) -> None:
    key = make_key(default_source).plaintext

    async def go() -> httpx2.Response:
        async with httpx2.AsyncClient() as http:
            return await http.post(
                f"{live_asgi}/mcp",
                json=INITIALIZE,
                headers={**ACCEPT, "Authorization": f"Bearer {key}"},
            )

    with database_unreachable() as where:
        response = anyio.run(go)
    assert response.status_code == 503, response.text[:300]
    assert response.headers["content-type"].startswith("application/json")
    _is_database_unavailable(response.json(), where)


def test_database_down_mcp_tool_call_is_the_unavailable_envelope() -> None:
    def local(ctx: Any) -> Caller:
        return local_caller(actor="test")

    server = build_server(surface="full", resolve_caller=local)

    async def go() -> Any:
        async with McpClient(server) as client:
            return await client.call_tool("brain_get_page", {"slug": "notes/x"})

    with database_unreachable() as where:
        result = anyio.run(go)
    _is_database_unavailable(envelope(result), where)
