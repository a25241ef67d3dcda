"""``manage.py doctor [--json] [--no-models]``: is the brain healthy? One line per
check with ok / warn / fail and the exact fix; exit status 1 on any fail
(``interfaces.doctor``)."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand

from interfaces.doctor import FAIL, WARN, doctor_report

MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


class Command(BaseCommand):
    help = (
        "Check the database, migrations, embeddings, worker, schedules, sources, "
        "keys, disk and deployment settings; exit 1 on any failure."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--json", action="store_true", help="Print JSON.")
        parser.add_argument(
            "--no-models",
            action="store_true",
            help="Do not load the embedding model (it takes seconds).",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        report = doctor_report(load_models=not opts["no_models"], deploy=True)
        if opts["json"]:
            self.stdout.write(json.dumps(report, indent=2))
        else:
            width = max(len(c["name"]) for c in report["checks"])
            for check in report["checks"]:
                line = f"{MARK[check['status']]}  {check['name']:<{width}}  {check['seen']}"
                style = {FAIL: self.style.ERROR, WARN: self.style.WARNING}.get(
                    check["status"], str
                )
                self.stdout.write(style(line))
                if check["fix"] and check["status"] != "ok":
                    self.stdout.write(f"      {'':<{width}}  fix: {check['fix']}")
            counts = {s: sum(c["status"] == s for c in report["checks"]) for s in MARK}
            self.stdout.write(
                f"\n{report['status'].upper()}: {counts['ok']} ok, "
                f"{counts['warn']} warning(s), {counts['fail']} failure(s)."
            )
        if report["status"] == FAIL:
            sys.exit(1)
