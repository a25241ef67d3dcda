"""What a newcomer hit after ``bin/demo`` with the README's harness key (mail in a
mailbox source, the key writing to ``default``): each rule of SPEC §4 and §8 the
answers broke, driven through the HTTP API against the real database."""

from __future__ import annotations

import io
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from brain.access import local_caller
from brain.models import Fact, Page, Source
from brain.services.verbs.common import ENTITY_NAME_MAX_CHARS
from interfaces.operations import op_loops_mute
from loops.models import LoopStatus, LoopSuppression, LoopType, OpenLoop
from loops.services import loop_open
from tests.factories import PageFactory, page_type

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[1]
MAIL = "enron-allen-p"


@pytest.fixture
def mail() -> Source:
    """The demo's mailbox source: federated, private by default, like ``bin/demo``."""
    return Source.objects.create(
        id=MAIL, name="Allen mailbox", kind="mailbox", federated=True
    )


@pytest.fixture
def greg(mail: Source) -> Page:
    """A private person page of the mailbox."""
    return PageFactory(
        source=mail,
        slug="people/greg-thorse",
        title="Greg Thorse",
        type=page_type("person"),
        body="Greg Thorse trades gas.",
        visibility="private",
    )


@pytest.fixture
def harness(make_key, api_client, default_source: Source, mail: Source) -> Client:  # type: ignore[no-untyped-def]
    """The README's first recipe: trusted, writes ``default``, reads the mailbox."""
    issued = make_key(default_source, trusted=True, readable=(default_source, mail))
    return api_client(issued.plaintext)


def post(client: Client, path: str, body: Any) -> Any:
    return client.post(path, body, content_type="application/json")


def mail_loop(mail: Source, email: str = "greg@enron.com") -> OpenLoop:
    return loop_open(
        source=mail,
        loop_type=LoopType.UNANSWERED_INBOUND,
        summary="Answer Greg about the gas curve",
        actor="test",
        counterparty_email=email,
        evidence=[{"quote": "Can you send the curve?"}],
    )


# --- 1. remember files the fact under the readable page it names -------------------


@pytest.mark.parametrize("named", ["people/greg-thorse", "Greg Thorse"])
def test_remember_links_the_readable_page_named_in_another_source(
    harness: Client, greg: Page, named: str
) -> None:
    """SPEC §2.4/§4: the entity a fact names is the page the caller can read, by
    slug or name, wherever it lives; the fact stays in the write source (was: a 200
    with the slug echoed and no page linked, so card and recall missed it)."""
    body = post(
        harness,
        "/api/remember",
        {
            "fact": "Greg Thorse prefers phone calls over email",
            "provenance": "call notes",
            "entity": named,
        },
    ).json()
    assert body["entity_slug"] == "people/greg-thorse"
    fact = Fact.objects.get(pk=body["id"])
    assert (fact.source_id, fact.entity_id) == ("default", greg.pk)
    card = post(harness, "/api/entity", {"name": "Greg Thorse"}).json()["card"]
    assert card["active_fact_count"] == 1
    recalled = post(harness, "/api/recall", {"entity": "Greg Thorse"}).json()
    assert [f["fact"] for f in recalled["facts"]] == [
        "Greg Thorse prefers phone calls over email"
    ]


def test_remember_never_links_a_page_the_key_cannot_read(
    make_key, api_client, default_source: Source, mail: Source, greg: Page
) -> None:  # type: ignore[no-untyped-def]
    """SPEC §8: an untrusted key cannot read the private page, so its fact keeps
    the bare reference and reveals nothing about the page."""
    issued = make_key(default_source, readable=(default_source, mail))
    body = post(
        api_client(issued.plaintext),
        "/api/remember",
        {"fact": "Greg likes tea", "provenance": "chat", "entity": "Greg Thorse"},
    ).json()
    fact = Fact.objects.get(pk=body["id"])
    assert fact.entity_id is None
    assert body["entity_slug"] == "greg-thorse"


# --- 2. loop writes: the refusal fits the request; the README key works ------------


def test_loops_close_refusal_names_the_loops_source_not_a_source_never_sent(
    harness: Client, mail: Source
) -> None:
    loop = mail_loop(mail)
    response = post(harness, "/api/loops_close", {"id": str(loop.pk)})
    assert response.status_code == 403
    body = response.json()
    assert body["error"] == "scope_denied"
    assert f"source '{MAIL}'" in body["message"]
    assert "Omit 'source'" not in body["suggestion"]
    assert f"--write-source {MAIL}" in body["suggestion"]
    loop.refresh_from_db()
    assert loop.status == LoopStatus.OPEN


def _readme_harness_command() -> list[str]:
    text = (ROOT / "README.md").read_text()
    found = re.search(r"manage\.py (apikey create --name harness[^`]*?)\n\s*```", text)
    assert found, "README has no harness key recipe"
    return shlex.split(found.group(1).replace("\\\n", " "))


