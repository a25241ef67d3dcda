"""The MCP tool registry: tool name → service call (SPEC §4; digest §11.2).

Each tool is a plain function ``fn(caller, **arguments) -> dict`` that parses nothing
itself (the SDK validates the arguments from the signature) and calls the same
operation as the HTTP API (``interfaces.operations``, or a ``verb_*`` service), so MCP
and HTTP answer alike. ``TOOLS`` lists them with
their group; ``SURFACES`` says which groups a surface offers:

- ``verbs``: exactly the seven memory verbs;
- ``starter``: the verbs, the page tools (``brain_*``), the loop tools and push;
- ``full``: starter plus the admin-ish extras (``whoami``, ``brain_list_sources``).

Descriptions are written for agents: search before adding, update an existing page
instead of creating a duplicate, always give provenance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field

from brain.access import Caller  # noqa: TC001 - resolved at runtime for the schemas
from brain.exceptions import PROTOCOL_VERSION, NotFound
from brain.selectors import page_get, page_list
from brain.services.ask import brain_ask
from brain.services.pages import page_update
from brain.services.verbs import (
    verb_context_pack,
    verb_delta,
    verb_entity,
    verb_forget,
    verb_recall,
    verb_remember,
    verb_synthesize,
)
from interfaces.operations import (
    op_brain_list_sources,
    op_loops_close,
    op_loops_mute,
    op_loops_unmute,
    op_open_loops,
    op_push_context,
    op_search,
    op_waiting,
    op_whoami,
    page_out,
    refuse_update_elsewhere,
    write_out,
)
from interfaces.page_fields import PageFields, page_add_from

if TYPE_CHECKING:
    from collections.abc import Callable

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
    # When set, the tool's arguments are this model's fields (shared with HTTP) and
    # ``fn(caller, model_instance)`` runs instead of ``fn(caller, **arguments)``.
    arguments: type[BaseModel] | None = None


# --- memory verbs (SPEC §4): the services return the exact wire dicts ---------------

VerbSourceArg = Annotated[
    str | list[str] | None,
    Field(
        description="Source id(s) to read (omit: the federated sources you may read)."
    ),
]
SinceArg = Annotated[
    str | None,
    Field(
        description="ISO 8601 timestamp (UTC if no offset), e.g. 2026-01-31T09:00:00Z."
    ),
]
BudgetArg = Annotated[
    int | None,
    Field(
        description="Token budget for the answer (chars/4 estimate); whole items only."
    ),
]
EntitiesArg = Annotated[
    str | list[str] | None,
    Field(description="Entity names or slugs, comma-separated or a list (at most 8)."),
]


def recall(
    caller: Caller,
    *,
    query: Annotated[
        str | None, Field(description="What to look for (hybrid search).")
    ] = None,
    entity: Annotated[
        str | None,
        Field(description="A person, company or project: name, alias or slug."),
    ] = None,
    since: SinceArg = None,
    limit: Annotated[
        int | None, Field(description="Items per arm (default 50, max 100).")
    ] = None,
    budget_tokens: BudgetArg = None,
    session_id: Annotated[
        str | None, Field(description="Your session id, if any.")
    ] = None,
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
    *,
    fact: Annotated[
        str, Field(description="One self-contained statement to remember.")
    ],
    provenance: Annotated[
        str,
        Field(
            description=(
                "Where this comes from (max 500 chars): a message id, a meeting, "
                "a URL, "
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
        str | None,
        Field(
            description="world or private (default: the source's, as for pages: private in mail sources, world in harness and markdown ones)."
        ),
    ] = None,
    slot: Annotated[
        str | None,
        Field(
            description=(
                "Optional attribute the fact sets (employer, location, role, "
                "preference:<topic>, status[<identifier>] ...); read from the text "
                "when omitted. A new value in the same slot supersedes the old one."
            )
        ),
    ] = None,
    value: Annotated[
        str | None,
        Field(description="Optional value of 'slot' (e.g. 'Acme'); needs 'slot'."),
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
        slot=slot,
        value=value,
    )


def entity(
    caller: Caller,
    *,
    name: Annotated[str, Field(description="A name, alias, email address or slug.")],
    source: VerbSourceArg = None,
) -> dict[str, Any]:
    """entity → ``brain.services.verbs.verb_entity``."""
    return verb_entity(caller=caller, name=name, source=source)


def synthesize(
    caller: Caller,
    *,
    question: Annotated[
        str, Field(description="The question to answer from the brain.")
    ],
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
    *,
    id: Annotated[  # noqa: A002 - the SPEC §4 wire name
        str | int, Field(description="The fact id (from remember or recall).")
    ],
    reason: Annotated[
        str | None, Field(description="Why the fact is wrong or stale.")
    ] = None,
) -> dict[str, Any]:
    """forget → ``brain.services.verbs.verb_forget``."""
    return verb_forget(caller=caller, id=str(id), reason=reason)


def context_pack(
    caller: Caller,
    *,
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
    *,
    since: SinceArg = None,
    slug: Annotated[
        str | None,
        Field(
            description="With since: the slug of next_cursor, to continue after "
            "that item (send next_cursor back whole).",
            max_length=300,
        ),
    ] = None,
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
        slug=slug,
        session_id=session_id,
        entities=entities,
        budget_tokens=budget_tokens,
        source=source,
    )


# --- page tools (SPEC §2.3, §3, §4): one write function, scoped selectors ------------

ProvenanceArg = Annotated[
    str,
    Field(
        min_length=1,
        max_length=500,
        description=(
            "Where this knowledge comes from: a message id, a meeting, a URL, a file, "
            "or 'user said in session X'. Required."
        ),
    ),
]
TagsArg = Annotated[
    list[str] | None, Field(description="Tags, e.g. ['customer', 'q3'].")
]


def _as_list(value: str | list[str] | None) -> list[str] | None:
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


def brain_search(
    caller: Caller,
    *,
    query: Annotated[
        str, Field(description="Words to look for (hybrid keyword + vector).")
    ],
    source: VerbSourceArg = None,
    type: Annotated[  # noqa: A002 - the Schema's word
        str | None, Field(description="Only pages of this type, e.g. person, project.")
    ] = None,
    limit: Annotated[
        int, Field(ge=1, le=100, description="Results (default 10).")
    ] = 10,
    budget_tokens: BudgetArg = None,
) -> dict[str, Any]:
    """brain_search → ``interfaces.operations.op_search``."""
    return op_search(
        caller,
        query=query,
        sources=_as_list(source),
        types=[type] if type else None,
        limit=limit,
        budget_tokens=budget_tokens,
    )


def brain_get_page(
    caller: Caller,
    *,
    slug: Annotated[str, Field(description="The page slug, e.g. people/ada-lovelace.")],
    source: SourceArg = None,
) -> dict[str, Any]:
    """brain_get_page → ``brain.selectors.page_get`` in the caller's read scope."""
    scope = caller.read_scope([source] if source else None)
    return page_out(page_get(scope=scope, slug=slug))


