"""Shared fixtures: sources, callers (Alice, Bob and an outsider) and API clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from django.test import Client

from accounts.services import IssuedKey, apikey_create
from brain.access import Caller, local_caller
from brain.embeddings import embeddings_warm_up
from brain.models import Source
from tests.factories import SourceFactory


@pytest.fixture(scope="session", autouse=True)
def embedding_model_loaded_at_startup() -> None:
    """Load the local embedding model once, before any test, as a web server does at
    startup (``gbrain_site.asgi``): requests never load it, so a test that saves
    through the API and expects vectors needs it loaded, like production."""
    warming = embeddings_warm_up()
    if warming is not None:
        warming.join()


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


@pytest.fixture
def fake_anthropic(settings):  # type: ignore[no-untyped-def]
    """Fake the Anthropic API at the HTTP layer.

    Usage: ``fake_anthropic(handler)`` where ``handler(request) -> httpx2.Response``;
    returns the list of requests seen. The real ``anthropic`` client runs.
    """
    import httpx2

    from brain.llm import use_transport

    settings.ANTHROPIC_API_KEY = "sk-ant-test"
    seen: list[object] = []
    stack: list[object] = []

    def install(handler):  # type: ignore[no-untyped-def]
        def record(request):  # type: ignore[no-untyped-def]
            seen.append(request)
            return handler(request)

        ctx = use_transport(httpx2.MockTransport(record))
        ctx.__enter__()
        stack.append(ctx)
        return seen

    yield install
    for ctx in reversed(stack):
        ctx.__exit__(None, None, None)  # type: ignore[attr-defined]


@pytest.fixture
def restore_migrated_rows(django_db_setup, django_db_blocker) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Put the rows data migrations installed back after a transactional test.

    A transactional test ends with a flush of every table, which would also remove
    the ``default`` source and the Schema installed by migrations from the reused
    test database. Request this fixture *before* ``transactional_db``.
    """
    from django.apps import apps
    from django.core.management import call_command
    from django.core.management.color import no_style
    from django.db import connection

    with django_db_blocker.unblock():
        snapshot = connection.creation.serialize_db_to_string()
    yield
    with django_db_blocker.unblock():
        # The test's own flush re-created content types and permissions with new ids;
        # empty everything again so the snapshot goes back exactly as it was.
        call_command("flush", interactive=False, inhibit_post_migrate=True, verbosity=0)
        connection.creation.deserialize_db_from_string(snapshot)
        # Rows came back with their ids; move every sequence past them.
        statements = connection.ops.sequence_reset_sql(no_style(), apps.get_models())
        with connection.cursor() as cursor:
            for sql in statements:
                cursor.execute(sql)
