"""The page tools over HTTP (SPEC §4): envelope, scopes, isolation, query counts."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from brain.access import local_caller
from brain.models import Source
from brain.services.pages import page_add

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_embeddings(settings) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"


def _seed(source: Source, n: int = 3, **kw) -> None:  # type: ignore[no-untyped-def]
    for i in range(n):
        page_add(
            source=source,
            slug=f"notes/item-{i}",
            title=f"Item {i}",
            body=f"Kayak trip number {i}.",
            actor=local_caller(),
            **kw,
        )


def test_add_page_creates_in_the_write_source_with_server_stamped_provenance(
    api_client,
    make_key,
    source_a,  # type: ignore[no-untyped-def]
) -> None:
    issued = make_key(source_a)
    response = api_client(issued.plaintext).post(
        "/api/pages",
        {"title": "Offsite plan", "body": "Lisbon in March."},
        content_type="application/json",
        headers={"X-Brain-Client": "codex"},
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["protocol_version"] == 1 and body["created"] is True
    assert (body["slug"], body["source_id"]) == ("notes/offsite-plan", "team-a")
    page = body["page"]
    assert "agent-input" in page["tags"]
    assert page["frontmatter"]["provenance"]["client"] == "codex"
    assert page["summary"] == "Lisbon in March."


def test_add_page_twice_is_refused_with_the_envelope_pointing_at_update(
    api_client,
    make_key,
    source_a,  # type: ignore[no-untyped-def]
) -> None:
    client = api_client(make_key(source_a).plaintext)
    payload = {"title": "Offsite plan", "body": "Lisbon."}
    client.post("/api/pages", payload, content_type="application/json")
    response = client.post("/api/pages", payload, content_type="application/json")
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "invalid_params" and "update_page" in body["suggestion"]
    assert body["protocol_version"] == 1


def test_update_page_appends_by_default_and_missing_page_is_not_found(
    api_client,
    make_key,
    source_a,  # type: ignore[no-untyped-def]
) -> None:
    client = api_client(make_key(source_a).plaintext)
    client.post(
        "/api/pages", {"title": "Plan", "body": "One."}, content_type="application/json"
    )
    response = client.post(
        "/api/pages/notes/plan", {"body": "Two."}, content_type="application/json"
    )
    assert response.status_code == 200, response.json()
    assert response.json()["page"]["body"] == "One.\n\nTwo."
    assert response.json()["operation"] == "append"
    missing = client.post(
        "/api/pages/notes/nope", {"body": "x"}, content_type="application/json"
    )
    assert missing.status_code == 404
    assert missing.json()["error"] == "not_found"
    assert "add_page" in missing.json()["suggestion"]


def test_writes_need_the_write_scope(api_client, make_key, source_a) -> None:  # type: ignore[no-untyped-def]
    client = api_client(make_key(source_a, scopes=("read",)).plaintext)
    response = client.post(
        "/api/pages", {"title": "x"}, content_type="application/json"
    )
    assert response.status_code == 403 and response.json()["error"] == "scope_denied"


def test_a_key_cannot_write_into_another_source(
    api_client, make_key, source_a, source_b
) -> None:  # type: ignore[no-untyped-def]
    client = api_client(make_key(source_a).plaintext)
    response = client.post(
        "/api/pages",
        {"title": "x", "source": "team-b"},
        content_type="application/json",
    )
    assert response.status_code == 403 and response.json()["error"] == "scope_denied"


def test_get_page_is_scoped_and_hides_private_pages_from_remote_keys(
    api_client,
    make_key,
    source_a,
    source_b,  # type: ignore[no-untyped-def]
) -> None:
    page_add(
        source=source_a, slug="notes/open", title="Open", body="x", actor=local_caller()
    )
    page_add(
        source=source_a,
        slug="notes/secret",
        title="Secret",
        body="x",
        visibility="private",
        actor=local_caller(),
    )
    page_add(
        source=source_b,
        slug="notes/other",
        title="Other",
        body="x",
        actor=local_caller(),
    )
    client = api_client(make_key(source_a, readable=(source_a,)).plaintext)
    ok = client.get("/api/pages/notes/open")
    assert ok.status_code == 200 and ok.json()["protocol_version"] == 1
    assert ok.json()["body"] == "x" and ok.json()["index_current"] is True
    assert client.get("/api/pages/notes/secret").status_code == 404
    assert client.get("/api/pages/notes/other").status_code == 404
    assert client.get("/api/pages/notes/other", {"source": "team-b"}).status_code == 403
    trusted = api_client(
        make_key(source_a, readable=(source_a,), trusted=True).plaintext
    )
    assert trusted.get("/api/pages/notes/secret").status_code == 200


def test_search_endpoint_returns_spec_fields_and_is_source_scoped(
    api_client,
    make_key,
    source_a,
    source_b,  # type: ignore[no-untyped-def]
) -> None:
    _seed(source_a, 2)
    _seed(source_b, 2)
    client = api_client(make_key(source_a, readable=(source_a,)).plaintext)
    response = client.get(reverse("api:search"), {"query": "kayak trip"})
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["protocol_version"] == 1
    assert body["search_degraded"].startswith("vector_search_unavailable")
    assert body["budget_tokens"] is None
    assert {r["source_id"] for r in body["results"]} == {"team-a"}
    assert {
        "slug",
        "title",
        "chunk",
        "score",
        "similarity",
        "evidence",
        "create_safety",
    } <= set(body["results"][0])


def test_search_without_query_is_invalid_params(api_client, make_key, source_a) -> None:  # type: ignore[no-untyped-def]
    response = api_client(make_key(source_a).plaintext).get("/api/search")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_params"


def test_list_pages_is_paginated_with_a_fixed_query_count(
    api_client,
    make_key,
    source_a,  # type: ignore[no-untyped-def]
) -> None:
    _seed(source_a, 3)
    client = api_client(make_key(source_a, readable=(source_a,)).plaintext)
    url = reverse("api:list_pages")
    client.get(url)  # the first use of a key stamps last_used_at; not part of listing
    with CaptureQueriesContext(connection) as small:
        response = client.get(url, {"limit": 2})
    body = response.json()
    assert (
        response.status_code == 200 and body["count"] == 3 and len(body["items"]) == 2
    )
    assert body["protocol_version"] == 1
    assert body["items"][0]["type"] == "note"
    for i in range(3, 15):
        page_add(
            source=source_a,
            slug=f"notes/more-{i}",
            title=f"More {i}",
            body="x",
            actor=local_caller(),
        )
    with CaptureQueriesContext(connection) as large:
        response = client.get(url, {"limit": 15})
    assert len(response.json()["items"]) == 15
    # Key lookup, its readable sources, the scope's sources, count, one page of rows.
    assert len(large.captured_queries) == len(small.captured_queries) == 5
