"""``manage.py export_markdown DIR [--source ID]``: write pages as markdown (SPEC §6.3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from tqdm import tqdm

from brain.models import Page
from connectors.markdown.sync import markdown_export


class Command(BaseCommand):
    help = (
        "Export every live page (frontmatter, body, facts, timeline) as GBrain-compatible "
        "markdown; without --source each source gets its own sub-folder."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory", type=Path)
        parser.add_argument("--source", default=None, help="Only this source id.")

    def handle(self, *args: Any, **options: Any) -> None:
        directory: Path = options["directory"]
        directory.mkdir(parents=True, exist_ok=True)
        pages = Page.objects.filter(deleted_at__isnull=True)
        if options["source"]:
            pages = pages.filter(source_id=options["source"])
        total = pages.count()
        with tqdm(total=total, unit="page", disable=total == 0) as bar:
            report = markdown_export(
                directory=directory,
                source_id=options["source"],
                progress=lambda _slug: bar.update(1),
            )
        self.stdout.write(
            f"Exported {report.pages} page(s) to {directory}: {report.written} written, "
            f"{report.unchanged} unchanged."
        )
