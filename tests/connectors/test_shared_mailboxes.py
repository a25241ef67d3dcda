"""Shared mailboxes as a team feature (SPEC §6.1, §6.1a, §7): their own schedules,
owner addresses from members, members-only visibility in the admin, write-only
encrypted credentials, the Workspace console steps and the per-mailbox waiting view."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django_q.models import Schedule

from accounts.models import User
from brain.models import Source
from connectors.google.delegation import DELEGATION_SCOPES
from connectors.imap.sync import imap_settings_for
from connectors.models import SharedMailbox, WorkspaceServiceAccount
from connectors.secrets import secret_decrypt
from connectors.services_shared import shared_mailbox_create

pytestmark = pytest.mark.django_db

SECRET = "imap-app-password-7731"  # noqa: S105 - invented


def _imap_mailbox(
    address: str = "deals@team.example", **kwargs: object
) -> SharedMailbox:
    return shared_mailbox_create(
        address=address,
        provider=SharedMailbox.Provider.IMAP,
        imap_host="imap.team.example",
        secret=SECRET,
        **kwargs,  # type: ignore[arg-type]
    )


def test_each_shared_mailbox_gets_its_own_schedule_installed_idempotently() -> None:
    _imap_mailbox()
    _imap_mailbox("support@team.example", sync_every_minutes=15)
    out = StringIO()
    call_command("setup_schedules", stdout=out)
    crons = dict(
        Schedule.objects.filter(name__startswith="sync_source:").values_list(
            "name", "cron"
        )
    )
    assert crons["sync_source:shared-deals"] == "*/10 * * * *"
    assert crons["sync_source:shared-support"] == "*/15 * * * *"
    before = list(Schedule.objects.order_by("name").values_list("name", "cron"))
    call_command("setup_schedules", stdout=StringIO())
    assert list(Schedule.objects.order_by("name").values_list("name", "cron")) == before
    kwargs = Schedule.objects.get(name="sync_source:shared-deals").kwargs
    assert "'source_id': 'shared-deals'" in kwargs


def test_owner_addresses_follow_the_members() -> None:
    ann = User.objects.create_user("ann", "Ann@Team.example", "pw", is_staff=True)
    bo = User.objects.create_user("bo", "bo@team.example", "pw", is_staff=True)
    mailbox = _imap_mailbox(members=[ann, bo])
    source = Source.objects.get(pk=mailbox.source_id)
    assert source.kind == Source.Kind.IMAP
    assert source.owner_addresses == [
        "ann@team.example",
        "bo@team.example",
        "deals@team.example",
    ]
    from connectors.services_shared import shared_mailbox_owners_sync

    mailbox.members.remove(bo)
    shared_mailbox_owners_sync(mailbox=mailbox)
    assert Source.objects.get(pk=mailbox.source_id).owner_addresses == [
        "ann@team.example",
        "deals@team.example",
    ]


def test_the_credential_is_encrypted_and_read_from_the_environment_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mailbox = _imap_mailbox()
    assert SECRET not in mailbox.secret_encrypted
    assert secret_decrypt(mailbox.secret_encrypted) == SECRET
    assert imap_settings_for(mailbox).secret == SECRET
    assert SECRET not in repr(imap_settings_for(mailbox))
    monkeypatch.setenv("DEALS_IMAP_PASSWORD", "from-env")
    mailbox.secret_env = "DEALS_IMAP_PASSWORD"
    assert imap_settings_for(mailbox).secret == "from-env"


def _staff(username: str, *, superuser: bool = False) -> tuple[User, Client]:
    maker = User.objects.create_superuser if superuser else User.objects.create_user
    user = maker(username, f"{username}@team.example", "pw")
    if not superuser:
        from django.contrib.auth.models import Permission

        user.is_staff = True
        user.save()
        user.user_permissions.set(
            Permission.objects.filter(codename__endswith="_sharedmailbox")
        )
    client = Client()
    client.force_login(user)
    return user, client


def test_admin_adds_a_mailbox_with_a_write_only_secret() -> None:
    admin_user, client = _staff("root", superuser=True)
    response = client.post(
        reverse("admin:connectors_sharedmailbox_add"),
        {
            "address": "ops@team.example",
            "provider": "imap",
            "members": [admin_user.pk],
            "sync_every_minutes": 20,
            "imap_host": "imap.team.example",
            "imap_port": "",
            "imap_security": "ssl",
            "imap_username": "",
            "imap_auth": "password",
            "imap_folders": "[]",
            "secret_env": "",
            "source_id": "",
            "secret": SECRET,
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    mailbox = SharedMailbox.objects.get(address="ops@team.example")
    assert mailbox.source_id == "shared-ops"
    assert secret_decrypt(mailbox.secret_encrypted) == SECRET
    assert Source.objects.get(pk="shared-ops").owner_addresses == [
        "ops@team.example",
        "root@team.example",
    ]
    page = client.get(
        reverse("admin:connectors_sharedmailbox_change", args=[mailbox.pk])
    ).content.decode()
    assert SECRET not in page and mailbox.secret_encrypted not in page
    assert "stored encrypted" in page
    assert f"?source={mailbox.source_id}" in page  # the mailbox's waiting view


def test_only_members_see_a_shared_mailbox_in_the_admin() -> None:
    member, member_client = _staff("dana")
    _outsider, outsider_client = _staff("eli")
    mailbox = _imap_mailbox(members=[member])
    url = reverse("admin:connectors_sharedmailbox_changelist")
    assert "deals@team.example" in member_client.get(url).content.decode()
    assert "deals@team.example" not in outsider_client.get(url).content.decode()
    change = reverse("admin:connectors_sharedmailbox_change", args=[mailbox.pk])
    assert member_client.get(change).status_code == 200
    assert outsider_client.get(change).status_code == 302  # "does not exist" redirect


def test_workspace_console_steps_show_the_exact_scopes_and_the_key_is_write_only() -> (
    None
):
    _root, client = _staff("root", superuser=True)
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    key = {
        "type": "service_account",
        "client_email": "sync@proj.iam.gserviceaccount.com",
        "client_id": "998877665544",
        "private_key_id": "abc123",
        "private_key": pem,
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    add = reverse("admin:connectors_workspaceserviceaccount_add")
    form_page = client.get(add).content.decode()
    assert DELEGATION_SCOPES in form_page
    assert "Manage domain-wide delegation" in form_page
    upload = SimpleUploadedFile("key.json", json.dumps(key).encode())
    response = client.post(add, {"key_file": upload})
    assert response.status_code == 302
    row = WorkspaceServiceAccount.objects.get()
    shown = client.get(
        reverse("admin:connectors_workspaceserviceaccount_change", args=[row.pk])
    ).content.decode()
    assert "998877665544" in shown and pem[40:80] not in shown
    mailbox = shared_mailbox_create(
        address="founder@team.example", provider=SharedMailbox.Provider.WORKSPACE
    )
    page = client.get(
        reverse("admin:connectors_sharedmailbox_change", args=[mailbox.pk])
    ).content.decode()
    assert DELEGATION_SCOPES in page and "998877665544" in page
    bad = client.post(add, {"key_file": SimpleUploadedFile("k.json", b'{"a": 1}')})
    assert bad.status_code == 200 and "not a Google service-account key" in (
        bad.content.decode()
    )


def test_the_waiting_view_filters_per_mailbox() -> None:
    _root, client = _staff("root", superuser=True)
    _imap_mailbox()
    _imap_mailbox("support@team.example")
    url = reverse("admin:loops_waiting")
    page = client.get(url, {"source": "shared-support"})
    assert page.status_code == 200
    assert page.context["report"]["sources"] == ["shared-support"]
    html = page.content.decode()
    assert '<option value="shared-support" selected>' in html
    assert '<option value="shared-deals">' in html
    every = client.get(url)
    assert {"shared-deals", "shared-support"} <= set(every.context["report"]["sources"])


def test_an_imap_mailbox_not_synced_for_a_day_makes_waiting_stale() -> None:
    from django.utils import timezone

    from brain.access import local_caller
    from loops.waiting import waiting_report

    mailbox = _imap_mailbox()
    report = waiting_report(caller=local_caller(), sources=[mailbox.source_id])
    assert report["stale"] and report["stale_sources"] == [mailbox.source_id]
    Source.objects.filter(pk=mailbox.source_id).update(
        last_success_at=timezone.now() - timezone.timedelta(hours=2)
    )
    report = waiting_report(caller=local_caller(), sources=[mailbox.source_id])
    assert not report["stale"] and report["stale_sources"] == []


def test_the_sources_list_hides_a_shared_mailbox_from_non_members() -> None:
    from django.contrib.auth.models import Permission

    member, member_client = _staff("dana")
    outsider, outsider_client = _staff("eli")
    for user in (member, outsider):
        user.user_permissions.add(*Permission.objects.filter(codename="view_source"))
    _imap_mailbox(members=[member])
    url = reverse("admin:brain_source_changelist")
    assert "shared-deals" in member_client.get(url).content.decode()
    seen = outsider_client.get(url).content.decode()
    assert "shared-deals" not in seen and "default" in seen


def test_a_workspace_address_already_signed_in_is_not_taken_over() -> None:
    from brain.exceptions import InvalidParams
    from connectors.google.auth import google_account_connect
    from connectors.google.client import READONLY_SCOPES

    account = google_account_connect(
        email="founder@team.example", granted_scopes=list(READONLY_SCOPES), client=None
    )
    with pytest.raises(InvalidParams) as caught:
        shared_mailbox_create(
            address="founder@team.example", provider=SharedMailbox.Provider.WORKSPACE
        )
    assert account.source_id in str(caught.value)
    account.refresh_from_db()
    assert account.source_id == "gmail-founder"
    assert not SharedMailbox.objects.exists()