def brain_list_pages(
    caller: Caller,
    *,
    type: Annotated[  # noqa: A002 - the Schema's word
        str | None, Field(description="Only this page type, e.g. person.")
    ] = None,
    prefix: Annotated[
        str | None, Field(description="Slug prefix, e.g. people/.")
    ] = None,
    tag: Annotated[str | None, Field(description="Only pages with this tag.")] = None,
    source: SourceArg = None,
    limit: Annotated[
        int, Field(ge=1, le=200, description="Page size (default 50).")
    ] = 50,
    offset: Annotated[int, Field(ge=0, description="Skip this many (paging).")] = 0,
) -> dict[str, Any]:
    """brain_list_pages → ``brain.selectors.page_list``, newest first."""
    scope = caller.read_scope([source] if source else None)
    qs = page_list(scope=scope, types=[type] if type else None, prefix=prefix, tag=tag)
    return {
        "items": [
            {
                "slug": p.slug,
                "source_id": p.source_id,
                "type": p.type.name,
                "title": p.title,
                "summary": p.summary,
                "tags": list(p.tags),
                "visibility": p.visibility,
                "updated_at": p.updated_at.isoformat(),
            }
            for p in qs[offset : offset + limit]
        ],
        "count": qs.count(),
        "limit": limit,
        "offset": offset,
        "protocol_version": PROTOCOL_VERSION,
    }


