"""What /api/docs says about each operation beyond its docstring (SPEC §4): a
description for every parameter and a valid example for every JSON request body, so
the docs' "Try it out" starts from a request the server accepts.

``document_operations(document)`` fills both into an OpenAPI document in place; a
parameter that already has a description keeps it. Examples are keyed by the
request schema's name, descriptions by parameter name.
"""

from __future__ import annotations

from typing import Any

PARAMETER_DOCS: dict[str, str] = {
    "source": "A source id to read (default: every source the key may read).",
    "source_id": "The source id, e.g. `default` or a mailbox source.",
    "limit": "How many results at most.",
    "offset": "How many results to skip (paging).",
    "type": "Keep pages of this Schema type only, e.g. `person`.",
    "query": "Words to search for, e.g. `offsite budget`.",
    "budget_tokens": "Keep whole results, best first, while they fit this many tokens "
    "(about 4 characters each).",
    "detail": "Include every health check line (trusted keys only).",
    "prefix": "Keep pages whose slug starts with this, e.g. `people/`.",
    "tag": "Keep pages with this tag.",
    "slug": "The page's slug, e.g. `people/dana-reyes`.",
    "status": "Keep rows in this status.",
    "loop_type": "Keep loops of this type, e.g. `unanswered_inbound`.",
    "counterparty": "Keep loops with this person (email address or page slug).",
    "as_of": "Replay the view as of this ISO 8601 time (no offset means UTC), or "
    "a date: the end of that day, UTC.",
    "top": "How many counterparty groups to return (1-50).",
    "job_id": "The job's id.",
    "kind": "Keep jobs of this kind, e.g. `sync_source`.",
}

REQUEST_EXAMPLES: dict[str, dict[str, Any]] = {
    "RecallIn": {"query": "offsite budget", "limit": 5},
    "RememberIn": {
        "fact": "Dana prefers meetings before noon.",
        "provenance": "call with Dana, 2026-03-02",
        "entity": "Dana Reyes",
        "kind": "preference",
    },
    "EntityIn": {"name": "Dana Reyes"},
    "SynthesizeIn": {"question": "What did we decide about the offsite?"},
    "ForgetIn": {"id": 1, "reason": "no longer true"},
    "ContextPackIn": {"entities": ["Dana Reyes"], "budget_tokens": 1500},
    "DeltaIn": {"since": "2026-01-01T00:00:00Z", "budget_tokens": 1500},
    "PushContextIn": {
        "turns": [{"role": "user", "text": "Can you draft a note to Dana Reyes?"}],
        "max_pages": 3,
    },
    "PageIn": {
        "title": "Offsite plan",
        "body": "We meet in Lisbon on May 4.",
        "type": "note",
    },
    "PageUpdateIn": {"mode": "append", "body": "Budget approved on March 3."},
    "JobIn": {"kind": "embed_pending", "params": {}},
    "LoopsCloseIn": {"id": "1", "status": "done", "note": "answered by phone"},
    "LoopsCorrectDueIn": {"id": "1", "due": "2026-06-30"},
    "LoopsMuteIn": {"kind": "sender", "value": "news@example.org"},
    "AskIn": {"question": "What is pgvector?", "save": False},
}


def document_operations(document: dict[str, Any]) -> dict[str, Any]:
    """Fill parameter descriptions and request-body examples into ``document``
    (an OpenAPI 3 dict) in place; returns it."""
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if not parameter.get("description"):
                    text = PARAMETER_DOCS.get(parameter.get("name", ""))
                    if text:
                        parameter["description"] = text
            media = (
                operation.get("requestBody", {})
                .get("content", {})
                .get("application/json")
            )
            if media is None:
                continue
            name = media.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
            if name in REQUEST_EXAMPLES and "example" not in media:
                media["example"] = REQUEST_EXAMPLES[name]
    return document
