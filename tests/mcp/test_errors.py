"""SPEC §4 over MCP: every failure is an MCP tool error (``isError``) whose text is
the envelope ``{error, message, suggestion, detail, protocol_version}``.

These run the server in process with the SDK client (no transport, no database: each
case fails before a service touches the ORM); the transport tests repeat the main
cases over stdio and HTTP.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
from mcp import Client

from brain.access import Caller, local_caller
from brain.exceptions import ScopeDenied
from interfaces.mcp.server import build_server
from tests.mcp.conftest import envelope, payload

if TYPE_CHECKING:
    from collections.abc import Callable


def _call(
    resolve: Callable[[Any], Caller], name: str, arguments: dict[str, Any]
) -> Any:
    server = build_server(surface="full", resolve_caller=resolve)

    async def go() -> Any:
        async with Client(server) as client:
            return await client.call_tool(name, arguments)

    return anyio.run(go)


def _local(ctx: Any) -> Caller:
    return local_caller(actor="test")


def test_a_tool_call_returns_the_service_result_as_structured_json() -> None:
    who = payload(_call(_local, "whoami", {}))
    assert who["actor"] == "test" and who["trusted"] is True


def test_unknown_tool_is_an_mcp_error_with_the_envelope() -> None:
    body = envelope(_call(_local, "drop_database", {}))
    assert body["error"] == "invalid_params"
    assert body["message"] == "Unknown tool 'drop_database' on the 'full' surface."
    assert json.loads(body["detail"])["reason"] == "unknown_tool"
    assert "recall" in json.loads(body["detail"])["available"]


def test_bad_argument_type_is_invalid_params_naming_the_field() -> None:
    body = envelope(_call(_local, "recall", {"query": "x", "limit": "many"}))
    assert body["error"] == "invalid_params"
    assert body["message"] == "Invalid or missing argument(s): limit."
    assert json.loads(body["detail"])["fields"][0]["field"] == "limit"


def test_missing_required_argument_is_invalid_params() -> None:
    """SPEC §4: remember without provenance is ``invalid_params``."""
    body = envelope(_call(_local, "remember", {"fact": "the sky is blue"}))
    assert body["error"] == "invalid_params"
    assert [f["field"] for f in json.loads(body["detail"])["fields"]] == ["provenance"]


def test_unknown_argument_is_invalid_params_listing_the_allowed_ones() -> None:
    body = envelope(_call(_local, "entity", {"nam": "Ada"}))
    assert body["error"] == "invalid_params"
    assert json.loads(body["detail"])["allowed"] == ["name", "source"]
    assert body["suggestion"] == "Use only: name, source."


def test_a_brain_error_keeps_its_code_message_and_suggestion() -> None:
    def deny(ctx: Any) -> Caller:
        raise ScopeDenied("No key.", suggestion="Send a key.", detail={"why": "test"})

    body = envelope(_call(deny, "whoami", {}))
    assert body == {
        "error": "scope_denied",
        "message": "No key.",
        "suggestion": "Send a key.",
        "detail": '{"why":"test"}',
        "protocol_version": 1,
    }


def test_an_unexpected_crash_is_internal_and_leaks_nothing() -> None:
    def crash(ctx: Any) -> Caller:
        raise RuntimeError("password=hunter2")

    result = _call(crash, "whoami", {})
    body = envelope(result)
    assert body["error"] == "internal"
    assert "hunter2" not in result.content[0].text


def test_a_lone_surrogate_in_an_argument_is_invalid_params_not_internal() -> None:
    """A raw JSON-RPC client may send ``"\\ud800"``, which decodes to a lone
    surrogate: no text, refused by the UTF-8 encoder and PostgreSQL later."""
    body = envelope(_call(_local, "recall", {"query": "quokka \ud800"}))
    assert body["error"] == "invalid_params"
    assert "lone surrogate" in body["message"]
