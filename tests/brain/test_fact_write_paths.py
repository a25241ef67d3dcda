"""Issue 17 scenarios through the public interfaces: HTTP ``/api``, the
``import_markdown`` command, and the Django admin (SPEC §2.4, §4, §6.3).

Each test is named after the scenario it reproduces; every one failed before slots
(supersession by subject and slot, derived data that follows each edit).
"""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from accounts.models import User
from brain.embeddings import embed_texts
from brain.models import Fact, Page
from brain.services.dream import dream_run
from tests.brain.conftest import add_page

pytestmark = pytest.mark.django_db

PROV = "chat, 2026-11-30"


@pytest.fixture
def writer(make_key, default_source):  # type: ignore[no-untyped-def]
    """A remote read/write key on ``default``."""
    return make_key(default_source).plaintext


@pytest.fixture
def staff_client() -> Client:
    user = User.objects.create_superuser("curator", "curator@example.org", "pw")
    client = Client()
    client.force_login(user)
    return client


def remember(verb, key: str, fact: str, **extra: Any) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    status, body = verb(key, "remember", {"fact": fact, "provenance": PROV, **extra})
    assert status == 200, body
    return body


def live_texts(verb, key: str, entity: str | None = None) -> list[str]:  # type: ignore[no-untyped-def]
    body: dict[str, Any] = {"entity": entity} if entity else {"query": "*"}
    status, out = verb(key, "recall", {**body, "limit": 50})
    assert status == 200, out
    return sorted(f["fact"] for f in out["facts"])


def active_texts() -> list[str]:
    return sorted(
        Fact.objects.filter(expired_at__isnull=True).values_list("text", flat=True)
    )


# --- remember over HTTP ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("entity", "old", "new", "kind"),
    [
        (
            "Bram Oakes",
            "Bram Oakes likes coffee",
            "Bram Oakes likes tea now",
            "preference",
        ),
        ("Kit Rowe", "Kit Rowe lives in Lisbon", "Kit Rowe lives in Porto", "fact"),
        (
            "Nessa Crane",
            "Nessa Crane's favourite colour is green",
            "Nessa Crane's favourite colour is blue",
            "preference",
        ),
        (
            "Idris Holt",
            "Idris Holt is the CTO of Brightwell Labs",
            "Idris Holt is the CEO of Brightwell Labs",
            "fact",
        ),
    ],
)
def test_a_change_of_value_without_a_cue_word_supersedes_over_http(
    verb, writer, entity, old, new, kind
) -> None:  # type: ignore[no-untyped-def]
    first = remember(verb, writer, old, entity=entity, kind=kind)
    second = remember(verb, writer, new, entity=entity, kind=kind)
    assert (first["status"], second["status"]) == ("inserted", "superseded")
    assert second["superseded_id"] == first["id"]
    assert live_texts(verb, writer, entity) == [new]


@pytest.mark.parametrize(
    ("entity", "old", "new"),
    [
        (
            "Jory Vance",
            "Jory Vance works at Acme Rivets",
            "Jory Vance left his umbrella at Acme Rivets",
        ),
        (
            "Kit Rowe",
            "Kit Rowe lives in Lisbon",
            "Kit Rowe used to play chess in Lisbon as a student",
        ),
        (
            "Lio Brand",
            "Lio Brand drinks coffee every morning",
            "Lio Brand stopped by the coffee shop on Friday",
        ),
        (
            None,
            "Tamsin Vell works at Acme Rivets",
            "Ulric Penn no longer works at Acme Rivets",
        ),
    ],
)
def test_a_cue_word_never_retires_an_unrelated_fact_over_http(
    verb, writer, entity, old, new
) -> None:  # type: ignore[no-untyped-def]
    extra = {"entity": entity} if entity else {}
    remember(verb, writer, old, **extra)
    assert remember(verb, writer, new, **extra)["status"] == "inserted"
    assert active_texts() == sorted([old, new])


