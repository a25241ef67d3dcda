"""After the demo, an agent sees the people the waiting list names (issue 18 "Done
when"): ``manage.py demo`` imports a small real mailbox (``tests/data/enron/allen-p``)
and federates it for the demo caller; then the README's own MCP stdio registration
(``claude mcp add … -- <command>``) answers ``entity`` and ``recall`` for a person the
waiting list shows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from anyio.from_thread import start_blocking_portal
from mcp import Client

from tests.mcp.conftest import REPO_ROOT, committed_db, stdio_params, subprocess_env
from tests.mcp.test_readme import _claude_commands

if TYPE_CHECKING:
    from pathlib import Path

MAILBOX = REPO_ROOT / "tests" / "data" / "enron" / "allen-p"
OWNER = "pallen@enron.com"
SOURCE = "demo-allen"


def _manage(*args: str, data_dir: Path) -> str:
    env = {**os.environ, **subprocess_env(), "BRAIN_DATA_DIR": str(data_dir)}
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout


@committed_db
def test_after_the_demo_mcp_stdio_finds_a_person_from_the_waiting_list(
    tmp_path: Path,
) -> None:
    shown = _manage(
        "demo",
        str(MAILBOX),
        "--owner",
        OWNER,
        "--source",
        SOURCE,
        "--no-serve",
        data_dir=tmp_path,
    )
    # The demo says it made the mailbox readable by unqualified searches.
    assert f"federated source '{SOURCE}'" in shown
    # …and says how search stands: keyword-only here (no embedding provider).
    assert "embeddings: provider none, search is keyword-only" in shown
    # Without serving it still gives the console login (the README promises it).
    password = (tmp_path / "admin-password").read_text().strip()
    assert f"user 'admin'  password {password!r}" in shown
    report = json.loads(
        _manage(
            "waiting", "--json", "--stale-ok", "--source", SOURCE, data_dir=tmp_path
        )
    )
    people = [g for g in report["groups"] if g.get("counterparty_slug")]
    assert people, report
    slug, name = people[0]["counterparty_slug"], people[0]["counterparty_name"]

    claude = _claude_commands()[0]
    command, *args = claude[claude.index("--") + 1 :]

    with start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(
            Client(stdio_params(command, args, cwd=tmp_path))
        ) as client:
            card = portal.call(client.call_tool, "entity", {"name": slug})
            recalled = portal.call(client.call_tool, "recall", {"query": name})
    found: dict[str, Any] = card.structured_content or {}
    assert found.get("found") is True, found
    assert found["card"]["entity"]["slug"] == slug
    results = (recalled.structured_content or {}).get("results", [])
    assert slug in {r["slug"] for r in results}, recalled.structured_content
