"""The memory-verb conformance contract, written here from its public description
(SPEC §4 and ``reference/gbrain-digest.md`` §7), judged the way the reference runner
judges: nothing of the reference implementation is copied.

- ``CASES``: the 20 reference cases, in order (they share state: a run marker, saved
  ids, the seeded entity ``people/conformance-<marker>``);
- ``TOOL_CHECKS``: the 8 tool-list checks (each memory verb is offered with an object
  input schema; the LLM-backed verb's description starts with ``[EXPENSIVE``);
- ``OWN_CASES``: our additions beyond the reference (dedup, no ghosts, private fences),
  run right after the reference cases on every transport.

Judging (``judge``): an error case passes when the call failed with the expected
code, the envelope validates (``detail`` a string) and, when asked, the suggestion is
a non-empty string; a success case passes when the body validates against the verb's
response schema (JSON Schema: extra fields allowed, a wrong type or a ``null`` where a
type is required fails, so a field that is absent unless asked for must be absent)
and every ``expect`` predicate holds over its dotted path (``equals``, ``oneOf``,
``type``, ``gte``, ``lte``, ``nonEmptyString``, ``absentOrNotContains``,
``notContains``, ``contains``; our ``duplicateOf``).

A transport is anything with ``call(verb, params) -> (ok, body)``, ``tools() ->
[{name, description, input_schema}]`` and ``seed_entity(slug, title) -> bool``;
``run_contract(transport)`` returns one ``Outcome`` per case and check.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

import jsonschema

if TYPE_CHECKING:
    from collections.abc import Sequence

VERBS = (
    "recall",
    "remember",
    "entity",
    "synthesize",
    "forget",
    "context_pack",
    "delta",
)
ERROR_CODES = [
    "invalid_params",
    "provenance_required",
    "not_found",
    "scope_denied",
    "unavailable",
    "budget_unsatisfiable",
    "internal",
]
SENTINEL = "PRIVATE-SENTINEL"

# --- Response schemas (SPEC §4; digest §7 items 4, 7, 10-16, 18) ----------------------

STR = {"type": "string"}
STR_OR_NULL = {"type": ["string", "null"]}
INT = {"type": "integer"}
NONNEG = {"type": "integer", "minimum": 0}
V1 = {"const": 1}
THREAD = {
    "type": "object",
    "required": ["kind", "text", "date"],
    "properties": {
        "kind": {"enum": ["commitment", "recent_event"]},
        "text": STR,
        "date": STR_OR_NULL,
    },
}

ENVELOPE = {
    "type": "object",
    "required": ["error", "message", "suggestion", "detail", "protocol_version"],
    "properties": {
        "error": {"enum": ERROR_CODES},
        "message": STR,
        "suggestion": STR,
        "detail": STR,
        "protocol_version": V1,
    },
}
REMEMBER = {
    "type": "object",
    "required": [
        "id",
        "status",
        "status_text",
        "entity_slug",
        "valid_until",
        "protocol_version",
    ],
    "properties": {
        "id": STR,
        "status": {"enum": ["inserted", "duplicate", "superseded"]},
        "status_text": STR,
        "entity_slug": STR_OR_NULL,
        "valid_until": STR_OR_NULL,
        "protocol_version": V1,
    },
}
FACT = {
    "type": "object",
    "required": ["id", "fact", "kind", "fact_id", "provenance"],
    "properties": {
        "id": INT,
        "fact": STR,
        "kind": {"enum": ["event", "preference", "commitment", "belief", "fact"]},
        "fact_id": STR,
        "provenance": STR,
        "entity_slug": STR_OR_NULL,
        "valid_until": STR_OR_NULL,
        "visibility": {"enum": ["world", "private"]},
    },
}
RESULT = {
    "type": "object",
    "required": ["slug", "title", "evidence", "create_safety", "provenance"],
    "properties": {
        "slug": STR,
        "title": STR,
        "chunk": STR,
        "evidence": {
            "enum": [
                "alias_hit",
                "exact_title_match",
                "high_vector_match",
                "keyword_exact",
                "weak_semantic",
            ]
        },
        "create_safety": {"enum": ["exists", "probable", "unknown"]},
        "provenance": STR,
    },
}
RECALL = {
    "type": "object",
    "required": ["protocol_version", "facts", "results", "total"],
    "properties": {
        "protocol_version": V1,
        "facts": {"type": "array", "items": FACT},
        "results": {"type": "array", "items": RESULT},
        "total": NONNEG,
        # Absent unless a budget is given; a string naming why, or absent.
        "budget_tokens": INT,
        "budget_used": NONNEG,
        "dropped_count": NONNEG,
        "search_degraded": STR,
    },
}
CARD = {
    "type": "object",
    "required": [
        "entity",
        "aka",
        "summary",
        "last_touched",
        "open_threads",
        "edges",
        "backlink_count",
        "active_fact_count",
    ],
    "properties": {
        "entity": {
            "type": "object",
            "required": ["slug", "title", "type"],
            "properties": {"slug": STR, "title": STR, "type": STR},
        },
        "aka": {"type": "array", "items": STR},
        "summary": STR,
        "last_touched": {
            "type": "object",
            "required": ["updated_at", "last_retrieved_at", "last_timeline_date"],
            "properties": {
                "updated_at": STR_OR_NULL,
                "last_retrieved_at": STR_OR_NULL,
                "last_timeline_date": STR_OR_NULL,
            },
        },
        "open_threads": {"type": "array", "maxItems": 3, "items": THREAD},
        "edges": {
            "type": "array",
            "maxItems": 10,
            "items": {
                "type": "object",
                "required": ["type", "direction", "slug"],
                "properties": {
                    "type": STR,
                    "direction": {"enum": ["out", "in"]},
                    "slug": STR,
                },
            },
        },
        "backlink_count": NONNEG,
        "active_fact_count": NONNEG,
    },
}
ENTITY = {
    "type": "object",
    "required": ["protocol_version", "found", "latency_ms"],
    "properties": {
        "protocol_version": V1,
        "found": {"type": "boolean"},
        "latency_ms": NONNEG,
        "card": CARD,
        "suggestions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["slug", "title", "create_safety"],
                "properties": {
                    "slug": STR,
                    "title": STR,
                    "create_safety": {"enum": ["exists", "probable", "unknown"]},
                },
            },
        },
    },
}
FORGET = {
    "type": "object",
    "required": ["id", "expired", "reason", "protocol_version"],
    "properties": {
        "id": STR,
        "expired": {"type": "boolean"},
        "reason": STR_OR_NULL,
        "protocol_version": V1,
    },
}
CONTEXT_PACK = {
    "type": "object",
    "required": ["protocol_version", "entities", "cards", "open_threads", "facts"],
    "properties": {
        "protocol_version": V1,
        "entities": {"type": "array", "items": STR},
        "cards": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["slug", "title", "summary", "open_threads"],
                "properties": {
                    "slug": STR,
                    "title": STR,
                    "summary": STR,
                    "open_threads": {"type": "array", "items": THREAD},
                },
            },
        },
        "open_threads": {"type": "array"},
        "facts": {"type": "array", "items": FACT},
    },
}
DELTA = {
    "type": "object",
    "required": ["protocol_version", "since", "threads", "has_more"],
    "properties": {
        "protocol_version": V1,
        "since": STR_OR_NULL,
        "threads": {"type": "array", "items": THREAD},
        "pages": {"type": "array"},
        "facts": {"type": "array", "items": FACT},
        "has_more": {"type": "boolean"},
    },
}


# --- Cases ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One contract case: call ``verb`` with ``params`` (``{{marker}}`` and
    ``{{id:KEY}}`` substituted) and judge the answer."""

    name: str
    verb: str
    params: dict[str, Any]
    schema: dict[str, Any] | None = None
    error: str | None = None
    suggestion: bool = False
    expect: tuple[tuple[str, str, Any], ...] = ()
    save: tuple[str, str] | None = None
    needs_entity: bool = False
    # "remote" or "trusted": run only for that kind of caller.
    only_for: str | None = None


