"""Issue 45: facts find their page later, and the page-less facts file forgets too
(SPEC §2.4, §4, §6.3).

A fact remembered for a name that has no page is kept under that name
(``evidence.entity_ref``); when a page for the name appears (page write) or at the
latest when dream runs, the fact attaches to it with an audit row, so the card and
``context_pack`` show it. A struck or removed row of ``.facts.md`` expires its fact
through the same code path as a page's facts fence. Every test here failed before.
"""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from brain.models import AuditEvent, Fact, Page
from brain.services.dream import dream_run
from brain.services.facts import fact_record
from tests.brain.conftest import add_page

pytestmark = pytest.mark.django_db

PROV = "chat, 2026-12-01"


@pytest.fixture
def writer(make_key, default_source):  # type: ignore[no-untyped-def]
    """A remote read/write key on ``default``."""
    return make_key(default_source).plaintext


def _ok(verb, key: str, name: str, body: dict[str, Any]) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    status, out = verb(key, name, body)
    assert status in (200, 201), out
    return out


def _card_and_pack(verb, key: str, name: str) -> tuple[dict[str, Any], list[str]]:  # type: ignore[no-untyped-def]
    card = _ok(verb, key, "entity", {"name": name})["card"]
    pack = _ok(verb, key, "context_pack", {"entities": name})
    return card, [f["fact"] for f in pack["facts"]]


def test_a_fact_remembered_before_the_person_page_attaches_after_add_and_dream(
    verb, writer
) -> None:  # type: ignore[no-untyped-def]
    said = _ok(
        verb,
        writer,
        "remember",
        {
            "fact": "Wren Talbot prefers calls after 4pm",
            "provenance": PROV,
            "entity": "Wren Talbot",
            "kind": "preference",
        },
    )
    assert said["entity_slug"] == "wren-talbot"
    _ok(
        verb,
        writer,
        "pages",
        {"title": "Wren Talbot", "type": "person", "body": "Wren runs the mill."},
    )
    dream_run(phases=["facts"])
    page = Page.objects.get(title="Wren Talbot")
    fact = Fact.objects.get(pk=int(said["id"]))
    assert fact.entity_id == page.pk
    card, pack_facts = _card_and_pack(verb, writer, "Wren Talbot")
    assert card["active_fact_count"] == 1
    assert pack_facts == ["Wren Talbot prefers calls after 4pm"]
    recall = _ok(verb, writer, "recall", {"entity": "Wren Talbot"})
    assert [f["entity_slug"] for f in recall["facts"]] == [page.slug]
    assert AuditEvent.objects.filter(
        action="fact_edited",
        target_type="fact",
        target_id=str(fact.pk),
        extra_data__attached_to=page.slug,
    ).exists()


def test_the_page_write_itself_attaches_the_waiting_fact(verb, writer) -> None:  # type: ignore[no-untyped-def]
    said = _ok(
        verb,
        writer,
        "remember",
        {
            "fact": "Ossian Vale is allergic to shellfish",
            "provenance": PROV,
            "entity": "Ossian Vale",
        },
    )
    _ok(verb, writer, "pages", {"title": "Ossian Vale", "type": "person"})
    page = Page.objects.get(title="Ossian Vale")
    assert Fact.objects.get(pk=int(said["id"])).entity_id == page.pk
    card, pack_facts = _card_and_pack(verb, writer, "Ossian Vale")
    assert card["active_fact_count"] == 1
    assert pack_facts == ["Ossian Vale is allergic to shellfish"]


def test_a_fact_remembered_under_an_address_attaches_to_the_page_with_that_alias(
    verb, writer
) -> None:  # type: ignore[no-untyped-def]
    said = _ok(
        verb,
        writer,
        "remember",
        {
            "fact": "Prefers email over phone",
            "provenance": PROV,
            "entity": "juno.marsh@example.org",
        },
    )
    _ok(
        verb,
        writer,
        "pages",
        {
            "title": "Juno Marsh",
            "type": "person",
            "frontmatter": {"aliases": ["juno.marsh@example.org"]},
        },
    )
    page = Page.objects.get(title="Juno Marsh")
    assert Fact.objects.get(pk=int(said["id"])).entity_id == page.pk


