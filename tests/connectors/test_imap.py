"""IMAP sync against a real Dovecot server started by the tests (SPEC §6.1a):
INBOX and the SPECIAL-USE Sent folder, incremental by UIDVALIDITY + UID, a changed
UIDVALIDITY, a connection dropped mid-sync, read-only enforcement, STARTTLS and TLS,
and the ``sync_source`` command on a stored shared mailbox."""

from __future__ import annotations

from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from brain.models import Page, RawRecord, Source
from connectors.base import PermanentError, TransientError
from connectors.imap.client import ImapFolder, ImapReader, ImapWriteRefused
from connectors.imap.sync import folders_to_sync, imap_folder_role, imap_sync
from connectors.models import HeldItem, ImportedItem, SharedMailbox, SyncRun
from connectors.services_shared import shared_mailbox_create
from loops.message import MailMessage
from tests.connectors.dovecot import (
    PASSWORD,
    ImapAccount,
    make_account,
    tls_context,
)

pytestmark = pytest.mark.django_db

INBOX_FILES = 9  # tests/data/enron/allen-p/inbox
SENT_FILES = 14  # tests/data/enron/allen-p/sent_items
OWNER = "pallen@enron.com"


def _mailbox(account: ImapAccount, source_id: str = "shared-allen") -> SharedMailbox:
    return shared_mailbox_create(
        address=account.user,
        provider=SharedMailbox.Provider.IMAP,
        source_id=source_id,
        imap_host="127.0.0.1",
        imap_port=account.server.port,
        imap_security=SharedMailbox.Security.PLAIN,
        secret=PASSWORD,
    )


def _stored(source_id: str) -> int:
    return RawRecord.objects.filter(source_id=source_id, kind="rfc822").count()


def _new_message(
    subject: str, *, sender: str = "Ann Example <ann@invented.example>"
) -> bytes:
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = OWNER
    msg["Subject"] = subject
    msg["Date"] = format_datetime(timezone.now())
    msg["Message-ID"] = make_msgid(domain="invented.example")
    msg.set_content("Could you send me the signed contract by Friday?\n")
    return bytes(msg)


def test_first_sync_reads_inbox_and_the_special_use_sent_folder(
    imap_account: ImapAccount,
) -> None:
    mailbox = _mailbox(imap_account)
    report = imap_sync(source=mailbox.source)
    assert report.status == "succeeded"
    assert report.counts["fetched"] == INBOX_FILES + SENT_FILES
    stored = _stored("shared-allen")
    assert stored == report.counts["messages"] > 0
    assert stored + report.skipped["duplicate copy"] == INBOX_FILES + SENT_FILES, (
        report.skipped
    )
    # Every fetched message is stored or ledgered as a duplicate copy.
    assert ImportedItem.objects.filter(source_id="shared-allen").count() == (
        INBOX_FILES + SENT_FILES
    )
    sent = RawRecord.objects.filter(source_id="shared-allen", metadata__folder="Sent")
    assert sent.exists()
    assert all(MailMessage.from_metadata(r.metadata).is_mine for r in sent)
    assert Page.objects.filter(source_id="shared-allen", type__name="email").exists()
    cursor = Source.objects.get(id="shared-allen").cursor["imap"]
    assert set(cursor) == {"INBOX", "Sent"}
    assert cursor["INBOX"]["last_uid"] == INBOX_FILES
    assert cursor["INBOX"]["uidvalidity"] == imap_account.uidvalidity()
    run = SyncRun.objects.get(source_id="shared-allen")
    assert run.status == SyncRun.Status.SUCCEEDED


def test_second_sync_fetches_only_the_new_message(imap_account: ImapAccount) -> None:
    mailbox = _mailbox(imap_account)
    imap_sync(source=mailbox.source)
    before = _stored("shared-allen")

    again = imap_sync(source=Source.objects.get(id="shared-allen"))
    assert again.counts["fetched"] == 0
    assert again.counts["messages"] == 0
    assert _stored("shared-allen") == before

    imap_account.deliver(_new_message("Contract for the Example deal"))
    third = imap_sync(source=Source.objects.get(id="shared-allen"))
    assert third.counts["fetched"] == 1
    assert third.counts["messages"] == 1
    assert _stored("shared-allen") == before + 1
    page = Page.objects.get(
        source_id="shared-allen", title="Contract for the Example deal"
    )
    assert "signed contract" in page.body


