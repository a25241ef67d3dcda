"""SPEC §4: the API is mounted at /api/ and every error is the envelope."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from brain.models import Fact

pytestmark = pytest.mark.django_db


def test_health_answers_without_a_key() -> None:
    response = Client().get("/api/health")
    assert response.status_code == 200
    # A fresh test database has no live worker and no schedules: the truth is
    # "degraded", with the failing doctor checks named (tests/ops/test_doctor.py
    # covers the healthy case).
    assert response.json() == {
        "status": "degraded",
        "database": "postgresql",
        "failing": ["worker", "schedules"],
        "imports": {
            "status": "ok",
            "sources_failed": 0,
            "sources_with_holds": 0,
            "running": 0,
            "held": 0,
        },
        "protocol_version": 1,
    }


def test_health_shows_held_items_and_failed_imports(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """SPEC §6 "Every importer": a run with holds and a failed import are visible
    in /api/health (regression: a crashed markdown import left health "ok")."""
    from connectors.mailbox.sync import mailbox_import
    from connectors.models import SyncRun

    (tmp_path / "notes.txt").write_bytes(b"shopping: pears\n")
    (tmp_path / "1.eml").write_bytes(
        b"From: ada@example.org\nSubject: Hi\nMessage-ID: <hi@example.org>\n\nHi\n"
    )
    mailbox_import(source_id="box", path=tmp_path, owners=[])
    imports = Client().get("/api/health").json()["imports"]
    assert imports == {
        "status": "held",
        "sources_failed": 0,
        "sources_with_holds": 1,
        "running": 0,
        "held": 1,
    }
    SyncRun.objects.create(
        source_id="box", kind="import_mail", actor="cli", status="failed"
    )
    body = Client().get("/api/health").json()
    assert body["status"] == "degraded" and "imports" in body["failing"]
    assert body["imports"]["sources_failed"] == 1


def test_openapi_schema_is_served() -> None:
    response = Client().get("/api/openapi.json")
    assert response.status_code == 200
    assert response.json()["info"]["title"] == "Brain API"


def test_a_missing_or_wrong_key_gets_the_error_envelope(api_client) -> None:  # type: ignore[no-untyped-def]
    for key in (None, "gbr_wrong_key"):
        response = api_client(key).get("/api/whoami")
        assert response.status_code == 401
        body = response.json()
        assert body == {
            "error": "scope_denied",
            "message": "Missing or invalid API key.",
            "suggestion": body["suggestion"],
            "detail": "",  # SPEC §4: detail is always a string
            "protocol_version": 1,
        }
        assert "admin → API keys" in body["suggestion"]


def test_whoami_describes_the_key(api_client, make_key, source_a) -> None:  # type: ignore[no-untyped-def]
    issued = make_key(source_a)
    body = api_client(issued.plaintext).get("/api/whoami").json()
    assert body["remote"] is True
    assert body["write_source"] == "team-a"
    assert body["readable_sources"] == ["team-a"]
    assert body["scopes"] == ["read", "write"]


def test_nul_bytes_in_a_read_get_the_envelope_not_a_500(
    api_client, make_key, default_source
) -> None:  # type: ignore[no-untyped-def]
    """Regression (fresh-clone check): a NUL byte reached PostgreSQL and gave HTTP 500."""
    client = api_client(make_key(default_source).plaintext)
    for response in (
        client.get("/api/search", {"query": "\x00"}),
        client.post(
            "/api/recall", {"query": "a\x00b"}, content_type="application/json"
        ),
    ):
        assert response.status_code == 400, response.content
        body = response.json()
        assert body["error"] == "invalid_params" and "NUL" in body["suggestion"]


def test_an_oversized_body_gets_the_envelope(
    api_client, make_key, default_source, settings
) -> None:  # type: ignore[no-untyped-def]
    """Regression: a body over DATA_UPLOAD_MAX_MEMORY_SIZE gave HTTP 500."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    client = api_client(make_key(default_source).plaintext)
    response = client.post(
        "/api/remember",
        {"fact": "x" * 5000, "provenance": "test"},
        content_type="application/json",
    )
    assert response.status_code == 413
    assert response.json()["error"] == "invalid_params"


def test_unknown_api_paths_get_the_envelope_not_html() -> None:
    response = Client(enforce_csrf_checks=True).post("/api/frobnicate")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
    assert "/api/openapi.json" in response.json()["suggestion"]


def test_a_missing_query_parameter_is_named_not_called_body(
    api_client, make_key, default_source
) -> None:  # type: ignore[no-untyped-def]
    """Regression (newcomer): ``GET /api/search`` without ``query`` answered "Invalid
    or missing parameter(s): body" because the field's name equals the location."""
    client = api_client(make_key(default_source).plaintext)
    response = client.get("/api/search")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"] == "invalid_params"
    assert json.loads(body["detail"])["fields"] == [
        {"field": "query", "problem": "Field required"}
    ]
    assert "query" in body["message"] and "body" not in body["message"]


def assert_unknown_arguments(response, *names: str) -> dict:  # type: ignore[no-untyped-def]
    """``response`` is the 400 ``invalid_params`` refusal of the unknown arguments
    ``names`` (each "unknown argument" in ``detail.fields``); returns its body."""
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"] == "invalid_params"
    assert json.loads(body["detail"])["fields"] == [
        {"field": name, "problem": "unknown argument"} for name in names
    ]
    return body


