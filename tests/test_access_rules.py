"""SPEC §8 rules, one regression test per finding of issue 15, each from invented input.

The generated matrix (``tests/test_isolation.py``) and the fuzz run
(``tests/test_api_fuzz.py``) keep the rules true across every endpoint; these tests
pin each reported reproducer to its refusal.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client
from django.urls import reverse

from accounts.models import ApiKey
from accounts.services import apikey_authenticate, apikey_create, hash_key
from brain.access import local_caller
from brain.hrefs import safe_href
from brain.models import Chunk, Fact, Page, Source
from brain.services.facts import fact_remember
from interfaces.callers import caller_for_key
from loops.models import Detector, LoopType, OpenLoop
from tests.brain.conftest import add_page

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[1]
ENVELOPE = {"error", "message", "suggestion", "detail", "protocol_version"}


def legacy_key(source_ids: tuple[str, ...], *, name: str = "legacy") -> str:
    """A write-scoped key without a write source, stored directly: keys like this
    could be created before the rule; creating one now is refused."""
    plaintext = f"gbr_legacy01_{name}-secret"
    key = ApiKey.objects.create(
        name=name,
        prefix="legacy01",
        key_hash=hash_key(plaintext),
        scopes=["read", "write"],
        write_source=None,
    )
    key.readable_sources.set(Source.objects.filter(id__in=source_ids))
    return plaintext


def post(client: Client, url: str, body: Any) -> tuple[int, dict[str, Any]]:
    response = client.post(url, data=json.dumps(body), content_type="application/json")
    return response.status_code, response.json()


def mcp_call(caller: Any, tool: str, arguments: dict[str, Any], monkeypatch) -> dict:  # type: ignore[no-untyped-def]
    """Call an MCP tool in-process with ``caller`` (the test's transaction)."""
    from interfaces.mcp import server
    from interfaces.mcp.server import build_server

    monkeypatch.setattr(server, "close_old_connections", lambda: None)
    mcp = build_server(surface="full", resolve_caller=lambda ctx: caller)
    result = async_to_sync(mcp.call_tool)(tool, arguments)
    if getattr(result, "is_error", False):
        return {"is_error": True, **json.loads(result.content[0].text)}
    return {"is_error": False, "text": json.dumps(result, default=str)}


# --- 1. a write key without a write source writes nothing -----------------------------


def test_a_write_key_without_a_write_source_writes_nothing_anywhere(
    source_a, source_b, api_client, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    page = add_page(source_a, title="Tamsin Vale", slug="people/tamsin-vale")
    fact = fact_remember(
        caller=local_caller(), text="Tamsin likes tea", provenance="t", source=source_a
    ).fact
    loop = OpenLoop.objects.create(
        source=source_a,
        dedup_key="tv",
        loop_type=LoopType.UNANSWERED_INBOUND,
        summary="Reply to Tamsin",
        detector=Detector.MANUAL,
    )
    client = api_client(legacy_key(("team-a", "team-b")))
    attempts = [
        ("/api/pages", {"title": "x", "body": "y", "source": "team-a"}),
        ("/api/pages", {"title": "x", "body": "y"}),
        (
            f"/api/pages/{page.slug}",
            {"mode": "replace", "body": "gone", "source": "team-a"},
        ),
        (
            "/api/loops_mute",
            {"kind": "sender", "value": "a@b.invalid", "source_id": "team-a"},
        ),
        ("/api/forget", {"id": str(fact.pk)}),
        ("/api/loops_close", {"id": str(loop.pk)}),
        ("/api/loops_correct_due", {"id": str(loop.pk), "due": "2030-01-01"}),
        ("/api/remember", {"fact": "x", "provenance": "p"}),
    ]
    for url, body in attempts:
        status, answer = post(client, url, body)
        assert status == 403 and answer["error"] == "scope_denied", (url, answer)
        assert (
            "no write source" in answer["message"] or "writes only" in answer["message"]
        )
    key = ApiKey.objects.get(prefix="legacy01")
    answer = mcp_call(
        caller_for_key(key),
        "brain_add",
        {"title": "x", "body": "y", "provenance": "p", "source": "team-a"},
        monkeypatch,
    )
    assert answer["is_error"] and answer["error"] == "scope_denied"
    page.refresh_from_db()
    loop.refresh_from_db()
    assert Page.objects.filter(title="x").count() == 0
    assert page.body.startswith("Tamsin Vale") and loop.status == "open"
    assert Fact.objects.get(pk=fact.pk).expired_at is None


def test_a_write_scoped_key_without_a_write_source_cannot_be_created(source_a) -> None:  # type: ignore[no-untyped-def]
    for scopes in (["read", "write"], ["admin"]):
        with pytest.raises(ValidationError) as caught:
            apikey_create(name="harness", scopes=scopes, write_source=None)
        assert "write_source" in caught.value.message_dict
    reader = apikey_create(
        name="reader", scopes=["read"], write_source=None, readable_sources=[source_a]
    )
    assert reader.api_key.pk is not None


def test_admin_form_refuses_a_write_key_without_a_write_source(
    admin_client, source_a
) -> None:  # type: ignore[no-untyped-def]
    response = admin_client.post(
        reverse("admin:accounts_apikey_add"),
        {"name": "harness", "scopes": "read,write", "readable_sources": ["team-a"]},
    )
    assert response.status_code == 200  # the form again, with the error
    assert "needs a write source" in response.content.decode()
    assert not ApiKey.objects.filter(name="harness").exists()


# --- 2. add/update answer exactly as a read of the same slug --------------------------


def test_a_remote_key_cannot_append_replace_publish_or_probe_a_private_page(
    source_a, make_key, api_client, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    secret = add_page(
        source_a,
        title="Ilsa Brook",
        slug="people/ilsa-brook",
        body="Ilsa's salary review is on Friday.",
        visibility="private",
    )
    issued = make_key(source_a)
    client = api_client(issued.plaintext)
    read = client.get("/api/pages/people/ilsa-brook")
    ghost = post(client, "/api/pages/people/nobody-here", {"body": "x"})
    assert read.status_code == 404
    for body in (
        {"mode": "append", "body": "hello"},
        {"mode": "replace", "body": "overwritten"},
        {"visibility": "world"},
    ):
        status, answer = post(client, "/api/pages/people/ilsa-brook", body)
        assert (status, answer["error"]) == (404, "not_found")
        assert answer["message"] == read.json()["message"]
        assert answer["suggestion"] == ghost[1]["suggestion"]
        assert "salary" not in json.dumps(answer)
    status, answer = post(
        client, "/api/pages", {"title": "Ilsa Brook", "slug": "people/ilsa-brook"}
    )
    assert (status, answer["error"]) == (404, "not_found")  # not 409 "already exists"
    answer = mcp_call(
        caller_for_key(issued.api_key),
        "brain_update",
        {"slug": "people/ilsa-brook", "provenance": "p", "mode": "append", "body": "x"},
        monkeypatch,
    )
    assert answer["is_error"] and answer["error"] == "not_found"
    secret.refresh_from_db()
    assert secret.body == "Ilsa's salary review is on Friday."
    assert secret.visibility == "private"


# --- 4. timestamps range-checked before anything is written ---------------------------


@pytest.mark.parametrize(
    ("verb", "body"),
    [
        (
            "remember",
            {
                "fact": "Kip owes a report",
                "provenance": "t",
                "ttl": "9999-12-31T23:59:59-12:00",
            },
        ),
        ("recall", {"since": "0001-01-01T00:00:00+14:00"}),
        ("delta", {"since": "0001-01-01T00:00:00+14:00"}),
        (
            "context_pack",
            {"entities": "Kip Lowry", "since": "0001-01-01T00:00:00+14:00"},
        ),
        ("synthesize", {"question": "Kip?", "until": "0001-01-01T00:00:00+14:00"}),
        ("synthesize", {"question": "Kip?", "since": "9999-12-31T23:59:59-12:00"}),
    ],
)
def test_out_of_range_timestamps_are_invalid_params_and_write_nothing(
    verb, body, source_a, make_key, api_client, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    issued = make_key(source_a, trusted=True)
    status, answer = post(api_client(issued.plaintext), f"/api/{verb}", body)
    assert (status, answer["error"]) == (400, "invalid_params"), answer
    assert "outside the supported range" in answer["message"]
    tool = {"synthesize": "synthesize"}.get(verb, verb)
    out = mcp_call(caller_for_key(issued.api_key), tool, body, monkeypatch)
    assert out["is_error"] and out["error"] == "invalid_params"
    assert Fact.objects.count() == 0


def test_a_stored_out_of_range_fact_is_hidden_then_repaired_in_the_admin(
    admin_client, source_a
) -> None:  # type: ignore[no-untyped-def]
    fact = fact_remember(
        caller=local_caller(), text="Kip owes a report", provenance="t", source=source_a
    ).fact
    with connection.cursor() as cursor:  # as a row stored before the range check
        cursor.execute(
            "UPDATE brain_fact SET valid_until = '10000-01-01T11:59:59Z' WHERE id = %s",
            [fact.pk],
        )
    listing = admin_client.get(reverse("admin:brain_fact_changelist"))
    assert listing.status_code == 200
    assert "1 fact(s) have a valid_until outside" in listing.content.decode()
    repaired = admin_client.post(
        reverse("admin:brain_fact_repair_timestamps"), follow=True
    )
    assert "1 fact(s) repaired" in repaired.content.decode()
    assert Fact.objects.get(pk=fact.pk).valid_until.year == 9999


# --- 5. mail sources default to private ------------------------------------------------


def test_mail_sources_default_to_private_and_remote_keys_do_not_read_them(
    make_key, api_client
) -> None:  # type: ignore[no-untyped-def]
    mailbox = Source.objects.create(id="mbox-zed", name="Zed's mailbox", kind="mailbox")
    google = Source.objects.create(id="g-zed", name="Zed", kind="google")
    notes = Source.objects.create(id="notes-zed", name="Notes", kind="markdown")
    harness = Source.objects.create(id="harness-zed", name="Harness", kind="manual")
    assert (mailbox.default_visibility, google.default_visibility) == ("private",) * 2
    assert (notes.default_visibility, harness.default_visibility) == ("world",) * 2
    thread = add_page(
        mailbox,
        title="Re: gearbox quote",
        slug="email/re-gearbox-quote",
        type_name="email",
        body="The gearbox quote is 4,100 EUR.",
    )
    assert thread.visibility == "private"
    assert Chunk.objects.filter(page=thread).exclude(visibility="private").count() == 0
    assert add_page(harness, title="Plain note", type_name="note").visibility == "world"
    client = api_client(make_key(mailbox).plaintext)
    assert client.get("/api/pages/email/re-gearbox-quote").status_code == 404
    found = client.get("/api/search", {"query": "gearbox quote"}).json()
    assert found["results"] == []
    mailbox.default_visibility = "world"  # an admin opens the mailbox up
    mailbox.save()
    opened = add_page(mailbox, title="Re: brake pads", type_name="email")
    assert opened.visibility == "world"


def test_a_sources_default_visibility_applies_to_facts_and_pages_alike(
    make_key, api_client
) -> None:  # type: ignore[no-untyped-def]
    """SPEC §8 source default visibility (issue 47): one trusted key wrote facts
    ``world`` (remember's own default) and pages ``private`` (the source's) into
    the same mailbox source. A write that names no visibility now gets the source's
    default whether it is a page or a fact."""
    for kind, expected in (("mailbox", "private"), ("manual", "world")):
        source = Source.objects.create(id=f"vis-{kind}", name=kind, kind=kind)
        client = api_client(make_key(source, trusted=True).plaintext)
        status, page = post(
            client, "/api/pages", {"title": f"Gearbox {kind}", "body": "4,100 EUR."}
        )
        assert status == 201, page
        status, fact = post(
            client,
            "/api/remember",
            {"fact": f"The {kind} gearbox costs 4,100 EUR.", "provenance": "quote"},
        )
        assert status == 200, fact
        stored = Fact.objects.get(pk=fact["id"])
        assert (page["page"]["visibility"], stored.visibility) == (expected,) * 2


def test_the_migration_moves_imported_mail_pages_to_their_source_default(db) -> None:  # type: ignore[no-untyped-def]
    from importlib import import_module

    from django.apps import apps

    migration = import_module("brain.migrations.0011_source_default_visibility")
    mailbox = Source.objects.create(id="mbox-old", name="Old", kind="mailbox")
    notes = Source.objects.create(id="notes-old", name="Notes", kind="manual")
    old = add_page(mailbox, title="Old thread", type_name="email", visibility="world")
    kept = add_page(notes, title="Old note", type_name="note", visibility="world")
    Source.objects.filter(pk=mailbox.pk).update(default_visibility="")
    migration.set_defaults_and_move_pages(apps, None)
    old.refresh_from_db()
    kept.refresh_from_db()
    assert (old.visibility, kept.visibility) == ("private", "world")
    assert set(Chunk.objects.filter(page=old).values_list("visibility", flat=True)) <= {
        "private"
    }
    assert Source.objects.get(pk=mailbox.pk).default_visibility == "private"


# --- 6. every /api answer is the envelope -------------------------------------------------


def test_wrong_methods_odd_paths_and_bad_keys_get_the_envelope(
    source_a, make_key
) -> None:  # type: ignore[no-untyped-def]
    from accounts.services import apikey_revoke

    revoked = make_key(source_a)
    apikey_revoke(api_key=revoked.api_key, actor="t")
    good = make_key(source_a).plaintext
    client = Client(enforce_csrf_checks=True)
    cases = [
        ("put", "/api/pages", {}, 405),
        ("get", "/api/recall", {"Authorization": f"Bearer {good}"}, 405),
        ("get", "/api/pag%0Aes", {}, 404),
        ("get", "/api/%0A", {}, 404),
        ("post", "/api/recall", {}, 401),
        ("post", "/api/recall", {"Authorization": "Bearer gbr_nope_nope"}, 401),
        ("post", "/api/recall", {"Authorization": f"Bearer {revoked.plaintext}"}, 401),
        ("get", "/api/recall", {}, 405),
        ("get", "/api/whoami", {}, 401),
    ]
    for method, url, headers, expected in cases:
        if method == "get":
            response = client.get(url, headers=headers)
        else:
            response = getattr(client, method)(
                url, data="{}", content_type="application/json", headers=headers
            )
        assert response.status_code == expected, (method, url, response.content)
        assert response["Content-Type"].startswith("application/json")
        body = response.json()
        assert set(body) == ENVELOPE and body["suggestion"], body
        assert "CSRF" not in body["message"]
    ok = client.post(
        "/api/recall",
        data="{}",
        content_type="application/json",
        headers={"Authorization": f"Bearer {good}"},
    )
    assert ok.status_code == 200  # bearer requests are CSRF-exempt


def test_non_object_bodies_are_invalid_params_and_write_nothing(
    source_a, make_key, api_client
) -> None:  # type: ignore[no-untyped-def]
    add_page(source_a, title="Noor Hale", slug="people/noor-hale")
    client = api_client(make_key(source_a).plaintext)
    for url, raw, named in (
        ("/api/pages", '"AAA"', "a string"),
        ("/api/pages/people/noor-hale", "5", "a number"),
        ("/api/recall", "[null,null]", "an array"),
        ("/api/context_pack", "[null,null]", "an array"),
        ("/api/remember", "null", "null"),
        ("/api/entity", "true", "a boolean"),
    ):
        response = client.post(url, data=raw, content_type="application/json")
        assert response.status_code == 400, (url, response.content)
        assert response.json()["error"] == "invalid_params"
        # The body is named in JSON's words, never Python's (list, NoneType).
        message = response.json()["message"]
        assert message == f"The request body must be a JSON object, not {named}."
    assert not Page.objects.filter(title__iexact="aaa").exists()


def test_a_lone_surrogate_escape_in_a_body_is_invalid_params_not_a_500(
    source_a, make_key, api_client
) -> None:  # type: ignore[no-untyped-def]
    """JSON's ``"\\ud800"`` decodes to a lone surrogate, which the UTF-8 encoder
    and PostgreSQL refuse: it reached them and answered 500 (newcomer)."""
    client = api_client(make_key(source_a).plaintext)
    for url, field in (
        ("/api/recall", "query"),
        ("/api/entity", "name"),
        ("/api/remember", "fact"),
        ("/api/context_pack", "entities"),
    ):
        raw = f'{{"{field}": "quokka \\ud800", "provenance": "test"}}'
        response = client.post(url, data=raw, content_type="application/json")
        assert response.status_code == 400, (url, response.content)
        body = response.json()
        assert body["error"] == "invalid_params"
        assert "lone surrogate" in body["message"]
    # A proper pair is text (U+1F600) and is not refused.
    fine = client.post(
        "/api/recall",
        data='{"query": "quokka \\ud83d\\ude00"}',
        content_type="application/json",
    )
    assert fine.status_code == 200, fine.content


def test_expired_keys_no_longer_authenticate(source_a, api_client) -> None:  # type: ignore[no-untyped-def]
    issued = apikey_create(
        name="short",
        scopes=["read"],
        write_source=None,
        readable_sources=[source_a],
        expires_at=datetime.now(UTC) + timedelta(days=1),
    )
    assert apikey_authenticate(plaintext=issued.plaintext) is not None
    ApiKey.objects.filter(pk=issued.api_key.pk).update(
        expires_at=datetime.now(UTC) - timedelta(seconds=1)
    )
    assert apikey_authenticate(plaintext=issued.plaintext) is None
    response = api_client(issued.plaintext).get("/api/whoami")
    assert response.status_code == 401 and response.json()["error"] == "scope_denied"


# --- 7. the OpenAPI document is the contract ----------------------------------------------


def test_openapi_documents_every_error_with_the_envelope_bounds_and_enums(
    client,
) -> None:  # type: ignore[no-untyped-def]
    doc = client.get("/api/openapi.json").json()
    schemas = doc["components"]["schemas"]
    assert set(schemas["ErrorOut"]["required"]) >= {"error", "message", "suggestion"}
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            for status in ("400", "401", "403", "404", "405", "429", "500"):
                ref = op["responses"][status]["content"]["application/json"]["schema"]
                assert ref == {"$ref": "#/components/schemas/ErrorOut"}, (path, method)
    params = {
        p["name"]: p["schema"]
        for p in doc["paths"]["/api/waiting"]["get"]["parameters"]
    }
    top = params["top"].get("anyOf", [params["top"]])[0]
    assert (top["minimum"], top["maximum"]) == (1, 50)
    recall = schemas["RecallOut"]["properties"]["results"]["items"]["$ref"]
    search = schemas["SearchOut"]["properties"]["results"]["items"]["$ref"]
    assert recall != search  # two shapes, two names
    provenance = schemas[search.rsplit("/", 1)[-1]]["properties"]["provenance"]
    assert provenance["type"] == "object"


def test_every_schema_name_belongs_to_one_class() -> None:
    from ninja import Schema

    from interfaces.http.api import api

    api.get_openapi_schema()  # imports every router and schema
    seen: dict[str, set[str]] = {}

    def walk(cls: type) -> None:
        for sub in cls.__subclasses__():
            if sub.__module__.split(".")[0] in {
                "brain",
                "loops",
                "jobs",
                "accounts",
                "connectors",
                "gbrain_site",
                "interfaces",
            }:
                seen.setdefault(sub.__name__, set()).add(
                    f"{sub.__module__}.{sub.__qualname__}"
                )
            walk(sub)

    walk(Schema)
    clashes = {name: where for name, where in seen.items() if len(where) > 1}
    assert clashes == {}


# --- 8. only http, https and mid: links become an href -------------------------------------


def test_only_http_https_and_mid_links_are_ever_an_href(admin_client, source_a) -> None:  # type: ignore[no-untyped-def]
    assert (
        safe_href("https://mail.example.invalid/t/1")
        == "https://mail.example.invalid/t/1"
    )
    assert safe_href("mid:abc@example.invalid") == "mid:abc@example.invalid"
    for bad in (
        "javascript:alert(1)",
        " JavaScript:alert(1)",
        "java\tscript:x",
        "data:text/html,hi",
        "//evil.invalid/x",
        "http:/nohost",
        None,
        5,
    ):
        assert safe_href(bad) == "", bad
    owner = "me@example.invalid"
    source_a.owner_addresses = [owner]
    source_a.save()
    for n, link in enumerate(
        ("javascript:alert(document.cookie)", "https://ok.invalid/x")
    ):
        OpenLoop.objects.create(
            source=source_a,
            dedup_key=f"link-{n}",
            loop_type=LoopType.UNANSWERED_INBOUND,
            summary=f"Answer Pell {n}",
            detector=Detector.MANUAL,
            counterparty_email=f"pell{n}@example.invalid",
            evidence=[{"quote": "Any news?", "link": link}],
        )
    page = admin_client.get(reverse("admin:loops_waiting")).content.decode()
    assert "javascript:" not in page
    assert 'href="https://ok.invalid/x"' in page


# --- 9. deployment settings and keys from the shell -----------------------------------------


def _readme_production_env() -> dict[str, str]:
    """The production variables the README documents (its ``env`` block)."""
    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- production-env -->", 2)[1]
    env = {}
    for line in block.splitlines():
        line = line.strip()
        if "=" in line and not line.startswith(("#", "`")):
            name, value = line.split("=", 1)
            env[name.removeprefix("export ").strip()] = value.split("#")[0].strip()
    return env


def _manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    from tests.mcp.conftest import test_database_url

    base = {
        k: v for k, v in __import__("os").environ.items() if not k.startswith("DJANGO_")
    }
    return subprocess.run(  # noqa: S603
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env={
            **base,
            "DJANGO_SETTINGS_MODULE": "gbrain_site.settings",
            "DATABASE_URL": test_database_url(),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_check_deploy_is_clean_with_the_documented_production_variables() -> None:
    env = _readme_production_env()
    assert {
        "DJANGO_DEBUG",
        "DJANGO_SECRET_KEY",
        "DJANGO_SECURE_HSTS_SECONDS",
        "DJANGO_SECURE_SSL_REDIRECT",
        "DJANGO_SECURE_COOKIES",
    } <= set(env)
    env["DJANGO_SECRET_KEY"] = "k" * 20 + "-invented-for-this-test-" + "x" * 30
    done = _manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_debug_off_without_a_real_secret_refuses_to_start() -> None:
    done = _manage("check", env={"DJANGO_DEBUG": "0"})
    assert done.returncode != 0
    assert "needs a real DJANGO_SECRET_KEY" in done.stderr


def test_apikey_command_creates_lists_and_revokes_with_the_admin_rules(
    source_a, source_b
) -> None:  # type: ignore[no-untyped-def]
    out, err = StringIO(), StringIO()
    call_command(
        "apikey",
        "create",
        "--name",
        "harness",
        "--scopes",
        "read,write",
        "--write-source",
        "team-a",
        "--readable",
        "team-a,team-b",
        "--expires",
        "30",
        stdout=out,
        stderr=err,
    )
    plaintext = out.getvalue().strip()
    key = apikey_authenticate(plaintext=plaintext)
    assert key is not None and key.write_source_id == "team-a"
    assert sorted(key.readable_sources.values_list("id", flat=True)) == [
        "team-a",
        "team-b",
    ]
    assert key.expires_at is not None and "Copy the key now" in err.getvalue()
    assert plaintext not in err.getvalue()
    with pytest.raises(CommandError, match="needs a write source"):
        call_command(
            "apikey",
            "create",
            "--name",
            "bad",
            "--scopes",
            "read,write",
            stdout=StringIO(),
            stderr=StringIO(),
        )
    with pytest.raises(CommandError, match="Unknown source"):
        call_command(
            "apikey",
            "create",
            "--name",
            "bad",
            "--scopes",
            "read",
            "--readable",
            "nope",
            stdout=StringIO(),
            stderr=StringIO(),
        )
    listing = StringIO()
    call_command("apikey", "list", stdout=listing, stderr=StringIO())
    assert key.prefix in listing.getvalue() and plaintext not in listing.getvalue()
    revoked = StringIO()
    call_command("apikey", "revoke", key.prefix, stdout=revoked)
    assert "Revoked" in revoked.getvalue()
    assert apikey_authenticate(plaintext=plaintext) is None


def test_a_dead_key_gets_one_status_on_every_route(source_a, make_key) -> None:  # type: ignore[no-untyped-def]
    """Issue 46: a revoked key got 403 on ``/api/health?detail=1`` and 401
    elsewhere. Revoked, expired or unknown: 401 ``scope_denied`` on every operation
    of the OpenAPI document (health's detail included), the same envelope."""
    from accounts.services import apikey_revoke

    revoked = make_key(source_a, scopes=("read", "write", "admin"))
    apikey_revoke(api_key=revoked.api_key, actor="t")
    expired = make_key(source_a, scopes=("read", "write", "admin"))
    ApiKey.objects.filter(pk=expired.api_key.pk).update(
        expires_at=datetime.now(UTC) - timedelta(minutes=1)
    )
    schema = Client().get("/api/openapi.json").json()
    answers = set()
    for token in (revoked.plaintext, expired.plaintext, "gbr_nope_nope"):
        client = Client(headers={"Authorization": f"Bearer {token}"})
        for path, operations in schema["paths"].items():
            url = path.replace("{", "").replace("}", "")  # any value: never read
            for method in operations:
                query = "?detail=1" if path == "/api/health" else ""
                response = (
                    getattr(client, method)(
                        url + query, data="{}", content_type="application/json"
                    )
                    if method != "get"
                    else client.get(url + query)
                )
                body = response.json()
                assert set(body) == ENVELOPE, (method, path, body)
                answers.add((response.status_code, body["error"], body["message"]))
    assert answers == {(401, "scope_denied", "Missing or invalid API key.")}
