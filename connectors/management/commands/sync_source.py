"""``manage.py sync_source ID``: sync one source now (SPEC §6, §7)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from brain.cli import progress_stream, resumable_on_database_failure
from brain.exceptions import BrainError
from connectors.base import ConnectorError
from connectors.dispatch import source_sync


class Command(BaseCommand):
    help = (
        "Sync a source now: a Google account or Workspace shared mailbox (contacts, "
        "calendar, gmail) from its cursor, an IMAP shared mailbox from its UIDVALIDITY "
        "+ UID cursor, or a mailbox source from its stored path. Idempotent and "
        "resumable; prints counts."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source_id", help="Source id, e.g. 'gmail-jane'")

    def handle(self, *args: Any, **options: Any) -> None:
        bars: dict[str, tqdm] = {}

        def progress(step: str, done: int, total: int | None) -> None:
            bar = bars.get(step)
            if bar is None:
                bar = bars[step] = tqdm(
                    total=total,
                    initial=done,
                    desc=step,
                    unit=" items",
                    file=progress_stream(self.stderr),
                )
            bar.update(done - bar.n)

        try:
            with resumable_on_database_failure("The sync"):
                report = source_sync(
                    source_id=options["source_id"],
                    progress=progress,
                    actor="cli:sync_source",
                )
        except ConnectorError as exc:
            kind = "permanent" if exc.permanent else "transient (retry later)"
            raise CommandError(
                f"Sync failed, {kind}: {exc.code}: {exc.message}"
            ) from exc
        except BrainError as exc:
            raise CommandError(f"{exc} {exc.suggestion}") from exc
        finally:
            for bar in bars.values():
                bar.close()
        counts = (
            ", ".join(f"{v} {k}" for k, v in sorted(report.counts.items()))
            or "nothing new"
        )
        self.stdout.write(f"Synced {report.source_id!r} ({report.status}): {counts}.")
        for reason, count in sorted(report.skipped.items()):
            self.stdout.write(f"  skipped {count:6d}  {reason}")
        for item in report.held:
            self.stdout.write(
                f"  held: {item['kind']} {item['external_id']} ({item['code']}): {item['message']}"
            )
        for warning in report.warnings:
            self.stdout.write(f"Note: {warning}")
