"""Issue 7 "Done when": each transport, driven by the SDK's own client, serves every
tool in one session; a page added is found by search in the same session; update by
append keeps the frontmatter; errors carry the SPEC §4 envelope."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import anyio
from mcp import Client

from accounts.models import ApiKey
from brain.models import Page, PageRevision
from loops.models import LoopSuppression
from tests.mcp.conftest import (
    REPO_ROOT,
    committed_db,
    envelope,
    http_client,
    manage_mcp,
    payload,
    subprocess_env,
)
from tests.mcp.scenario import APPENDED, BODY, TITLE, run_session
from tests.mcp.test_surfaces import EXPECTED

MUTE = "newsletter@example.com"


def _assert_session(r: dict[str, Any], *, remote: bool, loop_id: str) -> None:
    slug = r["slug"]
    assert r["tools"] == EXPECTED["full"]
    assert payload(r["whoami"])["remote"] is remote

    # Search before adding finds nothing; the added page is found in the same session.
    assert all(x["slug"] != slug for x in payload(r["search_before"])["results"])
    added = payload(r["add"])
    assert added["created"] is True and added["source_id"] == "default"
    assert slug.startswith("projects/")
    hits = [x for x in payload(r["search_after"])["results"] if x["slug"] == slug]
    assert len(hits) == 1
    assert hits[0]["source_id"] == "default" and hits[0]["title"] == TITLE
    assert "similarity" in hits[0] and "quokka" in hits[0]["chunk"].lower()

    again = envelope(r["add_again"])
    assert again["error"] == "invalid_params" and "update" in again["suggestion"]

    # Update by append keeps the frontmatter (title, summary, tags).
    assert payload(r["update"])["operation"] == "append"
    page = payload(r["get"])
    assert page["body"].startswith(BODY) and page["body"].rstrip().endswith(APPENDED)
    assert page["title"] == TITLE
    assert page["frontmatter"]["title"] == TITLE
    assert page["frontmatter"]["summary"] == BODY.splitlines()[0]
    assert {"zoo", "perth"} <= set(page["frontmatter"]["tags"])
    assert ("agent-input" in page["tags"]) is remote

    assert envelope(r["get_missing"])["error"] == "not_found"
    assert slug in [p["slug"] for p in payload(r["list"])["items"]]
    assert envelope(r["query"])["error"] == "unavailable"
    assert envelope(r["ask"])["error"] == "unavailable"  # no LLM in the tests

    remembered = payload(r["remember"])
    assert remembered["status"] == "inserted" and isinstance(remembered["id"], str)
    assert envelope(r["remember_blank"])["error"] == "provenance_required"
    recalled = payload(r["recall"])
    assert "The quokka enclosure opens in March 2027." in [
        f["fact"] for f in recalled["facts"]
    ]
    card = payload(r["entity"])
    assert card["found"] is True and card["card"]["entity"]["slug"] == slug
    pack = payload(r["context_pack"])
    assert pack["protocol_version"] == 1 and slug in [c["slug"] for c in pack["cards"]]
    changes = payload(r["delta"])
    assert changes["since"] == "1970-01-01T00:00:00.000Z"
    assert slug in json.dumps(changes)
    assert envelope(r["synthesize"])["error"] == "unavailable"
    assert payload(r["forget"])["expired"] is True
    assert payload(r["forget_again"])["expired"] is False

    assert slug in [p["slug"] for p in payload(r["push"])["pages"]]

    assert loop_id in [str(x["id"]) for x in payload(r["open_loops"])["loops"]]
    # waiting (SPEC §5.5) on MCP: the same ranked view as GET /api/waiting, the
    # loop in its counterparty's group, redacted for a remote key.
    waiting = payload(r["waiting"])
    assert waiting["protocol_version"] == 1 and waiting["redacted"] is remote
    ada = [g for g in waiting["groups"] if g["counterparty"] == "ada@example.com"]
    assert [str(x["id"]) for x in ada[0]["loops"]] == [loop_id]
    assert ("quote" in ada[0]["loops"][0]) is not remote
    assert envelope(r["waiting_bad"])["error"] == "invalid_params"
    assert payload(r["close"])["closed"] is True
    assert loop_id not in [
        str(x["id"]) for x in payload(r["open_loops_after"])["loops"]
    ]
    assert payload(r["mute"])["created"] is True
    assert payload(r["unmute"])["removed"] is True

    unknown = envelope(r["unknown_tool"])
    assert unknown["error"] == "invalid_params"
    assert json.loads(unknown["detail"])["reason"] == "unknown_tool"
    bad = envelope(r["bad_type"])
    assert (
        bad["error"] == "invalid_params"
        and json.loads(bad["detail"])["fields"][0]["field"] == "limit"
    )
    missing = envelope(r["missing"])
    assert missing["error"] == "invalid_params"
    assert json.loads(missing["detail"])["fields"][0]["field"] == "provenance"
    unknown_arg = envelope(r["unknown_arg"])
    assert (
        unknown_arg["error"] == "invalid_params"
        and "query" in json.loads(unknown_arg["detail"])["allowed"]
    )


@committed_db
def test_stdio_session_calls_every_tool_as_a_trusted_local_caller(open_loop) -> None:  # type: ignore[no-untyped-def]
    async def go() -> dict[str, Any]:
        async with Client(manage_mcp("--surface", "full")) as client:
            return await run_session(client, loop_id=str(open_loop.pk), mute_value=MUTE)

    r = anyio.run(go)
    _assert_session(r, remote=False, loop_id=str(open_loop.pk))
    page = Page.objects.get(source_id="default", slug=r["slug"])
    assert PageRevision.objects.filter(page=page).count() == 2
    assert not LoopSuppression.objects.filter(value=MUTE).exists()


@committed_db
def test_http_session_calls_every_tool_as_the_keys_remote_caller(  # type: ignore[no-untyped-def]
    live_asgi, make_key, default_source, open_loop
) -> None:
    """Runs with the local embedding model: the search hit carries a real cosine."""
    issued = make_key(default_source)

    async def go() -> dict[str, Any]:
        async with http_client(f"{live_asgi}/mcp", issued.plaintext) as client:
            return await run_session(client, loop_id=str(open_loop.pk), mute_value=MUTE)

    r = anyio.run(go)
    _assert_session(r, remote=True, loop_id=str(open_loop.pk))
    hit = next(
        x for x in payload(r["search_after"])["results"] if x["slug"] == r["slug"]
    )
    assert 0 < hit["similarity"] <= 1
    page = Page.objects.get(source_id="default", slug=r["slug"])
    # Remote writes carry the server-stamped provenance of the key.
    assert page.frontmatter["provenance"]["key"] == f"key:{issued.api_key.prefix}"
    assert ApiKey.objects.get(pk=issued.api_key.pk).last_used_at is not None


@committed_db
def test_stdio_server_starts_loading_the_model_at_start() -> None:
    """The stdio server starts the local model's background load as it starts (the
    harness's first search used to load it, ~20 s on a busy machine); with provider
    ``none`` there is nothing to load and it says nothing."""
    said = {}
    for provider in ("local", "none"):
        done = subprocess.run(
            [sys.executable, "manage.py", "mcp"],
            input=b"",  # stdin closes at once: the server reports and stops
            capture_output=True,
            cwd=REPO_ROOT,
            env={
                **os.environ,
                **subprocess_env(),
                "BRAIN_EMBEDDING_PROVIDER": provider,
            },
            timeout=120,
            check=True,
        )
        said[provider] = done.stderr.decode()
    assert "embedding model loading in the background" in said["local"], said
    assert "brain MCP server on stdio" in said["none"], said
    assert "embedding model" not in said["none"], said
