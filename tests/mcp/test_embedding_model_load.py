"""The embedding model loads once per process, outside requests (SPEC §11): a web save
never waits for it; its chunks wait for ``embed_pending`` instead. Committed
transactions, so the save's after-commit embedding runs inside the request as in
production."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.urls import reverse

from brain.embeddings import WARM_UP_THREAD, LocalProvider, get_provider
from brain.models import Chunk, Page
from tests.mcp.conftest import committed_db

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