ENTITY_SLUG = "people/conformance-{{marker}}"
FACT_TEXT = "Conformance {{marker}} prefers written agendas"

CASES: tuple[Case, ...] = (
    Case(
        "remember_without_provenance_is_invalid_params",
        "remember",
        {"fact": FACT_TEXT, "entity": ENTITY_SLUG},
        error="invalid_params",
    ),
    Case(
        "remember_blank_provenance_is_provenance_required",
        "remember",
        {"fact": FACT_TEXT, "provenance": "   ", "entity": ENTITY_SLUG},
        error="provenance_required",
        suggestion=True,
    ),
    Case(
        "remember_iso_duration_ttl_is_invalid_params",
        "remember",
        {
            "fact": FACT_TEXT,
            "provenance": "conformance run {{marker}}",
            "entity": ENTITY_SLUG,
            "ttl": "P30D",
        },
        error="invalid_params",
        suggestion=True,
    ),
    Case(
        "remember_fact",
        "remember",
        {
            "fact": FACT_TEXT,
            "provenance": "conformance run {{marker}}",
            "entity": ENTITY_SLUG,
            "kind": "fact",
        },
        schema=REMEMBER,
        expect=(
            ("id", "type", "string"),
            ("status", "oneOf", ["inserted", "duplicate", "superseded"]),
            ("protocol_version", "equals", 1),
        ),
        save=("fact", "id"),
    ),
    Case(
        "remember_ttl_30d_returns_iso_valid_until",
        "remember",
        {
            "fact": "Conformance {{marker}} is travelling this month",
            "provenance": "conformance run {{marker}}",
            "entity": ENTITY_SLUG,
            "kind": "event",
            "ttl": "30d",
        },
        schema=REMEMBER,
        expect=(("valid_until", "nonEmptyString", None),),
        save=("ttl_fact", "id"),
    ),
    Case(
        "remember_private_commitment",
        "remember",
        {
            "fact": f"{SENTINEL} {{{{marker}}}} promised to send the budget",
            "provenance": "conformance run {{marker}}",
            "entity": ENTITY_SLUG,
            "kind": "commitment",
            "visibility": "private",
        },
        schema=REMEMBER,
        expect=(("id", "type", "string"),),
    ),
    Case(
        "recall_by_entity",
        "recall",
        {"entity": ENTITY_SLUG},
        schema=RECALL,
        expect=(
            ("total", "gte", 1),
            ("facts.0.fact_id", "type", "string"),
            ("facts.0.provenance", "type", "string"),
        ),
    ),
    Case(
        "recall_with_budget_echoes_it",
        "recall",
        {"entity": ENTITY_SLUG, "budget_tokens": 10000},
        schema=RECALL,
        expect=(
            ("budget_tokens", "equals", 10000),
            ("budget_used", "gte", 0),
            ("budget_used", "lte", 10000),
            ("dropped_count", "gte", 0),
        ),
    ),
    Case(
        "recall_budget_smaller_than_an_item_drops_everything",
        "recall",
        {"entity": ENTITY_SLUG, "budget_tokens": 1},
        schema=RECALL,
        expect=(("total", "equals", 0), ("dropped_count", "gte", 1)),
    ),
    Case(
        "recall_query_with_budget",
        "recall",
        {"query": "conformance {{marker}}", "budget_tokens": 8000},
        schema=RECALL,
        expect=(("results", "type", "array"),),
    ),
    Case(
        "entity_found",
        "entity",
        {"name": ENTITY_SLUG},
        schema={**ENTITY, "required": [*ENTITY["required"], "card"]},
        expect=(
            ("found", "equals", True),
            ("card.entity.slug", "type", "string"),
            ("card.backlink_count", "gte", 0),
        ),
        needs_entity=True,
    ),
    Case(
        "entity_card_never_carries_private_fact_text",
        "entity",
        {"name": ENTITY_SLUG},
        schema=ENTITY,
        expect=(
            ("found", "equals", True),
            ("card.open_threads", "absentOrNotContains", SENTINEL),
        ),
        needs_entity=True,
    ),
    Case(
        "entity_miss_has_suggestions_array",
        "entity",
        {"name": "zq-no-such-entity-{{marker}}"},
        schema=ENTITY,
        expect=(("found", "equals", False), ("suggestions", "type", "array")),
    ),
    Case(
        "forget_ttl_fact",
        "forget",
        {"id": "{{id:ttl_fact}}", "reason": "conformance cleanup"},
        schema=FORGET,
        expect=(("expired", "equals", True),),
    ),
    Case(
        "forget_again_is_idempotent",
        "forget",
        {"id": "{{id:ttl_fact}}", "reason": "conformance cleanup"},
        schema=FORGET,
        expect=(("expired", "equals", False),),
    ),
    Case(
        "forget_unknown_id_is_not_found",
        "forget",
        {"id": "999999999", "reason": "conformance"},
        error="not_found",
        suggestion=True,
    ),
    Case(
        "synthesize_without_llm_is_unavailable",
        "synthesize",
        {"question": "What does conformance {{marker}} prefer?"},
        error="unavailable",
    ),
    Case(
        "context_pack_of_unknown_entity_is_empty_success",
        "context_pack",
        {"entities": "<nonexistent>", "budget_tokens": 500},
        schema=CONTEXT_PACK,
        expect=(("protocol_version", "equals", 1),),
    ),
    Case(
        "delta_since_is_echoed_in_milliseconds",
        "delta",
        {"since": "1970-01-01T00:00:00Z", "budget_tokens": 500},
        schema=DELTA,
        expect=(("since", "equals", "1970-01-01T00:00:00.000Z"),),
    ),
    Case(
        "delta_without_since_or_session_is_invalid_params",
        "delta",
        {},
        error="invalid_params",
        suggestion=True,
    ),
)

