"""Shared fixtures: sources, callers (Alice, Bob and an outsider) and API clients."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from accounts.services import IssuedKey, apikey_create
from brain.access import Caller, local_caller
from brain.models import Source
from tests.factories import SourceFactory


@pytest.fixture
def default_source(db: None) -> Source:
    """The ``default`` source installed by the data migration."""
    return Source.objects.get(id="default")


@pytest.fixture
def source_a(db: None) -> Source:
    return SourceFactory(id="team-a", name="Team A", federated=True)


@pytest.fixture
def source_b(db: None) -> Source:
    return SourceFactory(id="team-b", name="Team B", federated=True)


@pytest.fixture
def local() -> Caller:
    """A trusted local caller (CLI / MCP over stdio)."""
    return local_caller()


@pytest.fixture
def make_key(db: None) -> Callable[..., IssuedKey]:
    """Create an API key: ``make_key(source, trusted=False, scopes=("read","write"))``."""

    def _make(
        source: Source,
        *,
        trusted: bool = False,
        scopes: tuple[str, ...] = ("read", "write"),
        readable: tuple[Source, ...] = (),
        name: str = "test key",
    ) -> IssuedKey:
        return apikey_create(
            name=name,
            scopes=scopes,
            write_source=source,
            readable_sources=readable,
            trusted=trusted,
        )

    return _make


@pytest.fixture
def api_client() -> Callable[[str | None], Client]:
    """A Django test client that sends ``Authorization: Bearer <key>``."""

    def _client(key: str | None) -> Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return Client(headers=headers)

    return _client