def brain_add(caller: Caller, page: PageFields) -> dict[str, Any]:
    """brain_add → ``interfaces.page_fields.page_add_from``, the call behind HTTP
    ``POST /api/pages``: the same fields make the same page (issue 47)."""
    return write_out(page_add_from(caller, page))


def brain_update(
    caller: Caller,
    *,
    slug: Annotated[str, Field(description="Slug of the existing page.")],
    provenance: ProvenanceArg,
    body: Annotated[
        str | None,
        Field(description="Text to append (append) or the new body (replace)."),
    ] = None,
    mode: Annotated[
        Literal["append", "replace"],
        Field(description="append (default): add to the body; replace: swap the body."),
    ] = "append",
    title: Annotated[
        str | None, Field(description="New title (kept if omitted).")
    ] = None,
    summary: Annotated[
        str | None, Field(description="New summary (kept if omitted).")
    ] = None,
    tags: Annotated[
        list[str] | None, Field(description="New tag list (kept if omitted).")
    ] = None,
    allow_empty: Annotated[
        bool, Field(description="Allow replacing a non-empty body with nothing.")
    ] = False,
    base_revision: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=64,
            description=(
                "The revision brain_get_page returned: if the page changed since, "
                "nothing is written and the error is `conflict` with the current "
                "revision and a diff. Omit it for an append that does not depend "
                "on what is there."
            ),
        ),
    ] = None,
    source: SourceArg = None,
) -> dict[str, Any]:
    """brain_update → ``brain.services.pages.page_update`` in the write source; a
    page readable only in another source is ``scope_denied`` naming it; a stale
    ``base_revision`` is ``conflict`` (SPEC §4)."""
    target = caller.write_source(source)
    try:
        result = page_update(
            mode=mode,
            source=target,
            actor=caller,
            slug=slug,
            title=title,
            body=body,
            summary=summary,
            tags=tags,
            allow_empty=allow_empty,
            provenance={"from": provenance, "ingested_via": "mcp:brain_update"},
            base_revision=base_revision,
        )
    except NotFound:
        refuse_update_elsewhere(caller, slug=slug, write_source_id=target.id)
        raise
    return write_out(result)


def brain_query(
    caller: Caller,
    *,
    question: Annotated[
        str, Field(min_length=1, description="The question to answer.")
    ],
    source: VerbSourceArg = None,
    since: SinceArg = None,
    until: SinceArg = None,
) -> dict[str, Any]:
    """brain_query → ``brain.services.verbs.verb_synthesize`` (retrieval, one LLM
    answer), shown as the answer plus the retrieved pages it cites."""
    out = verb_synthesize(
        caller=caller, question=question, since=since, until=until, source=source
    )
    return {
        "question": question,
        "answer": out["answer"],
        "citations": [
            {
                "n": s["n"],
                "slug": s["slug"],
                "title": s["title"],
                "excerpt": s["excerpt"],
            }
            for s in out["sources"]
            if s.get("kind") == "page"
        ],
        "gaps": out.get("gaps", []),
        "synthesis_status": out.get("synthesis_status"),
        "cost": out.get("cost"),
        "warnings": out.get("warnings", []),
        "protocol_version": PROTOCOL_VERSION,
    }


