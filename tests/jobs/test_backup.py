"""Backup and restore drills (seeds: backup is the markdown tree plus the database).

A brain with pages, page-less and page facts, loops, mutes, keys, sources and jobs is
backed up with ``manage.py backup``; the archive is restored with ``manage.py
restore`` into a fresh, empty database and every table's row count and content hash
is compared with the brain's. A second drill restores from the markdown alone and
checks what it reports it could not carry.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import threading
import uuid
from io import StringIO
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection
from django.db import connections as db_connections

from accounts.services import apikey_create
from brain.models import Source
from jobs.backup import (
    BackupError,
    backup_create,
    backup_prune,
    backup_read,
    database_uri,
    table_fingerprints,
)
from jobs.models import Job
from jobs.services import worker_beat
from loops.models import Detector, LoopSuppression, LoopType, OpenLoop
from tests.factories import FactFactory, PageFactory, SourceFactory
from tests.jobs.test_worker_kill import ROOT

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.slow


def seed_brain() -> Source:
    source = SourceFactory(
        id="drill", name="Drill", kind="mailbox", owner_addresses=["me@example.org"]
    )
    page = PageFactory(source=source, slug="people/ada-quill", title="Ada Quill")
    FactFactory(source=source, entity=page, text="Ada Quill leads the Harbor project")
    FactFactory(source=source, entity=None, text="The office moves to Pier 9 in May")
    OpenLoop.objects.create(
        source=source,
        dedup_key="thread:t1:unanswered_inbound",
        loop_type=LoopType.UNANSWERED_INBOUND,
        summary="Ada asked for the budget",
        detector=Detector.MANUAL,
        counterparty=page,
        counterparty_email="ada@example.org",
        thread_id="t1",
    )
    LoopSuppression.objects.create(
        source=source, kind="sender", value="news@example.org"
    )
    apikey_create(name="drill harness", scopes=["read"], write_source=source)
    Job.objects.create(kind="dream", params={}, status=Job.Status.SUCCEEDED)
    return source


@pytest.fixture
def empty_database() -> Iterator[str]:
    """A new, empty database on the same server; its libpq URI. Dropped after."""
    name = f"drill_{uuid.uuid4().hex[:8]}"
    admin = database_uri({**connection.settings_dict, "NAME": "postgres"})
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    uri = database_uri({**connection.settings_dict, "NAME": name})
    yield uri
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def manage(*args: str, database_url: str) -> subprocess.CompletedProcess[str]:
    import os

    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "gbrain_site.settings",
    }
    return subprocess.run(  # noqa: S603
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def fingerprints_of(uri: str) -> dict[str, dict[str, object]]:
    out = {}
    with psycopg.connect(uri) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
            )
        ]
        for table in tables:
            rows, digest = conn.execute(
                f"SELECT count(*), md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '')) FROM \"{table}\" t"  # noqa: S608
            ).fetchone()
            out[table] = {"rows": rows, "md5": digest}
    return out


def test_backup_then_restore_into_an_empty_database_reproduces_every_table(
    restore_migrated_rows: None,
    transactional_db: None,
    tmp_path: Path,
    empty_database: str,
) -> None:
    seed_brain()
    archive = tmp_path / "brain.tar.gz"
    out = StringIO()
    call_command("backup", str(archive), stdout=out)
    assert "Wrote" in out.getvalue()
    before = table_fingerprints()
    assert before["loops_openloop"]["rows"] == 1
    assert before["accounts_apikey"]["rows"] == 1

    restored = manage("restore", str(archive), database_url=empty_database)

    assert restored.returncode == 0, restored.stderr + restored.stdout
    assert "every row count and content hash matches" in restored.stdout
    assert fingerprints_of(empty_database) == before
    # Settled (issue 48): the restore analysed its tables (pg_restore brings no
    # column statistics; the planner would meet every column as never seen).
    with psycopg.connect(empty_database) as conn:
        analysed = {
            row[0]
            for row in conn.execute(
                "SELECT DISTINCT tablename FROM pg_stats WHERE schemaname = 'public' "
                "AND tablename IN ('loops_openloop', 'brain_page', 'brain_fact')"
            ).fetchall()
        }
    assert analysed == {"loops_openloop", "brain_page", "brain_fact"}


def test_backup_reads_the_dump_and_the_fingerprints_from_one_snapshot(
    restore_migrated_rows: None,
    transactional_db: None,
    tmp_path: Path,
    empty_database: str,
) -> None:
    """Another connection writes while the backup runs (a worker's heartbeat, an
    embed job adding rows): at every step of the backup a thread with its own
    connection commits a write. The archive still restores verified, because the
    dump, the markdown and the fingerprints all read the backup's snapshot."""
    seed_brain()
    worker_beat(name="host:1")
    writes: list[str] = []

    def write_elsewhere() -> None:
        try:
            worker_beat(name="host:1")
            Job.objects.create(kind="dream", params={}, status=Job.Status.QUEUED)
            PageFactory(source_id="drill", slug=f"notes/n{len(writes)}")
        finally:
            db_connections.close_all()

    def step(message: str) -> None:
        writer = threading.Thread(target=write_elsewhere)
        writer.start()
        writer.join()
        writes.append(message)

    archive = tmp_path / "brain.tar.gz"
    manifest = backup_create(path=archive, progress=step)
    assert len(writes) >= 3  # written before the dump, before and after fingerprints
    live = table_fingerprints()
    assert live["jobs_job"] != manifest["tables"]["jobs_job"]
    assert live["brain_page"] != manifest["tables"]["brain_page"]

    restored = manage("restore", str(archive), database_url=empty_database)

    assert restored.returncode == 0, restored.stderr + restored.stdout
    assert "every row count and content hash matches" in restored.stdout
    assert fingerprints_of(empty_database) == manifest["tables"]


