"""``manage.py deploy_units --out DIR [--root R] [--user U] [--env-file F]``: render
the systemd units in ``deploy/systemd/`` for this installation (operations issue).

The templates name ``@ROOT@`` (the checkout with its ``.venv``), ``@USER@`` and
``@ENV_FILE@``; the rendered files go to ``--out`` (copy them to
``/etc/systemd/system/``). Each ``ExecStart``/``ExecStartPre`` program is checked to
exist and each ``manage.py`` sub-command to be a real command, so a unit never names
something that is not there.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import get_commands
from django.core.management.base import BaseCommand, CommandError

TEMPLATES = Path(settings.BASE_DIR) / "deploy" / "systemd"


def render_units(*, root: Path, user: str, env_file: Path) -> dict[str, str]:
    """Return ``{unit file name: text}`` with the placeholders filled."""
    values = {"@ROOT@": str(root), "@USER@": user, "@ENV_FILE@": str(env_file)}
    units = {}
    for template in sorted(TEMPLATES.glob("*.service")):
        text = template.read_text()
        for placeholder, value in values.items():
            text = text.replace(placeholder, value)
        units[template.name] = text
    return units


def unit_problems(text: str) -> list[str]:
    """What a rendered unit names that does not exist: programs that are not
    executable files, ``manage.py`` sub-commands that are not commands."""
    problems = []
    commands = get_commands()
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() not in {"ExecStart", "ExecStartPre"}:
            continue
        argv = shlex.split(value)
        program = Path(argv[0])
        if not program.is_file():
            problems.append(f"{key}: {program} does not exist")
        if len(argv) > 2 and argv[1].endswith("manage.py") and argv[2] not in commands:
            problems.append(f"{key}: manage.py has no command {argv[2]!r}")
    return problems


class Command(BaseCommand):
    help = "Render the systemd units (web + worker) for this installation."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--out", required=True, type=Path)
        parser.add_argument("--root", type=Path, default=Path(settings.BASE_DIR))
        parser.add_argument("--user", default="brain")
        parser.add_argument(
            "--env-file", type=Path, default=Path("/etc/brain/brain.env")
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        units = render_units(
            root=opts["root"].resolve(), user=opts["user"], env_file=opts["env_file"]
        )
        problems = [f"{n}: {p}" for n, t in units.items() for p in unit_problems(t)]
        if problems:
            raise CommandError("\n".join(problems))
        opts["out"].mkdir(parents=True, exist_ok=True)
        for name, text in units.items():
            (opts["out"] / name).write_text(text)
            self.stdout.write(f"wrote {opts['out'] / name}")
        self.stdout.write(
            "Next: copy them to /etc/systemd/system/, write the environment file "
            f"({opts['env_file']}; see deploy/brain.env.example), then "
            "`systemctl daemon-reload && systemctl enable --now "
            + " ".join(n.removesuffix(".service") for n in units)
            + "`."
        )
