"""``gbrain_site.asgi:application`` serves the whole site under uvicorn: MCP at /mcp,
Django (admin, API) everywhere else, and the admin's static files."""

from __future__ import annotations

import anyio
import httpx2
import pytest

from tests.mcp.conftest import committed_db

pytestmark = pytest.mark.django_db


def test_the_asgi_app_serves_django_the_admin_static_files_and_mcp(live_asgi) -> None:  # type: ignore[no-untyped-def]
    async def go() -> dict[str, httpx2.Response]:
        async with httpx2.AsyncClient(base_url=live_asgi) as http:
            return {
                path: await http.get(path)
                for path in (
                    "/api/health",
                    "/admin/login/",
                    "/static/admin/css/base.css",
                    "/mcp/nope",
                    "/mcpx",
                )
            }

    seen = anyio.run(go)
    assert seen["/api/health"].json()["database"] == "postgresql"
    assert seen["/admin/login/"].status_code == 200
    assert seen["/static/admin/css/base.css"].status_code == 200
    assert "text/css" in seen["/static/admin/css/base.css"].headers["content-type"]
    # Unknown surfaces are refused with the envelope; /mcpx is Django's (a 404 page).
    assert seen["/mcp/nope"].status_code == 404
    assert seen["/mcp/nope"].json()["error"] == "not_found"
    assert seen["/mcpx"].status_code == 404


def test_a_host_outside_allowed_hosts_is_refused(live_asgi) -> None:  # type: ignore[no-untyped-def]
    async def go() -> httpx2.Response:
        async with httpx2.AsyncClient() as http:
            return await http.post(
                f"{live_asgi}/mcp", json={}, headers={"Host": "evil.example"}
            )

    response = anyio.run(go)
    assert response.status_code == 400
    assert response.json()["message"] == "Host not allowed."


def test_an_oversized_mcp_body_gets_the_envelope_not_plain_text(live_asgi) -> None:  # type: ignore[no-untyped-def]
    """SPEC §4: a body over the MCP SDK's 4 MiB limit is refused by our code, with
    the envelope, before the SDK's plain-text 413."""

    async def go() -> httpx2.Response:
        async with httpx2.AsyncClient() as http:
            return await http.post(
                f"{live_asgi}/mcp",
                content=b"x" * (6 * 1024 * 1024),
                headers={"Content-Type": "application/json"},
            )

    response = anyio.run(go)
    assert response.status_code == 413
    body = response.json()
    assert body["error"] == "invalid_params"
    assert "limit" in body["message"] and isinstance(body["detail"], str)


def test_an_oversized_chunked_mcp_body_gets_the_envelope(live_asgi) -> None:  # type: ignore[no-untyped-def]
    """SPEC §4: a body over the limit sent without a length (chunked transfer) is
    refused with the envelope too (it reached the SDK's plain-text 413 before)."""

    async def chunks():  # type: ignore[no-untyped-def]
        for _ in range(6):
            yield b"x" * (1024 * 1024)

    async def go() -> httpx2.Response:
        async with httpx2.AsyncClient() as http:
            return await http.post(
                f"{live_asgi}/mcp",
                content=chunks(),
                headers={"Content-Type": "application/json"},
            )

    response = anyio.run(go)
    assert response.status_code == 413
    body = response.json()
    assert body["error"] == "invalid_params"
    assert "limit" in body["message"]


@committed_db
def test_a_get_on_the_mcp_endpoint_is_405_not_a_stream_that_never_ends(
    live_asgi, make_key, default_source
) -> None:  # type: ignore[no-untyped-def]
    """Regression (newcomer): GET /mcp with a valid key answered 200
    ``text/event-stream`` and then nothing, holding the connection until the client
    gave up; the endpoint is stateless JSON, so GET is 405 with the envelope and
    ``Allow: POST`` (the MCP transport's permitted answer)."""
    key = make_key(default_source).plaintext

    async def go() -> httpx2.Response:
        async with httpx2.AsyncClient(timeout=10) as http:
            return await http.get(
                f"{live_asgi}/mcp", headers={"Authorization": f"Bearer {key}"}
            )

    response = anyio.run(go)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.json()["error"] == "invalid_params"
