"""``manage.py sync_source`` on an IMAP source killed with SIGKILL mid-sync: the
re-run resumes and stores every message exactly once (SPEC §6, §6.1a: "a killed
sync resumes with no duplicate")."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from brain.models import Page, RawRecord, Source
from connectors.imap.sync import imap_sync
from connectors.models import ImportedItem, SharedMailbox
from connectors.services_shared import shared_mailbox_create
from tests.connectors.dovecot import PASSWORD, DovecotServer, make_account
from tests.jobs.test_worker_kill import child_env

pytestmark = pytest.mark.slow

ROOT = Path(settings.BASE_DIR)
WAIT_SECONDS = 90  # a guard against hanging, not a speed assertion
TOPICS = 450  # x 2 messages (a question and its answer): three batches of threads


def _messages() -> list[bytes]:
    """Invented conversations: each topic a question and a reply (In-Reply-To)."""
    out = []
    base = timezone.now() - timezone.timedelta(days=30)
    for n in range(TOPICS):
        first = EmailMessage()
        first["From"] = f"Client {n} <client{n}@invented.example>"
        first["To"] = "Deals Desk <deals@invented.example>"
        first["Subject"] = f"Quote request {n}"
        first["Date"] = format_datetime(base + timezone.timedelta(minutes=n))
        first["Message-ID"] = f"<q{n}@invented.example>"
        first.set_content(f"Could you send a quote for order {n}?\n")
        reply = EmailMessage()
        reply["From"] = "Deals Desk <deals@invented.example>"
        reply["To"] = f"client{n}@invented.example"
        reply["Subject"] = f"Re: Quote request {n}"
        reply["Date"] = format_datetime(base + timezone.timedelta(minutes=n, hours=2))
        reply["Message-ID"] = f"<r{n}@invented.example>"
        reply["In-Reply-To"] = f"<q{n}@invented.example>"
        reply.set_content(f"Here is the quote for order {n}.\n")
        out += [bytes(first), bytes(reply)]
    return out


def test_a_killed_sync_source_resumes_without_duplicates(
    restore_migrated_rows: None,
    transactional_db: None,
    dovecot: DovecotServer,
) -> None:
    account = make_account(dovecot, {"INBOX": _messages()})
    shared_mailbox_create(
        address="deals@invented.example",
        provider=SharedMailbox.Provider.IMAP,
        source_id="shared-kill",
        imap_host="127.0.0.1",
        imap_port=dovecot.port,
        imap_security=SharedMailbox.Security.PLAIN,
        imap_username=account.user,
        secret=PASSWORD,
    )
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, "manage.py", "sync_source", "shared-kill"],
        cwd=ROOT,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline and proc.poll() is None:
        if ImportedItem.objects.filter(source_id="shared-kill").exists():
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=WAIT_SECONDS)
    stored = RawRecord.objects.filter(source_id="shared-kill", kind="rfc822").count()
    assert 0 < stored < 2 * TOPICS
    assert ImportedItem.objects.filter(source_id="shared-kill").count() == stored

    report = imap_sync(source=Source.objects.get(id="shared-kill"))
    assert report.status == "succeeded"
    assert report.counts["messages"] == 2 * TOPICS - stored
    assert (
        RawRecord.objects.filter(source_id="shared-kill", kind="rfc822").count()
        == 2 * TOPICS
    )
    assert ImportedItem.objects.filter(source_id="shared-kill").count() == 2 * TOPICS
    pages = Page.objects.filter(source_id="shared-kill", type__name="email")
    assert pages.count() == TOPICS
    assert all(p.frontmatter["message_count"] == 2 for p in pages)

    again = imap_sync(source=Source.objects.get(id="shared-kill"))
    assert again.counts["fetched"] == 0 and again.counts["messages"] == 0
