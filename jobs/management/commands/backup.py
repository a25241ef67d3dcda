"""``manage.py backup PATH``: write one archive with the database dump, the markdown
export and a manifest (``jobs.backup``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from brain.exceptions import BrainError
from jobs.backup import backup_create


class Command(BaseCommand):
    help = "Back up the brain: pg_dump + markdown export + manifest in one .tar.gz."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("path", type=Path, help="The archive to write (.tar.gz).")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            manifest = backup_create(
                path=opts["path"], progress=lambda m: self.stdout.write(f"… {m}")
            )
        except BrainError as exc:
            raise CommandError(f"{exc.message} {exc.suggestion}") from exc
        rows = sum(t["rows"] for t in manifest["tables"].values())
        size = opts["path"].stat().st_size
        self.stdout.write(
            f"Wrote {opts['path']} ({size / 2**20:.1f} MiB): {len(manifest['tables'])} "
            f"tables, {rows} rows, {manifest['markdown_pages']} markdown pages; "
            f"PostgreSQL {manifest['server_version']}."
        )
