"""The ``deploy/`` folder (operations issue): the systemd units render for this
checkout and name only programs and commands that exist; the compose file runs the
site, migrations, schedules and workers with real commands."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import yaml
from django.conf import settings
from django.core.management import call_command, get_commands

from interfaces.management.commands.deploy_units import render_units, unit_problems

ROOT = Path(settings.BASE_DIR)


def test_units_render_with_every_program_and_command_present(tmp_path: Path) -> None:
    units = render_units(root=ROOT, user="brain", env_file=Path("/etc/brain/brain.env"))
    assert set(units) == {"brain-web.service", "brain-worker.service"}
    for name, text in units.items():
        assert "@" not in text.replace("@ROOT@", ""), f"placeholder left in {name}"
        assert unit_problems(text) == [], name
    worker = units["brain-worker.service"]
    assert "KillMode=mixed" in worker, "SIGTERM must reach the supervisor alone"
    assert "manage.py worker" in worker


def test_unit_problems_names_a_missing_command() -> None:
    text = f"ExecStart={ROOT}/.venv/bin/python {ROOT}/manage.py no_such_command\n"
    assert unit_problems(text) == [
        "ExecStart: manage.py has no command 'no_such_command'"
    ]


def test_deploy_units_writes_the_files(tmp_path: Path) -> None:
    out = StringIO()
    call_command("deploy_units", "--out", str(tmp_path), stdout=out)
    assert (tmp_path / "brain-web.service").read_text().count(str(ROOT)) >= 2
    assert "systemctl daemon-reload" in out.getvalue()


def test_compose_runs_real_commands_on_postgres_with_pgvector_and_redis() -> None:
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    services = compose["services"]
    assert "pgvector" in services["db"]["image"]
    assert services["redis"]["image"].startswith("redis")
    commands = get_commands()
    for name in ("migrate", "worker", "schedules"):
        argv = services[name]["command"]
        assert argv[:2] == ["python", "manage.py"]
        assert argv[2] in commands, argv
    assert services["web"]["command"][0] == "uvicorn"
    assert services["web"]["environment"]["REDIS_URL"].startswith("redis://")