def test_a_restore_that_differs_says_which_rows_differ_and_what_to_do(
    restore_migrated_rows: None,
    transactional_db: None,
    tmp_path: Path,
    empty_database: str,
) -> None:
    """A dump that does not hold what its manifest says (an archive from before
    backups read one snapshot) is reported table by table with the counts, and
    the advice is to take a new backup, not to check the server's extensions."""
    seed_brain()
    archive = tmp_path / "brain.tar.gz"
    backup_create(path=archive)
    unpacked = tmp_path / "x"
    with tarfile.open(archive) as tar:
        tar.extractall(unpacked, filter="data")
    manifest = json.loads((unpacked / "manifest.json").read_text())
    manifest["tables"]["jobs_job"]["rows"] += 1
    (unpacked / "manifest.json").write_text(json.dumps(manifest))
    altered = tmp_path / "altered.tar.gz"
    with tarfile.open(altered, "w:gz") as tar:
        for item in unpacked.iterdir():
            tar.add(item, arcname=item.name)

    restored = manage("restore", str(altered), database_url=empty_database)

    said = restored.stdout + restored.stderr
    assert restored.returncode != 0, said
    assert "jobs_job (2 rows in the backup, 1 restored)" in said
    assert "take a new backup" in said
    assert "extensions" not in said


def test_restore_refuses_a_database_that_is_not_empty(
    restore_migrated_rows: None, transactional_db: None, tmp_path: Path
) -> None:
    archive = tmp_path / "brain.tar.gz"
    call_command("backup", str(archive), stdout=StringIO())
    with pytest.raises(Exception, match="is not empty"):
        call_command("restore", str(archive), stdout=StringIO())


def test_a_damaged_archive_is_refused(
    restore_migrated_rows: None, transactional_db: None, tmp_path: Path
) -> None:
    import tarfile

    archive = tmp_path / "brain.tar.gz"
    call_command("backup", str(archive), stdout=StringIO())
    unpacked = tmp_path / "x"
    with tarfile.open(archive) as tar:
        tar.extractall(unpacked, filter="data")
    (unpacked / "database.dump").write_bytes(b"not a dump")
    damaged = tmp_path / "damaged.tar.gz"
    with tarfile.open(damaged, "w:gz") as tar:
        for item in unpacked.iterdir():
            tar.add(item, arcname=item.name)
    with pytest.raises(BackupError, match="does not match its manifest"):
        backup_read(path=damaged, into=tmp_path / "y")


