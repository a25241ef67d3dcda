"""SPEC §9 push context over HTTP: ``POST /api/push_context`` (scoping per SPEC §8)."""

from __future__ import annotations

import pytest

from brain.models import PushEvent, Source, Visibility
from tests.brain.test_push import make_page

pytestmark = pytest.mark.django_db

URL = "/api/push_context"


@pytest.fixture
def pages(default_source: Source, source_b: Source) -> None:
    make_page(default_source, "Priya Raman", "priya", summary="CTO of Lumen Labs.")
    make_page(default_source, "Nadia Petrov", "nadia", visibility=Visibility.PRIVATE)
    make_page(source_b, "Felix Brandt", "felix")


def test_push_context_endpoint_returns_pages_and_logs_the_session(
    api_client, make_key, default_source, pages
) -> None:  # type: ignore[no-untyped-def]
    issued = make_key(default_source, readable=(default_source,))
    body = {
        "turns": ["And Felix Brandt.", {"role": "user", "text": "Ask Priya Raman."}],
        "session_id": "sess-1",
    }
    response = api_client(issued.plaintext).post(
        URL, body, content_type="application/json"
    )
    assert response.status_code == 200
    data = response.json()
    assert [(p["slug"], p["arm"], p["synopsis"]) for p in data["pages"]] == [
        ("people/priya-raman", "title", "CTO of Lumen Labs.")
    ]
    assert data["session_id"] == "sess-1" and data["source"] is None
    assert data["max_pages"] == 3 and data["protocol_version"] == 1
    assert PushEvent.objects.filter(session_id="sess-1").count() == 1
    again = api_client(issued.plaintext).post(
        URL, body, content_type="application/json"
    )
    assert again.json()["pages"] == []


def test_private_pages_hidden_from_remote_keys_over_http(
    api_client, make_key, default_source, pages
) -> None:  # type: ignore[no-untyped-def]
    remote = make_key(default_source, readable=(default_source,))
    trusted = make_key(
        default_source, readable=(default_source,), trusted=True, name="t"
    )
    body = {"turns": ["Schedule the interview with Nadia Petrov."]}
    remote_pages = api_client(remote.plaintext).post(
        URL, body, content_type="application/json"
    )
    trusted_pages = api_client(trusted.plaintext).post(
        URL, body, content_type="application/json"
    )
    assert remote_pages.json()["pages"] == []
    assert [p["slug"] for p in trusted_pages.json()["pages"]] == ["people/nadia-petrov"]


def test_source_isolation_over_http(
    api_client, make_key, default_source, source_b, pages
) -> None:  # type: ignore[no-untyped-def]
    key = make_key(default_source, readable=(default_source,))
    denied = api_client(key.plaintext).post(
        URL,
        {"turns": ["Ask Felix Brandt."], "source": "team-b"},
        content_type="application/json",
    )
    assert denied.status_code == 403
    assert denied.json()["error"] == "scope_denied"
    both = make_key(default_source, readable=(default_source, source_b), name="both")
    only_b = api_client(both.plaintext).post(
        URL,
        {"turns": ["Ask Felix Brandt and Priya Raman."], "source": "team-b"},
        content_type="application/json",
    )
    assert [(p["source_id"], p["slug"]) for p in only_b.json()["pages"]] == [
        ("team-b", "people/felix-brandt")
    ]


def test_bad_input_gets_the_error_envelope(
    api_client, make_key, default_source
) -> None:  # type: ignore[no-untyped-def]
    key = make_key(default_source)
    for body in (
        {"turns": ["hi"], "max_pages": 0},
        {"max_pages": 2},
        {"turns": [{"role": "user"}]},
    ):
        response = api_client(key.plaintext).post(
            URL, body, content_type="application/json"
        )
        assert response.status_code == 400
        assert response.json()["error"] == "invalid_params"
        assert response.json()["suggestion"]


def test_max_pages_above_5_is_capped_at_5(api_client, make_key, default_source) -> None:  # type: ignore[no-untyped-def]
    names = ["Ana Lima", "Ben Ode", "Cleo Park", "Dev Rao", "Eva Moss", "Finn Roe"]
    for name in names:
        make_page(default_source, name)
    key = make_key(default_source, readable=(default_source,))
    response = api_client(key.plaintext).post(
        URL,
        {"turns": [f"Invite {', '.join(names)}."], "max_pages": 9},
        content_type="application/json",
    )
    assert response.status_code == 200
    assert response.json()["max_pages"] == 5
    assert len(response.json()["pages"]) == 5
