"""Import runs (SPEC §6, §2.1): serialised per source, killed runs closed by the
next run or the reaper, source counts are totals of what is stored, and a held
item's raw bytes can be retried."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from django.db import OperationalError, connection, transaction

from brain.models import Page, RawRecord, Source
from connectors.dispatch import held_items_retry
from connectors.mailbox.sync import mailbox_import
from connectors.models import HeldItem, ImportedItem, SyncRun
from connectors.services import (
    _lock_key,
    source_lock_acquire,
    source_lock_release,
    sync_runs_reap,
)
from tests.connectors.helpers import (
    SPAMASSASSIN,
    Killed,
    die_in_second_batch,
    stopped_import,
)

pytestmark = pytest.mark.django_db


def _other_connection():  # type: ignore[no-untyped-def]
    """A second database session (another process, as far as locks go)."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.connect(**params, autocommit=True)


def test_source_counts_are_totals_of_what_is_stored_after_a_resumed_import() -> None:
    """Regression: after a resumed import the source's counts showed only the last
    attempt (261 pages against 659 stored)."""

    stopped_import(die_in_second_batch)
    report = mailbox_import(source_id="sa", path=SPAMASSASSIN, owners=[])
    counts = Source.objects.get(id="sa").counts
    pages = Page.objects.filter(source_id="sa", deleted_at__isnull=True).count()
    assert report.counts["pages"] < pages  # the second attempt wrote only the rest
    assert counts["pages"] == pages
    assert counts["raw_records"] == RawRecord.objects.filter(source_id="sa").count()
    assert (
        counts["imported"]
        == ImportedItem.objects.filter(source_id="sa", kind="message").count()
    )
    assert counts["last_run"]["pages"] == report.counts["pages"]


def test_a_killed_run_is_marked_failed_by_the_next_run() -> None:
    mailbox_import(source_id="sa", path=SPAMASSASSIN, owners=[])
    # A process killed with SIGKILL leaves its run "running" and its lock released.
    killed = SyncRun.objects.create(source_id="sa", kind="import_mail", actor="cli")
    mailbox_import(source_id="sa", path=SPAMASSASSIN, owners=[])
    killed.refresh_from_db()
    assert killed.status == "failed"
    assert "Killed" in killed.error
    assert not SyncRun.objects.filter(status="running").exists()


def test_the_reaper_closes_dead_runs_and_leaves_live_ones() -> None:
    mailbox_import(source_id="sa", path=SPAMASSASSIN, owners=[])
    Source.objects.create(id="live", name="live", kind="mailbox")
    dead = SyncRun.objects.create(source_id="sa", kind="import_mail", actor="cli")
    live = SyncRun.objects.create(source_id="live", kind="import_mail", actor="cli")
    other = _other_connection()
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [_lock_key("live")])
        assert sync_runs_reap() == 1
    finally:
        other.close()
    dead.refresh_from_db()
    live.refresh_from_db()
    assert dead.status == "failed"
    assert live.status == "running"


def test_concurrent_imports_of_one_source_are_serialised() -> None:
    """Regression: two concurrent imports of one mailbox both reported the whole
    import. An import waits for the source's lock while another holds it (here
    bounded by ``lock_timeout``), then runs and finds everything stored."""
    mailbox_import(source_id="sa", path=SPAMASSASSIN, owners=[])
    runs = SyncRun.objects.filter(source_id="sa").count()
    other = _other_connection()
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [_lock_key("sa")])
        with pytest.raises(OperationalError), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '300ms'")
            mailbox_import(source_id="sa", path=SPAMASSASSIN, owners=[])
        assert SyncRun.objects.filter(source_id="sa").count() == runs
    finally:
        other.close()  # releases the lock
    second = mailbox_import(source_id="sa", path=SPAMASSASSIN, owners=[])
    assert second.counts["stored"] == 0
    assert second.counts["duplicates"] == second.counts["items"] == 26