def test_markdown_only_restore_reports_what_it_cannot_carry(
    restore_migrated_rows: None,
    transactional_db: None,
    tmp_path: Path,
    empty_database: str,
) -> None:
    seed_brain()
    archive = tmp_path / "brain.tar.gz"
    call_command("backup", str(archive), stdout=StringIO())
    migrated = manage("migrate", "--noinput", database_url=empty_database)
    assert migrated.returncode == 0, migrated.stderr

    restored = manage(
        "restore", str(archive), "--markdown-only", database_url=empty_database
    )

    assert restored.returncode == 0, restored.stderr + restored.stdout
    for what in ("open loops: 1", "mutes: 1", "API keys: 1", "jobs: 1"):
        assert what in restored.stdout, restored.stdout
    with psycopg.connect(empty_database) as conn:
        titles = {
            r[0]
            for r in conn.execute(
                "SELECT title FROM brain_page WHERE source_id = 'drill'"
            )
        }
    assert "Ada Quill" in titles


def test_nightly_backups_keep_the_newest_n(tmp_path: Path) -> None:
    for stamp in ("20260101T000000Z", "20260102T000000Z", "20260103T000000Z"):
        (tmp_path / f"brain-backup-{stamp}.tar.gz").write_bytes(b"x")
    (tmp_path / "notes.txt").write_text("kept")
    deleted = backup_prune(directory=tmp_path, keep=2)
    assert [p.name for p in deleted] == ["brain-backup-20260101T000000Z.tar.gz"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "brain-backup-20260102T000000Z.tar.gz",
        "brain-backup-20260103T000000Z.tar.gz",
        "notes.txt",
    ]


def test_the_backup_job_writes_an_archive_and_prunes(
    restore_migrated_rows: None, transactional_db: None, tmp_path: Path
) -> None:
    from jobs.runner import execute_job
    from jobs.services import job_enqueue

    for stamp in ("20200101T000000Z", "20200102T000000Z"):
        (tmp_path / f"brain-backup-{stamp}.tar.gz").write_bytes(b"old")
    job, _ = job_enqueue(kind="backup", params={"directory": str(tmp_path), "keep": 2})
    job.refresh_from_db()
    if job.status != Job.Status.SUCCEEDED:  # the test settings run tasks at once
        execute_job(job_id=job.pk)
        job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED, job.error
    archives = sorted(p.name for p in tmp_path.glob("brain-backup-*.tar.gz"))
    assert len(archives) == 2
    assert "brain-backup-20200101T000000Z.tar.gz" not in archives
    assert job.result["pruned"] == ["brain-backup-20200101T000000Z.tar.gz"]
    manifest = backup_read(path=Path(job.result["path"]), into=tmp_path / "check")
    assert "brain_page" in manifest["tables"]


@pytest.mark.django_db
def test_setup_schedules_installs_the_nightly_backup() -> None:
    from jobs.schedules import schedule_specs

    spec = next(s for s in schedule_specs() if s.name == "backup")
    assert spec.cron == "0 3 * * *"


def test_no_backup_lands_in_a_folder_the_web_server_serves(
    settings: Any, tmp_path: Path
) -> None:
    """Issue 46: an archive (every source's pages, key hashes, credentials) written
    under a static folder was downloadable with no key at ``/static/…``."""
    import django.contrib.admin

    settings.STATIC_ROOT = tmp_path / "static"
    admin_static = Path(django.contrib.admin.__file__).parent / "static" / "admin"
    for target in (
        admin_static / "brain.tar.gz",
        settings.STATIC_ROOT / "deep" / "brain.tar.gz",
    ):
        with pytest.raises(BackupError, match="serves to anyone"):
            backup_create(path=target)
        assert not target.exists()
    assert not settings.STATIC_ROOT.exists()