# --- loop tools (SPEC §4, §5): remote callers get redacted loops (§5.5) -------------


def open_loops(
    caller: Caller,
    *,
    status: Annotated[
        Literal["open", "done", "dropped", "stale"], Field(description="Default open.")
    ] = "open",
    loop_type: Annotated[
        str | None,
        Field(
            description=(
                "commitment_owed_by_me, commitment_owed_to_me, unanswered_inbound, "
                "unanswered_outbound or decision_pending."
            )
        ),
    ] = None,
    counterparty: Annotated[
        str | None, Field(description="A person's email address or page slug.")
    ] = None,
    source: SourceArg = None,
    limit: Annotated[
        int, Field(ge=1, le=500, description="At most (default 50).")
    ] = 50,
    include_snoozed: Annotated[
        bool,
        Field(
            description=(
                "Also list open loops a curator snoozed into the future (default "
                "false: they are left out until their date and counted in "
                "snoozed_left_out)."
            )
        ),
    ] = False,
) -> dict[str, Any]:
    """open_loops → ``interfaces.operations.op_open_loops`` (the same fields as
    ``GET /api/open_loops``)."""
    return op_open_loops(
        caller,
        status=status,
        loop_type=loop_type,
        counterparty=counterparty,
        source=source,
        limit=limit,
        include_snoozed=include_snoozed,
    )


def waiting(
    caller: Caller,
    *,
    source: SourceArg = None,
    as_of: Annotated[
        str | None,
        Field(
            description=(
                "Replay another day: an ISO 8601 date (its end, UTC) or time. "
                "Default now (a mailbox file: its newest message)."
            )
        ),
    ] = None,
    top: Annotated[
        int | None,
        Field(ge=1, le=50, description="Only the first N groups (default all)."),
    ] = None,
) -> dict[str, Any]:
    """waiting → ``interfaces.operations.op_waiting`` (SPEC §5.5), the same view as
    ``GET /api/waiting`` and ``manage.py waiting``."""
    return op_waiting(caller, source=source, as_of=as_of, top=top)


def loops_close(
    caller: Caller,
    *,
    id: Annotated[  # noqa: A002 - the open_loops field name
        str | int, Field(description="The loop id from open_loops.")
    ],
    status: Annotated[
        Literal["done", "dropped"], Field(description="done (default) or dropped.")
    ] = "done",
    note: Annotated[
        str | None, Field(description="What happened, e.g. 'sent the proposal'.")
    ] = None,
) -> dict[str, Any]:
    """loops_close → ``interfaces.operations.op_loops_close`` (expires its
    commitment fact)."""
    return op_loops_close(caller, loop_id=str(id), status=status, note=note)


MuteKindArg = Annotated[
    Literal["sender", "thread"],
    Field(description="sender (an email address) or thread."),
]
MuteValueArg = Annotated[
    str, Field(min_length=1, max_length=320, description="The address or thread id.")
]


def loops_mute(
    caller: Caller, *, kind: MuteKindArg, value: MuteValueArg, source: SourceArg = None
) -> dict[str, Any]:
    """loops_mute → ``interfaces.operations.op_loops_mute``."""
    return op_loops_mute(caller, kind=kind, value=value, source=source)


def loops_unmute(
    caller: Caller, *, kind: MuteKindArg, value: MuteValueArg, source: SourceArg = None
) -> dict[str, Any]:
    """loops_unmute → ``interfaces.operations.op_loops_unmute``."""
    return op_loops_unmute(caller, kind=kind, value=value, source=source)


# --- push (SPEC §9) -------------------------------------------------------------------


class Turn(BaseModel):
    """One conversation turn."""

    role: str = "user"
    text: str


