"""Management commands of the jobs app: setup_schedules and run_job (SPEC §7)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils.module_loading import import_string
from django_q.conf import Conf
from django_q.models import Schedule
from django_q.utils import localtime

from brain.models import RawRecord
from connectors.management.commands.import_mail import Command as ImportMail
from jobs.management.commands.run_job import Command as RunJob
from jobs.models import Job
from tests.factories import ONE_ASK_MESSAGE, SourceFactory, one_message_mbox

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def rows() -> list[tuple]:
    return list(
        Schedule.objects.order_by("name").values_list(
            "id", "name", "func", "kwargs", "cron", "next_run"
        )
    )


def test_setup_schedules_twice_leaves_the_same_schedule_rows() -> None:
    SourceFactory(id="shared-inbox", kind="imap")
    SourceFactory(id="notes", kind="markdown")
    first = run("setup_schedules")
    before = rows()
    second = run("setup_schedules")
    assert rows() == before
    assert [r[1] for r in before] == [
        "backup",
        "dream",
        "jobs_reaper",
        "loops_sweep",
        "session_cursor_purge",
        "sync_source:shared-inbox",
    ]
    assert first.count("created") == 6
    assert second.count("unchanged") == 6 and "created" not in second
    assert "https://crontab.guru/#*/10_*_*_*_*" in first


def test_schedules_sync_each_mail_source_every_10_minutes_and_dream_at_2am_local() -> (
    None
):
    SourceFactory(id="gmail-team", kind="google")
    run("setup_schedules")
    sync = Schedule.objects.get(name="sync_source:gmail-team")
    assert (sync.func, sync.cron) == ("jobs.tasks.enqueue_kind", "*/10 * * * *")
    assert eval(sync.kwargs) == {"kind": "sync_source", "source_id": "gmail-team"}  # noqa: S307
    dream = Schedule.objects.get(name="dream")
    assert dream.cron == "0 2 * * *"
    local = localtime(dream.next_run)
    assert (local.hour, local.minute) == (2, 0)
    assert str(local.tzinfo) == Conf.TIME_ZONE
    assert Schedule.objects.get(name="loops_sweep").cron == "0 * * * *"
    assert (
        Schedule.objects.get(name="jobs_reaper").func == "jobs.tasks.reap_and_dispatch"
    )


def test_setup_schedules_removes_the_sync_schedule_of_a_deleted_source() -> None:
    source = SourceFactory(id="old-box", kind="imap")
    run("setup_schedules")
    source.delete()
    out = run("setup_schedules")
    assert "deleted" in out
    assert not Schedule.objects.filter(name="sync_source:old-box").exists()


def test_setup_schedules_schedules_live_sources_only_not_file_imports() -> None:
    """Google and IMAP sources are synced every 10 minutes; a source imported
    from an mbox, maildir or markdown file has nothing new to fetch, so it gets no
    sync schedule, and one installed by an older version is deleted."""
    SourceFactory(id="gmail", kind="google")
    SourceFactory(id="team-imap", kind="imap")
    SourceFactory(id="archive", kind="mailbox")
    SourceFactory(id="notes", kind="markdown")
    Schedule.objects.create(
        name="sync_source:archive",
        func="jobs.tasks.enqueue_kind",
        schedule_type=Schedule.CRON,
        cron="*/10 * * * *",
    )
    out = run("setup_schedules")
    synced = set(
        Schedule.objects.filter(name__startswith="sync_source:").values_list(
            "name", flat=True
        )
    )
    assert synced == {"sync_source:gmail", "sync_source:team-imap"}
    assert "sync_source:archive" in out and "deleted" in out


@pytest.mark.usefixtures("test_kinds")
def test_run_job_runs_a_kind_in_the_foreground_and_twice_is_a_noop() -> None:
    out = run(
        "run_job",
        "test_items",
        "--param",
        "items=3",
        "--idempotency-key",
        "cli-1",
        "--no-progress",
    )
    assert "succeeded after 1 attempt(s)" in out
    assert '"imported": 3' in out
    again = run(
        "run_job",
        "test_items",
        "--param",
        "items=3",
        "--idempotency-key",
        "cli-1",
        "--no-progress",
    )
    assert "is already succeeded; nothing to do" in again
    assert RawRecord.objects.filter(external_id__startswith="item-").count() == 3
    job = Job.objects.get(idempotency_key="cli-1")
    assert (job.attempts, job.created_by, job.params) == (1, "cli", {"items": 3})


@pytest.mark.usefixtures("test_kinds")
def test_run_job_shows_one_bar_per_stage_and_no_empty_bar() -> None:
    """A bar made before the first report printed an empty ``0step`` line, and one
    bar for every stage carried the first stage's count and clock into the next."""
    err = StringIO()
    call_command("run_job", "test_stages", stdout=StringIO(), stderr=err)
    lines = [line.strip() for line in err.getvalue().replace("\r", "\n").splitlines()]
    lines = [line for line in lines if line]
    assert not [line for line in lines if line.startswith("0step")]
    assert lines[0].startswith("first:") and lines[-1].startswith("second:")
    assert "1/1" in lines[-1]
    # Each report is drawn once (the description and the count were two draws).
    assert len([line for line in lines if "first:" in line and "1/2" in line]) == 1


