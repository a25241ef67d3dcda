"""A newcomer following the README's MCP section connects to both transports
(issue 7 "Done when"): the same commands and config snippets, parsed from README.md,
drive the SDK's client."""

from __future__ import annotations

import importlib
import os
import re
import shlex
import tomllib
from typing import TYPE_CHECKING

import anyio
from mcp import Client

from tests.mcp.conftest import (
    REPO_ROOT,
    committed_db,
    http_client,
    payload,
    served_application,
    stdio_params,
)

if TYPE_CHECKING:
    from pathlib import Path

README = (REPO_ROOT / "README.md").read_text()


def _mcp_section() -> str:
    start = README.index("## MCP (agent harnesses)")
    return README[start : README.index("\n## ", start + 1)]


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", _mcp_section(), flags=re.S)


def _claude_commands() -> list[list[str]]:
    lines = [b.strip() for b in _blocks("sh") if b.strip().startswith("claude mcp add")]
    return [shlex.split(line.replace("$PWD", str(REPO_ROOT))) for line in lines]


def _codex_tables() -> list[dict[str, object]]:
    return [tomllib.loads(b)["mcp_servers"]["brain"] for b in _blocks("toml")]


def test_readme_lists_claude_and_codex_registrations_for_both_transports() -> None:
    claude = _claude_commands()
    assert [c[:3] for c in claude] == [["claude", "mcp", "add"]] * 2
    assert "--" in claude[0] and "--transport" in claude[1]
    codex = _codex_tables()
    assert "command" in codex[0] and "url" in codex[1]


@committed_db
def test_readme_stdio_registration_connects_claude_code_and_codex(
    tmp_path: Path,
) -> None:
    claude = _claude_commands()[0]
    command, *args = claude[claude.index("--") + 1 :]
    codex = _codex_tables()[0]
    codex_command = str(codex["command"]).replace("/path/to/brain", str(REPO_ROOT))
    codex_args = [
        str(a).replace("/path/to/brain", str(REPO_ROOT)) for a in codex["args"]
    ]  # type: ignore[attr-defined]

    # Both registrations start the same server; a harness starts it from its own
    # working directory, so the paths must be absolute.
    assert [codex_command, *codex_args] == [command, *args]

    async def go() -> tuple[set[str], dict[str, object]]:
        async with Client(stdio_params(command, args, cwd=tmp_path)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            return tools, payload(await client.call_tool("whoami", {}))

    tools, who = anyio.run(go)
    assert "brain_search" in tools and "whoami" in tools
    assert who["trusted"] is True and who["readable_sources"] is None


@committed_db
def test_readme_http_registration_connects_claude_code_and_codex(  # type: ignore[no-untyped-def]
    live_asgi, make_key, default_source, monkeypatch
) -> None:
    serve = next(b for b in _blocks("sh") if "uvicorn" in b).split()
    module, attr = serve[1].split(":")
    # The live server runs exactly the application the README tells you to serve.
    assert getattr(importlib.import_module(module), attr) is served_application()
    issued = make_key(default_source)
    host = live_asgi.removeprefix("http://")

    claude = _claude_commands()[1]
    url = claude[claude.index("--transport") + 3].replace("HOST:8000", host)
    header_name, header_value = claude[claude.index("--header") + 1].split(": ", 1)
    assert header_name == "Authorization"
    claude_key = header_value.removeprefix("Bearer ").replace("gbr_…", issued.plaintext)
    codex = _codex_tables()[1]
    codex_url = str(codex["url"]).replace("HOST:8000", host)
    monkeypatch.setenv(str(codex["bearer_token_env_var"]), issued.plaintext)

    async def go() -> list[dict[str, object]]:
        seen = []
        for endpoint, key in (
            (url, claude_key),
            (codex_url, os.environ[str(codex["bearer_token_env_var"])]),
        ):
            async with http_client(endpoint, key) as client:
                seen.append(payload(await client.call_tool("whoami", {})))
        return seen

    for who in anyio.run(go):
        assert who["actor"] == f"key:{issued.api_key.prefix}"
        assert who["remote"] is True