OWN_CASES: tuple[Case, ...] = (
    Case(
        "dedup_the_same_fact_again_is_a_duplicate",
        "remember",
        {
            "fact": FACT_TEXT,
            "provenance": "conformance run {{marker}}, again",
            "entity": ENTITY_SLUG,
            "kind": "fact",
        },
        schema=REMEMBER,
        expect=(("<root>", "duplicateOf", "{{id:fact}}"),),
        save=("fact_copy", "id"),
    ),
    Case(
        "no_ghosts_forget_the_fact",
        "forget",
        {"id": "{{id:fact}}", "reason": "conformance: no ghosts"},
        schema=FORGET,
        expect=(("expired", "equals", True),),
    ),
    Case(
        "no_ghosts_forget_any_copy",
        "forget",
        {"id": "{{id:fact_copy}}", "reason": "conformance: no ghosts"},
        schema=FORGET,
    ),
    Case(
        "no_ghosts_recall_by_entity_omits_it",
        "recall",
        {"entity": ENTITY_SLUG},
        schema=RECALL,
        expect=(("facts", "notContains", "prefers written agendas"),),
    ),
    Case(
        "no_ghosts_recall_by_query_omits_it",
        "recall",
        {"query": "written agendas"},
        schema=RECALL,
        expect=(("facts", "notContains", "prefers written agendas"),),
    ),
    Case(
        "no_ghosts_card_omits_it",
        "entity",
        {"name": ENTITY_SLUG},
        schema=ENTITY,
        expect=(("card", "absentOrNotContains", "prefers written agendas"),),
        needs_entity=True,
    ),
    Case(
        "private_fence_whole_card",
        "entity",
        {"name": ENTITY_SLUG},
        schema=ENTITY,
        expect=(("card", "absentOrNotContains", SENTINEL),),
        needs_entity=True,
    ),
    Case(
        "private_fence_context_pack",
        "context_pack",
        {"entities": ENTITY_SLUG},
        schema=CONTEXT_PACK,
        expect=(
            ("cards", "absentOrNotContains", SENTINEL),
            ("open_threads", "absentOrNotContains", SENTINEL),
            ("facts", "absentOrNotContains", SENTINEL),
            ("text", "absentOrNotContains", SENTINEL),
        ),
        needs_entity=True,
    ),
    Case(
        "private_fence_remote_recall",
        "recall",
        {"entity": ENTITY_SLUG},
        schema=RECALL,
        expect=(("facts", "notContains", SENTINEL),),
        only_for="remote",
    ),
    Case(
        "trusted_recall_shows_private_facts",
        "recall",
        {"entity": ENTITY_SLUG},
        schema=RECALL,
        expect=(("facts", "contains", SENTINEL),),
        only_for="trusted",
    ),
    Case(
        "private_fence_remote_delta",
        "delta",
        {"since": "1970-01-01T00:00:00Z"},
        schema=DELTA,
        expect=(
            ("facts", "notContains", SENTINEL),
            ("threads", "notContains", SENTINEL),
        ),
        only_for="remote",
    ),
)


