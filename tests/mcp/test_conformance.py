"""Memory-verb conformance on every transport (SPEC §4, §11: "GBrain's public
memory-verb conformance cases 100 % on every transport").

The contract (``tests.mcp.conformance``: 20 reference cases, 8 tool-list checks and
our own dedup / no-ghost / private-fence cases) is replayed, in order and with shared
state, against:

- MCP over stdio: a real ``manage.py mcp`` subprocess (the trusted local caller),
  driven by the official ``mcp`` client;
- HTTP ``/api``: Django's test client with a remote API key (the tool list is the
  OpenAPI document);
- MCP over HTTP ``/mcp``: the served ASGI application under uvicorn on loopback, with
  the same kind of remote key, driven by the official client.

Each test asserts 28 of 28 for the reference contract and every own case, naming each
failure with its reasons.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from anyio.from_thread import start_blocking_portal
from mcp import Client

from tests.mcp.conformance import (
    CASES,
    OWN_CASES,
    VERBS,
    Outcome,
    run_contract,
    summary,
)
from tests.mcp.conftest import committed_db, http_client, manage_mcp

if TYPE_CHECKING:
    from collections.abc import Iterator

    from anyio.from_thread import BlockingPortal
    from django.test import Client as DjangoClient

REFERENCE_TOTAL = len(CASES) + len(VERBS) + 1  # 20 cases + 8 tool-list checks
assert REFERENCE_TOTAL == 28

SEED_BODY = "{title} is the entity the conformance cases share."


class McpTransport:
    """A connected MCP client (stdio or streamable HTTP) behind a blocking portal."""

    def __init__(self, portal: BlockingPortal, client: Client, *, remote: bool):
        self.portal, self.client, self.remote = portal, client, remote

    def call(self, verb: str, params: dict[str, Any]) -> tuple[bool, Any]:
        result = self.portal.call(self.client.call_tool, verb, params)
        if result.is_error:
            return False, json.loads(result.content[0].text)  # type: ignore[union-attr]
        return True, result.structured_content

    def tools(self) -> list[dict[str, Any]]:
        listed = self.portal.call(self.client.list_tools)
        return [
            {
                "name": t.name,
                "description": t.description,
                "input_schema": t.input_schema,
            }
            for t in listed.tools
        ]

    def seed_entity(self, slug: str, title: str) -> bool:
        ok, _ = self.call(
            "brain_add",
            {
                "title": title,
                "slug": slug,
                "type": "person",
                "body": SEED_BODY.format(title=title),
                "provenance": "conformance seed",
            },
        )
        return ok


class HttpTransport:
    """``/api`` through Django's test client with a bearer key."""

    def __init__(self, client: DjangoClient, *, remote: bool = True):
        self.client, self.remote = client, remote

    def call(self, verb: str, params: dict[str, Any]) -> tuple[bool, Any]:
        response = self.client.post(
            f"/api/{verb}", data=json.dumps(params), content_type="application/json"
        )
        return response.status_code < 400, response.json()

    def tools(self) -> list[dict[str, Any]]:
        doc = self.client.get("/api/openapi.json").json()
        schemas = doc.get("components", {}).get("schemas", {})
        out = []
        for verb in VERBS:
            operation = doc["paths"].get(f"/api/{verb}", {}).get("post")
            if operation is None:
                continue
            body = operation.get("requestBody", {}).get("content", {})
            schema = body.get("application/json", {}).get("schema", {})
            if "$ref" in schema:
                schema = schemas.get(schema["$ref"].rsplit("/", 1)[-1], {})
            out.append(
                {
                    "name": verb,
                    "description": operation.get("description")
                    or operation.get("summary"),
                    "input_schema": schema,
                }
            )
        return out

    def seed_entity(self, slug: str, title: str) -> bool:
        response = self.client.post(
            "/api/pages",
            data=json.dumps(
                {
                    "title": title,
                    "slug": slug,
                    "type": "person",
                    "body": SEED_BODY.format(title=title),
                }
            ),
            content_type="application/json",
        )
        return response.status_code < 400


@contextmanager
def mcp_transport(client: Client, *, remote: bool) -> Iterator[McpTransport]:
    """Open ``client`` in a blocking portal so the contract runs synchronously."""
    with start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(client) as connected:
            yield McpTransport(portal, connected, remote=remote)


def assert_conforms(outcomes: list[Outcome]) -> None:
    reference = [o for o in outcomes if o.group in ("reference", "tools")]
    own = [o for o in outcomes if o.group == "own"]
    assert len(reference) == REFERENCE_TOTAL
    assert own and len(own) >= len(OWN_CASES) - 2
    failed = [o for o in outcomes if not o.passed]
    assert not failed, f"reference {summary(outcomes)}\nown {summary(outcomes, 'own')}"


@committed_db
def test_conformance_over_mcp_stdio(default_source: Any) -> None:  # noqa: ARG001
    with mcp_transport(Client(manage_mcp()), remote=False) as transport:
        outcomes = run_contract(transport)
    assert_conforms(outcomes)


def test_conformance_over_http_api(  # type: ignore[no-untyped-def]
    api_client, make_key, default_source, settings
) -> None:
    """With the local embedding model (the product default), so dedup is real: the
    same fact again must come back as a duplicate of the first id."""
    settings.BRAIN_EMBEDDING_PROVIDER = "local"
    key = make_key(default_source).plaintext
    outcomes = run_contract(HttpTransport(api_client(key)))
    assert_conforms(outcomes)


@committed_db
def test_conformance_over_mcp_http(  # type: ignore[no-untyped-def]
    live_asgi, make_key, default_source, no_embeddings
) -> None:
    key = make_key(default_source).plaintext

    with start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(
            http_client(f"{live_asgi}/mcp", key)
        ) as client:
            outcomes = run_contract(McpTransport(portal, client, remote=True))
    assert_conforms(outcomes)
