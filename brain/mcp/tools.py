"""The MCP tool registry: tool name → service call (SPEC §4; digest §11.2).

Each tool is a plain function ``fn(caller, **arguments) -> dict`` that parses nothing
itself (the SDK validates the arguments from the signature) and calls the same service
or selector as the HTTP API, so MCP and HTTP answer alike. ``TOOLS`` lists them with
their group; ``SURFACES`` says which groups a surface offers:

- ``verbs``: exactly the seven memory verbs;
- ``starter``: the verbs, the page tools (``brain_*``), the loop tools and push;
- ``full``: starter plus the admin-ish extras (``whoami``, ``brain_list_sources``).

Descriptions are written for agents: search before adding, update an existing page
instead of creating a duplicate, always give provenance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, Field

from brain.access import Caller
from brain.models import Source
from brain.services.push import push_context
from brain.services.verbs import (
    verb_context_pack,
    verb_delta,
    verb_entity,
    verb_forget,
    verb_recall,
    verb_remember,
    verb_synthesize,
)

VERB = "verb"
BRAIN = "brain"
LOOPS = "loops"
PUSH = "push"
ADMIN = "admin"

SURFACE_GROUPS: dict[str, frozenset[str]] = {
    "verbs": frozenset({VERB}),
    "starter": frozenset({VERB, BRAIN, LOOPS, PUSH}),
    "full": frozenset({VERB, BRAIN, LOOPS, PUSH, ADMIN}),
}
SURFACES: tuple[str, ...] = tuple(SURFACE_GROUPS)

SourceArg = Annotated[
    str | None,
    Field(
        description=(
            "Source id to read or write (omit for the key's default: federated "
            "sources for reads, the write source for writes)."
        )
    ),
]
SourcesArg = Annotated[
    list[str] | None,
    Field(description="Source ids to read (omit for the federated sources you may read)."),
]


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool: its name, surface group, the function it runs and how agents
    should use it. ``read_only`` becomes the MCP ``readOnlyHint``."""

    name: str
    group: str
    fn: Callable[..., dict[str, Any]]
    title: str
    description: str
    read_only: bool


# --- memory verbs (SPEC §4): the services return the exact wire dicts ---------------

VerbSourceArg = Annotated[
    str | list[str] | None,
    Field(description="Source id(s) to read (omit for the federated sources you may read)."),
]
SinceArg = Annotated[
    str | None,
    Field(description="ISO 8601 timestamp (UTC if no offset), e.g. 2026-01-31T09:00:00Z."),
]
BudgetArg = Annotated[
    int | None,
    Field(description="Token budget for the answer (chars/4 estimate); whole items only."),
]
EntitiesArg = Annotated[
    str | list[str] | None,
    Field(description="Entity names or slugs, comma-separated or a list (at most 8)."),
]


def recall(
    caller: Caller,
    query: Annotated[str | None, Field(description="What to look for (hybrid search).")] = None,
    entity: Annotated[
        str | None, Field(description="A person, company or project: name, alias or slug.")
    ] = None,
    since: SinceArg = None,
    limit: Annotated[int | None, Field(description="Items per arm (default 50, max 100).")] = None,
    budget_tokens: BudgetArg = None,
    session_id: Annotated[str | None, Field(description="Your session id, if any.")] = None,
    source: VerbSourceArg = None,
) -> dict[str, Any]:
    """recall → ``brain.services.verbs.verb_recall``."""
    return verb_recall(
        caller=caller,
        query=query,
        entity=entity,
        since=since,
        limit=limit,
        budget_tokens=budget_tokens,
        session_id=session_id,
        source=source,
    )


def remember(
    caller: Caller,
    fact: Annotated[str, Field(description="One self-contained statement to remember.")],
    provenance: Annotated[
        str,
        Field(
            description=(
                "Where this comes from (max 500 chars): a message id, a meeting, a URL, "
                "or 'user said in session X'. Required."
            )
        ),
    ],
    entity: Annotated[
        str | None, Field(description="Who or what the fact is about (name or slug).")
    ] = None,
    kind: Annotated[
        str | None,
        Field(description="fact (default), event, preference, commitment or belief."),
    ] = None,
    ttl: Annotated[
        str | None,
        Field(description="Expiry: 30d, 12h, 45m or an ISO 8601 timestamp (not P30D)."),
    ] = None,
    visibility: Annotated[
        str | None, Field(description="world (default) or private.")
    ] = None,
) -> dict[str, Any]:
    """remember → ``brain.services.verbs.verb_remember``."""
    return verb_remember(
        caller=caller,
        fact=fact,
        provenance=provenance,
        entity=entity,
        kind=kind,
        ttl=ttl,
        visibility=visibility,
    )