def test_facts_differing_only_in_an_identifier_both_stay_live_over_http(
    verb, writer
) -> None:  # type: ignore[no-untyped-def]
    for n in range(4711, 4716):
        assert remember(verb, writer, f"Invoice INV-{n} paid")["status"] == "inserted"
    assert len(active_texts()) == 5
    body = remember(verb, writer, "Invoice INV-4711 refunded")
    assert body["status"] == "superseded"
    assert "Invoice INV-4711 paid" not in active_texts() and len(active_texts()) == 5


def test_a_near_duplicate_of_another_kind_is_written_over_http(verb, writer) -> None:  # type: ignore[no-untyped-def]
    remember(
        verb,
        writer,
        "Pella Dorn prefers aisle seats on flights",
        entity="Pella Dorn",
        kind="preference",
    )
    second = remember(
        verb,
        writer,
        "Pella Dorn prefers aisle seats on long flights",
        entity="Pella Dorn",
        kind="belief",
    )
    assert second["status"] == "inserted"
    assert len(active_texts()) == 2


def test_structured_slot_and_value_over_http(verb, writer) -> None:  # type: ignore[no-untyped-def]
    remember(
        verb,
        writer,
        "Wren is in Ghent this quarter",
        entity="Wren Castell",
        slot="location",
        value="Ghent",
    )
    moved = remember(
        verb,
        writer,
        "Wren is in Bergen this quarter",
        entity="Wren Castell",
        slot="location",
        value="Bergen",
    )
    assert moved["status"] == "superseded"
    status, body = verb(
        writer, "remember", {"fact": "x y", "provenance": PROV, "value": "Ghent"}
    )
    assert status == 400 and body["error"] == "invalid_params"


# --- markdown import -------------------------------------------------------------------

PERSON = """---
type: person
title: Kit Rowe
---
{body}

## Facts
<!--- gbrain:facts:begin -->
| # | claim | kind | confidence | visibility | notability | valid_from | valid_until | source | context |
|---|---|---|---|---|---|---|---|---|---|
{rows}
<!--- gbrain:facts:end -->
"""


def _write(folder: Path, body: str, rows: list[str]) -> None:
    (folder / "people").mkdir(parents=True, exist_ok=True)
    lines = "\n".join(
        f"| {i} | {claim} | fact | 1.0 | world | medium |  |  | notes |  |"
        for i, claim in enumerate(rows, start=1)
    )
    (folder / "people" / "kit-rowe.md").write_text(PERSON.format(body=body, rows=lines))


def _import(folder: Path) -> str:
    out = StringIO()
    call_command(
        "import_markdown",
        str(folder),
        "--source",
        "notes",
        stdout=out,
        stderr=StringIO(),
    )
    return out.getvalue()


def test_markdown_struck_row_and_its_replacement_supersede_on_reimport(
    tmp_path: Path,
) -> None:
    _write(
        tmp_path,
        "Kit Rowe is a designer.",
        ["Kit Rowe lives in Lisbon", "Kit Rowe plays chess"],
    )
    _import(tmp_path)
    old = Fact.objects.get(text="Kit Rowe lives in Lisbon")
    _write(
        tmp_path,
        "Kit Rowe is a designer.",
        [
            "~~Kit Rowe lives in Lisbon~~",
            "Kit Rowe lives in Porto",
            "Kit Rowe plays chess",
        ],
    )
    _import(tmp_path)
    old.refresh_from_db()
    new = Fact.objects.get(text="Kit Rowe lives in Porto")
    assert old.expired_at is not None and old.superseded_by_id == new.pk
    assert active_texts() == ["Kit Rowe lives in Porto", "Kit Rowe plays chess"]


def test_markdown_removed_row_expires_its_fact_on_reimport(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "Kit Rowe is a designer.",
        ["Kit Rowe lives in Lisbon", "Kit Rowe plays chess"],
    )
    _import(tmp_path)
    _write(tmp_path, "Kit Rowe is a designer.", ["Kit Rowe lives in Lisbon"])
    _import(tmp_path)
    chess = Fact.objects.get(text="Kit Rowe plays chess")
    assert (
        chess.expired_at is not None and chess.expired_reason == "removed from markdown"
    )
    assert active_texts() == ["Kit Rowe lives in Lisbon"]


