"""``manage.py import_markdown DIR --source ID``: apply a markdown folder (SPEC §6.3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from brain.cli import resumable_on_database_failure
from connectors.markdown.client import iter_folder
from connectors.markdown.sync import markdown_import


class Command(BaseCommand):
    help = (
        "Import GBrain-compatible markdown page files into a source: path → slug, "
        "unchanged files skipped, removed files soft-deleted."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory", type=Path)
        parser.add_argument("--source", required=True, help="Source id, e.g. 'notes'.")
        parser.add_argument(
            "--no-embed",
            action="store_true",
            help="Skip embeddings (embed_pending later).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        directory: Path = options["directory"]
        if not directory.is_dir():
            raise CommandError(f"{directory} is not a directory.")
        total = sum(1 for _ in iter_folder(directory))
        with (
            tqdm(total=total, unit="file", disable=total == 0) as bar,
            resumable_on_database_failure("The import"),
        ):
            report = markdown_import(
                source_id=options["source"],
                directory=directory,
                embed=not options["no_embed"],
                progress=lambda _path: bar.update(1),
            )
        self.stdout.write(
            f"Imported {directory} into source '{options['source']}': "
            f"{report.created} created, {report.updated} updated, "
            f"{report.unchanged} unchanged, {report.deleted} soft-deleted, "
            f"{report.facts_added} facts added, {report.embedded} chunks embedded, "
            f"{report.held} held (admin → Held items)."
        )
        for line in report.errors:
            self.stderr.write(f"  {line}")