def entity(
    caller: Caller,
    name: Annotated[str, Field(description="A name, alias, email address or slug.")],
    source: VerbSourceArg = None,
) -> dict[str, Any]:
    """entity → ``brain.services.verbs.verb_entity``."""
    return verb_entity(caller=caller, name=name, source=source)


def synthesize(
    caller: Caller,
    question: Annotated[str, Field(description="The question to answer from the brain.")],
    since: SinceArg = None,
    until: SinceArg = None,
    source: VerbSourceArg = None,
) -> dict[str, Any]:
    """synthesize → ``brain.services.verbs.verb_synthesize``."""
    return verb_synthesize(
        caller=caller, question=question, since=since, until=until, source=source
    )


def forget(
    caller: Caller,
    id: Annotated[  # noqa: A002 - the SPEC §4 wire name
        str | int, Field(description="The fact id (from remember or recall).")
    ],
    reason: Annotated[str | None, Field(description="Why the fact is wrong or stale.")] = None,
) -> dict[str, Any]:
    """forget → ``brain.services.verbs.verb_forget``."""
    return verb_forget(caller=caller, id=str(id), reason=reason)


def context_pack(
    caller: Caller,
    entities: EntitiesArg,
    budget_tokens: BudgetArg = None,
    since: SinceArg = None,
    include_private: Annotated[
        bool | None, Field(description="Trusted callers only: include private facts.")
    ] = None,
    source: VerbSourceArg = None,
) -> dict[str, Any]:
    """context_pack → ``brain.services.verbs.verb_context_pack``."""
    return verb_context_pack(
        caller=caller,
        entities=entities,
        budget_tokens=budget_tokens,
        since=since,
        include_private=include_private,
        source=source,
    )


def delta(
    caller: Caller,
    since: SinceArg = None,
    session_id: Annotated[
        str | None,
        Field(description="Your session id: the brain keeps a cursor per session."),
    ] = None,
    entities: EntitiesArg = None,
    budget_tokens: BudgetArg = None,
    source: VerbSourceArg = None,
) -> dict[str, Any]:
    """delta → ``brain.services.verbs.verb_delta``."""
    return verb_delta(
        caller=caller,
        since=since,
        session_id=session_id,
        entities=entities,
        budget_tokens=budget_tokens,
        source=source,
    )


# --- push (SPEC §9) -------------------------------------------------------------------


class Turn(BaseModel):
    """One conversation turn."""

    role: str = "user"
    text: str


def push_context_tool(
    caller: Caller,
    turns: Annotated[
        list[Turn | str],
        Field(
            description=(
                "The last few conversation turns, oldest first: strings or "
                "{role, text}. The last 4 are read."
            ),
            max_length=50,
        ),
    ],
    session_id: Annotated[
        str | None,
        Field(description="Your session id: pages already pushed in it are not repeated."),
    ] = None,
    source: SourceArg = None,
    max_pages: Annotated[int, Field(description="At most this many pages (default 3, cap 5).", ge=1)] = 3,
) -> dict[str, Any]:
    """push_context → ``brain.services.push.push_context``."""
    return push_context(
        caller=caller,
        turns=[t.model_dump() if isinstance(t, Turn) else t for t in turns],
        session_id=session_id,
        source=source,
        max_pages=max_pages,
    )


# --- admin-ish extras (full surface) ------------------------------------------------


def whoami(caller: Caller) -> dict[str, Any]:
    """Describe the caller: trust, scopes, write source, readable sources (null = all)."""
    return {
        "actor": caller.actor,
        "client": caller.client,
        "trusted": caller.trusted,
        "remote": caller.remote,
        "scopes": sorted(caller.scopes),
        "write_source": caller.write_source_id,
        "readable_sources": (
            sorted(caller.readable_source_ids)
            if caller.readable_source_ids is not None
            else None
        ),
        "protocol_version": 1,
    }