class _Terminal(StringIO):
    """A stderr that says it is a terminal, as an interactive shell's is."""

    def isatty(self) -> bool:
        return True


@pytest.mark.usefixtures("test_kinds")
def test_progress_bars_on_a_terminal_are_not_drawn_in_the_error_style(
    tmp_path,
) -> None:  # type: ignore[no-untyped-def]
    """Regression (newcomer): on a terminal, Django styles every write to a
    command's stderr as an error, so run_job's and import_mail's progress bars
    were drawn in red. They now write to the stream under the wrapper."""
    for command, args in (
        (RunJob, ("test_stages",)),
        (ImportMail, (str(one_message_mbox(tmp_path)), "--source", "tty-check")),
    ):
        err = _Terminal()
        call_command(command(stdout=StringIO(), stderr=err, force_color=True), *args)
        drawn = err.getvalue()
        assert "it/s" in drawn or "items" in drawn or "step" in drawn, drawn
        assert "\x1b[31" not in drawn, repr(drawn[:200])


@pytest.mark.usefixtures("test_kinds")
def test_run_job_reports_a_failure_and_refuses_unknown_kinds() -> None:
    with pytest.raises(CommandError, match="the mailbox file is not a mailbox"):
        run("run_job", "test_broken", "--no-progress")
    with pytest.raises(CommandError, match="Unknown job kind 'nope'"):
        run("run_job", "nope")
    with pytest.raises(CommandError, match="expected key=value"):
        run("run_job", "test_items", "--param", "items")


def test_demo_summary_shows_the_counts_a_connector_result_nests() -> None:
    """A regression from the fresh-clone check: the demo printed a blank line for
    the import job because its numbers are under ``counts``."""
    import json
    from io import StringIO

    from interfaces.management.commands.demo import _Summary

    out = StringIO()
    _Summary(out).write(
        json.dumps({"kind": "mailbox", "counts": {"messages": 756, "threads": 659}})
    )
    assert "messages: 756" in out.getvalue() and "threads: 659" in out.getvalue()


def test_idle_delta_cursors_are_purged_nightly_by_a_schedule(
    django_capture_on_commit_callbacks,
) -> None:  # type: ignore[no-untyped-def]
    """SPEC §4: a delta session cursor idle for more than 7 days is removed; the
    purge is scheduled (it used to exist only as a function nobody called)."""
    from datetime import timedelta

    from django.utils import timezone

    from brain.models import SessionCursor
    from jobs.models import Job

    source = SourceFactory(id="cursors", kind="manual")
    now = timezone.now()
    idle = SessionCursor.objects.create(source=source, client="a", session_id="old")
    SessionCursor.objects.filter(pk=idle.pk).update(touched_at=now - timedelta(days=8))
    fresh = SessionCursor.objects.create(source=source, client="a", session_id="new")
    run("setup_schedules")
    schedule = Schedule.objects.get(name="session_cursor_purge")
    assert schedule.cron == "30 3 * * *"
    # What django-q2 calls when the schedule fires (sync mode in tests: the job runs).
    task = import_string(schedule.func)
    with django_capture_on_commit_callbacks(execute=True):
        task(**eval(schedule.kwargs))  # noqa: S307
    job = Job.objects.get(kind="session_cursor_purge")
    assert job.status == Job.Status.SUCCEEDED and job.result == {"purged": 1}
    assert list(SessionCursor.objects.values_list("pk", flat=True)) == [fresh.pk]


@pytest.mark.django_db
def test_demo_schedule_line_promises_no_sync_for_a_mailbox_file() -> None:
    """The newcomer's demo printed "sync every 10 min" under a schedule table with
    no sync row: mailbox files get no sync schedule (README, setup_schedules)."""
    from io import StringIO

    from brain.models import Source
    from interfaces.management.commands import demo
    from tests.factories import SourceFactory

    SourceFactory(id="mail-x", kind=Source.Kind.MAILBOX)
    SourceFactory(id="imap-x", kind=Source.Kind.IMAP)
    command = demo.Command(stdout=StringIO())
    line = command._schedules_summary("mail-x")
    assert "sync every" not in line and "no sync is scheduled" in line
    assert "dream nightly at 02:00" in line
    assert "'imap-x' syncs on its schedule" in command._schedules_summary("imap-x")


