"""``manage.py restore PATH [--markdown-only]``: restore a backup archive into an
empty database and verify it against the manifest, or import only its markdown and
say what that cannot carry (``jobs.backup``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from brain.exceptions import BrainError
from jobs.backup import backup_restore, backup_restore_markdown


class Command(BaseCommand):
    help = "Restore a backup archive (written by manage.py backup)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("path", type=Path)
        parser.add_argument(
            "--markdown-only",
            action="store_true",
            help="Import only the markdown tree into this (migrated) database.",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        say = lambda m: self.stdout.write(f"… {m}")  # noqa: E731
        try:
            if opts["markdown_only"]:
                report = backup_restore_markdown(path=opts["path"], progress=say)
            else:
                report = backup_restore(path=opts["path"], progress=say)
        except BrainError as exc:
            detail = exc.detail or {}
            for table, pair in (detail.get("mismatches") or {}).items():
                self.stderr.write(
                    f"  {table}: backup {pair['backup']} restored {pair['restored']}"
                )
            raise CommandError(f"{exc.message} {exc.suggestion}") from exc
        if opts["markdown_only"]:
            self.stdout.write(f"Imported {report.pages} page(s) from markdown.")
            if report.not_carried:
                self.stdout.write(
                    "A markdown-only restore cannot carry (rows in the backup):"
                )
                for what, rows in report.not_carried.items():
                    self.stdout.write(f"  {what}: {rows}")
                self.stdout.write(
                    "Restore the full archive (without --markdown-only) to keep them."
                )
        else:
            self.stdout.write(
                f"Restored and verified {report.tables} tables: every row count and "
                "content hash matches the backup's manifest. Run `manage.py doctor`."
            )