# --- Judging -----------------------------------------------------------------------------

_MISSING = object()
_TYPES = {
    "string": str,
    "array": list,
    "object": dict,
    "boolean": bool,
    "number": (int, float),
}


def lookup(body: Any, path: str) -> Any:
    """The value at a dotted path (``facts.0.fact_id``), or ``_MISSING``."""
    value = body
    for part in path.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return _MISSING
    return value


def _duplicate_of(body: Any, want: str) -> str | None:
    """SPEC §2.4: the same fact again is ``duplicate`` with the first id; only when
    the brain says it could not check (``degraded_dedup: true``, no embeddings and
    no slot) may it be a plain ``inserted``."""
    status, got = body.get("status"), body.get("id")
    if status == "duplicate" and got == want:
        return None
    if body.get("degraded_dedup") is True and status == "inserted":
        return None
    return f"not a duplicate of {want}: status {status!r}, id {got!r}"


def _check(body: Any, path: str, op: str, want: Any) -> str | None:
    if op == "duplicateOf":
        return _duplicate_of(body, want)
    got = lookup(body, path)
    text = json.dumps(got, default=str) if got is not _MISSING else ""
    if op == "absentOrNotContains":
        return None if got is _MISSING or want not in text else f"{path} has {want!r}"
    if op == "notContains":
        if got is _MISSING:
            return f"{path} is absent"
        return f"{path} has {want!r}" if want in text else None
    if got is _MISSING:
        return f"{path} is absent"
    ok = {
        "equals": lambda: got == want and type(got) is type(want),
        "oneOf": lambda: got in want,
        "type": lambda: (
            isinstance(got, _TYPES[want])
            and not (want == "number" and isinstance(got, bool))
        ),
        "gte": lambda: isinstance(got, (int, float)) and got >= want,
        "lte": lambda: isinstance(got, (int, float)) and got <= want,
        "nonEmptyString": lambda: isinstance(got, str) and bool(got.strip()),
        "contains": lambda: want in text,
    }[op]()
    return None if ok else f"{path} {op} {want!r}: got {got!r}"


