"""``manage.py loops``: close, reopen, confirm, correct and mute loops from the CLI
(SPEC §5.4: loops close manually from admin, API, MCP or CLI). Trusted local caller."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from brain.exceptions import BrainError
from brain.models import Source
from loops.models import LoopStatus
from loops.services import (
    due_end_of_day,
    loop_close,
    loop_confirm_fulfilment,
    loop_correct_due,
    loop_get,
    loop_mute,
    loop_reopen,
    loop_unmute,
)

ACTOR = "cli:loops"


class Command(BaseCommand):
    help = "Close, reopen, confirm, re-date or mute open loops."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        for name in ("done", "drop", "reopen", "confirm"):
            p = sub.add_parser(name)
            p.add_argument("loop_id")
            p.add_argument("--note", default="")
        p = sub.add_parser("due")
        p.add_argument("loop_id")
        p.add_argument("date", help="YYYY-MM-DD, or 'none' to clear")
        p.add_argument("--note", default="")
        for name in ("mute", "unmute"):
            p = sub.add_parser(name)
            p.add_argument("kind", choices=["sender", "thread"])
            p.add_argument("value")
            p.add_argument("--source", required=True)

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            self._run(opts)
        except BrainError as exc:
            raise CommandError(f"{exc.message} {exc.suggestion}") from exc

    def _run(self, opts: dict[str, Any]) -> None:
        action = opts["action"]
        if action in ("mute", "unmute"):
            source = Source.objects.filter(id=opts["source"]).first()
            if source is None:
                raise CommandError(f"No source '{opts['source']}'.")
            if action == "mute":
                _, created = loop_mute(
                    source=source, kind=opts["kind"], value=opts["value"], actor=ACTOR
                )
                state = "muted" if created else "already muted"
            else:
                removed = loop_unmute(
                    source=source, kind=opts["kind"], value=opts["value"], actor=ACTOR
                )
                state = "unmuted" if removed else "was not muted"
            self.stdout.write(
                f"{opts['kind']} {opts['value']} in {source.id}: {state}."
            )
            return
        loop = loop_get(loop_id=opts["loop_id"])
        if action in ("done", "drop", "confirm"):
            if action == "confirm":
                closed = loop_confirm_fulfilment(loop=loop, actor=ACTOR)
            else:
                closed = loop_close(
                    loop=loop,
                    status=LoopStatus.DONE if action == "done" else LoopStatus.DROPPED,
                    actor=ACTOR,
                    note=opts["note"],
                )
            self.stdout.write(f"loop {opts['loop_id']}: {_closed_sentence(closed)}")
            return
        if action == "reopen":
            loop = loop_reopen(loop=loop, actor=ACTOR, note=opts["note"])
            self.stdout.write(f"loop {opts['loop_id']}: reopened ({loop.status}).")
            return
        else:
            value = opts["date"]
            try:
                due = (
                    None
                    if value == "none"
                    else due_end_of_day(date.fromisoformat(value))
                )
            except ValueError as exc:
                raise CommandError(f"'{value}' is not YYYY-MM-DD or 'none'.") from exc
            loop = loop_correct_due(
                loop=loop, due_at=due, actor=ACTOR, evidence={"note": opts["note"]}
            )
            when = (
                timezone.localtime(loop.due_at).date().isoformat()
                if loop.due_at
                else "none"
            )
            self.stdout.write(f"loop {opts['loop_id']}: due {when}.")


def _closed_sentence(result: dict[str, Any]) -> str:
    """``loop_close``'s ``{closed, status, fact_expired, reason}`` as one sentence:
    "closed as done; its commitment fact expired." or "already closed (dropped)."."""
    status = str(getattr(result["status"], "value", result["status"]))
    if not result["closed"]:
        return f"already closed ({status}); nothing changed."
    fact = "; its commitment fact expired" if result.get("fact_expired") else ""
    return f"closed as {status}{fact}."
