"""``manage.py waiting``: who is waiting on me, what did I promise (SPEC §5.5)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from brain.access import local_caller
from brain.exceptions import BrainError
from brain.timestamps import as_of_from_text
from loops.waiting import waiting_report


class Command(BaseCommand):
    help = "Rank who is waiting on you: open loops grouped by counterparty (SPEC §5.5)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--top", type=int, default=10, help="Groups to show (default 10)."
        )
        parser.add_argument(
            "--json", action="store_true", help="Print the JSON report."
        )
        parser.add_argument(
            "--stale-ok",
            action="store_true",
            help="Show results even when every mail source is stale.",
        )
        parser.add_argument(
            "--source",
            action="append",
            default=None,
            help="Limit to a source id (repeatable).",
        )
        parser.add_argument(
            "--as-of",
            default=None,
            help="Replay ranking (and mailbox detection) for this time: ISO 8601 "
            "(no offset means UTC) or a date, meaning the end of that day, UTC.",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            report = waiting_report(
                caller=local_caller(actor="cli:waiting"),
                sources=opts["source"],
                as_of=as_of_from_text(opts["as_of"]) if opts["as_of"] else None,
                top=opts["top"],
            )
        except BrainError as exc:
            raise CommandError(f"{exc.message} {exc.suggestion}") from exc
        if report["stale"] and not opts["stale_ok"]:
            raise CommandError(
                "Every mail source in scope is stale (no successful sync for 24 h): "
                f"{', '.join(report['stale_sources'])}. Fix: run "
                + " && ".join(
                    f"manage.py sync_source {s}" for s in report["stale_sources"]
                )
                + ", or pass --stale-ok to see possibly outdated loops."
            )
        if opts["json"]:
            self.stdout.write(json.dumps(report, indent=2, default=str))
        else:
            self.stdout.write(report["text"])
