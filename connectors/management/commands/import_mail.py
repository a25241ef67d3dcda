"""``manage.py import_mail PATH --source ID --owner ADDRESS [--owner …]``
(SPEC §6.2)."""

from __future__ import annotations

import signal
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from brain.cli import progress_stream, resumable_on_database_failure
from brain.exceptions import BrainError
from brain.models import Source
from connectors.base import ConnectorError
from connectors.mailbox.sync import mailbox_import


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


class Command(BaseCommand):
    help = (
        "Import an mbox file, a maildir or a folder of .eml files into a mailbox "
        "source: raw records, thread pages, person pages, open loops."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="mbox file, maildir, or folder of messages")
        parser.add_argument(
            "--source", required=True, help="Source id, e.g. 'acme-shared'"
        )
        parser.add_argument(
            "--owner",
            action="append",
            default=[],
            help="An address that counts as 'me' (repeatable).",
        )
        parser.add_argument(
            "--embed",
            action="store_true",
            help="Embed pages during the import (default: later, by embed_pending).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        bars: dict[str, tqdm] = {}

        def progress(step: str, done: int, total: int | None) -> None:
            bar = bars.get(step)
            if bar is None:
                label = "parsing messages" if step == "parse" else "writing threads"
                bar = bars[step] = tqdm(
                    total=total,
                    initial=done,
                    desc=label,
                    unit=" items",
                    file=progress_stream(self.stderr),
                )
            bar.update(done - bar.n)

        # SIGTERM stops the import like Ctrl-C: the batch in flight rolls back,
        # the sync run is recorded as failed, and a re-run finishes the rest.
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            with resumable_on_database_failure("The import"):
                report = mailbox_import(
                    source_id=options["source"],
                    path=options["path"],
                    owners=options["owner"],
                    progress=progress,
                    embed=options["embed"],
                    actor="cli:import_mail",
                )
        except (BrainError, ConnectorError) as exc:
            raise CommandError(f"{exc}") from exc
        except KeyboardInterrupt:
            for bar in bars.values():
                bar.close()
            self.stderr.write(
                "Interrupted: the batches written so far are kept and the one in "
                "flight was rolled back; run the same command again to finish."
            )
            sys.exit(130)
        finally:
            signal.signal(signal.SIGTERM, previous)
            for bar in bars.values():
                bar.close()
        counts = report.counts
        self.stdout.write(
            f"Imported into source {report.source_id!r}: "
            f"{counts['messages']} messages, {counts['threads']} threads, "
            f"{counts['pages']} pages, {counts['people']} people "
            f"(from {counts['files']} files)."
        )
        self.stdout.write(
            f"Every item accounted for ({report.status}): {counts['items']} read = "
            f"{counts['stored']} stored + {counts['duplicates']} duplicates + "
            f"{counts['held']} held."
        )
        if report.skipped:
            self.stdout.write("Skipped (duplicates, noise, not mail):")
            for reason, count in sorted(report.skipped.items()):
                self.stdout.write(f"  {count:6d}  {reason}")
        if report.held:
            self.stdout.write(
                "Held (admin → Held items, where 'retry' re-imports them):"
            )
            for item in report.held[:20]:
                self.stdout.write(
                    f"  {item['code']:<20} {item.get('location') or item['external_id']}"
                )
            if counts["held"] > 20:
                self.stdout.write(f"  … and {counts['held'] - 20} more")
        for warning in report.warnings:
            self.stdout.write(f"Note: {warning}")
        if not options["embed"] and counts["pages"]:
            self.stdout.write(
                "Embeddings were not computed (--embed computes them during the "
                "import) and no job was queued: run `manage.py run_job "
                "embed_pending` to compute them now, or leave them to the worker "
                "(the nightly dream queues embed_pending). Keyword search works now."
            )
        source = Source.objects.filter(id=report.source_id).first()
        if source is not None and not source.federated:
            self.stdout.write(
                f"Source {source.id!r} is not federated (SPEC §2.1): name it to search "
                f"it, e.g. GET /api/search?query=…&source={source.id}."
            )
