"""``manage.py skills list`` / ``skills install --target claude-code|codex [--dir D]``:
the harness skills of ``skills/`` (``interfaces.skills``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from interfaces.skills import TARGETS, skills_install, skills_list


class Command(BaseCommand):
    help = "List the harness skills or install them where a harness reads skills."

    def add_arguments(self, parser: Any) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list", help="List the skills.")
        install = sub.add_parser("install", help="Copy the skills for a harness.")
        install.add_argument("--target", required=True, choices=sorted(TARGETS))
        install.add_argument(
            "--dir", type=Path, default=None, help="Install here instead."
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["action"] == "list":
            for skill in skills_list():
                self.stdout.write(
                    f"{skill.name} ({skill.surface}): {skill.description}"
                )
            return
        try:
            written = skills_install(target=opts["target"], directory=opts["dir"])
        except OSError as exc:
            raise CommandError(f"Could not write the skills: {exc}") from exc
        for path in written:
            self.stdout.write(f"wrote {path}")
        self.stdout.write(
            f"Installed {len(written)} skill(s) for {opts['target']}. Connect the MCP "
            "server too (README: MCP), with a surface that offers their tools."
        )
