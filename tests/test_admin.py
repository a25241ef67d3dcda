"""STYLE rule 21: every admin changelist, add form and change form loads for staff."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import reverse

from accounts.models import User
from accounts.services import apikey_create
from brain.models import AuditEvent, Chunk, PageRevision, PushEvent, SessionCursor
from tests.factories import (
    AliasFactory,
    FactFactory,
    PageFactory,
    RawRecordFactory,
    RelationFactory,
    TimelineEntryFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client() -> Client:
    user = User.objects.create_superuser("curator", "curator@example.org", "pw")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def one_of_everything() -> None:
    page = PageFactory()
    AliasFactory(page=page)
    RelationFactory(from_page=page)
    TimelineEntryFactory(page=page)
    FactFactory(entity=page, source=page.source)
    raw = RawRecordFactory(source=page.source)
    PageRevision.objects.create(
        page=page, actor="t", operation="create", content_hash="h", raw_record=raw
    )
    Chunk.objects.create(
        page=page,
        source=page.source,
        visibility="world",
        ordinal=0,
        text="t",
        content_hash="h",
    )
    AuditEvent.objects.create(actor="t", action="other", target_type="x", target_id="1")
    SessionCursor.objects.create(source=page.source, client="c", session_id="s")
    PushEvent.objects.create(
        session_id="s", page=page, mention="m", arm="alias", confidence=0.9
    )
    apikey_create(name="k", scopes=["read"], write_source=page.source)


def test_every_changelist_loads(staff_client: Client, one_of_everything: None) -> None:
    for model, model_admin in admin.site._registry.items():
        opts = model._meta
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        response = staff_client.get(url)
        assert response.status_code == 200, f"{url}: {response.status_code}"
        # A search must not crash either.
        if model_admin.search_fields:
            assert staff_client.get(url, {"q": "x"}).status_code == 200, url


def test_every_change_and_add_form_loads(
    staff_client: Client, one_of_everything: None
) -> None:
    for model in admin.site._registry:
        opts = model._meta
        obj = model._default_manager.first()
        if obj is not None:
            url = reverse(
                f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk]
            )
            response = staff_client.get(url)
            assert response.status_code == 200, f"{url}: {response.status_code}"
        add_url = reverse(f"admin:{opts.app_label}_{opts.model_name}_add")
        response = staff_client.get(add_url)
        assert response.status_code in (200, 403), f"{add_url}: {response.status_code}"


def test_admin_creates_an_api_key_and_shows_it_once(staff_client: Client) -> None:
    response = staff_client.post(
        reverse("admin:accounts_apikey_add"),
        {
            "name": "claude-code",
            "scopes": "read,write",
            "write_source": "default",
            "readable_sources": ["default"],
            "trusted": "on",
        },
        follow=True,
    )
    assert response.status_code == 200
    shown = [str(m) for m in response.context["messages"]]
    assert any("gbr_" in m and "shown only once" in m for m in shown), shown


def test_the_source_form_explains_federation_where_it_is_set(
    staff_client: Client,
) -> None:
    """Issue 18: the curator learns what federation means at the checkbox."""
    response = staff_client.get("/admin/brain/source/default/change/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "searched whenever a caller names no source" in page
    assert "Imported mailboxes start unfederated" in page