def test_changed_uidvalidity_relists_the_folder_without_duplicates(
    imap_account: ImapAccount,
) -> None:
    mailbox = _mailbox(imap_account)
    imap_sync(source=mailbox.source)
    before = _stored("shared-allen")
    items = ImportedItem.objects.filter(source_id="shared-allen").count()
    old = imap_account.uidvalidity()

    imap_account.set_uidvalidity(old + 7)
    report = imap_sync(source=Source.objects.get(id="shared-allen"))

    assert report.counts["uidvalidity_resets"] == 1
    assert report.counts["fetched"] == INBOX_FILES  # the whole INBOX again
    assert report.counts["messages"] == 0
    assert _stored("shared-allen") == before
    assert ImportedItem.objects.filter(source_id="shared-allen").count() == items
    cursor = Source.objects.get(id="shared-allen").cursor["imap"]["INBOX"]
    assert cursor == {"uidvalidity": old + 7, "last_uid": INBOX_FILES}
    assert any("UIDVALIDITY changed" in w for w in report.warnings)


def test_connection_dropped_mid_sync_resumes_without_duplicates(
    imap_account: ImapAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    mailbox = _mailbox(imap_account)
    real_fetch = ImapReader.fetch
    calls = {"n": 0}

    def fetch_then_drop(self: ImapReader, uids: list[int]) -> dict[int, bytes]:
        calls["n"] += 1
        if calls["n"] == 2:
            imap_account.kick()  # the server drops the connection
        return real_fetch(self, uids)

    monkeypatch.setattr(ImapReader, "fetch", fetch_then_drop)
    with pytest.raises(TransientError) as caught:
        imap_sync(source=mailbox.source, chunk=4, attempts=1)  # no retry in-run
    assert caught.value.code == "imap_connection_lost"
    failed = SyncRun.objects.get(source_id="shared-allen")
    assert failed.status == SyncRun.Status.FAILED
    cursor = Source.objects.get(id="shared-allen").cursor["imap"]
    assert cursor["INBOX"]["last_uid"] == 4  # the first chunk is stored
    partial = _stored("shared-allen")
    assert 0 < partial

    monkeypatch.setattr(ImapReader, "fetch", real_fetch)
    resumed = imap_sync(source=Source.objects.get(id="shared-allen"), chunk=4)
    assert resumed.status == "succeeded"
    assert resumed.counts["fetched"] == INBOX_FILES + SENT_FILES - 4

    # The same mailbox synced without interruption (same chunks) stores exactly
    # the same messages, ledger rows and thread pages.
    clean_source = _mailbox(make_account(imap_account.server), "shared-clean").source
    imap_sync(source=clean_source, chunk=4)
    assert _stored("shared-allen") == _stored("shared-clean")
    assert ImportedItem.objects.filter(source_id="shared-allen").count() == (
        ImportedItem.objects.filter(source_id="shared-clean").count()
    )
    assert Page.objects.filter(
        source_id="shared-allen", type__name="email"
    ).count() == (
        Page.objects.filter(source_id="shared-clean", type__name="email").count()
    )


def test_a_dropped_connection_is_retried_in_the_same_run_with_backoff(
    imap_account: ImapAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    mailbox = _mailbox(imap_account)
    real_fetch = ImapReader.fetch
    calls = {"n": 0}

    def fetch_then_drop(self: ImapReader, uids: list[int]) -> dict[int, bytes]:
        calls["n"] += 1
        if calls["n"] in (2, 3):
            imap_account.kick()  # dropped twice in a row
        return real_fetch(self, uids)

    monkeypatch.setattr(ImapReader, "fetch", fetch_then_drop)
    waits: list[float] = []
    report = imap_sync(source=mailbox.source, chunk=4, sleep=waits.append)
    assert report.status == "succeeded"
    assert report.counts["reconnects"] == 2 and len(waits) == 2
    assert 0 < waits[0] <= waits[1] * 2  # exponential backoff with jitter
    ledger = ImportedItem.objects.filter(source_id="shared-allen").count()
    assert ledger == INBOX_FILES + SENT_FILES  # every message once, none twice
    assert report.counts["fetched"] == INBOX_FILES + SENT_FILES
    run = SyncRun.objects.get(source_id="shared-allen")
    assert run.status == SyncRun.Status.SUCCEEDED


def test_reader_refuses_every_write_and_leaves_the_mailbox_unchanged(
    imap_account: ImapAccount,
) -> None:
    imap_account.deliver(_new_message("Unread note"))
    with ImapReader(imap_account.settings()) as reader:
        reader.examine("INBOX")
        uids = reader.uids_after(0)
        reader.fetch(uids)
        with pytest.raises(ImapWriteRefused):
            reader.command("STORE", "1", "+FLAGS", "(\\Deleted)")
        # Even the underlying client cannot send a write through our reader.
        with pytest.raises(ImapWriteRefused):
            reader.connection.add_flags(uids, [b"\\Deleted"])
        with pytest.raises(ImapWriteRefused):
            reader.connection.expunge()
        with pytest.raises(ImapWriteRefused):
            reader.connection.append("INBOX", b"Subject: x\r\n\r\nx\r\n")
        with pytest.raises(ImapWriteRefused):
            reader.connection.select_folder("INBOX")  # read-write SELECT
    other = imap_account.other_client()
    try:
        other.select_folder("INBOX", readonly=True)
        flags = other.get_flags(other.search(["ALL"]))
    finally:
        other.logout()
    assert len(flags) == INBOX_FILES + 1
    assert not any(b"\\Deleted" in f for f in flags.values())
    # BODY.PEEK[]: the new message is still unread after being fetched.
    assert b"\\Seen" not in flags[max(flags)]


@pytest.mark.parametrize("security", ["starttls", "ssl"])
def test_starttls_and_implicit_tls_against_the_servers_certificate(
    imap_account: ImapAccount, security: str
) -> None:
    port = (
        imap_account.server.tls_port if security == "ssl" else imap_account.server.port
    )
    settings = imap_account.settings(
        security=security, port=port, ssl_context=tls_context(imap_account.server)
    )
    with ImapReader(settings) as reader:
        names = {f.name for f in reader.folders()}
    assert {"INBOX", "Sent"} <= names
    # Without the self-signed certificate in the trust store, TLS is refused.
    untrusted = imap_account.settings(security=security, port=port)
    with pytest.raises(PermanentError) as caught, ImapReader(untrusted) as reader:
        reader.folders()  # reached only if the server wrongly accepted
    assert caught.value.code == "tls_failed"


def test_a_refused_login_is_permanent_and_never_shows_the_password(
    imap_account: ImapAccount,
) -> None:
    bad = imap_account.settings(secret="wrong-" + PASSWORD)
    with pytest.raises(PermanentError) as caught, ImapReader(bad) as reader:
        reader.folders()  # reached only if the server wrongly accepted
    assert caught.value.code == "auth_failed"
    assert PASSWORD not in str(caught.value) and PASSWORD not in repr(bad)
    assert PASSWORD not in str(caught.value.detail)


def test_sent_folder_is_found_by_special_use_whatever_its_name() -> None:
    folders = [
        ImapFolder("INBOX", ("\\HasNoChildren",)),
        ImapFolder("Gesendete Objekte", ("\\HasNoChildren", "\\Sent"), "\\Sent"),
        ImapFolder("Sent", ("\\HasNoChildren",)),  # a plain folder of that name
        ImapFolder("Archive", ("\\Archive",), "\\Archive"),
        ImapFolder("[Gmail]", ("\\Noselect",)),
    ]
    assert [f.name for f in folders_to_sync(folders, [])] == [
        "INBOX",
        "Gesendete Objekte",
    ]
    assert [f.name for f in folders_to_sync(folders, ["inbox", "Archive"])] == [
        "INBOX",
        "Archive",
    ]
    # A server without SPECIAL-USE: the sent folder is known by its name.
    plain = [
        ImapFolder("INBOX", ()),
        ImapFolder("INBOX/Sent Items", ()),
        ImapFolder("Drafts", ()),
    ]
    assert [f.name for f in folders_to_sync(plain, [])] == ["INBOX", "INBOX/Sent Items"]


def test_sync_source_command_prints_counts_and_a_second_run_imports_nothing(
    imap_account: ImapAccount,
) -> None:
    mailbox = _mailbox(imap_account)
    assert mailbox.secret_encrypted and PASSWORD not in mailbox.secret_encrypted
    out = StringIO()
    call_command("sync_source", "shared-allen", stdout=out, stderr=StringIO())
    first = out.getvalue()
    assert "Synced 'shared-allen' (succeeded):" in first
    assert f"{INBOX_FILES + SENT_FILES} fetched" in first
    stored = _stored("shared-allen")
    assert f"{stored} messages" in first

    out = StringIO()
    call_command("sync_source", "shared-allen", stdout=out, stderr=StringIO())
    assert "nothing new" in out.getvalue()
    assert _stored("shared-allen") == stored


def test_a_reply_by_a_member_counts_as_mine(imap_account: ImapAccount) -> None:
    from accounts.models import User

    dana = User.objects.create_user(
        "dana", "dana@invented.example", "pw", is_staff=True
    )
    mailbox = _mailbox(imap_account)
    mailbox.members.add(dana)
    from connectors.services_shared import shared_mailbox_owners_sync

    shared_mailbox_owners_sync(mailbox=mailbox)
    # Dana answered from her own address; the copy landed in the shared INBOX.
    imap_account.deliver(
        _new_message(
            "Re: Example renewal", sender="Dana Invented <dana@invented.example>"
        )
    )
    imap_sync(source=Source.objects.get(id="shared-allen"))
    raw = RawRecord.objects.get(
        source_id="shared-allen", metadata__subject="Re: Example renewal"
    )
    assert MailMessage.from_metadata(raw.metadata).is_mine


def test_xoauth2_logs_in_with_an_access_token(imap_account: ImapAccount) -> None:
    token = imap_account.issue_token()
    settings = imap_account.settings(auth="xoauth2", secret=token)
    with ImapReader(settings) as reader:
        assert reader.examine("INBOX").exists == INBOX_FILES
    expired = imap_account.settings(auth="xoauth2", secret="ya29.not-issued")
    with pytest.raises(PermanentError) as caught, ImapReader(expired) as reader:
        reader.folders()  # reached only if the server wrongly accepted
    assert caught.value.code == "auth_failed"


# --- a configured folder gone from the server; localised sent names (issue 46) ----


def _health_failing(client: Client) -> list[str]:
    return list(client.get("/api/health").json()["failing"])


def test_a_configured_folder_renamed_on_the_server_is_partial_held_and_degraded(
    imap_account: ImapAccount, client: Client
) -> None:
    """Rename the configured Sent folder between two syncs: the second run is
    ``partial`` with a held reason naming it, doctor and /api/health name the
    folder, and the console re-maps it to the server's new name."""
    from accounts.models import User
    from interfaces.doctor import doctor_report

    mailbox = _mailbox(imap_account)
    SharedMailbox.objects.filter(pk=mailbox.pk).update(imap_folders=["INBOX", "Sent"])
    source = Source.objects.get(id="shared-allen")
    assert imap_sync(source=source).status == "succeeded"
    assert "source shared-allen folder Sent" not in _health_failing(client)

    other = imap_account.other_client()
    try:
        other.rename_folder("Sent", "Sent 2026")
    finally:
        other.logout()
    report = imap_sync(source=source)
    assert report.status == "partial"
    assert SyncRun.objects.filter(source=source).first().status == "partial"  # type: ignore[union-attr]
    assert any("'Sent'" in u for u in report.unfinished)
    held = HeldItem.objects.get(source=source, kind="imap_folder", external_id="Sent")
    assert held.released_at is None and held.error_code == "imap_folder_missing"
    check = next(
        c
        for c in doctor_report(deploy=False)["checks"]
        if c["name"] == "source shared-allen folder Sent"
    )
    assert check["status"] == "fail" and "console/sources/shared-allen" in check["fix"]
    health = client.get("/api/health").json()
    assert health["status"] == "degraded"
    assert "source shared-allen folder Sent" in health["failing"]

    staff = User.objects.create_user("curator", "c@invented.example", "pw")
    staff.is_staff = staff.is_superuser = True
    staff.save()
    client.force_login(staff)
    url = "/admin/console/sources/shared-allen/folders/"
    page = client.get(url).content.decode()
    assert "Sent 2026" in page and "is not on the server any more" in page
    client.post(url, {"old": "Sent", "new": "Sent 2026"})
    client.logout()
    assert SharedMailbox.objects.get(pk=mailbox.pk).imap_folders == [
        "INBOX",
        "Sent 2026",
    ]
    assert imap_sync(source=source).status == "succeeded"
    assert "source shared-allen folder Sent" not in _health_failing(client)


def test_a_gesendete_elemente_folder_without_special_use_is_synced_as_sent(
    imap_account: ImapAccount,
) -> None:
    """Outlook's German sent folder on a server without SPECIAL-USE for it: found
    by its name, and its messages are labelled sent."""
    other = imap_account.other_client()
    try:
        other.rename_folder("Sent", "Gesendete Elemente")
        listed = {str(name): flags for flags, _d, name in other.list_folders()}
    finally:
        other.logout()
    assert "Sent" not in listed
    assert b"\\Sent" not in listed["Gesendete Elemente"]
    mailbox = _mailbox(imap_account)
    report = imap_sync(source=mailbox.source)
    assert report.counts["fetched"] == INBOX_FILES + SENT_FILES
    sent = [
        raw
        for raw in RawRecord.objects.filter(source_id="shared-allen", kind="rfc822")
        if "SENT" in (raw.metadata.get("labels") or [])
    ]
    assert sent, "no message of 'Gesendete Elemente' was labelled sent"


@pytest.mark.parametrize(
    "name",
    [
        "Gesendete Elemente",
        "Éléments envoyés",
        "Elementos enviados",
        "Posta inviata",
        "Verzonden items",
        "Sent Items",
        "Sent Messages",
        "已发送",
        "보낸 편지함",
        "送信済みアイテム",
    ],
)
def test_localised_sent_folder_names_are_sent_without_special_use(name: str) -> None:
    folders = [ImapFolder("INBOX", ()), ImapFolder(name, ()), ImapFolder("Drafts", ())]
    assert [f.name for f in folders_to_sync(folders, [])] == ["INBOX", name]


def test_special_use_comes_before_the_name_table() -> None:
    """A folder named like sent but flagged ``\\Drafts`` is drafts; a \\Sent folder
    wins over a folder whose name says sent."""
    drafts_named_sent = ImapFolder("Sent Items", ("\\Drafts",), "\\Drafts")
    assert imap_folder_role(drafts_named_sent) == "drafts"
    assert imap_folder_role(ImapFolder("Entwürfe", ())) == "drafts"
    assert imap_folder_role(ImapFolder("Brouillons", ())) == "drafts"
    flagged = ImapFolder("Postausgang", ("\\Sent",), "\\Sent")
    folders = [ImapFolder("INBOX", ()), ImapFolder("Gesendete Elemente", ()), flagged]
    assert [f.name for f in folders_to_sync(folders, [])] == ["INBOX", "Postausgang"]


def test_a_sync_job_with_a_configured_folder_gone_ends_partial_naming_it(
    imap_account: ImapAccount,
) -> None:
    """The ``sync_source`` job of that run is ``partial`` too, its error line
    naming the folder (SPEC §7 job statuses)."""
    from jobs.models import Job
    from jobs.runner import execute_job
    from jobs.services import job_enqueue

    mailbox = _mailbox(imap_account)
    SharedMailbox.objects.filter(pk=mailbox.pk).update(imap_folders=["INBOX", "Gone"])
    job, _created = job_enqueue(
        kind="sync_source", params={"source_id": "shared-allen"}, dispatch=False
    )
    done = execute_job(job_id=job.pk)
    assert done is not None and done.status == Job.Status.PARTIAL
    assert "'Gone'" in done.error
    assert done.result["status"] == "partial"
