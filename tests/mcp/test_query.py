"""SPEC §4 ``query`` (MCP ``brain_query``): an answer with citations from retrieved
pages, composed by the LLM (faked at the HTTP layer); ``unavailable`` without one
(covered in the session tests)."""

from __future__ import annotations

import json

import anyio
import httpx2

from brain.access import local_caller
from brain.services.pages import page_add
from tests.mcp.conftest import committed_db, http_client, payload

ANSWER = "Ada Lovelace owns the quokka enclosure budget [1]."


def _reply(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(
        200,
        json={
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-5",
            "content": [{"type": "text", "text": ANSWER}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 120, "output_tokens": 12},
        },
    )


@committed_db
def test_brain_query_answers_with_citations_from_retrieved_pages(  # type: ignore[no-untyped-def]
    live_asgi, make_key, default_source, no_embeddings, fake_anthropic
) -> None:
    written = page_add(
        source=default_source,
        actor=local_caller(),
        title="Quokka Enclosure Budget",
        type_name="project",
        body="Ada Lovelace owns the quokka enclosure budget for 2027.",
    )
    seen = fake_anthropic(_reply)
    key = make_key(default_source).plaintext

    async def go():  # type: ignore[no-untyped-def]
        async with http_client(f"{live_asgi}/mcp", key) as client:
            return await client.call_tool(
                "brain_query", {"question": "Who owns the quokka budget?"}
            )

    out = payload(anyio.run(go))
    assert out["answer"] == ANSWER
    assert out["synthesis_status"] == "ok"
    assert [(c["n"], c["slug"], c["title"]) for c in out["citations"]] == [
        (1, written.page.slug, "Quokka Enclosure Budget")
    ]
    # The model saw the retrieved page, and only through the brain's prompt.
    assert len(seen) == 1
    prompt = json.loads(seen[0].content)["messages"][0]["content"]
    assert "Ada Lovelace owns the quokka enclosure budget for 2027." in prompt