def test_markdown_reimport_of_a_changed_body_without_summary_follows_the_body(
    tmp_path: Path, verb, make_key
) -> None:  # type: ignore[no-untyped-def]
    _write(tmp_path, "Kit Rowe is a designer in Lisbon.", [])
    _import(tmp_path)
    page = Page.objects.get(slug="people/kit-rowe")
    assert page.summary == "Kit Rowe is a designer in Lisbon."
    _write(tmp_path, "Kit Rowe is an architect in Porto.", [])
    _import(tmp_path)
    page.refresh_from_db()
    assert page.summary == "Kit Rowe is an architect in Porto."
    key = make_key(page.source, readable=(page.source,)).plaintext
    status, card = verb(key, "entity", {"name": "Kit Rowe", "source": "notes"})
    assert status == 200 and "designer" not in str(card)
    status, pack = verb(key, "context_pack", {"entities": "Kit Rowe"})
    assert status == 200 and "designer" not in pack["text"]
    out = tmp_path / "export"
    call_command("export_markdown", str(out), "--source", "notes", stdout=StringIO())
    assert "designer" not in (out / "people" / "kit-rowe.md").read_text()


def test_markdown_summary_given_by_the_file_is_kept(tmp_path: Path) -> None:
    _write(tmp_path, "Kit Rowe is a designer.", [])
    text = (tmp_path / "people" / "kit-rowe.md").read_text()
    (tmp_path / "people" / "kit-rowe.md").write_text(
        text.replace("title: Kit Rowe", "title: Kit Rowe\nsummary: Our designer")
    )
    _import(tmp_path)
    _write(tmp_path, "Kit Rowe draws buildings.", [])
    text = (tmp_path / "people" / "kit-rowe.md").read_text()
    (tmp_path / "people" / "kit-rowe.md").write_text(
        text.replace("title: Kit Rowe", "title: Kit Rowe\nsummary: Our designer")
    )
    _import(tmp_path)
    assert Page.objects.get(slug="people/kit-rowe").summary == "Our designer"


# --- admin -----------------------------------------------------------------------------


def _admin_fact_form(fact: Fact, **changes: Any) -> dict[str, Any]:
    data = {
        "source": fact.source_id,
        "entity": fact.entity_id or "",
        "text": fact.text,
        "kind": fact.kind,
        "visibility": fact.visibility,
        "provenance": fact.provenance,
        "raw_record": "",
        "evidence": "{}",
        "confidence": fact.confidence,
        "valid_from_0": fact.valid_from.strftime("%Y-%m-%d"),
        "valid_from_1": fact.valid_from.strftime("%H:%M:%S"),
        "valid_until_0": "",
        "valid_until_1": "",
    }
    data.update(changes)
    return data


def test_admin_edit_of_a_fact_reembeds_it_and_rechecks_its_slot(
    staff_client, verb, writer, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    typo = remember(verb, writer, "Suri Lam lives in Oslo", entity="Suri Lam")
    porto = remember(
        verb, writer, "Suri Lam works at Corvid Systems", entity="Suri Lam"
    )
    fact = Fact.objects.get(pk=typo["id"])
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            f"/admin/brain/fact/{fact.pk}/change/",
            _admin_fact_form(fact, text="Suri Lam works at Brightwell Labs"),
        )
    assert response.status_code == 302, response.content[:2000]
    fact.refresh_from_db()
    assert fact.text == "Suri Lam works at Brightwell Labs" and fact.slot == "employer"
    want = np.asarray(embed_texts([fact.text])[0][0])
    assert float(np.dot(np.asarray(fact.embedding), want)) > 0.999
    # Re-check: the edit now states the employer, so the older employer fact goes.
    assert Fact.objects.get(pk=porto["id"]).superseded_by_id == fact.pk
    # Later writes compare against the new text: the same employer is a duplicate.
    again = remember(
        verb, writer, "Suri Lam is employed by Brightwell Labs", entity="Suri Lam"
    )
    assert again["status"] == "duplicate" and again["id"] == str(fact.pk)