def test_an_unknown_body_field_is_refused_as_over_mcp(
    api_client, make_key, default_source
) -> None:  # type: ignore[no-untyped-def]
    """HTTP answers a misspelt argument the way MCP's ``call_tool`` does (SPEC §4: one
    contract on every transport): refused with the allowed names, nothing written."""
    client = api_client(make_key(default_source).plaintext)
    response = client.post(
        "/api/remember",
        {"fact": "Dana likes tea", "provenance": "test", "entitty": "people/dana"},
        content_type="application/json",
    )
    body = assert_unknown_arguments(response, "entitty")
    assert "entitty" in body["message"] and "openapi" in body["suggestion"]
    assert not Fact.objects.filter(text="Dana likes tea").exists()


def test_an_unknown_query_parameter_is_refused_naming_the_ones_taken(
    api_client, make_key, default_source
) -> None:  # type: ignore[no-untyped-def]
    """Regression (newcomer): GET endpoints dropped an unknown query parameter
    silently (``?limt=5`` answered with the default limit of 10); it is refused as
    an unknown body key is, with the parameters the endpoint takes."""
    client = api_client(make_key(default_source).plaintext)
    response = client.get("/api/search", {"query": "pottery", "limt": "5"})
    body = assert_unknown_arguments(response, "limt")
    assert "limt" in body["message"] and "limit" in body["suggestion"]
    assert (
        client.get("/api/search", {"query": "pottery", "limit": "5"}).status_code == 200
    )
    response = client.get("/api/whoami", {"verbose": "1"})
    assert response.status_code == 400
    assert "takes no query parameters" in response.json()["suggestion"]


@pytest.mark.parametrize(
    ("path", "body", "typo"),
    [
        ("/api/loops_close", {"id": "1", "stauts": "dropped"}, "stauts"),
        (
            "/api/loops_mute",
            {"kind": "sender", "value": "a@x.org", "sorce": "d"},
            "sorce",
        ),
        ("/api/loops_correct_due", {"id": "1", "deu": "2030-01-01"}, "deu"),
        ("/api/ask", {"question": "who is Dana?", "budget_usd": 1}, "budget_usd"),
    ],
)
def test_a_loop_tool_refuses_an_unknown_body_field(
    api_client, make_key, default_source, path, body, typo
) -> None:  # type: ignore[no-untyped-def]
    """Regression (newcomer): the loop tools and ask ignored unknown body keys, so
    ``{"stauts": "dropped"}`` closed a loop as done; refused as on every other
    endpoint and over MCP, before anything runs."""
    client = api_client(make_key(default_source).plaintext)
    response = client.post(path, body, content_type="application/json")
    assert_unknown_arguments(response, typo)


def test_a_query_word_longer_than_any_index_word_is_no_500(
    api_client, make_key, default_source
) -> None:  # type: ignore[no-untyped-def]
    """Regression (newcomer): one query word of 2,047 characters or more answered
    500 ("word is too long in tsquery") on search and recall; such a word can match
    nothing, so it is left out of the keyword arm."""
    client = api_client(make_key(default_source).plaintext)
    word = "y" * 2100
    for response in (
        client.get("/api/search", {"query": word}),
        client.get("/api/search", {"query": f"pottery {word}"}),
        client.post("/api/recall", {"query": word}, content_type="application/json"),
    ):
        assert response.status_code == 200, response.content


def test_a_nul_in_a_page_field_is_refused_naming_the_field(
    api_client, make_key, default_source
) -> None:  # type: ignore[no-untyped-def]
    """Regression (newcomer): a NUL in add_page's title or body answered the raw
    database error with no field named; it is refused before the write."""
    client = api_client(make_key(default_source).plaintext)
    response = client.post(
        "/api/pages",
        {"title": "Dana", "body": "first\x00second"},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"] == "invalid_params"
    assert "NUL" in body["message"] and "'body'" in body["message"]
    assert json.loads(body["detail"])["fields"] == [
        {"field": "body", "problem": "NUL character"}
    ]


def test_a_remote_keys_fact_carries_the_server_stamp_on_recall(
    api_client, make_key, default_source
) -> None:  # type: ignore[no-untyped-def]
    """Regression (newcomer): a fact a remote key wrote came back to a trusted
    reader with only the provenance text the key chose ("remote test"), nothing
    naming the key (SPEC §8: remote callers' provenance is stamped by the server).
    A trusted writer's fact keeps its text as written."""
    remote = make_key(default_source, name="harness-x")
    trusted = make_key(default_source, trusted=True, name="curator")
    for key, text in ((remote, "Dana banks at Harbour"), (trusted, "Dana likes tea")):
        response = api_client(key.plaintext).post(
            "/api/remember",
            {"fact": text, "provenance": "remote test", "entity": "Dana"},
            content_type="application/json",
        )
        assert response.status_code == 200, response.content
    facts = {
        f["fact"]: f["provenance"]
        for f in api_client(trusted.plaintext)
        .post("/api/recall", {"entity": "Dana"}, content_type="application/json")
        .json()["facts"]
    }
    assert facts["Dana likes tea"] == "remote test"
    stamped = facts["Dana banks at Harbour"]
    assert stamped.startswith("remote test (key=") and "harness-x" in stamped
    assert "client=" in stamped and "at=" in stamped
