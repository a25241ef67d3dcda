"""Edits never clobber (issue 46, SPEC §4 ``conflict``): a page write that carries the
revision it was based on (``base_revision``) is refused with ``conflict`` (HTTP 409)
naming the current revision and a diff when the page changed since; writes without
a base apply as before (appends commute). The check lives in the page write path
(``brain.services.pages.revisions``), so every transport gets it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from accounts.models import User
from brain.access import local_caller
from brain.exceptions import Conflict
from brain.models import Page, PageRevision, Source
from brain.services.pages import page_add, page_update

pytestmark = pytest.mark.django_db

CALLER = local_caller(actor="test")


@pytest.fixture(autouse=True)
def _no_embeddings(settings) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"


def _plan(source: Source) -> Page:
    return page_add(
        source=source, slug="notes/plan", title="Plan", body="Lisbon.", actor=CALLER
    ).page


def test_spec4_conflict_two_api_replaces_from_the_same_base(
    api_client: Any, make_key: Any, source_a: Source
) -> None:
    """Two agents read the page, both replace it from that read: the first is kept,
    the second gets 409 ``conflict`` naming the current revision with the diff from
    the base to it, and nothing of the second is written."""
    _plan(source_a)
    client = api_client(make_key(source_a).plaintext)
    read = client.get("/api/pages/notes/plan").json()
    base = read["revision"]
    assert base == read["content_hash"]

    first = client.post(
        "/api/pages/notes/plan",
        {"mode": "replace", "body": "Porto.", "base_revision": base},
        content_type="application/json",
    )
    assert first.status_code == 200, first.json()
    current = first.json()["page"]["revision"]
    assert current != base

    second = client.post(
        "/api/pages/notes/plan",
        {"mode": "replace", "body": "Madrid.", "base_revision": base},
        content_type="application/json",
    )
    assert second.status_code == 409, second.json()
    body = second.json()
    assert set(body) == {"error", "message", "suggestion", "detail", "protocol_version"}
    assert body["error"] == "conflict" and body["suggestion"]
    assert current in body["message"]
    detail = json.loads(body["detail"])
    assert detail["current_revision"] == current
    assert detail["base_revision"] == base and detail["base_known"] is True
    assert "-Lisbon." in detail["diff"] and "+Porto." in detail["diff"]
    page = Page.objects.get(source=source_a, slug="notes/plan")
    assert page.body == "Porto."
    assert PageRevision.objects.filter(page=page).count() == 2


def test_spec4_conflict_a_current_base_revision_writes(
    api_client: Any, make_key: Any, source_a: Source
) -> None:
    """The revision just read is current: the write goes through (append or
    replace) and answers the new revision."""
    _plan(source_a)
    client = api_client(make_key(source_a).plaintext)
    base = client.get("/api/pages/notes/plan").json()["revision"]
    response = client.post(
        "/api/pages/notes/plan",
        {"mode": "append", "body": "Then Porto.", "base_revision": base},
        content_type="application/json",
    )
    assert response.status_code == 200, response.json()
    assert response.json()["page"]["body"] == "Lisbon.\n\nThen Porto."
    assert response.json()["page"]["revision"] != base


def test_spec4_conflict_never_without_base_revision(
    api_client: Any, make_key: Any, source_a: Source
) -> None:
    """An append without a base after someone else's change applies (appends
    commute); so does a replace without one (the pre-issue behaviour)."""
    _plan(source_a)
    client = api_client(make_key(source_a).plaintext)
    client.get("/api/pages/notes/plan")
    page_update(source=source_a, slug="notes/plan", body="Curator line.", actor=CALLER)
    response = client.post(
        "/api/pages/notes/plan",
        {"body": "Agent line."},
        content_type="application/json",
    )
    assert response.status_code == 200, response.json()
    assert response.json()["page"]["body"] == "Lisbon.\n\nCurator line.\n\nAgent line."


def test_spec4_conflict_an_unknown_base_is_a_conflict_with_the_whole_body(
    source_a: Source,
) -> None:
    """A base the page never had (made up, or another page's) still conflicts;
    ``base_known`` says the diff is from an empty body."""
    page = _plan(source_a)
    with pytest.raises(Conflict) as caught:
        page_update(
            source=source_a,
            slug="notes/plan",
            mode="replace",
            body="Madrid.",
            base_revision="0" * 64,
            actor=CALLER,
        )
    detail = caught.value.detail or {}
    assert detail["current_revision"] == page.content_hash
    assert detail["base_known"] is False and "+Lisbon." in detail["diff"]
    assert Page.objects.get(pk=page.pk).body == "Lisbon."


def test_spec4_conflict_the_diff_starts_at_an_older_base(source_a: Source) -> None:
    """The diff runs from the body the base revision had, however many writes
    came after it (rebuilt from the page's revisions)."""
    base = _plan(source_a).content_hash
    for line in ("Two.", "Three."):
        page_update(source=source_a, slug="notes/plan", body=line, actor=CALLER)
    with pytest.raises(Conflict) as caught:
        page_update(
            source=source_a,
            slug="notes/plan",
            mode="replace",
            body="Mine.",
            base_revision=base,
            actor=CALLER,
        )
    diff = (caught.value.detail or {})["diff"]
    assert " Lisbon." in diff and "+Two." in diff and "+Three." in diff


# --- the admin change form ------------------------------------------------------------


@pytest.fixture
def staff_client() -> Client:
    user = User.objects.create_superuser("curator", "curator@example.org", "pw")
    client = Client()
    client.force_login(user)
    return client


def _change_form(client: Client, page: Page, **over: str) -> dict[str, str]:
    """The change form's fields as the browser would post them back: the values
    the admin rendered (read from the GET), then ``over``."""
    response = client.get(reverse("admin:brain_page_change", args=[page.pk]))
    assert response.status_code == 200
    form = response.context["adminform"].form
    data = {}
    for name in form.fields:
        value = form[name].value()
        data[name] = "" if value is None else str(value)
    for prefix in (
        "aliases",
        "outgoing_relations",
        "incoming_relations",
        "facts",
        "timeline",
        "revisions",
    ):
        data.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    data.update(over)
    return data


def test_admin_change_form_sends_base_revision_and_a_stale_one_is_shown(
    staff_client: Client, default_source: Source
) -> None:
    """The admin form carries the revision it showed; an API append between
    opening and saving it makes the save a 409 showing both versions, and the
    append is kept."""
    page = _plan(default_source)
    data = _change_form(staff_client, page, body="Madrid only.")
    assert data["base_revision"] == page.content_hash
    page_update(
        source=default_source, slug="notes/plan", body="Agent line.", actor=CALLER
    )
    url = reverse("admin:brain_page_change", args=[page.pk])
    response = staff_client.post(url, data)
    assert response.status_code == 409
    html = response.content.decode()
    assert "Not saved: the page changed since you opened the editor" in html
    assert "Agent line." in html and "Madrid only." in html
    assert Page.objects.get(pk=page.pk).body == "Lisbon.\n\nAgent line."


def test_admin_change_form_refreshes_the_derived_summary_on_every_edit(
    staff_client: Client, default_source: Source
) -> None:
    """Issue 46: an admin body edit keeps the summary derived (the new body's first
    line), and a later edit changes it again, as every other write path does."""
    page = _plan(default_source)
    assert page.summary == "Lisbon."
    url = reverse("admin:brain_page_change", args=[page.pk])
    response = staff_client.post(
        url, _change_form(staff_client, page, body="Porto in May.\n\nDetails.")
    )
    assert response.status_code == 302, response.content[:2000]
    page.refresh_from_db()
    assert page.summary == "Porto in May." and page.frontmatter["summary"] == (
        "Porto in May."
    )
    response = staff_client.post(
        url, _change_form(staff_client, page, body="Madrid in June.")
    )
    assert response.status_code == 302, response.content[:2000]
    page.refresh_from_db()
    assert page.summary == "Madrid in June."


def test_admin_change_form_keeps_a_summary_the_curator_wrote(
    staff_client: Client, default_source: Source
) -> None:
    """A summary typed in the form is the curator's, kept over later body edits."""
    page = _plan(default_source)
    url = reverse("admin:brain_page_change", args=[page.pk])
    staff_client.post(
        url, _change_form(staff_client, page, summary="Where we meet.", body="Porto.")
    )
    page.refresh_from_db()
    assert page.summary == "Where we meet."
    staff_client.post(url, _change_form(staff_client, page, body="Madrid."))
    page.refresh_from_db()
    assert (page.body, page.summary) == ("Madrid.", "Where we meet.")


def test_console_editor_conflict_keeps_the_text_and_shows_both_versions(
    staff_client: Client, default_source: Source
) -> None:
    """The console editor's POST with a stale base answers 409 with the current
    version and the curator's text in the box, whose base is now current: a second
    save puts the curator's text over it."""
    page = _plan(default_source)
    url = reverse("admin:console_page_edit", args=[page.source_id, page.slug])
    form = staff_client.get(url)
    assert form.context["base_revision"] == page.content_hash
    page_update(
        source=default_source, slug="notes/plan", body="Agent line.", actor=CALLER
    )
    data = {
        "title": "Plan",
        "body": "Curator text.",
        "mode": "replace",
        "base_revision": page.content_hash,
    }
    response = staff_client.post(url, data)
    assert response.status_code == 409
    assert response.context["form_body"] == "Curator text."
    assert "Lisbon.\n\nAgent line." == response.context["conflict"]["current"]
    current = Page.objects.get(pk=page.pk)
    assert response.context["base_revision"] == current.content_hash
    again = staff_client.post(
        url, {**data, "base_revision": response.context["base_revision"]}
    )
    assert again.status_code == 302
    assert Page.objects.get(pk=page.pk).body == "Curator text."