def test_readme_harness_key_recipe_closes_and_mutes_the_demo_mailbox_loops(
    mail: Source, api_client
) -> None:  # type: ignore[no-untyped-def]
    """The README's harness key can do what skills/close-loops-after-acting asks
    on the demo's mailbox loops."""
    args = _readme_harness_command()
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    client = api_client(out.getvalue().strip())
    loop = mail_loop(mail)
    closed = post(client, "/api/loops_close", {"id": str(loop.pk), "note": "called"})
    assert closed.status_code == 200, closed.json()
    mail_loop(mail, "news@enron.com")
    muted = post(
        client, "/api/loops_mute", {"kind": "sender", "value": "news@enron.com"}
    ).json()
    assert muted["source_ids"] == [MAIL]
    assert LoopSuppression.objects.filter(source=mail, value="news@enron.com").exists()


def test_loops_mute_says_where_it_applied_and_that_loops_stay(
    harness: Client, mail: Source
) -> None:
    """SPEC §5: a mute gates new detection only. A key that cannot write the
    mailbox mutes in its write source and says so, naming the mailbox it could not
    mute and the open loops that keep their state."""
    loop = mail_loop(mail, "x@enron.com")
    body = post(
        harness, "/api/loops_mute", {"kind": "sender", "value": "X@enron.com"}
    ).json()
    assert body["source_id"] == "default"
    assert body["source_ids"] == ["default"]
    assert body["open_loops"] == {MAIL: 1}
    assert f"Not muted in '{MAIL}'" in body["note"]
    assert "keep their state" in body["note"]
    assert not LoopSuppression.objects.filter(source=mail).exists()
    loop.refresh_from_db()
    assert loop.status == LoopStatus.OPEN


def test_loops_mute_reads_source_like_every_other_operation(
    harness: Client, mail: Source
) -> None:
    """Every other operation (and the MCP tool) names its source ``source``; the
    HTTP mute body took only ``source_id`` and silently dropped ``source``, so a
    key that may not write the mailbox muted in ``default`` with a 200 instead of
    being refused for the source it asked for."""
    for field in ("source", "source_id"):
        response = post(
            harness,
            "/api/loops_mute",
            {"kind": "sender", "value": "x@enron.com", field: MAIL},
        )
        assert response.status_code == 403, (field, response.content)
        assert response.json()["error"] == "scope_denied"
    assert not LoopSuppression.objects.exists()


def test_loops_mute_applies_where_the_senders_loops_are_when_writable(
    mail: Source, default_source: Source
) -> None:
    mail_loop(mail, "x@enron.com")
    body = op_loops_mute(
        local_caller(), kind="sender", value="x@enron.com", source=None
    )
    assert body["source_ids"] == ["default", MAIL]
    assert LoopSuppression.objects.filter(source=mail, value="x@enron.com").exists()
    assert "Not muted" not in body["note"]


# --- 5. API details ----------------------------------------------------------------


def test_context_pack_explains_a_name_entity_finds_but_the_pack_misses(
    harness: Client, greg: Page
) -> None:
    """entity() resolves a private page for a trusted key; context_pack is
    world-only unless asked (SPEC §4), so its miss says how to include it."""
    assert post(harness, "/api/entity", {"name": "Greg Thorse"}).json()["found"]
    pack = post(harness, "/api/context_pack", {"entities": ["Greg Thorse"]}).json()
    assert pack["missing"] == ["Greg Thorse"]
    assert any("include_private: true" in w for w in pack["warnings"])
    private = post(
        harness,
        "/api/context_pack",
        {"entities": ["Greg Thorse"], "include_private": True},
    ).json()
    assert private["missing"] == []
    assert [c["slug"] for c in private["cards"]] == ["people/greg-thorse"]


def test_update_of_a_page_readable_but_not_writable_is_403_not_404(
    harness: Client, greg: Page
) -> None:
    """SPEC §8: only a page the caller cannot read answers as missing."""
    response = post(
        harness, "/api/pages/people/greg-thorse", {"mode": "append", "body": "More."}
    )
    assert response.status_code == 403
    body = response.json()
    assert body["error"] == "scope_denied"
    assert MAIL in body["message"]
    assert "add_page to create it" not in body["suggestion"]
    greg.refresh_from_db()
    assert "More." not in greg.body


def test_update_of_a_page_the_key_cannot_read_stays_404(
    make_key, api_client, default_source: Source, mail: Source, greg: Page
) -> None:  # type: ignore[no-untyped-def]
    issued = make_key(default_source, readable=(default_source, mail))
    response = post(
        api_client(issued.plaintext),
        "/api/pages/people/greg-thorse",
        {"mode": "append", "body": "More."},
    )
    assert response.status_code == 404


def test_405_envelope_detail_is_a_string(harness: Client) -> None:
    response = harness.get("/api/remember")
    assert response.status_code == 405
    detail = response.json()["detail"]
    assert isinstance(detail, str) and detail


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/entity", {"name": "x" * 200_000}),
        ("/api/recall", {"entity": "x" * (ENTITY_NAME_MAX_CHARS + 1)}),
        ("/api/context_pack", {"entities": ["y" * (ENTITY_NAME_MAX_CHARS + 1)]}),
        (
            "/api/remember",
            {"fact": "f", "provenance": "p", "entity": "z" * 200_000},
        ),
    ],
)
def test_an_entity_name_over_the_limit_is_refused_with_the_envelope(
    harness: Client, path: str, body: dict[str, Any]
) -> None:
    response = post(harness, path, body)
    assert response.status_code == 400
    out = response.json()
    assert out["error"] == "invalid_params"
    assert str(ENTITY_NAME_MAX_CHARS) in out["message"]
    assert not Fact.objects.exists()