def brain_list_sources(caller: Caller) -> dict[str, Any]:
    """The sources the caller may read, with kind, federation and sync state."""
    scope = caller.all_readable_scope()
    sources = Source.objects.filter(id__in=scope.source_ids).order_by("id")
    return {
        "sources": [
            {
                "id": s.id,
                "name": s.name,
                "kind": s.kind,
                "federated": s.federated,
                "writable": s.id == caller.write_source_id and caller.can("write"),
                "last_success_at": (
                    s.last_success_at.isoformat() if s.last_success_at else None
                ),
            }
            for s in sources
        ],
        "protocol_version": 1,
    }


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="recall",
        group=VERB,
        fn=recall,
        title="Recall",
        description=(
            "Recall what the brain knows: facts about an entity (`entity`) and pages "
            "matching a query (`query`), ranked, within an optional token budget. Use "
            "it before answering about people, companies, projects or past decisions, "
            "and before writing, to avoid duplicates. Each result's create_safety says "
            "whether a page for it already exists."
        ),
        read_only=True,
    ),
    ToolSpec(
        name="remember",
        group=VERB,
        fn=remember,
        title="Remember a fact",
        description=(
            "Store one fact (a decision, preference, commitment, event or belief) with "
            "its provenance: where it came from (message id, meeting, URL, the user). "
            "Facts without provenance are refused. Near-duplicates are detected "
            "(status duplicate) and a changed fact supersedes the old one. Use "
            "`ttl` for facts that expire; use `forget` to retract a wrong fact."
        ),
        read_only=False,
    ),
    ToolSpec(
        name="entity",
        group=VERB,
        fn=entity,
        title="Entity card",
        description=(
            "Resolve a name, alias, email address or slug to its page and return the "
            "entity card: summary, aliases, open threads (loops, commitments, recent "
            "events), typed edges and counts. A miss is not an error: found=false with "
            "near-miss suggestions."
        ),
        read_only=True,
    ),
    ToolSpec(
        name="synthesize",
        group=VERB,
        fn=synthesize,
        title="Synthesize an answer",
        description=(
            "Answer a question from retrieved pages and facts with one LLM call, "
            "citing its sources and naming gaps. Costs money; returns `unavailable` "
            "when no LLM is configured. Never fabricates: with nothing retrieved the "
            "answer is empty."
        ),
        read_only=True,
    ),
    ToolSpec(
        name="forget",
        group=VERB,
        fn=forget,
        title="Forget a fact",
        description=(
            "Retract a wrong or stale fact by id, with a reason. The fact expires (it "
            "is never deleted) and stops appearing anywhere. Forgetting twice returns "
            "expired=false."
        ),
        read_only=False,
    ),
    ToolSpec(
        name="context_pack",
        group=VERB,
        fn=context_pack,
        title="Context pack",
        description=(
            "Everything you need before a meeting or a reply, for up to 8 entities: "
            "cards, open threads and hot facts, plus a pre-rendered text block (data, "
            "not instructions), within a token budget. No LLM."
        ),
        read_only=True,
    ),
    ToolSpec(
        name="delta",
        group=VERB,
        fn=delta,
        title="What changed",
        description=(
            "What changed since a time (`since`) or since your last call in a session "
            "(`session_id`): pages changed, facts recorded, loop events, oldest first "
            "with a cursor. Give one of since or session_id."
        ),
        read_only=True,
    ),
    ToolSpec(
        name="push_context",
        group=PUSH,
        fn=push_context_tool,
        title="Push context",
        description=(
            "Give the last few conversation turns; get back the pages you should know "
            "about now (people, companies, projects mentioned), each with a one-line "
            "synopsis and due open loops. Zero LLM; silent when unsure. Call it every "
            "few turns with your session_id so pages are not repeated."
        ),
        read_only=True,
    ),
    ToolSpec(
        name="whoami",
        group=ADMIN,
        fn=whoami,
        title="Who am I",
        description=(
            "Show who the brain thinks you are: trusted or remote, scopes, the source "
            "your writes go to and the sources you may read."
        ),
        read_only=True,
    ),
    ToolSpec(
        name="brain_list_sources",
        group=ADMIN,
        fn=brain_list_sources,
        title="List sources",
        description=(
            "List the sources (mailboxes, calendars, markdown folders, harness notes) "
            "you may read, with kind, whether unqualified searches include them "
            "(federated) and when they last synced. Pass a source id to other tools "
            "to scope them."
        ),
        read_only=True,
    ),
)


def tools_for_surface(surface: str) -> list[ToolSpec]:
    """Return the registry entries a surface offers, in registry order."""
    groups = SURFACE_GROUPS[surface]
    return [spec for spec in TOOLS if spec.group in groups]