def schema_problems(schema: dict[str, Any], body: Any) -> list[str]:
    """Every JSON Schema violation of ``body``, as ``path: message`` lines."""
    validator = jsonschema.Draft202012Validator(schema)
    return [
        f"{'.'.join(str(p) for p in err.absolute_path) or '<root>'}: {err.message}"
        for err in sorted(validator.iter_errors(body), key=lambda e: list(e.path))
    ]


def judge(case: Case, *, ok: bool, body: Any) -> list[str]:
    """Problems with one answer (empty: the case passes). ``ok`` says whether the
    transport reported success; ``body`` is the JSON answer or the error envelope."""
    if case.error:
        if ok:
            return [f"expected error {case.error}, got success"]
        problems = schema_problems(ENVELOPE, body)
        if isinstance(body, dict) and body.get("error") != case.error:
            problems.append(f"error {body.get('error')!r}, want {case.error!r}")
        if case.suggestion and not str((body or {}).get("suggestion") or "").strip():
            problems.append("no suggestion")
        return problems
    if not ok:
        return [f"unexpected error: {json.dumps(body)[:300]}"]
    problems = schema_problems(case.schema, body) if case.schema else []
    problems += [
        p for path, op, want in case.expect if (p := _check(body, path, op, want))
    ]
    return problems


