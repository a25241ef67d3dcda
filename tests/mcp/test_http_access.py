"""SPEC §8 over MCP-over-HTTP: a missing or wrong key is refused; the key's sources
and visibility apply to every tool; a remote key never sees private data."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from accounts.services import apikey_revoke
from brain.access import local_caller
from brain.services.pages import page_add
from brain.services.verbs import verb_remember
from tests.mcp.conftest import committed_db, envelope, http_client, payload

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


@committed_db
def test_http_refuses_a_missing_wrong_or_revoked_key_with_the_envelope(  # type: ignore[no-untyped-def]
    live_asgi, make_key, default_source
) -> None:
    revoked = make_key(default_source)
    apikey_revoke(api_key=revoked.api_key, actor="test")
    attempts = {
        "missing": {},
        "not bearer": {"Authorization": "Basic dXNlcjpwYXNz"},
        "wrong": {"Authorization": "Bearer gbr_deadbeef_wrong"},
        "revoked": {"Authorization": f"Bearer {revoked.plaintext}"},
    }

    async def go() -> dict[str, httpx2.Response]:
        async with httpx2.AsyncClient() as http:
            return {
                name: await http.post(
                    f"{live_asgi}/mcp", json=INITIALIZE, headers={**ACCEPT, **headers}
                )
                for name, headers in attempts.items()
            }

    for name, response in anyio.run(go).items():
        assert response.status_code == 401, name
        assert response.headers["www-authenticate"] == 'Bearer realm="brain"'
        body = response.json()
        assert body["error"] == "scope_denied" and body["protocol_version"] == 1
        assert body["message"] == "Missing or invalid API key."
        assert "admin → API keys" in body["suggestion"]


@committed_db
def test_sdk_client_with_a_wrong_key_cannot_connect(live_asgi) -> None:  # type: ignore[no-untyped-def]
    async def go() -> None:
        async with http_client(f"{live_asgi}/mcp", "gbr_deadbeef_wrong") as client:
            await client.list_tools()

    with pytest.raises(ExceptionGroup) as caught:
        anyio.run(go)
    # The 401 surfaces as the SDK's MCPError: no tool list without a valid key.
    assert caught.group_contains(MCPError)


@pytest.fixture
def two_sources_with_private_data(no_embeddings, source_a, source_b) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """World and private pages in team-a, a world page in team-b, a private fact."""
    local = local_caller()
    page_add(
        source=source_a,
        actor=local,
        title="Alpha Rollout Plan",
        type_name="project",
        body="Rollout plan for alpha: staged launch in three regions.",
    )
    secret = page_add(
        source=source_a,
        actor=local,
        title="Alpha Salary Review",
        type_name="note",
        visibility="private",
        body="Confidential rollout salary review: figures inside.",
    )
    page_add(
        source=source_b,
        actor=local,
        title="Beta Rollout Plan",
        type_name="project",
        body="Rollout plan for beta: one region only.",
    )
    fact = verb_remember(
        caller=dataclasses.replace(local, write_source_id="team-a"),
        fact="PRIVATE-SENTINEL the alpha rollout slips to May",
        provenance="1:1 notes",
        entity="Alpha Rollout Plan",
        kind="commitment",
        visibility="private",
    )
    return {"secret_slug": secret.page.slug, "fact_id": fact["id"]}


@committed_db
def test_http_applies_the_keys_sources_and_a_remote_key_never_sees_private_data(  # type: ignore[no-untyped-def]
    live_asgi, make_key, source_a, two_sources_with_private_data, no_embeddings
) -> None:
    remote = make_key(source_a).plaintext
    trusted = make_key(source_a, trusted=True).plaintext
    secret_slug = two_sources_with_private_data["secret_slug"]

    async def session(key: str) -> dict[str, Any]:
        r: dict[str, Any] = {}
        async with http_client(f"{live_asgi}/mcp", key) as c:
            r["sources"] = await c.call_tool("brain_list_sources", {})
            r["search"] = await c.call_tool("brain_search", {"query": "rollout"})
            r["search_b"] = await c.call_tool(
                "brain_search", {"query": "rollout", "source": "team-b"}
            )
            r["get_secret"] = await c.call_tool("brain_get_page", {"slug": secret_slug})
            r["list"] = await c.call_tool("brain_list_pages", {})
            r["recall"] = await c.call_tool(
                "recall", {"entity": "Alpha Rollout Plan", "query": "rollout"}
            )
            r["entity"] = await c.call_tool("entity", {"name": "Alpha Rollout Plan"})
            r["pack"] = await c.call_tool(
                "context_pack",
                {"entities": "Alpha Rollout Plan", "include_private": True},
            )
            r["delta"] = await c.call_tool("delta", {"since": "1970-01-01T00:00:00Z"})
            r["waiting"] = await c.call_tool("waiting", {})
            r["waiting_b"] = await c.call_tool("waiting", {"source": "team-b"})
            r["write_b"] = await c.call_tool(
                "brain_add",
                {
                    "title": "Sneaky",
                    "body": "x",
                    "source": "team-b",
                    "provenance": "test",
                },
            )
        return r

    seen_remote = anyio.run(session, remote)
    seen_trusted = anyio.run(session, trusted)

    for r in (seen_remote, seen_trusted):
        assert [s["id"] for s in payload(r["sources"])["sources"]] == ["team-a"]
        assert {x["source_id"] for x in payload(r["search"])["results"]} == {"team-a"}
        assert envelope(r["search_b"])["error"] == "scope_denied"
        assert envelope(r["write_b"])["error"] == "scope_denied"
        assert envelope(r["waiting_b"])["error"] == "scope_denied"
        assert payload(r["waiting"])["sources"] == ["team-a"]
        assert "Beta" not in json.dumps([x.structured_content for x in r.values()])

    # The remote key sees no private page, fact or text anywhere.
    assert envelope(seen_remote["get_secret"])["error"] == "not_found"
    remote_text = json.dumps([x.structured_content for x in seen_remote.values()])
    for leak in ("Salary", "Confidential", "PRIVATE-SENTINEL", secret_slug):
        assert leak not in remote_text
    # The trusted key of the same source does see them: the filter is visibility.
    assert payload(seen_trusted["get_secret"])["visibility"] == "private"
    trusted_text = json.dumps([x.structured_content for x in seen_trusted.values()])
    assert "Salary" in trusted_text and "PRIVATE-SENTINEL" in trusted_text


@committed_db
def test_mcp_over_http_counts_against_the_keys_http_rate_limit(  # type: ignore[no-untyped-def]
    live_asgi, make_key, default_source
) -> None:
    """One caller resolution for both transports (interfaces.callers): a key limited
    to 2 requests a minute spends them on /api/ and is refused on /mcp, with the
    SPEC §4 envelope and HTTP 429, like the third HTTP request."""
    from django.core.cache import cache

    from accounts.models import ApiKey

    cache.clear()
    issued = make_key(default_source)
    ApiKey.objects.filter(pk=issued.api_key.pk).update(rate_limit_per_minute=2)
    bearer = {"Authorization": f"Bearer {issued.plaintext}"}

    async def go() -> list[httpx2.Response]:
        async with httpx2.AsyncClient() as http:
            return [
                await http.get(f"{live_asgi}/api/whoami", headers=bearer),
                await http.post(
                    f"{live_asgi}/mcp", json=INITIALIZE, headers={**ACCEPT, **bearer}
                ),
                await http.post(
                    f"{live_asgi}/mcp", json=INITIALIZE, headers={**ACCEPT, **bearer}
                ),
                await http.get(f"{live_asgi}/api/whoami", headers=bearer),
            ]

    api_ok, mcp_ok, mcp_over, api_over = anyio.run(go)
    assert (api_ok.status_code, mcp_ok.status_code) == (200, 200)
    assert (mcp_over.status_code, api_over.status_code) == (429, 429)
    body = mcp_over.json()
    assert body["error"] == "unavailable" and body["protocol_version"] == 1
    assert "2 requests per minute" in body["message"] and body["suggestion"]


@committed_db
def test_a_chunked_mcp_request_within_the_limit_is_served(  # type: ignore[no-untyped-def]
    live_asgi, make_key, default_source
) -> None:
    """A body sent without a length is read within the limit and handed on whole:
    ``initialize`` sent in two chunks is answered as if it had a length."""
    key = make_key(default_source)
    raw = json.dumps(INITIALIZE).encode()

    async def chunks():  # type: ignore[no-untyped-def]
        yield raw[:20]
        yield raw[20:]

    async def go() -> httpx2.Response:
        async with httpx2.AsyncClient() as http:
            return await http.post(
                f"{live_asgi}/mcp",
                content=chunks(),
                headers={
                    **ACCEPT,
                    "Content-Type": "application/json",
                    "Authorization": f"Bearer {key.plaintext}",
                },
            )

    response = anyio.run(go)
    assert response.status_code == 200, response.text
    assert "content-length" not in response.request.headers
    assert '"protocolVersion"' in response.text