def push_context_tool(
    caller: Caller,
    *,
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
        Field(
            description="Your session id: pages already pushed in it are not repeated."
        ),
    ] = None,
    source: SourceArg = None,
    max_pages: Annotated[
        int, Field(description="At most this many pages (default 3, cap 5).", ge=1)
    ] = 3,
) -> dict[str, Any]:
    """push_context → ``interfaces.operations.op_push_context``."""
    return op_push_context(
        caller,
        turns=[t.model_dump() if isinstance(t, Turn) else t for t in turns],
        session_id=session_id,
        source=source,
        max_pages=max_pages,
    )


def brain_ask_tool(
    caller: Caller,
    *,
    question: Annotated[str, Field(min_length=1, description="The question.")],
    save: Annotated[
        bool, Field(description="Write the answer as a page (needs write).")
    ] = False,
    tags: TagsArg = None,
    max_searches: Annotated[
        int, Field(ge=1, le=10, description="Web searches allowed (default 5).")
    ] = 5,
) -> dict[str, Any]:
    """brain_ask → ``brain.services.ask.brain_ask``."""
    return brain_ask(
        caller=caller,
        question=question,
        save=save,
        tags=tags,
        max_searches=max_searches,
    )


# --- admin-ish extras (full surface) ------------------------------------------------


def whoami(caller: Caller) -> dict[str, Any]:
    """The caller: trust, scopes, write source, readable sources (null = all)."""
    return op_whoami(caller)


