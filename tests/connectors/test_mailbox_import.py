"""Mailbox import end to end on real mail (SPEC §6.2, §6, §11): raw records, thread
pages, person pages, the ledger, idempotency and resumption after a crash."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from brain.models import Alias, Page, RawRecord, Source
from connectors.mailbox.sync import mailbox_import
from connectors.models import ImportedItem, SyncRun
from loops.message import MailMessage
from tests.connectors.helpers import (
    ENRON,
    SPAMASSASSIN,
    Killed,
    die_in_second_batch,
    stopped_import,
)

pytestmark = pytest.mark.django_db


def _emails(source_id: str) -> dict[str, Page]:
    pages = Page.objects.filter(source_id=source_id, type__name="email")
    return {p.frontmatter["thread_id"]: p for p in pages}


def test_enron_import_builds_threads_pages_and_marks_mine() -> None:
    report = mailbox_import(source_id="enron", path=ENRON, owners=["pallen@enron.com"])
    assert report.counts["messages"] == 28
    assert report.counts["threads"] == 9
    assert report.skipped["duplicate copy"] == 5
    assert RawRecord.objects.filter(source_id="enron", kind="rfc822").count() == 28
    pages = _emails("enron")
    assert len(pages) == 9
    distribution = next(p for p in pages.values() if p.title == "Distribution Form")
    fm = distribution.frontmatter
    assert fm["message_count"] == 5
    assert fm["first_message_date"].startswith("2001-10-25T19:04")
    assert distribution.slug.startswith("emails/2001/10/2001-10-25-distribution-form-")
    # The forward went to Scott Neal; the rest is between Renee and me.
    assert fm["participants"] == [
        "k..allen@enron.com",
        "renee.ratcliff@enron.com",
        "scott.neal@enron.com",
    ]
    assert fm["senders"] == ["k..allen@enron.com", "renee.ratcliff@enron.com"]
    # Three of the five messages are mine (sent_items), marked with an arrow.
    assert distribution.body.count("## → ") == 3
    raws = RawRecord.objects.filter(source_id="enron", page=distribution)
    mine = sorted(
        (m.date, m.is_mine)
        for m in (MailMessage.from_metadata(r.metadata) for r in raws)
    )
    assert [flag for _, flag in mine] == [False, True, True, False, True]
    # The sent-folder sender address is learned as an owner address.
    source = Source.objects.get(id="enron")
    assert {"pallen@enron.com", "k..allen@enron.com"} <= set(source.owner_addresses)


def test_person_pages_only_for_real_correspondents_with_address_aliases() -> None:
    """SPEC §6.2: people I wrote to or got a reply from; addresses and display
    names are aliases; no company pages."""
    mailbox_import(source_id="enron", path=ENRON, owners=["pallen@enron.com"])
    people = Page.objects.filter(source_id="enron", type__name="person")
    emails = {e for p in people for e in p.frontmatter["emails"]}
    assert "renee.ratcliff@enron.com" in emails  # replied to me
    assert "heather.dunton@enron.com" in emails  # I wrote to her
    assert "jsmith@austintx.com" not in emails  # wrote to me, I only forwarded it on
    assert not any(e in emails for e in ("pallen@enron.com", "k..allen@enron.com"))
    renee = Alias.objects.get(source_id="enron", alias="renee.ratcliff@enron.com").page
    assert renee.slug.startswith("people/")
    assert not Page.objects.filter(source_id="enron", type__name="company").exists()


def test_importing_the_same_mailbox_twice_creates_nothing_new() -> None:
    mailbox_import(source_id="sa", path=SPAMASSASSIN, owners=[])
    counts = (
        RawRecord.objects.count(),
        Page.objects.count(),
        ImportedItem.objects.count(),
        sum(p.revisions.count() for p in Page.objects.all()),
    )
    second = mailbox_import(source_id="sa", path=SPAMASSASSIN, owners=[])
    assert second.counts["messages"] == 0
    assert second.skipped["already imported"] == 26
    assert (
        RawRecord.objects.count(),
        Page.objects.count(),
        ImportedItem.objects.count(),
        sum(p.revisions.count() for p in Page.objects.all()),
    ) == counts
    assert SyncRun.objects.filter(source_id="sa").count() == 2


def test_an_import_killed_halfway_completes_on_rerun_without_duplicates() -> None:
    """Batches of four threads: a crash in the second batch keeps the first batch
    whole and rolls the second back; the re-run writes the other eight threads.
    (Progress is reported once per batch, after its threads are written and before
    the batch commits.)"""

    stopped_import(die_in_second_batch)
    assert len(_emails("sa")) == 4
    assert ImportedItem.objects.filter(source_id="sa").count() == sum(
        p.frontmatter["message_count"] for p in _emails("sa").values()
    )
    assert SyncRun.objects.get(source_id="sa").status == "failed"
    report = mailbox_import(
        source_id="sa", path=SPAMASSASSIN, owners=[], batch_threads=4
    )
    assert report.counts["threads"] == 8
    pages = _emails("sa")
    assert len(pages) == 12
    assert sum(p.frontmatter["message_count"] for p in pages.values()) == 26
    assert RawRecord.objects.filter(source_id="sa").count() == 26
    assert ImportedItem.objects.filter(source_id="sa", kind="message").count() == 26


def test_import_mail_command_prints_a_summary() -> None:
    out = StringIO()
    call_command(
        "import_mail",
        str(ENRON),
        "--source",
        "enron",
        "--owner",
        "pallen@enron.com",
        stdout=out,
        stderr=StringIO(),
    )
    text = out.getvalue()
    assert "28 messages, 9 threads, 9 pages" in text
    assert "duplicate copy" in text
    assert "k..allen@enron.com" in text


def test_person_pages_take_display_names_from_the_whole_mailbox() -> None:
    """Renee first appears as a bare address (my forward's To); her own messages,
    later, carry "Ratcliff, Renee" (Exchange X-From), shown as "Renee Ratcliff"."""
    mailbox_import(source_id="enron", path=ENRON, owners=["pallen@enron.com"])
    renee = Alias.objects.get(source_id="enron", alias="renee.ratcliff@enron.com").page
    assert renee.title == "Renee Ratcliff"
    assert renee.slug == "people/renee-ratcliff"
    assert Alias.objects.filter(page=renee, alias="renee ratcliff").exists()


def test_parallel_parsing_gives_the_serial_result_and_keeps_the_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Parsing uses every core for big mailboxes (SPEC §11 ingest rate): the
    forked pool returns the same messages, in order, and the parent's database
    connection (inside a transaction here) still works afterwards."""
    import connectors.mailbox.sync as sync
    from connectors.mailbox.client import iter_mailbox

    entries = list(iter_mailbox(SPAMASSASSIN))
    serial = [sync.parse_entry(e) for e in entries]
    monkeypatch.setattr(sync, "PARALLEL_PARSE_MIN", 1)
    monkeypatch.setattr(sync.os, "cpu_count", lambda: 2)
    parallel = list(sync.parse_entries(entries))
    assert [(m.key, m.labels, m.body) for m in parallel] == [
        (m.key, m.labels, m.body) for m in serial
    ]
    report = mailbox_import(source_id="sa", path=SPAMASSASSIN, owners=[])
    assert report.counts["messages"] == 26
    assert Source.objects.filter(id="sa").exists()


def test_parse_workers_cut_the_newest_text_so_the_importer_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """reply_text (about a millisecond a message) runs in the parse pool; the
    importing process gets the results in its cache and never cuts those bodies
    itself (SPEC §11 ingest rate), and they equal what it would have cut."""
    import connectors.mailbox.sync as sync
    import loops.definitions as definitions
    from connectors.mail.parsing import ParsedMail
    from connectors.mailbox.client import iter_mailbox

    entries = list(iter_mailbox(SPAMASSASSIN))
    monkeypatch.setattr(sync, "PARALLEL_PARSE_MIN", 1)
    monkeypatch.setattr(sync.os, "cpu_count", lambda: 2)
    definitions._reply_cache.clear()
    parsed = [m for m in sync.parse_entries(entries) if isinstance(m, ParsedMail)]
    assert parsed

    def cut_again(body: str) -> str:
        raise AssertionError("the importing process cut a body the pool had cut")

    with monkeypatch.context() as patch:
        patch.setattr(definitions, "_reply_text", cut_again)
        seeded = [definitions.reply_text(m.body) for m in parsed]
    definitions._reply_cache.clear()
    assert seeded == [definitions.reply_text(m.body) for m in parsed]


def test_reply_text_keeps_the_most_recent_bodies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import loops.definitions as definitions

    monkeypatch.setattr(definitions, "REPLY_CACHE_SIZE", 2)
    definitions._reply_cache.clear()
    for body in ("one?", "two?", "one?", "three?"):
        definitions.reply_text(body)
    assert list(definitions._reply_cache) == ["one?", "three?"]
    definitions._reply_cache.clear()


HOSTILE = [
    # NUL in a header and in an 8-bit body (a UTF-16 part sent unencoded).
    b"From: Ann <ann@example.org>\nTo: bob@example.org\nSubject: nul\x00here\n"
    b"Message-ID: <nul-1@x>\nDate: Mon, 7 Oct 2002 10:00:00 +0000\n\n"
    b"h\x00e\x00l\x00l\x00o\x00 body\n",
    # A charset name with a NUL inside it.
    b"From: ann@example.org\nTo: bob@example.org\nSubject: cs\n"
    b"Message-ID: <cs-1@x>\nDate: Mon, 7 Oct 2002 11:00:00 +0000\n"
    b'Content-Type: text/plain; charset="iso-8\x00859-1"\n\nbody \xe9\n',
    # Two Message-IDs longer than the 512-character ledger key, equal in 512.
    b"From: ann@example.org\nTo: bob@example.org\nSubject: long a\n"
    b"Message-ID: <"
    + b"a" * 600
    + b"1@x>\nDate: Mon, 7 Oct 2002 12:00:00 +0000\n\nA\n",
    b"From: ann@example.org\nTo: bob@example.org\nSubject: long b\n"
    b"Message-ID: <"
    + b"a" * 600
    + b"2@x>\nDate: Mon, 7 Oct 2002 13:00:00 +0000\n\nB\n",
]


def test_hostile_messages_import_and_a_rerun_adds_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Regressions from the fresh-clone check: NUL bytes (header or 8-bit body), a
    NUL inside a charset name, and Message-IDs longer than the 512-character key
    used to abort the whole import (DataError, ValueError) or collide."""
    folder = tmp_path / "hostile"
    folder.mkdir()
    for index, data in enumerate(HOSTILE):
        (folder / f"{index}.eml").write_bytes(data)
    report = mailbox_import(source_id="hostile", path=folder, owners=[])
    assert report.counts["messages"] == 4 and report.counts["threads"] == 4
    raws = RawRecord.objects.filter(source_id="hostile")
    assert raws.count() == 4
    assert not any("\x00" in r.content for r in raws)
    subjects = {
        p.title for p in Page.objects.filter(source_id="hostile", type__name="email")
    }
    assert "nulhere" in subjects
    assert all(len(r.external_id) <= 512 for r in raws)
    again = mailbox_import(source_id="hostile", path=folder, owners=[])
    assert again.counts["messages"] == 0 and raws.count() == 4


def test_a_thread_keeps_its_page_when_an_older_message_arrives_later(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The thread slug is keyed on the first message's date when the page is
    created and never moves: a later import that brings an older message of the
    thread updates that page instead of creating a second one (a regression from
    the fresh-clone check: sent_items then deleted_items gave two live pages)."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    # Header-less replies, as in the Enron export: threaded by subject and
    # participants; the one imported second is dated earlier.
    (first / "reply.eml").write_bytes(
        b"From: bob@example.org\nTo: ann@example.org\nSubject: Re: Zero option\n"
        b"Date: Mon, 26 Nov 2001 10:00:00 +0000\n\nAgreed.\n"
    )
    (second / "earlier.eml").write_bytes(
        b"From: ann@example.org\nTo: bob@example.org\nSubject: RE: Zero option\n"
        b"Date: Tue, 20 Nov 2001 10:00:00 +0000\n\nShall we take the zero option?\n"
    )
    mailbox_import(source_id="late", path=first, owners=[])
    slug = Page.objects.get(source_id="late", type__name="email").slug
    mailbox_import(source_id="late", path=second, owners=[])
    pages = Page.objects.filter(source_id="late", type__name="email")
    assert [p.slug for p in pages] == [slug]
    assert pages.get().frontmatter["message_count"] == 2
    linked = RawRecord.objects.filter(source_id="late").values_list("page__slug")
    assert {row[0] for row in linked} == {slug}


def test_importing_a_sent_folder_alone_still_marks_its_messages_as_sent(
    tmp_path,
) -> None:  # type: ignore[no-untyped-def]
    """A regression from the fresh-clone check: messages at the top of the imported
    path had no folder, so ``…/sent_items`` imported alone lost the sent label, the
    owner was not learned and no person pages were made."""
    import shutil

    sent = tmp_path / "sent_items"
    shutil.copytree(ENRON / "sent_items", sent)
    report = mailbox_import(source_id="sent-only", path=sent, owners=[])
    source = Source.objects.get(id="sent-only")
    assert "k..allen@enron.com" in source.owner_addresses
    assert report.counts["people"] > 0
    raws = RawRecord.objects.filter(source_id="sent-only", kind="rfc822")
    assert raws and all("SENT" in r.metadata["labels"] for r in raws)


def test_an_import_hides_its_parsed_mailbox_from_the_collector_and_gives_it_back() -> (
    None
):
    """The parsed mailbox is frozen out of the garbage collector's full passes while
    the batches are written (``gc.freeze``), and unfrozen when the import ends,
    whether it succeeded or was stopped (a process importing twice must not keep
    the first mailbox frozen for good)."""
    import gc

    frozen: list[int] = []

    def watch(step: str, done: int, total: int | None) -> None:
        if step == "threads":
            frozen.append(gc.get_freeze_count())
            if done >= 8:
                raise Killed

    stopped_import(watch)
    assert frozen and all(count > 0 for count in frozen)
    assert gc.get_freeze_count() == 0
    frozen.clear()
    mailbox_import(
        source_id="sa",
        path=SPAMASSASSIN,
        owners=[],
        progress=lambda step, done, total: frozen.append(gc.get_freeze_count()),
    )
    assert frozen[-1] > 0
    assert gc.get_freeze_count() == 0