def test_dream_attaches_a_waiting_reference_the_page_write_did_not_see(
    default_source,
) -> None:  # type: ignore[no-untyped-def]
    page = add_page(default_source, title="Tamsin Roe", slug="people/tamsin-roe")
    fact = fact_record(
        source_id=default_source.id,
        entity=None,
        text="Tamsin Roe owes the survey by Friday",
        kind="commitment",
        visibility="world",
        provenance="loops",
        created_by="loops",
        actor="loops",
        evidence={"entity_ref": "tamsin-roe"},
    )
    report = dream_run(phases=["facts"])
    fact.refresh_from_db()
    assert fact.entity_id == page.pk
    facts_phase = next(p for p in report["phases"] if p["phase"] == "facts")
    assert facts_phase["counts"]["facts_attached"] == 1
    assert dream_run(phases=["facts"])["status"] == "clean"


def test_an_unknown_name_stays_a_reference_until_its_page_appears(verb, writer) -> None:  # type: ignore[no-untyped-def]
    said = _ok(
        verb,
        writer,
        "remember",
        {"fact": "Lior Bask plays the oboe", "provenance": PROV, "entity": "Lior Bask"},
    )
    _ok(verb, writer, "pages", {"title": "Lior Baskin", "type": "person"})
    dream_run(phases=["facts"])
    fact = Fact.objects.get(pk=int(said["id"]))
    assert fact.entity_id is None and fact.evidence["entity_ref"] == "lior-bask"


# --- the page-less facts file (.facts.md) forgets like a page's fence ------------------

FENCE = """## Facts
<!--- gbrain:facts:begin -->
| # | claim | kind | confidence | visibility | notability | valid_from | valid_until | source | context |
|---|---|---|---|---|---|---|---|---|---|
{rows}
<!--- gbrain:facts:end -->
"""


def _write_facts_file(folder: Path, rows: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = "\n".join(
        f"| {i} | {claim} | fact | 1.0 | world | medium |  |  | notes |  |"
        for i, claim in enumerate(rows, start=1)
    )
    (folder / ".facts.md").write_text(FENCE.format(rows=lines))
    (folder / "readme.md").write_text("# Notes\n\nA folder of notes.\n")


def _import(folder: Path) -> None:
    call_command(
        "import_markdown",
        str(folder),
        "--source",
        "notes",
        stdout=StringIO(),
        stderr=StringIO(),
    )


def _live(text: str) -> bool:
    return Fact.objects.filter(
        source_id="notes", text=text, expired_at__isnull=True
    ).exists()


def test_a_struck_row_of_the_facts_file_expires_its_fact(tmp_path: Path) -> None:
    _write_facts_file(
        tmp_path, ["The boiler is serviced in March", "The gate code is 4711"]
    )
    _import(tmp_path)
    assert _live("The gate code is 4711")
    _write_facts_file(
        tmp_path, ["The boiler is serviced in March", "~~The gate code is 4711~~"]
    )
    _import(tmp_path)
    gone = Fact.objects.get(source_id="notes", text="The gate code is 4711")
    assert gone.expired_at is not None
    assert gone.expired_reason.startswith("struck in markdown")
    assert _live("The boiler is serviced in March")
    assert AuditEvent.objects.filter(
        action="fact_expired", target_id=str(gone.pk)
    ).exists()


def test_a_removed_row_of_the_facts_file_expires_its_fact(tmp_path: Path) -> None:
    _write_facts_file(
        tmp_path, ["The boiler is serviced in March", "The gate code is 4711"]
    )
    _import(tmp_path)
    _write_facts_file(tmp_path, ["The boiler is serviced in March"])
    _import(tmp_path)
    gone = Fact.objects.get(source_id="notes", text="The gate code is 4711")
    assert gone.expired_at is not None
    assert gone.expired_reason == "removed from markdown"
    assert _live("The boiler is serviced in March")


def test_a_struck_row_and_its_replacement_in_the_facts_file_supersede(
    tmp_path: Path,
) -> None:
    _write_facts_file(tmp_path, ["Kit Rowe lives in Lisbon"])
    _import(tmp_path)
    old = Fact.objects.get(text="Kit Rowe lives in Lisbon")
    _write_facts_file(
        tmp_path, ["~~Kit Rowe lives in Lisbon~~", "Kit Rowe lives in Porto"]
    )
    _import(tmp_path)
    old.refresh_from_db()
    new = Fact.objects.get(text="Kit Rowe lives in Porto")
    assert old.expired_at is not None and old.superseded_by_id == new.pk
    assert not _live("Kit Rowe lives in Lisbon")
