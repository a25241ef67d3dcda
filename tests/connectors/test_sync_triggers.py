"""Everything that starts a sync calls ``source_sync`` (SPEC §6, §7): the
``sync_source`` command, the admin action, the API, and the social-auth step that
connects a Google account."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from social_django.models import UserSocialAuth

from accounts.models import User
from brain.models import Page, Source
from connectors.dispatch import source_sync
from connectors.google.auth import connect_google_source
from connectors.google.client import READONLY_SCOPES
from connectors.mailbox.sync import mailbox_import
from connectors.models import GoogleAccount, SyncRun
from tests.connectors.helpers import SPAMASSASSIN

pytestmark = pytest.mark.django_db


def test_source_sync_of_a_mailbox_source_reimports_its_path_idempotently() -> None:
    mailbox_import(source_id="sa", path=SPAMASSASSIN, owners=[])
    report = source_sync(source_id="sa")
    assert report.counts["messages"] == 0
    assert report.skipped["already imported"] == 26


def test_sync_source_command_prints_what_it_did() -> None:
    mailbox_import(source_id="sa", path=SPAMASSASSIN, owners=[])
    out = StringIO()
    call_command("sync_source", "sa", stdout=out, stderr=StringIO())
    assert "Synced 'sa' (succeeded)" in out.getvalue()
    assert "already imported" in out.getvalue()


def test_sync_source_command_refuses_an_unknown_source_with_a_fix() -> None:
    with pytest.raises(CommandError, match="No source 'nope'"):
        call_command("sync_source", "nope", stdout=StringIO(), stderr=StringIO())


def test_admin_sync_now_action_runs_the_sync() -> None:
    mailbox_import(source_id="sa", path=SPAMASSASSIN, owners=[])
    staff = User.objects.create_superuser(
        username="admin", email="a@example.org", password="pw-123456"
    )
    client = Client()
    client.force_login(staff)
    response = client.post(
        "/admin/brain/source/",
        {"action": "sync_now", "_selected_action": ["sa"]},
        follow=True,
    )
    assert response.status_code == 200
    notes = [str(m) for m in response.context["messages"]]
    assert notes == ["sa (succeeded): 26 duplicates, 26 files, 26 items."]
    assert SyncRun.objects.filter(source_id="sa").count() == 2


def test_connector_admin_changelists_load() -> None:
    mailbox_import(source_id="sa", path=SPAMASSASSIN, owners=[])
    staff = User.objects.create_superuser(
        username="admin", email="a@example.org", password="pw-123456"
    )
    client = Client()
    client.force_login(staff)
    for name in ("importeditem", "helditem", "syncrun", "googleaccount"):
        assert client.get(f"/admin/connectors/{name}/").status_code == 200


def test_api_sync_requires_admin_scope(api_client, make_key) -> None:  # type: ignore[no-untyped-def]
    mailbox_import(source_id="sa", path=SPAMASSASSIN, owners=[])
    source = Source.objects.get(id="sa")
    denied = api_client(make_key(source).plaintext).post("/api/sources/sa/sync")
    assert denied.status_code == 403 and denied.json()["error"] == "scope_denied"
    admin_key = make_key(source, scopes=("read", "write", "admin"), trusted=True)
    body = api_client(admin_key.plaintext).post("/api/sources/sa/sync").json()
    assert body["status"] == "succeeded" and body["skipped"]["already imported"] == 26


class _Backend:
    name = "google-oauth2"


def test_google_sign_in_with_mailbox_scopes_connects_a_source() -> None:
    user = User.objects.create_user(username="jane", email="jane@example.com")
    social = UserSocialAuth.objects.create(
        user=user, provider="google-oauth2", uid="jane@example.com", extra_data={}
    )
    connect_google_source(
        _Backend(),
        user=user,
        response={
            "email": "jane@example.com",
            "scope": " ".join(["openid", READONLY_SCOPES[0]]),
        },
        social=social,
    )
    account = GoogleAccount.objects.get(email="jane@example.com")
    assert account.source.kind == "google" and account.source.id == "gmail-jane"
    assert account.social_auth == social
    assert account.missing_scopes == list(READONLY_SCOPES[1:])
    social.refresh_from_db()
    assert "access_token" not in social.extra_data or social.extra_data["access_token"]
    assert social.extra_data["granted_scopes"] == sorted(["openid", READONLY_SCOPES[0]])


def test_a_staff_sign_in_without_mailbox_scopes_connects_nothing() -> None:
    user = User.objects.create_user(username="staff", email="staff@example.com")
    connect_google_source(
        _Backend(),
        user=user,
        response={"email": "staff@example.com", "scope": "openid email"},
    )
    assert not GoogleAccount.objects.exists()
    assert not Page.objects.filter(source__kind="google").exists()


def test_syncing_a_google_source_without_a_stored_grant_asks_to_reconnect() -> None:
    from brain.exceptions import InvalidParams
    from connectors.google.auth import google_account_connect

    account = google_account_connect(
        email="x@example.com", granted_scopes=[], client=None
    )
    with pytest.raises(InvalidParams, match="no stored grant") as excinfo:
        source_sync(source_id=account.source.id)
    assert "/login/google-oauth2/" in excinfo.value.suggestion