# --- Running -------------------------------------------------------------------------


class Transport(Protocol):
    """What ``run_contract`` drives (see the module docstring)."""

    remote: bool

    def call(self, verb: str, params: dict[str, Any]) -> tuple[bool, Any]: ...

    def tools(self) -> list[dict[str, Any]]: ...

    def seed_entity(self, slug: str, title: str) -> bool: ...


@dataclass
class Outcome:
    """One case's result on one transport."""

    name: str
    passed: bool
    problems: list[str] = field(default_factory=list)
    group: str = "reference"


def _substitute(value: Any, marker: str, saved: dict[str, str]) -> Any:
    if isinstance(value, str):
        value = value.replace("{{marker}}", marker)
        return re.sub(
            r"\{\{id:(\w+)\}\}", lambda m: str(saved.get(m.group(1), "missing")), value
        )
    if isinstance(value, dict):
        return {k: _substitute(v, marker, saved) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, marker, saved) for v in value]
    if isinstance(value, tuple):
        return tuple(_substitute(v, marker, saved) for v in value)
    return value


def tool_checks(tools: Sequence[dict[str, Any]]) -> list[Outcome]:
    """The 8 tool-list checks over a transport's tool list."""
    by_name = {t["name"]: t for t in tools}
    out = []
    for verb in VERBS:
        tool = by_name.get(verb)
        problems = []
        if tool is None:
            problems.append(f"{verb} is not listed")
        elif (tool.get("input_schema") or {}).get("type") != "object":
            problems.append(f"{verb} has no object input schema")
        out.append(Outcome(f"tool_listed_{verb}", not problems, problems, "tools"))
    description = (by_name.get("synthesize") or {}).get("description") or ""
    expensive = description.startswith("[EXPENSIVE")
    out.append(
        Outcome(
            "tool_synthesize_description_starts_with_expensive",
            expensive,
            [] if expensive else [f"description starts {description[:30]!r}"],
            "tools",
        )
    )
    return out


def run_contract(transport: Transport, *, marker: str | None = None) -> list[Outcome]:
    """Run the tool checks, the 20 reference cases and our own cases, in order."""
    marker = marker or uuid.uuid4().hex[:8]
    saved: dict[str, str] = {}
    outcomes = tool_checks(transport.tools())
    seeded = transport.seed_entity(
        ENTITY_SLUG.replace("{{marker}}", marker), f"Conformance {marker}"
    )
    kind = "remote" if transport.remote else "trusted"
    for group, cases in (("reference", CASES), ("own", OWN_CASES)):
        for case in cases:
            if case.only_for and case.only_for != kind:
                continue
            if case.needs_entity and not seeded:
                outcomes.append(
                    Outcome(
                        case.name,
                        passed=False,
                        problems=["entity not seeded"],
                        group=group,
                    )
                )
                continue
            concrete = replace(
                case,
                params=_substitute(case.params, marker, saved),
                expect=_substitute(case.expect, marker, saved),
            )
            ok, body = transport.call(case.verb, concrete.params)
            problems = judge(concrete, ok=ok, body=body)
            if case.save and ok:
                saved[case.save[0]] = str(lookup(body, case.save[1]))
            outcomes.append(Outcome(case.name, not problems, problems, group))
    return outcomes


def summary(outcomes: Sequence[Outcome], group: str | None = None) -> str:
    """``passed of total`` for the reference cases and tool checks (``group`` None)
    or one group, followed by each failure."""
    chosen = [
        o
        for o in outcomes
        if (o.group in ("reference", "tools") if group is None else o.group == group)
    ]
    passed = sum(o.passed for o in chosen)
    lines = [f"{passed} of {len(chosen)}"]
    lines += [
        f"  FAIL {o.name}: {'; '.join(o.problems)}" for o in chosen if not o.passed
    ]
    return "\n".join(lines)
