"""Admin edits go through the one write path (SPEC §2.3); actions call services."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from accounts.models import User
from brain.access import local_caller
from brain.models import AuditEvent, Chunk, Page, PageRevision, PageType, Source
from brain.services.pages import page_add

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_embeddings(settings) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"


@pytest.fixture
def staff_client() -> Client:
    user = User.objects.create_superuser("curator", "curator@example.org", "pw")
    client = Client()
    client.force_login(user)
    return client


def _form(page_type: PageType, **over: str) -> dict[str, str]:
    data = {
        "source": "default",
        "slug": "notes/offsite",
        "type": str(page_type.pk),
        "title": "Offsite",
        "frontmatter": '{"owner": "ann"}',
        "body": "Lisbon in March.",
        "summary": "",
        "tags": "",
        "visibility": "world",
        "effective_date": "",
    }
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


def test_admin_add_goes_through_the_write_path(
    staff_client: Client, default_source: Source
) -> None:
    note = PageType.objects.get(name="note")
    response = staff_client.post(reverse("admin:brain_page_add"), _form(note))
    assert response.status_code == 302, response.content[:2000]
    page = Page.objects.get(slug="notes/offsite")
    revision = PageRevision.objects.get(page=page)
    assert revision.actor == "staff:curator" and revision.operation == "create"
    assert page.frontmatter["owner"] == "ann" and page.summary == "Lisbon in March."
    assert Chunk.objects.filter(page=page).exists()


def test_admin_change_writes_a_revision_with_the_previous_body(
    staff_client: Client, default_source: Source
) -> None:
    page = page_add(
        source=default_source,
        slug="notes/offsite",
        title="Offsite",
        body="Lisbon.",
        actor=local_caller(),
    ).page
    note = PageType.objects.get(name="note")
    url = reverse("admin:brain_page_change", args=[page.pk])
    response = staff_client.post(
        url, _form(note, body="Porto instead.", summary="Porto")
    )
    assert response.status_code == 302, response.content[:2000]
    page.refresh_from_db()
    assert page.body == "Porto instead." and page.summary == "Porto"
    latest = PageRevision.objects.filter(page=page, operation="replace").get()
    assert latest.previous_body == "Lisbon." and latest.actor == "staff:curator"


def test_admin_actions_soft_delete_restore_and_reembed(
    staff_client: Client, default_source: Source
) -> None:
    page = page_add(
        source=default_source,
        slug="notes/x",
        title="X",
        body="Body.",
        actor=local_caller(),
    ).page
    url = reverse("admin:brain_page_changelist")
    staff_client.post(
        url, {"action": "soft_delete_pages", "_selected_action": [page.pk]}
    )
    page.refresh_from_db()
    assert page.deleted_at is not None
    staff_client.post(url, {"action": "restore_pages", "_selected_action": [page.pk]})
    page.refresh_from_db()
    assert page.deleted_at is None
    response = staff_client.post(
        url, {"action": "reembed_pages", "_selected_action": [page.pk]}, follow=True
    )
    assert b"1 page(s) re-chunked" in response.content
    assert list(AuditEvent.objects.order_by("id").values_list("action", flat=True)) == [
        "page_deleted",
        "page_restored",
    ]
