"""Fixtures for driving the MCP transports with the SDK's own client.

Both transports run outside the test's transaction (a ``manage.py mcp`` subprocess, a
uvicorn server thread), so these tests are transactional: rows they set up are
committed, and the database is flushed afterwards. ``serialized_rollback`` restores
the rows the data migrations installed (the ``default`` source, the Schema) before
each such test; ``_restore_migrated_rows`` restores them once more at the end of the
session, so a later ``--reuse-db`` run starts from a complete database.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx2
import pytest
import uvicorn
from django.db import connection
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from mcp_types import CallToolResult

REPO_ROOT = Path(__file__).resolve().parents[2]

# Marker for every test that drives a transport (see the module docstring).
committed_db = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture(scope="session", autouse=True)
def _restore_migrated_rows(
    django_db_setup: None, django_db_blocker: Any
) -> Iterator[None]:
    yield
    from brain.models import Source

    with django_db_blocker.unblock():
        contents = getattr(connection, "_test_serialized_contents", None)
        if contents and not Source.objects.filter(id="default").exists():
            connection.creation.deserialize_db_from_string(contents)


def test_database_url() -> str:
    """A ``DATABASE_URL`` for the test database this process uses."""
    s = connection.settings_dict
    host = s["HOST"] or ""
    host = quote(host, safe="") if host.startswith("/") else host
    auth = quote(s["USER"] or "", safe="")
    if s.get("PASSWORD"):
        auth += ":" + quote(s["PASSWORD"], safe="")
    port = f":{s['PORT']}" if s.get("PORT") else ""
    return f"postgres://{auth}@{host}{port}/{s['NAME']}"


test_database_url.__test__ = False  # type: ignore[attr-defined]


def subprocess_env() -> dict[str, str]:
    """Environment for a ``manage.py`` subprocess that must use the test database."""
    return {
        "DJANGO_SETTINGS_MODULE": "gbrain_site.settings_test",
        "DATABASE_URL": test_database_url(),
        "BRAIN_EMBEDDING_PROVIDER": "none",
    }


def stdio_params(
    command: str, args: list[str], *, cwd: Path = REPO_ROOT
) -> StdioServerParameters:
    """Parameters to spawn an MCP stdio server against the test database."""
    return StdioServerParameters(
        command=command, args=args, cwd=cwd, env=subprocess_env()
    )


def manage_mcp(*args: str) -> StdioServerParameters:
    """``python manage.py mcp ARGS`` with this interpreter."""
    return stdio_params(sys.executable, ["manage.py", "mcp", *args])


@asynccontextmanager
async def http_client(url: str, key: str | None) -> AsyncIterator[Client]:
    """An SDK client on the streamable HTTP transport, sending ``key`` as bearer."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


def payload(result: CallToolResult) -> dict[str, Any]:
    """The JSON object a successful tool call returned."""
    assert not result.is_error, result.content[0].text  # type: ignore[union-attr]
    assert result.structured_content is not None
    return result.structured_content


def envelope(result: CallToolResult) -> dict[str, Any]:
    """The SPEC §4 envelope a failed tool call carries (asserting its shape)."""
    assert result.is_error, result
    body = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert set(body) == {"error", "message", "suggestion", "detail", "protocol_version"}
    assert body["protocol_version"] == 1
    assert body["suggestion"]
    return body


def served_application() -> Any:
    """The ASGI application the README serves (``gbrain_site.asgi:application``)."""
    from gbrain_site.asgi import application

    return application


@pytest.fixture(scope="module")
def live_asgi() -> Iterator[str]:
    """Serve ``gbrain_site.asgi.application`` with uvicorn on 127.0.0.1; yields the
    base URL. The server thread shares the test database (its writes are committed
    by transactional tests)."""
    config = uvicorn.Config(
        served_application(),
        host="127.0.0.1",
        port=0,
        lifespan="on",
        log_level="warning",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=30)


@pytest.fixture
def no_embeddings(settings: Any) -> None:
    """Keyword-only search in this process (the server thread), as in the
    subprocesses: keeps the suite from loading the local model."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"


@pytest.fixture
def open_loop(default_source: Any) -> Any:
    """An open commitment loop in ``default`` (what I owe Ada)."""
    from loops.services import loop_open

    return loop_open(
        source=default_source,
        loop_type="commitment_owed_by_me",
        summary="Send Ada the enclosure budget",
        actor="test",
        counterparty_email="ada@example.com",
    )