def brain_list_sources(caller: Caller) -> dict[str, Any]:
    """The sources the caller may read, with kind, federation and sync state."""
    return op_brain_list_sources(caller)


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
            "[EXPENSIVE: one LLM call, costs money] Answer a question from retrieved "
            "pages and facts, citing its sources and naming gaps. Returns "
            "`unavailable` when no LLM is configured; use recall or context_pack "
            "(no LLM) first. Never fabricates: with nothing retrieved the answer is "
            "empty."
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
            "with a cursor. Give one of since or session_id; to page on with since, "
            "send next_cursor's since and slug."
        ),
        read_only=True,
    ),
    ToolSpec(
        name="brain_search",
        group=BRAIN,
        fn=brain_search,
        title="Search pages",
        description=(
            "Hybrid search (keyword + meaning) over the pages you may read. Each "
            "result has slug, title, source_id, similarity (cosine), chunk (the "
            "matching excerpt), score (0..1, comparable across queries), "
            "matched_terms, evidence, create_safety and duplicates (slugs of "
            "near-copies folded into the result). ALWAYS search "
            "before brain_add: when a result's create_safety is 'exists' or "
            "'probable', that page already exists, so read it with brain_get_page "
            "and change it with brain_update."
        ),
        read_only=True,
    ),
    ToolSpec(
        name="brain_get_page",
        group=BRAIN,
        fn=brain_get_page,
        title="Get a page",
        description=(
            "Read one page by slug: title, type, frontmatter, tags, visibility, the "
            "full markdown body and its revision. Use it before brain_update to see "
            "what is there (send the revision back as base_revision)."
        ),
        read_only=True,
    ),
    ToolSpec(
        name="brain_add",
        group=BRAIN,
        fn=brain_add,
        title="Add a page",
        description=(
            "Create a NEW page (person, company, project, meeting, note…). Search "
            "first (brain_search): if the page exists, call brain_update instead of "
            "creating a duplicate; adding an existing slug is refused. Give "
            "provenance: where the knowledge comes from (message id, meeting, URL, "
            "the user). Write the body as durable facts, not chat; the slug comes "
            "from the title under the type's folder (people/, companies/…). The "
            "arguments are POST /api/pages' fields; provenance is an object such as "
            '{"note": "kickoff meeting 2026-11-18"} (a plain string is still taken '
            'and kept as {"note": string}).'
        ),
        read_only=False,
        arguments=PageFields,
    ),
    ToolSpec(
        name="brain_update",
        group=BRAIN,
        fn=brain_update,
        title="Update a page",
        description=(
            "Change an existing page instead of adding a duplicate. mode 'append' "
            "(default) adds your text to the end of the body and keeps the "
            "frontmatter (title, summary, tags); 'replace' swaps the body and still "
            "keeps title, summary and tags unless you give new ones. Give provenance "
            "for what you add. Every change is a revision that can be reverted. "
            "When your text depends on what you read (a replace), send "
            "base_revision: a page changed since answers `conflict` with a diff."
        ),
        read_only=False,
    ),
    ToolSpec(
        name="brain_ask",
        group=BRAIN,
        fn=brain_ask_tool,
        title="Ask the web",
        description=(
            "[EXPENSIVE: one LLM call with web search, metered against a daily cap] "
            "Answer a question from the web with citations (url, title, quoted "
            "span). With save=true the answer becomes a page in your write source "
            "(provenance brain_ask) that brain_search then finds. Use it for facts "
            "the brain does not hold; use recall first. Without an LLM configured: "
            "`unavailable`, naming the setting."
        ),
        read_only=False,
    ),
    ToolSpec(
        name="brain_query",
        group=BRAIN,
        fn=brain_query,
        title="Ask the brain",
        description=(
            "[EXPENSIVE: one LLM call, costs money] Answer a question in prose from "
            "retrieved pages, with numbered citations (slug, title, excerpt) and the "
            "gaps it could not answer; returns `unavailable` when no LLM is "
            "configured: then use brain_search or recall."
        ),
        read_only=True,
    ),
    ToolSpec(
        name="brain_list_pages",
        group=BRAIN,
        fn=brain_list_pages,
        title="List pages",
        description=(
            "List pages newest first, filtered by type, slug prefix (e.g. people/) or "
            "tag, with paging (limit, offset; count is the total). Bodies are not "
            "included: read one with brain_get_page."
        ),
        read_only=True,
    ),
    ToolSpec(
        name="open_loops",
        group=LOOPS,
        fn=open_loops,
        title="Open loops",
        description=(
            "What is still open: promises you made, promises made to you, emails you "
            "owe a reply to, questions you are waiting on, pending decisions. Filter "
            "by "
            "loop_type, counterparty or source. Loops a curator snoozed are left out "
            "until their date (snoozed_left_out counts them; include_snoozed=true "
            "lists them); each loop says snoozed_until. Remote keys see summary, due "
            "date and snoozed_until only."
        ),
        read_only=True,
    ),
    ToolSpec(
        name="waiting",
        group=LOOPS,
        fn=waiting,
        title="Who is waiting on whom",
        description=(
            "The daily triage list: open loops grouped by person and ranked (due "
            "soonest, oldest, most loops first), each group with up to 5 loops and "
            "the evidence; automated senders collapsed into one line. Start a "
            "review here; use open_loops for a flat, filtered list. Remote keys "
            "see counts, counterparty, summary and due date only."
        ),
        read_only=True,
    ),
    ToolSpec(
        name="loops_close",
        group=LOOPS,
        fn=loops_close,
        title="Close a loop",
        description=(
            "Record the result: close a loop as done (delivered, replied) or dropped "
            "(no longer needed), with a note saying what happened. Its commitment fact "
            "expires. Closing a closed loop changes nothing."
        ),
        read_only=False,
    ),
    ToolSpec(
        name="loops_mute",
        group=LOOPS,
        fn=loops_mute,
        title="Mute a sender or thread",
        description=(
            "Stop new loops from a sender (email address) or a thread, e.g. a "
            "newsletter. Without 'source' it applies to your write source and to "
            "every source you may write where that sender has open loops; 'note' "
            "says where. Existing loops keep their state; undo with loops_unmute."
        ),
        read_only=False,
    ),
    ToolSpec(
        name="loops_unmute",
        group=LOOPS,
        fn=loops_unmute,
        title="Unmute a sender or thread",
        description="Remove a mute set with loops_mute (removed=false when none).",
        read_only=False,
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
