"""A copy is a copy (issue 46, SPEC §6.2): a message counts as a copy of another
only if, besides From, Date, subject and body, it has the same To/Cc set and the
same attachments (name, size, sha256). Otherwise both are stored (raw bytes, ledger
row, thread) and both open their loops. Folder copies of one message (Enron's
sent / _sent_mail / all_documents) still count once.

Invented mail, written to ``tmp_path`` as ``.eml`` files; real PostgreSQL.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

from brain.models import RawRecord
from connectors.mail.parsing import fingerprint, parse_rfc822
from connectors.mailbox.sync import mailbox_import
from connectors.models import ImportedItem
from loops.models import LoopStatus, OpenLoop

pytestmark = pytest.mark.django_db

ROBIN = "robin@harbour.example"
DATE = "Mon, 03 Mar 2025 09:00:00 +0000"


def _message(
    *,
    message_id: str,
    to: str,
    subject: str,
    body: str,
    cc: str = "",
    date: str = DATE,
    attachment: tuple[str, bytes] | None = None,
) -> bytes:
    """One RFC 822 message from Robin; with ``attachment`` (name, bytes) a
    multipart/mixed with the body and one base64 PDF part."""
    head = (
        f"From: Robin Vale <{ROBIN}>\nTo: {to}\n"
        + (f"Cc: {cc}\n" if cc else "")
        + f"Subject: {subject}\nDate: {date}\nMessage-ID: <{message_id}>\n"
        "MIME-Version: 1.0\n"
    )
    if attachment is None:
        return (head + "Content-Type: text/plain; charset=utf-8\n\n" + body).encode()
    name, data = attachment
    encoded = base64.encodebytes(data).decode()
    return (
        head
        + 'Content-Type: multipart/mixed; boundary="b1"\n\n'
        + "--b1\nContent-Type: text/plain; charset=utf-8\n\n"
        + body
        + "\n--b1\nContent-Type: application/pdf\n"
        + f'Content-Disposition: attachment; filename="{name}"\n'
        + "Content-Transfer-Encoding: base64\n\n"
        + encoded
        + "--b1--\n"
    ).encode()


def _write(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data)
    return path


def _stored(source_id: str) -> int:
    return ImportedItem.objects.filter(
        source_id=source_id, kind=ImportedItem.Kind.MESSAGE
    ).count()


INVOICE = "Hello,\n\nPlease find this month's invoice attached.\n\nRobin\n"


def test_two_invoices_differing_only_by_attachment_are_both_stored(
    tmp_path: Path,
) -> None:
    """Same From, Date, subject, body and To; the PDFs differ (same size, other
    bytes, then another name): every message is stored with its own bytes."""
    march = _message(
        message_id="inv-1@harbour.example",
        to="Accounts <accounts@client.example>",
        subject="Invoice",
        body=INVOICE,
        attachment=("invoice.pdf", b"%PDF-1.4 invoice 0001 total 120.00"),
    )
    april = _message(
        message_id="inv-2@harbour.example",
        to="Accounts <accounts@client.example>",
        subject="Invoice",
        body=INVOICE,
        attachment=("invoice.pdf", b"%PDF-1.4 invoice 0002 total 980.00"),
    )
    renamed = _message(
        message_id="inv-3@harbour.example",
        to="Accounts <accounts@client.example>",
        subject="Invoice",
        body=INVOICE,
        attachment=("invoice-0003.pdf", b"%PDF-1.4 invoice 0001 total 120.00"),
    )
    _write(tmp_path / "Sent", "1.eml", march)
    _write(tmp_path / "Sent", "2.eml", april)
    _write(tmp_path / "Sent", "3.eml", renamed)
    report = mailbox_import(source_id="invoices", path=tmp_path, owners=[ROBIN])
    assert report.counts["stored"] == 3, report.counts
    assert report.counts["duplicates"] == 0
    assert report.counts["lost"] == 0
    assert _stored("invoices") == 3
    kept = {
        bytes(r.data)
        for r in RawRecord.objects.filter(
            source_id="invoices", kind=RawRecord.Kind.RFC822
        )
    }
    assert kept == {march, april, renamed}


ASK = "Hi,\n\nCould you send me the signed harbour lease by Friday?\n\nThanks,\nRobin\n"


def test_one_ask_sent_separately_to_bob_and_to_carol_is_stored_twice_with_two_loops(
    tmp_path: Path,
) -> None:
    """A mail-merge: the same ask, same second, one message per recipient. Each
    is stored and each waits for its own answer."""
    _write(
        tmp_path / "Sent",
        "bob.eml",
        _message(
            message_id="ask-bob@harbour.example",
            to="Bob Stone <bob@lease.example>",
            subject="Signed lease",
            body=ASK,
        ),
    )
    _write(
        tmp_path / "Sent",
        "carol.eml",
        _message(
            message_id="ask-carol@harbour.example",
            to="Carol Reyes <carol@lease.example>",
            subject="Signed lease",
            body=ASK,
        ),
    )
    # Ten days on, other mail arrives: both asks are now overdue for an answer.
    _write(
        tmp_path / "INBOX",
        "later.eml",
        (
            f"From: Dana Okafor <dana@example.com>\nTo: Robin Vale <{ROBIN}>\n"
            "Subject: Quay rota\nDate: Thu, 13 Mar 2025 09:00:00 +0000\n"
            "Message-ID: <rota@example.com>\n\nRota for next week attached.\n"
        ).encode(),
    )
    report = mailbox_import(source_id="asks", path=tmp_path, owners=[ROBIN])
    assert report.counts["stored"] == 3, report.counts
    assert report.counts["duplicates"] == 0
    assert _stored("asks") == 3
    loops = OpenLoop.objects.filter(source_id="asks", status=LoopStatus.OPEN)
    assert loops.count() == 2
    assert len({loop.thread_id for loop in loops}) == 2


def test_the_same_text_an_hour_apart_to_other_people_is_not_a_clock_shifted_copy(
    tmp_path: Path,
) -> None:
    """Dates whole hours apart read as one message stamped in two zones only when
    the recipients are the same too."""
    for name, to, date in (
        ("bob.eml", "bob@lease.example", DATE),
        ("carol.eml", "carol@lease.example", "Mon, 03 Mar 2025 10:00:00 +0000"),
    ):
        _write(
            tmp_path / "Sent",
            name,
            _message(
                message_id=f"{name}@harbour.example",
                to=to,
                subject="Signed lease",
                body=ASK,
                date=date,
            ),
        )
    report = mailbox_import(source_id="shifted", path=tmp_path, owners=[ROBIN])
    assert report.counts["stored"] == 2, report.counts
    assert report.counts["duplicates"] == 0


def test_a_true_folder_copy_still_counts_once(tmp_path: Path) -> None:
    """Enron-style: one message in sent/, _sent_mail/ and all_documents/ under
    three Message-IDs, the recipients in another order and with other display
    names, the same attachment: one stored, two duplicates, the ledger's content
    hash covering the attachment's sha256 (recorded on the raw record)."""
    pdf = ("lease.pdf", b"%PDF-1.4 lease v3")
    folders = {
        "sent": ("Bob Stone <bob@lease.example>", "carol@lease.example"),
        "_sent_mail": ("bob@lease.example", "Carol Reyes <carol@lease.example>"),
        "all_documents": ("BOB@lease.example", "carol@lease.example"),
    }
    for n, (folder, (to, cc)) in enumerate(folders.items()):
        _write(
            tmp_path / folder,
            "1.",
            _message(
                message_id=f"{n}.lease@harbour.example",
                to=to,
                cc=cc,
                subject="Lease v3",
                body="Bob, Carol,\n\nThe lease as agreed is attached.\n\nRobin\n",
                attachment=pdf,
            ),
        )
    report = mailbox_import(source_id="folders", path=tmp_path, owners=[ROBIN])
    assert report.counts["stored"] == 1, report.counts
    assert report.counts["duplicates"] == 2
    assert report.counts["lost"] == 0
    raw = RawRecord.objects.get(source_id="folders", kind=RawRecord.Kind.RFC822)
    [attachment] = raw.metadata["attachments"]
    assert attachment["sha256"] == hashlib.sha256(pdf[1]).hexdigest()
    hashes = set(
        ImportedItem.objects.filter(source_id="folders").values_list(
            "content_hash", flat=True
        )
    )
    assert len(hashes) == 1