def test_the_lock_is_reentrant_and_released_after_a_failed_import(
    tmp_path: Path,
) -> None:
    source_lock_acquire(source_id="sa")
    try:
        mailbox_import(source_id="sa", path=SPAMASSASSIN, owners=[])
    finally:
        source_lock_release(source_id="sa")
    with pytest.raises(Killed):

        def stop(step: str, done: int, total: int | None) -> None:
            raise Killed

        mailbox_import(source_id="sa", path=SPAMASSASSIN, owners=[], progress=stop)
    other = _other_connection()
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [_lock_key("sa")])
            assert cursor.fetchone()[0] is True
    finally:
        other.close()


def test_retry_reimports_the_held_raw_bytes(tmp_path: Path) -> None:
    """The admin's "retry": a held maildir tmp/ delivery is imported from the
    bytes kept in the held item and released."""
    box = tmp_path / "box"
    for part in ("cur", "tmp"):
        (box / part).mkdir(parents=True)
    (box / "tmp" / "1.host").write_bytes(
        b"From: Ada Quill <ada@example.org>\nTo: bram@example.net\n"
        b"Subject: Crates\nDate: Mon, 3 Mar 2025 09:15:00 +0000\n"
        b"Message-ID: <crates@example.org>\n\nTwelve crates.\n"
    )
    report = mailbox_import(source_id="box", path=box, owners=[])
    assert report.status == "succeeded_with_holds"
    held = HeldItem.objects.get(source_id="box")
    assert held.error_code == "maildir_tmp"
    assert bytes(held.raw) == (box / "tmp" / "1.host").read_bytes()
    (box / "tmp" / "1.host").unlink()  # the bytes live on in the held item only
    counts = held_items_retry(held_ids=[held.pk], actor="admin:test")
    assert counts == {"retried": 1, "released": 1, "still_held": 0, "no_bytes": 0}
    assert RawRecord.objects.get(source_id="box", external_id="<crates@example.org>")
    held.refresh_from_db()
    assert held.released_at is not None
    assert Source.objects.get(id="box").counts["held"] == 0


def test_admin_lists_held_items_with_reasons_and_retries_them(tmp_path: Path) -> None:
    from django.test import Client

    from accounts.models import User

    box = tmp_path / "box"
    (box / "cur").mkdir(parents=True)
    (box / "tmp").mkdir()
    (box / "tmp" / "1.host").write_bytes(
        b"From: Ada Quill <ada@example.org>\nTo: bram@example.net\n"
        b"Subject: Crates\nDate: Mon, 3 Mar 2025 09:15:00 +0000\n"
        b"Message-ID: <crates@example.org>\n\nTwelve crates.\n"
    )
    (box / "cur" / "notes").write_bytes(b"shopping: pears\n")
    mailbox_import(source_id="box", path=box, owners=[])
    staff = User.objects.create_superuser(
        username="admin", email="a@example.org", password="pw-123456"
    )
    client = Client()
    client.force_login(staff)
    page = client.get("/admin/connectors/helditem/")
    html = page.content.decode()
    assert "Unfinished maildir delivery (tmp/)" in html
    assert "Not a mail message" in html
    held = HeldItem.objects.get(error_code="maildir_tmp")
    detail = client.get(f"/admin/connectors/helditem/{held.pk}/change/")
    assert "Twelve crates." in detail.content.decode()
    response = client.post(
        "/admin/connectors/helditem/",
        {
            "action": "retry_held",
            "_selected_action": list(HeldItem.objects.values_list("pk", flat=True)),
        },
        follow=True,
    )
    notes = [str(m) for m in response.context["messages"]]
    assert notes == [
        "Retried 2: 1 stored and released, 1 still held (see their reason), "
        "0 without bytes to retry."
    ]
    assert HeldItem.objects.get(error_code="not_mail").attempts == 2
    assert HeldItem.objects.get(pk=held.pk).released_at is not None
