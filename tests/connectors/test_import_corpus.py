"""Importers lose nothing (SPEC §6 "Every importer", §6.2): every shared mail corpus
and a crafted hostile set are imported, and for each ``items == stored + duplicates
+ held`` with no exception escaping; every file on disk is an item.

The hostile set (``tests/data/hostile_mail``, invented content) carries one case per
regression; the links and the FIFO are added to a copy at test time. The shared
corpora are read from ``../shared/data`` (or ``$BRAIN_SHARED_DATA``) and skipped
cleanly when absent (a fresh clone elsewhere).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from brain.models import Page, RawRecord, Source
from connectors.mail.intake import TWIN_DEFECT
from connectors.mailbox.client import MailboxReader, is_metadata_file
from connectors.mailbox.sync import mailbox_import
from connectors.models import HeldItem, ImportedItem, SyncRun

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ROOT / "tests" / "data" / "hostile_mail" / "corpus"
SHARED = Path(os.environ.get("BRAIN_SHARED_DATA", ROOT.parent / "shared" / "data"))
SHARED_CORPORA = [
    "enron/allen-p",
    "spamassassin_ham",
    "notmuch_corpora",
    "patchwork_list_mails",
    "mime_edge_cases",
]


def add_links_and_fifo(folder: Path, outside: Path) -> None:
    """The cases git cannot carry: two self-links, a link to a folder above, a link
    to a file outside the root, a dangling link and a FIFO."""
    (folder / "links").mkdir()
    (folder / "links" / "self").symlink_to(".")
    (folder / "links" / "self-too").symlink_to(".")
    (folder / "links" / "up").symlink_to("..")
    outside.write_bytes(b"From: x@example.org\nSubject: secret\n\noutside\n")
    (folder / "links" / "outside.eml").symlink_to(outside)
    (folder / "links" / "dangling.eml").symlink_to(folder / "missing.eml")
    os.mkfifo(folder / "links" / "pipe")


def files_on_disk(root: Path) -> set[str]:
    """Every non-directory entry under ``root`` (links not followed), as relative
    paths, except mailbox-format metadata files."""
    found = set()
    for base, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not is_metadata_file(d)]
        for name in [*files, *(d for d in dirs if (Path(base) / d).is_symlink())]:
            if not is_metadata_file(name):
                found.add((Path(base) / name).relative_to(root).as_posix())
    return found


def assert_nothing_lost(root: Path, source_id: str, report) -> None:  # type: ignore[no-untyped-def]
    counts = report.counts
    assert (
        counts["items"] == counts["stored"] + counts["duplicates"] + counts["held"]
    ), counts
    assert counts["lost"] == 0
    # Every file on disk is at least one item (an mbox is several), or a document
    # of the folder's root (README, LICENSE, SOURCE.txt) counted as not mail.
    reader = MailboxReader(root)
    locations = {e.location.split("#")[0] for e in reader}
    assert files_on_disk(root) <= locations | set(reader.not_mail)
    assert counts.get("not_mail_files", 0) == len(reader.not_mail)
    # The ledger and held items agree with the report.
    held = HeldItem.objects.filter(source_id=source_id, released_at__isnull=True)
    assert held.count() == counts["held"]
    stored = ImportedItem.objects.filter(
        source_id=source_id, kind=ImportedItem.Kind.MESSAGE
    )
    assert stored.count() == counts["stored"]
    mail = RawRecord.objects.filter(source_id=source_id, kind=RawRecord.Kind.RFC822)
    assert mail.count() == counts["stored"]


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    shutil.copytree(HOSTILE, folder, symlinks=True)
    add_links_and_fifo(folder, tmp_path / "outside.eml")
    return folder


def test_hostile_corpus_every_item_is_stored_duplicate_or_held(hostile: Path) -> None:
    report = mailbox_import(source_id="hostile", path=hostile, owners=[])
    assert_nothing_lost(hostile, "hostile", report)
    held = dict(
        HeldItem.objects.filter(source_id="hostile").values_list(
            "location", "error_code"
        )
    )
    assert held == {
        "hostile/empty.eml": "empty",
        "hostile/notes.txt": "not_mail",
        "kernel/tmp/1740990003.M4P1.host": "maildir_tmp",
        "links/self": "symlink_loop",
        "links/self-too": "symlink_loop",
        "links/up": "symlink_loop",
        "links/outside.eml": "symlink_outside_root",
        "links/dangling.eml": "unreadable",
        "links/pipe": "not_regular_file",
    }
    # The copy in copies/ is the only duplicate; everything else is stored.
    assert report.counts["duplicates"] == 1
    assert report.counts["stored"] == report.counts["items"] - 1 - len(held)
    run = SyncRun.objects.get(source_id="hostile")
    assert run.status == "succeeded_with_holds"
    assert run.counts["counts"]["held"] == len(held)


def test_a_rerun_of_the_hostile_corpus_adds_nothing_and_counts_everything(
    hostile: Path,
) -> None:
    first = mailbox_import(source_id="hostile", path=hostile, owners=[])
    again = mailbox_import(source_id="hostile", path=hostile, owners=[])
    assert again.counts["stored"] == 0
    assert again.counts["duplicates"] == first.counts["stored"] + 1
    assert again.counts["held"] == first.counts["held"]
    assert again.counts["lost"] == 0
    assert HeldItem.objects.filter(source_id="hostile", attempts=2).count() == 9


def _raw(source_id: str, message_id: str) -> RawRecord:
    return RawRecord.objects.get(source_id=source_id, external_id=f"<{message_id}>")


def test_maildir_without_new_and_loose_files_and_plain_subfolders_are_read(
    hostile: Path,
) -> None:
    """Regression: ``box/cur/<msg>`` without ``new/`` imported 0 of 0; non-dot
    sub-folders and loose files of a maildir root were ignored."""
    mailbox_import(source_id="hostile", path=hostile, owners=[])
    for mid in (
        "cur-only@example.org",
        "k1@example.org",
        "k2@example.org",
        "k3@example.org",
        "k4@example.org",
        "mh1@example.org",
        "mh2@example.org",
        "p2@example.org",
    ):
        assert _raw("hostile", mid)
    assert _raw("hostile", "p2@example.org").metadata["folder"] == "plus/Sent"
    assert "SENT" in _raw("hostile", "p2@example.org").metadata["labels"]


def test_mbox_variants(hostile: Path) -> None:
    """Regressions: one message without an envelope line read as an empty mbox; a
    body line "From the warehouse…" cut the message; mboxrd quoting; a body
    delimited by Content-Length holding an envelope-like line."""
    mailbox_import(source_id="hostile", path=hostile, owners=[])
    assert _raw("hostile", "noenv@example.org")
    warehouse = _raw("hostile", "warehouse@example.org")
    assert "Could you confirm the count by Thursday?" in warehouse.content
    assert b"\nFrom the warehouse we shipped" in warehouse.data
    assert _raw("hostile", "warehouse-2@example.org")
    quoted = _raw("hostile", "rd1@example.org")
    assert b">From the top" in quoted.data  # raw bytes exactly as read
    page = Page.objects.get(source_id="hostile", raw_records=quoted)
    assert "From the top, please." in page.body
    assert ">From the top" not in page.body
    length = _raw("hostile", "cl1@example.org")
    assert b"From log@example.org Mon Mar  3 12:00:00 2025\nline two" in length.data
    assert _raw("hostile", "cl2@example.org")


def test_encoded_nul_and_deep_multipart_are_stored_not_fatal(hostile: Path) -> None:
    """Regression: ``Subject: =?utf-8?B?AA==?=`` or an encoded NUL in the From name
    raised DataError and stored 0 of 2; multiparts 1,000 deep raised
    RecursionError."""
    mailbox_import(source_id="hostile", path=hostile, owners=[])
    assert _raw("hostile", "nulsubj@example.org")
    assert _raw("hostile", "nulname@example.org")
    rawnul = _raw("hostile", "rawnul@example.org")
    assert b"before\x00after" in rawnul.data and "\x00" not in rawnul.content
    deep = _raw("hostile", "dolls@example.org")
    assert "MIME nesting too deep: body parts not read" in deep.metadata["defects"]


def test_two_messages_sharing_a_message_id_are_both_stored(hostile: Path) -> None:
    mailbox_import(source_id="hostile", path=hostile, owners=[])
    first = _raw("hostile", "twin@example.org")
    second = RawRecord.objects.get(
        source_id="hostile",
        external_id__startswith="sha256:",
        content__contains="Second",
    )
    assert "First twin." in first.content
    assert TWIN_DEFECT in second.metadata["defects"]


def test_a_twin_arriving_in_a_later_import_is_stored_too(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    shutil.copy(HOSTILE / "hostile" / "same-id-a.eml", a / "1.eml")
    shutil.copy(HOSTILE / "hostile" / "same-id-b.eml", b / "1.eml")
    mailbox_import(source_id="twins", path=a, owners=[])
    report = mailbox_import(source_id="twins", path=b, owners=[])
    assert report.counts["stored"] == 1
    assert RawRecord.objects.filter(source_id="twins").count() == 2


def test_raw_bytes_are_kept_exactly(hostile: Path) -> None:
    """Regression: Latin-1 bytes were stored as U+FFFD."""
    mailbox_import(source_id="hostile", path=hostile, owners=[])
    latin1 = _raw("hostile", "latin1@example.org")
    assert bytes(latin1.data) == (hostile / "hostile" / "latin1.eml").read_bytes()
    assert "Crème brûlée" in Page.objects.get(raw_records=latin1).body


def test_dates_out_of_range_are_flagged_never_shifted(hostile: Path) -> None:
    """Regression: a year 0000/0001 was stored as 2000/2001; a message dated 9999
    became the reference time ("as of 9999-12-31")."""
    from datetime import UTC, datetime

    from django.utils import timezone

    from loops.selectors import newest_message_at

    mailbox_import(source_id="hostile", path=hostile, owners=[])
    for mid in ("y0@example.org", "y1@example.org"):
        raw = _raw("hostile", mid)
        assert raw.metadata.get("date") in (None, "")  # never 2000 / 2001
        assert any(d.startswith("date: misread_year") for d in raw.metadata["defects"])
    far = _raw("hostile", "y9999@example.org")
    assert far.metadata["date"].startswith("9999-12-31")  # kept as written
    assert any(d.startswith("date: out_of_range") for d in far.metadata["defects"])
    newest = newest_message_at(source_id="hostile", until=timezone.now())
    assert newest == datetime(2025, 3, 4, 10, 0, tzinfo=UTC)


def test_a_fifo_as_the_path_is_a_clear_error(tmp_path: Path) -> None:
    from connectors.mailbox.client import MailboxPathError

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(MailboxPathError, match="not a mailbox file or folder"):
        mailbox_import(source_id="fifo", path=fifo, owners=[])


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data is absent")
@pytest.mark.parametrize("corpus", SHARED_CORPORA)
def test_shared_corpus_loses_nothing(corpus: str) -> None:
    root = SHARED / corpus
    if not root.exists():
        pytest.skip(f"{corpus} is absent")
    source_id = corpus.split("/")[-1].replace("_", "-")[:32]
    report = mailbox_import(source_id=source_id, path=root, owners=[])
    assert_nothing_lost(root, source_id, report)
    assert Source.objects.get(id=source_id).counts["held"] == report.counts["held"]


def test_import_mail_command_prints_the_accounting_and_the_held_items(
    hostile: Path,
) -> None:
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("import_mail", str(hostile), "--source", "hostile", stdout=out)
    text = out.getvalue()
    assert "Every item accounted for (succeeded_with_holds): 36 read = " in text
    assert "+ 9 held." in text
    assert "maildir_tmp          kernel/tmp/1740990003.M4P1.host" in text