@pytest.mark.django_db
def test_demo_closing_lines_say_how_to_finish_embedding(settings) -> None:  # type: ignore[no-untyped-def]
    """Issue 18: pending embeddings, how to finish them and how long it takes on
    this machine (measured with the real local model)."""
    from io import StringIO

    from brain.models import Chunk
    from interfaces.management.commands import demo
    from tests.brain.conftest import add_page
    from tests.factories import SourceFactory

    settings.BRAIN_EMBEDDING_PROVIDER = "local"
    mailbox = SourceFactory(id="mail-x")
    for n in range(3):
        add_page(mailbox, title=f"Thread {n}", body=f"Budget review number {n}.")
    total = Chunk.objects.filter(source=mailbox).count()
    assert total and not Chunk.objects.filter(embedding__isnull=False).exists()
    command = demo.Command(stdout=StringIO())
    command._embedding_report("mail-x", serving=False)
    line = command.stdout.getvalue()
    assert f"{total} of {total} chunks pending" in line and "search_degraded" in line
    job = Job.objects.get(kind="embed_pending")
    assert job.status == Job.Status.QUEUED and job.params == {"source_ids": ["mail-x"]}
    assert f"job #{job.pk} is queued" in line and "manage.py worker" in line
    assert "on this machine (" in line and "chunks/s measured)" in line
    command._embedding_report("mail-x", serving=True)
    assert Job.objects.filter(kind="embed_pending").count() == 1, "coalesced"
    assert f"embeds them in the background (job #{job.pk}" in command.stdout.getvalue()


@pytest.mark.django_db
def test_demo_reports_the_embed_jobs_real_status(settings) -> None:  # type: ignore[no-untyped-def]
    """``bin/demo --no-serve`` with a worker alive: a running embed job is called
    running (on its worker), a queued one is left to the live worker; neither
    tells the user to start a worker."""
    from io import StringIO

    from interfaces.management.commands import demo
    from jobs.services import job_claim, job_enqueue, worker_beat
    from tests.brain.conftest import add_page
    from tests.factories import SourceFactory

    settings.BRAIN_EMBEDDING_PROVIDER = "local"
    mailbox = SourceFactory(id="mail-x")
    add_page(mailbox, title="Thread", body="Budget review.")
    worker_beat(name="host:1")
    job, _ = job_enqueue(
        kind="embed_pending", params={"source_ids": ["mail-x"]}, dispatch=False
    )
    command = demo.Command(stdout=StringIO())
    command._embedding_report("mail-x", serving=False)
    queued = command.stdout.getvalue()
    assert f"job #{job.pk} is queued; the running worker starts it" in queued
    assert "start `manage.py worker`" not in queued

    job_claim(job_id=job.pk, worker="host:1")
    command = demo.Command(stdout=StringIO())
    command._embedding_report("mail-x", serving=False)
    running = command.stdout.getvalue()
    assert f"job #{job.pk} is running on worker host:1" in running
    assert "queued" not in running
    assert Job.objects.filter(kind="embed_pending").count() == 1


@pytest.mark.django_db
def test_import_mail_says_embeddings_wait_for_a_job_it_did_not_queue(
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    mbox = one_message_mbox(tmp_path)
    out = run("import_mail", str(mbox), "--source", "archive")
    assert not Job.objects.filter(kind="embed_pending").exists()
    assert "deferred to the embed_pending job" not in out
    assert "no job was queued" in out and "run_job embed_pending" in out


@pytest.mark.django_db
def test_import_mail_skips_folder_documents_in_the_root_as_not_mail(
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    """A mail folder shipped with SOURCE.txt, README.md and LICENSE (as the demo's
    sample is): those are counted "not mail" and skipped, not held forever."""
    from connectors.models import HeldItem

    root = tmp_path / "box"
    (root / "inbox").mkdir(parents=True)
    (root / "inbox" / "1.").write_text(ONE_ASK_MESSAGE)
    for name in ("SOURCE.txt", "README.md", "LICENSE"):
        (root / name).write_text("Dataset: a mail corpus; licence: research only.\n")
    out = run("import_mail", str(root), "--source", "box", "--owner", "me@example.org")
    assert not HeldItem.objects.filter(source_id="box").exists()
    assert "1 read = 1 stored + 0 duplicates + 0 held" in out
    assert "     3  not mail (LICENSE, README.md, SOURCE.txt)" in out


def test_the_demo_sample_has_one_folder_document_and_it_is_not_read_as_mail() -> None:
    from django.conf import settings

    from connectors.mailbox.client import MailboxReader
    from interfaces.management.commands.demo import SAMPLE

    reader = MailboxReader(settings.BASE_DIR / SAMPLE)
    locations = {entry.location for entry in reader}
    assert reader.not_mail == ["SOURCE.txt"]
    assert "SOURCE.txt" not in locations


@pytest.mark.django_db
def test_run_job_import_mail_reads_a_plain_owner_as_one_address(
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    """``--param owners=me@x.org`` is a string: ``list()`` made the owners its
    characters (``['.', '@', 'e', …]``) without a word (newcomer); a comma list is
    several addresses, and anything that is no address fails the job clearly."""
    from brain.models import Source

    mbox = one_message_mbox(tmp_path)
    run(
        "run_job",
        "import_mail",
        "--param",
        "source_id=plain",
        "--param",
        f"path={mbox}",
        "--param",
        "owners=ada@example.org, bo@example.org",
        "--no-progress",
    )
    owners = Source.objects.get(pk="plain").owner_addresses
    assert sorted(owners) == ["ada@example.org", "bo@example.org"]
    with pytest.raises(CommandError, match="must be addresses"):
        run(
            "run_job",
            "import_mail",
            "--param",
            "source_id=odd",
            "--param",
            f"path={mbox}",
            "--param",
            "owners=5",
            "--no-progress",
        )
