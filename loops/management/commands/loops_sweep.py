"""``manage.py loops_sweep``: grace re-checks and staleness (SPEC §5.2 rule 8, §5.4)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils.dateparse import parse_datetime

from loops.pipeline import loops_sweep


class Command(BaseCommand):
    help = "Re-check threads whose grace window ended and mark stale commitments."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--source", action="append", default=None, help="Source id (repeatable)."
        )
        parser.add_argument(
            "--now", default=None, help="Reference time (ISO 8601), for replays."
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        now = parse_datetime(opts["now"]) if opts["now"] else None
        result = loops_sweep(source_ids=opts["source"], now=now)
        self.stdout.write(
            f"loops_sweep: {result['sources']} source(s), {result['rechecked']} thread(s) "
            f"re-checked, {result['opened']} loop(s) opened, {result['stale']} marked stale, "
            f"{result['failed']} failure(s)."
        )
