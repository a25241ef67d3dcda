"""The embedding model loads once per process, outside requests (SPEC §11): a web save
never waits for it; its chunks wait for ``embed_pending`` instead. Committed
transactions, so the save's after-commit embedding runs inside the request as in
production."""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

import anyio
from django.urls import reverse
from mcp import Client as McpClient

from brain.embeddings import WARM_UP_THREAD, LocalProvider, get_provider
from brain.models import Chunk, Page
from tests.mcp.conftest import committed_db, payload, stdio_params, subprocess_env

if TYPE_CHECKING:
    from collections.abc import Callable

    from django.test import Client

    from accounts.services import IssuedKey
    from brain.models import Source

pytestmark = committed_db


def test_no_request_loads_the_embedding_model(
    settings,  # type: ignore[no-untyped-def]
    default_source: Source,
    make_key: Callable[..., IssuedKey],
    api_client: Callable[[str | None], Client],
) -> None:
    settings.BRAIN_EMBEDDING_PROVIDER = "local"
    # Another model name is another provider (cached per settings): a fresh process
    # whose model is not loaded yet.
    settings.BRAIN_EMBEDDING_MODEL = "all-MiniLM-L6-v2-not-loaded-yet"
    provider = get_provider()
    assert isinstance(provider, LocalProvider)
    assert provider.loaded_in is None
    client = api_client(make_key(default_source, trusted=True).plaintext)

    saved = client.post(
        "/api/pages",
        {"title": "Harbor tram", "body": "The harbor tram opened in May."},
        content_type="application/json",
    )

    assert saved.status_code == 201, saved.json()
    assert provider.loaded_in is None or provider.loaded_in == WARM_UP_THREAD
    page = Page.objects.get(title="Harbor tram")
    assert Chunk.objects.filter(page=page, embedding__isnull=True).exists(), (
        "the save did not wait for the model: its chunks wait for embed_pending"
    )
    warming = provider.warm_up()  # the request started the background load
    if warming is not None:
        warming.join()
    assert provider.loaded_in == WARM_UP_THREAD, "loaded in the background thread"
    found = client.get(reverse("api:search"), {"query": "harbor tram"})
    assert found.status_code == 200, found.json()
    assert [r["title"] for r in found.json()["results"]] == ["Harbor tram"]


def test_search_while_the_model_loads_says_so(
    settings,  # type: ignore[no-untyped-def]
    default_source: Source,
    make_key: Callable[..., IssuedKey],
    api_client: Callable[[str | None], Client],
) -> None:
    """Right after a server starts, the model loads in the background: search answers
    keyword-only and its ``search_degraded`` says the model is loading (it used to
    read like a provider failure), then says nothing once the model is ready."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"  # the page is saved before the server
    client = api_client(make_key(default_source, trusted=True).plaintext)
    assert (
        client.post(
            "/api/pages",
            {"title": "Ferry timetable", "body": "The ferry leaves at nine."},
            content_type="application/json",
        ).status_code
        == 201
    )
    settings.BRAIN_EMBEDDING_PROVIDER = "local"
    settings.BRAIN_EMBEDDING_MODEL = "all-MiniLM-L6-v2-loading-at-start"
    provider = get_provider()
    assert isinstance(provider, LocalProvider)
    assert provider.loaded_in is None
    # The server's warm-up thread has not finished: a stand-in thread that is alive
    # until released holds the provider's loading slot, as a slow load would.
    release = threading.Event()
    slow_load = threading.Thread(target=release.wait, name=WARM_UP_THREAD, daemon=True)
    slow_load.start()
    provider._warming = slow_load
    try:
        loading = client.get(reverse("api:search"), {"query": "ferry timetable"})
    finally:
        release.set()
        slow_load.join()

    assert loading.status_code == 200, loading.json()
    body = loading.json()
    assert [r["title"] for r in body["results"]] == ["Ferry timetable"]
    assert body["search_degraded"].startswith(
        "vector_search_unavailable: provider local (model loading"
    ), body["search_degraded"]
    warming = provider.warm_up()
    if warming is not None:
        warming.join()
    embedded = client.get(reverse("api:search"), {"query": "ferry timetable"}).json()
    assert "model loading" not in (embedded["search_degraded"] or "")


def test_mcp_stdio_first_search_answers_keyword_only_while_the_model_loads(
    settings,  # type: ignore[no-untyped-def]
    default_source: Source,
    make_key: Callable[..., IssuedKey],
    api_client: Callable[[str | None], Client],
) -> None:
    """Issue 47: the first ``brain_search`` of a stdio session waited 11 s for the
    model that startup said loads "in the background". Over stdio a tool call now
    never waits for it: with a load that never finishes (tests/mcp/slow_model_mcp.py)
    the first search answers keyword-only and says the model is loading (before the
    fix it blocked on the load; ``fail_after`` turns that hang into a failure)."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    client = api_client(make_key(default_source, trusted=True).plaintext)
    saved = client.post(
        "/api/pages",
        {"title": "Lighthouse keeper", "body": "The lighthouse keeper is Ada."},
        content_type="application/json",
    )
    assert saved.status_code == 201, saved.json()
    params = stdio_params(sys.executable, ["-m", "tests.mcp.slow_model_mcp"])
    params.env = {**subprocess_env(), "BRAIN_EMBEDDING_PROVIDER": "local"}

    async def first_search() -> dict[str, Any]:
        async with McpClient(params) as mcp:
            with anyio.fail_after(60):
                return payload(
                    await mcp.call_tool("brain_search", {"query": "lighthouse keeper"})
                )

    found = anyio.run(first_search)

    assert [r["title"] for r in found["results"]] == ["Lighthouse keeper"]
    assert found["search_degraded"].startswith(
        "vector_search_unavailable: provider local (model loading"
    ), found["search_degraded"]
