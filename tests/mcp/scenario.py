"""One agent session that calls every MCP tool, shared by the stdio and HTTP tests.

``run_session(client, loop_id=…)`` plays a harness that searches before adding,
adds a page, finds it, updates it by append, remembers and recalls a fact, asks for
cards, packs, deltas and pushed context, works an open loop, and hits each kind of
error. It returns every result by step name; the tests assert on them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp import Client

TITLE = "Quokka Expansion Project"
BODY = "Plan to open the quokka enclosure at Perth zoo.\n\nBudget owner: Ada Lovelace."
APPENDED = "Update: the council approved the enclosure on 2026-11-20."


async def run_session(
    client: Client, *, loop_id: str, mute_value: str
) -> dict[str, Any]:
    """Call every tool of the full surface in one session (see module doc)."""
    r: dict[str, Any] = {}
    call = client.call_tool
    r["tools"] = {t.name for t in (await client.list_tools()).tools}
    r["whoami"] = await call("whoami", {})
    r["sources"] = await call("brain_list_sources", {})
    r["search_before"] = await call("brain_search", {"query": "quokka enclosure"})
    r["add"] = await call(
        "brain_add",
        {
            "title": TITLE,
            "body": BODY,
            "type": "project",
            "tags": ["zoo", "perth"],
            "provenance": "kickoff meeting notes, 2026-11-18",
        },
    )
    slug = (r["add"].structured_content or {}).get("slug", "")
    r["search_after"] = await call("brain_search", {"query": "quokka enclosure"})
    r["add_again"] = await call(
        "brain_add",
        {"title": TITLE, "body": "duplicate", "type": "project", "provenance": "x"},
    )
    r["update"] = await call(
        "brain_update",
        {"slug": slug, "body": APPENDED, "provenance": "council minutes 2026-11-20"},
    )
    r["get"] = await call("brain_get_page", {"slug": slug})
    r["get_missing"] = await call("brain_get_page", {"slug": "projects/no-such-page"})
    r["list"] = await call("brain_list_pages", {"type": "project"})
    r["query"] = await call("brain_query", {"question": "Who owns the quokka budget?"})
    r["ask"] = await call("brain_ask", {"question": "When do quokkas breed?"})
    r["remember"] = await call(
        "remember",
        {
            "fact": "The quokka enclosure opens in March 2027.",
            "provenance": "council minutes 2026-11-20",
            "entity": slug,
        },
    )
    fact_id = (r["remember"].structured_content or {}).get("id", "0")
    r["remember_blank"] = await call(
        "remember", {"fact": "x", "provenance": "   ", "entity": slug}
    )
    r["recall"] = await call("recall", {"entity": slug, "query": "quokka"})
    r["entity"] = await call("entity", {"name": TITLE})
    r["context_pack"] = await call(
        "context_pack", {"entities": slug, "budget_tokens": 2000}
    )
    r["delta"] = await call("delta", {"since": "1970-01-01T00:00:00Z"})
    r["synthesize"] = await call("synthesize", {"question": "When does it open?"})
    r["forget"] = await call("forget", {"id": fact_id, "reason": "date moved"})
    r["forget_again"] = await call("forget", {"id": fact_id, "reason": "date moved"})
    r["push"] = await call(
        "push_context",
        {"turns": [f"Can you check where the {TITLE} stands?"], "session_id": "s-1"},
    )
    r["open_loops"] = await call("open_loops", {})
    r["waiting"] = await call("waiting", {"top": 10})
    r["waiting_bad"] = await call("waiting", {"as_of": "last tuesday"})
    r["close"] = await call("loops_close", {"id": loop_id, "note": "sent it"})
    r["open_loops_after"] = await call("open_loops", {})
    r["mute"] = await call("loops_mute", {"kind": "sender", "value": mute_value})
    r["unmute"] = await call("loops_unmute", {"kind": "sender", "value": mute_value})
    # Errors: unknown tool, bad argument type, missing argument, unknown argument.
    r["unknown_tool"] = await call("brain_delete_everything", {})
    r["bad_type"] = await call("brain_search", {"query": "quokka", "limit": "many"})
    r["missing"] = await call("remember", {"fact": "no provenance given"})
    r["unknown_arg"] = await call("brain_search", {"q": "quokka"})
    r["slug"] = slug
    return r
