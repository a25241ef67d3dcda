"""Isolation (SPEC §8, §2.1): two sources and three keys (trusted key for A, remote key
for A, key for B). Every verb endpoint is tried across the boundaries; nothing
crosses, and private facts and pages never reach the remote key."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from brain.access import local_caller
from brain.models import Fact
from brain.services.facts import fact_remember
from tests.brain.conftest import add_page
from tests.brain.verbs_helpers import call

pytestmark = pytest.mark.django_db

SECRETS = ("PRIVATE-FACT-A", "Secret Sam", "people/secret-sam")
A_ONLY = ("Alice Example", "WORLD-FACT-A", "people/alice-example")


@pytest.fixture
def brain(source_a, source_b, make_key, api_client):  # type: ignore[no-untyped-def]
    alice = add_page(source_a, title="Alice Example", slug="people/alice-example")
    add_page(
        source_a,
        title="Secret Sam",
        slug="people/secret-sam",
        visibility="private",
        body="Secret Sam is a private page of source A.",
    )
    bob = add_page(source_b, title="Bob Beta", slug="people/bob-beta")
    caller = local_caller()
    world = fact_remember(
        caller=caller,
        text="WORLD-FACT-A Alice likes sailing",
        provenance="t",
        entity=alice,
        source=source_a,
    )
    private = fact_remember(
        caller=caller,
        text="PRIVATE-FACT-A Alice owes a favour",
        provenance="t",
        entity=alice,
        source=source_a,
        visibility="private",
        kind="commitment",
    )
    fact_remember(
        caller=caller,
        text="Bob likes chess",
        provenance="t",
        entity=bob,
        source=source_b,
    )
    keys = {
        "trusted_a": make_key(source_a, trusted=True, name="trusted A").plaintext,
        "remote_a": make_key(source_a, name="remote A").plaintext,
        "key_b": make_key(source_b, name="key B").plaintext,
    }

    def verb(who: str, name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return call(api_client(keys[who]), name, body)

    return {
        "verb": verb,
        "world_id": str(world.fact.pk),
        "private_id": str(private.fact.pk),
    }


ECHOES = ("query", "entity", "entities", "missing", "name", "question")


def leaks(body: dict[str, Any], needles: tuple[str, ...]) -> list[str]:
    """Needles found in a response, ignoring the echoed inputs."""
    text = json.dumps({k: v for k, v in body.items() if k not in ECHOES})
    return [n for n in needles if n in text]


def test_recall_never_crosses_sources_or_shows_private_to_remote(brain) -> None:  # type: ignore[no-untyped-def]
    verb = brain["verb"]
    for params in (
        {},
        {"entity": "Alice Example"},
        {"query": "Alice"},
        {"query": "Secret Sam"},
        {"since": "1970-01-01T00:00:00Z"},
    ):
        _, body = verb("key_b", "recall", params)
        assert leaks(body, A_ONLY + SECRETS) == [], params
        _, body = verb("remote_a", "recall", params)
        assert leaks(body, SECRETS) == [], params
    _, trusted = verb("trusted_a", "recall", {"entity": "Alice Example"})
    assert {f["fact"][:14] for f in trusted["facts"]} == {
        "WORLD-FACT-A A",
        "PRIVATE-FACT-A",
    }
    status, denied = verb("key_b", "recall", {"source": "team-a"})
    assert status == 403 and denied["error"] == "scope_denied"


def test_entity_never_resolves_or_suggests_across_sources(brain) -> None:  # type: ignore[no-untyped-def]
    verb = brain["verb"]
    for name in (
        "Alice Example",
        "people/alice-example",
        "Alice Exampel",
        "alice-example",
    ):
        _, body = verb("key_b", "entity", {"name": name})
        assert body["found"] is False and body["suggestions"] == [], name
    for name in ("Secret Sam", "people/secret-sam", "Secret Sm"):
        _, body = verb("remote_a", "entity", {"name": name})
        assert body["found"] is False and body["suggestions"] == [], name
    _, card = verb("remote_a", "entity", {"name": "Alice Example"})
    assert leaks(card, SECRETS) == [] and card["card"]["active_fact_count"] == 1
    _, trusted = verb("trusted_a", "entity", {"name": "Secret Sam"})
    assert trusted["found"] is True
    # SPEC §4: a card never carries private fact text, even for a trusted key;
    # the trusted key reads the private fact through recall.
    _, trusted_card = verb("trusted_a", "entity", {"name": "Alice Example"})
    assert "PRIVATE-FACT-A" not in str(trusted_card["card"])
    assert trusted_card["card"]["active_fact_count"] == 1
    _, recalled = verb("trusted_a", "recall", {"entity": "Alice Example"})
    assert "PRIVATE-FACT-A" in str(recalled["facts"])


def test_remember_writes_only_to_the_key_source_and_never_dedups_across(brain) -> None:  # type: ignore[no-untyped-def]
    verb = brain["verb"]
    status, body = verb(
        "key_b",
        "remember",
        {
            "fact": "WORLD-FACT-A Alice likes sailing",
            "provenance": "b",
            "entity": "Alice Example",
        },
    )
    assert status == 200 and body["status"] == "inserted"
    assert body["entity_slug"] == "alice-example"  # A's page is not resolvable from B
    assert Fact.objects.get(pk=body["id"]).source_id == "team-b"
    status, body = verb(
        "remote_a",
        "remember",
        {
            "fact": "PRIVATE-FACT-A Alice owes a favour",
            "provenance": "r",
            "entity": "Alice Example",
            "kind": "commitment",
        },
    )
    assert status == 200 and body["status"] == "inserted"
    assert body["id"] != brain["private_id"]


def test_forget_cannot_reach_other_sources_or_private_facts(brain) -> None:  # type: ignore[no-untyped-def]
    verb = brain["verb"]
    status, body = verb("key_b", "forget", {"id": brain["world_id"]})
    assert status == 404 and body["error"] == "not_found"
    status, body = verb("remote_a", "forget", {"id": brain["private_id"]})
    assert status == 404 and body["error"] == "not_found"
    assert Fact.objects.filter(expired_at__isnull=False).count() == 0
    status, body = verb("trusted_a", "forget", {"id": brain["private_id"]})
    assert status == 200 and body["expired"] is True


def test_context_pack_never_crosses_sources_or_leaks_private(brain) -> None:  # type: ignore[no-untyped-def]
    verb = brain["verb"]
    names = "Alice Example,Secret Sam,Bob Beta"
    _, body = verb(
        "key_b", "context_pack", {"entities": names, "include_private": True}
    )
    assert leaks(body, A_ONLY + SECRETS) == []
    assert body["missing"] == ["Alice Example", "Secret Sam"]
    _, body = verb(
        "remote_a", "context_pack", {"entities": names, "include_private": True}
    )
    assert leaks(body, SECRETS + ("Bob Beta",)) == []
    _, body = verb(
        "trusted_a", "context_pack", {"entities": names, "include_private": True}
    )
    assert "PRIVATE-FACT-A" in body["text"] and leaks(body, ("Bob Beta",)) == []


def test_delta_never_crosses_sources_or_leaks_private(brain) -> None:  # type: ignore[no-untyped-def]
    verb = brain["verb"]
    since = {"since": "1970-01-01T00:00:00Z"}
    _, body = verb("key_b", "delta", since)
    assert leaks(body, A_ONLY + SECRETS) == []
    assert [p["slug"] for p in body["pages"]] == ["people/bob-beta"]
    _, body = verb("remote_a", "delta", since)
    assert leaks(body, SECRETS + ("Bob Beta",)) == []
    _, body = verb("remote_a", "delta", {"session_id": "s", "entities": "Secret Sam"})
    assert body["pages"] == [] and body["facts"] == []
    _, body = verb("trusted_a", "delta", since)
    assert "people/secret-sam" in json.dumps(body)


def test_synthesize_only_sees_the_callers_sources(brain, fake_anthropic) -> None:  # type: ignore[no-untyped-def]
    def reply(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200,
            json={
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "m",
                "content": [{"type": "text", "text": "Answer [1]."}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 3},
            },
        )

    seen = fake_anthropic(reply)
    verb = brain["verb"]
    _, body = verb("key_b", "synthesize", {"question": "Alice"})
    assert (
        leaks(body, A_ONLY + SECRETS) == []
        and body["synthesis_status"] == "empty_answer"
    )
    _, body = verb("remote_a", "synthesize", {"question": "Alice Example"})
    assert body["synthesis_status"] == "ok" and leaks(body, SECRETS) == []
    prompts = " ".join(request.content.decode() for request in seen)
    assert "WORLD-FACT-A" in prompts
    assert "PRIVATE-FACT-A" not in prompts and "Bob" not in prompts


def test_a_key_without_scopes_cannot_call_the_verbs(
    brain, source_a, make_key, api_client
) -> None:  # type: ignore[no-untyped-def]
    reader = make_key(source_a, scopes=("read",)).plaintext
    status, body = call(
        api_client(reader), "remember", {"fact": "x", "provenance": "p"}
    )
    assert status == 403 and body["error"] == "scope_denied"
    status, body = call(api_client(None), "recall", {})
    assert status == 401 and body["error"] == "scope_denied"


# --- jobs: a key's job runs only on its write source (issue 46) ---------------------------


@pytest.fixture
def admin_a(source_a, source_b, make_key, api_client):  # type: ignore[no-untyped-def]
    """An admin-scoped key limited to source A (it reads A and B)."""
    key = make_key(
        source_a, scopes=("admin",), readable=(source_b,), name="admin A"
    ).plaintext
    client = api_client(key)

    def post(kind: str, **params: Any) -> tuple[int, dict[str, Any]]:
        answer = client.post(
            "/api/jobs",
            {"kind": kind, "params": params},
            content_type="application/json",
        )
        return answer.status_code, answer.json()

    return client, post


def _refused(status: int, body: dict[str, Any]) -> bool:
    return (
        status == 403
        and body["error"] == "scope_denied"
        and bool(body["suggestion"])
        and body["protocol_version"] == 1
    )


def test_an_admin_key_queues_no_job_on_another_source(admin_a) -> None:  # type: ignore[no-untyped-def]
    from jobs.models import Job

    _, post = admin_a
    for kind, params in (
        ("sync_source", {"source_id": "team-b"}),
        ("import_markdown", {"source_id": "team-b", "path": "/tmp"}),  # noqa: S108
        ("import_mail", {"source_id": "team-b", "path": "/tmp"}),  # noqa: S108
        ("extract_loops", {"source_id": "team-b", "thread_ids": ["t"]}),
        ("extract_commitments", {"source_id": "team-b", "thread_id": "t"}),
        ("loops_sweep", {"source_ids": ["team-a", "team-b"]}),
        ("embed_pending", {"source_ids": "team-b"}),
        ("dream", {}),
        ("session_cursor_purge", {}),
        ("reembed", {}),  # re-embeds (and may migrate) every source's vectors
    ):
        status, body = post(kind, **params)
        assert _refused(status, body), (kind, status, body)
    assert Job.objects.count() == 0


def test_an_admin_key_queues_jobs_on_its_own_source_only(admin_a) -> None:  # type: ignore[no-untyped-def]
    _, post = admin_a
    status, body = post("sync_source", source_id="team-a")
    assert status == 201 and body["job"]["params"] == {"source_id": "team-a"}
    status, body = post("sync_source")  # no source: the key's write source
    assert status == 201 and body["job"]["params"] == {"source_id": "team-a"}
    status, body = post("loops_sweep")  # "every source" narrows to the key's own
    assert status == 201 and body["job"]["params"] == {"source_ids": ["team-a"]}
    # Imports read a server folder: the CLI and staff start them, never a key.
    status, body = post("import_markdown", source_id="team-a", path="/tmp")  # noqa: S108
    assert _refused(status, body) and "import_markdown" in body["suggestion"]


def test_a_key_backup_takes_no_folder_and_no_retention(admin_a) -> None:  # type: ignore[no-untyped-def]
    from jobs.models import Job

    _, post = admin_a
    for params in ({"directory": "/tmp/x"}, {"keep": 1}):  # noqa: S108
        status, body = post("backup", **params)
        assert _refused(status, body), params
    assert Job.objects.count() == 0
    status, body = post("backup")
    assert status == 201 and body["job"]["params"] == {}


def test_a_key_sees_and_manages_only_its_sources_jobs(admin_a) -> None:  # type: ignore[no-untyped-def]
    from jobs.models import Job

    client, _ = admin_a
    own, other = (
        Job.objects.create(
            kind="sync_source",
            params={"source_id": sid},
            status=Job.Status.FAILED,
            error=f"{sid} failed",
        )
        for sid in ("team-a", "team-b")
    )
    listed = client.get("/api/jobs").json()
    assert [j["id"] for j in listed["items"]] == [own.pk]
    for method, url in (
        ("get", f"/api/jobs/{other.pk}"),
        ("post", f"/api/jobs/{other.pk}/cancel"),
        ("post", f"/api/jobs/{other.pk}/retry"),
    ):
        answer = getattr(client, method)(url)
        assert answer.status_code == 404, url
        assert answer.json()["message"] == f"Job {other.pk} does not exist."
    other.refresh_from_db()
    assert other.status == Job.Status.FAILED
    assert client.post(f"/api/jobs/{own.pk}/retry").json()["status"] == "queued"
    # An idempotency key held by another source's job neither returns nor names it.
    Job.objects.filter(pk=other.pk).update(idempotency_key="nightly-b")
    answer = client.post(
        "/api/jobs",
        {"kind": "sync_source", "idempotency_key": "nightly-b"},
        content_type="application/json",
    )
    assert answer.status_code == 403 and "team-b" not in answer.content.decode()


# --- the generated matrix: every key shape × every operation and tool -------------------


@pytest.fixture
def matrix(settings, db):  # type: ignore[no-untyped-def]
    from tests import isolation_matrix as m

    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    return m, m.seed_two_sources(), m.make_keys()


def _report(outcome) -> str:  # type: ignore[no-untyped-def]
    shown = "\n".join(outcome.violations[:40])
    return f"{len(outcome.violations)} violation(s) in {outcome.cases} cases:\n{shown}"


def test_every_http_operation_with_every_key_shape_leaks_and_writes_nothing(
    matrix, client
) -> None:  # type: ignore[no-untyped-def]
    m, seed, keys = matrix
    schema = client.get("/api/openapi.json").json()
    outcome = m.run_http(schema, seed, keys)
    print(
        f"isolation http: {outcome.cases} cases, {len(outcome.violations)} violations"
    )
    assert outcome.cases > 500
    assert outcome.violations == [], _report(outcome)


def test_every_mcp_tool_with_every_key_shape_leaks_and_writes_nothing(
    matrix, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    from interfaces.mcp import server
    from interfaces.mcp.server import build_server

    # The tools run in this test's transaction: the transport's per-request
    # connection hygiene would close it.
    monkeypatch.setattr(server, "close_old_connections", lambda: None)

    m, seed, keys = matrix
    tools = build_server(
        surface="full", resolve_caller=lambda ctx: None
    )._tool_manager.list_tools()
    outcome = m.run_mcp(tools, seed, keys)
    print(f"isolation mcp: {outcome.cases} cases, {len(outcome.violations)} violations")
    assert outcome.cases > 300
    assert outcome.violations == [], _report(outcome)