def test_soft_deleting_a_page_expires_its_facts_and_restore_brings_them_back(
    staff_client, verb, make_key, default_source
) -> None:  # type: ignore[no-untyped-def]
    page = add_page(default_source, title="Odo Fenwick", slug="people/odo-fenwick")
    key = make_key(default_source).plaintext
    remember(verb, key, "Odo Fenwick lives in Oslo", entity="Odo Fenwick")
    status, first = verb(key, "delta", {"session_id": "s1"})
    assert status == 200 and [f["fact"] for f in first["facts"]] == [
        "Odo Fenwick lives in Oslo"
    ]
    response = staff_client.post(
        "/admin/brain/page/",
        {"action": "soft_delete_pages", "_selected_action": [page.pk]},
    )
    assert response.status_code == 302
    fact = Fact.objects.get(text="Odo Fenwick lives in Oslo")
    assert fact.expired_reason == "page_deleted"
    status, recall = verb(key, "recall", {"query": "Odo Fenwick Oslo"})
    assert status == 200 and recall["facts"] == []
    status, later = verb(key, "delta", {"session_id": "s1"})
    assert later["facts"] == []
    assert [f["fact_id"] for f in later["forgotten"]] == [str(fact.pk)]
    staff_client.post(
        "/admin/brain/page/",
        {"action": "restore_pages", "_selected_action": [page.pk]},
    )
    fact.refresh_from_db()
    assert fact.expired_at is None and fact.expired_reason == ""
    assert live_texts(verb, key, "Odo Fenwick") == ["Odo Fenwick lives in Oslo"]


def test_purging_a_deleted_page_never_leaves_its_facts_live(
    verb, writer, default_source
) -> None:  # type: ignore[no-untyped-def]
    """Hard delete (dream's purge after 72 h): the facts stay expired, entity-less,
    and are found nowhere; a page deleted before facts expired with it gets them
    expired by the purge."""
    page = add_page(default_source, title="Rhea Tolland", slug="people/rhea-tolland")
    remember(verb, writer, "Rhea Tolland lives in Lyon", entity="Rhea Tolland")
    # A page soft-deleted before this rule existed: its fact is still active.
    Page.objects.filter(pk=page.pk).update(
        deleted_at=timezone.now() - timedelta(days=4)
    )
    report = dream_run(phases=["purge"])
    assert report["totals"] == {"pages_purged": 1}
    fact = Fact.objects.get(text="Rhea Tolland lives in Lyon")
    assert fact.entity_id is None and fact.expired_reason == "page_deleted"
    assert live_texts(verb, writer) == []


def test_delta_tells_a_session_that_received_a_fact_it_was_forgotten(
    verb, writer
) -> None:  # type: ignore[no-untyped-def]
    kept = remember(
        verb, writer, "Tess Harrow prefers morning meetings", entity="Tess Harrow"
    )
    gone = remember(verb, writer, "Tess Harrow lives in Leeds", entity="Tess Harrow")
    status, first = verb(writer, "delta", {"session_id": "tess"})
    assert status == 200 and first["forgotten"] == [] and len(first["facts"]) == 2
    status, _ = verb(writer, "forget", {"id": gone["id"], "reason": "wrong"})
    assert status == 200
    status, second = verb(writer, "delta", {"session_id": "tess"})
    assert [f["fact_id"] for f in second["forgotten"]] == [gone["id"]]
    assert second["forgotten"][0]["at"].endswith("Z")
    status, third = verb(writer, "delta", {"session_id": "tess"})
    assert third["forgotten"] == []
    # A session that never received the fact is not told about it.
    status, fresh = verb(writer, "delta", {"session_id": "new"})
    assert fresh["forgotten"] == [] and [f["fact_id"] for f in fresh["facts"]] == [
        kept["id"]
    ]
