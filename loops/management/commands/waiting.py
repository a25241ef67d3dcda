"""``manage.py waiting``: who is waiting on me, what did I promise (SPEC §5.5)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from brain.access import local_caller
from brain.exceptions import BrainError
from loops.waiting import waiting_report

if TYPE_CHECKING:
    from datetime import datetime


def _as_of(value: str | None) -> datetime | None:
    if not value:
        return None
    # A bare date is the end of that day in UTC; checked first, because
    # parse_datetime reads "2001-05-15" as a naive midnight, which is refused below.
    if len(value) == 10:
        parsed = parse_datetime(value + "T23:59:59+00:00")
    else:
        parsed = parse_datetime(value)
    if parsed is None or parsed.tzinfo is None:
        raise CommandError(
            f"--as-of {value!r}: use an ISO 8601 time with offset, "
            "e.g. 2001-05-15T18:00:00+00:00, or a date 2001-05-15."
        )
    return parsed


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
            help="Replay ranking (and mailbox detection) for this time.",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            report = waiting_report(
                caller=local_caller(actor="cli:waiting"),
                sources=opts["source"],
                as_of=_as_of(opts["as_of"]),
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