def test_a_mailbox_ledgered_before_issue_46_re_imports_as_duplicates(
    tmp_path: Path,
) -> None:
    """Ledger rows written before recipients and attachments counted hold the
    body fingerprint (From, Date, subject, body): a re-import recognises them
    and stores nothing twice (no twin re-keying)."""
    data = _message(
        message_id="old@harbour.example",
        to="bob@lease.example",
        subject="Signed lease",
        body=ASK,
        attachment=("lease.pdf", b"%PDF-1.4 lease"),
    )
    _write(tmp_path / "Sent", "1.eml", data)
    mailbox_import(source_id="legacy", path=tmp_path, owners=[ROBIN])
    parsed = parse_rfc822(data, folder="Sent")
    assert parsed.body_fingerprint == fingerprint(
        ROBIN, parsed.date, parsed.subject, parsed.full_text
    )
    ImportedItem.objects.filter(source_id="legacy").update(
        content_hash=parsed.body_fingerprint
    )
    again = mailbox_import(source_id="legacy", path=tmp_path, owners=[ROBIN])
    assert again.counts["stored"] == 0, again.counts
    assert again.counts["duplicates"] == 1
    assert (
        RawRecord.objects.filter(source_id="legacy", kind=RawRecord.Kind.RFC822).count()
        == 1
    )
