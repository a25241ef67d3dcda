"""The MCP tool registry: tool name → service call (SPEC §4; digest §11.2).

Each tool is a plain function ``fn(caller, **arguments) -> dict`` that parses nothing
itself (the SDK validates the arguments from the signature) and calls the same service
or selector as the HTTP API, so MCP and HTTP answer alike. ``TOOLS`` lists them with
their group; ``SURFACES`` says which groups a surface offers:

- ``verbs``: exactly the seven memory verbs;
- ``starter``: the verbs, the page tools (``brain_*``), the loop tools and push;
- ``full``: starter plus the admin-ish extras (``whoami``, ``brain_list_sources``).

The seven memory verbs, ``brain_query`` (built on ``verb_synthesize``) and
``push_context`` are not registered: their services (``brain.services.verbs``,
``brain.services.push``) were not in main when this registry was wired, so the
``verbs`` surface is empty until they are added back (no stub tools).

Descriptions are written for agents: search before adding, update an existing page
instead of creating a duplicate, always give provenance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field

from brain.access import Caller  # noqa: TC001 - resolved at runtime for the schemas
from brain.api.pages import page_out
from brain.exceptions import InvalidParams
from brain.models import Source
from brain.search import page_search
from brain.selectors import page_get, page_list
from brain.services.pages import WriteResult, page_add, page_update
from loops.models import LoopType, OpenLoop
from loops.selectors import loop_list
from loops.services import loop_close, loop_get, loop_mute, loop_unmute
from loops.waiting import loop_view

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


# --- shared argument types ------------------------------------------------------------

VerbSourceArg = Annotated[
    str | list[str] | None,
    Field(
        description="Source id(s) to read (omit: the federated sources you may read)."
    ),
]
BudgetArg = Annotated[
    int | None,
    Field(
        description="Token budget for the answer (chars/4 estimate); whole items only."
    ),
]


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


class RelationArg(BaseModel):
    """An explicit typed edge from the written page to another page of its source."""

    type: str = Field(
        description="Relation type, e.g. works_at, member_of, related_to."
    )
    to_slug: str = Field(description="Slug of the target page (it must exist).")
    context: str = Field("", max_length=200, description="Why (≤ 200 chars).")


def _write_out(result: WriteResult) -> dict[str, Any]:
    """The HTTP API's ``WriteOut`` shape: where the write landed and the page."""
    page = result.page
    return {
        "slug": page.slug,
        "source_id": page.source_id,
        "created": result.created,
        "changed": result.changed,
        "index_current": result.index_current,
        "operation": result.operation,
        "page": page_out(page),
        "protocol_version": 1,
    }


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
    """brain_search → ``brain.search.page_search`` in the caller's read scope."""
    scope = caller.read_scope(_as_list(source))
    response = page_search(
        scope=scope,
        query=query,
        limit=limit,
        types=[type] if type else None,
        budget_tokens=budget_tokens,
    )
    return {
        "query": response.query,
        "results": [r.as_dict() for r in response.results],
        "search_degraded": response.search_degraded,
        "budget_tokens": response.budget_tokens,
        "budget_used": response.budget_used,
        "dropped_count": response.dropped_count,
        "protocol_version": 1,
    }


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
        "protocol_version": 1,
    }


def brain_add(
    caller: Caller,
    *,
    title: Annotated[
        str, Field(min_length=1, description="Page title; the slug comes from it.")
    ],
    body: Annotated[str, Field(description="Markdown body: the compiled truth.")],
    provenance: ProvenanceArg,
    type: Annotated[  # noqa: A002 - the Schema's word
        str | None,
        Field(
            description=(
                "Page type: person, company, organization, project, deal, email, "
                "meeting, note, concept, document (default note, or from the slug)."
            )
        ),
    ] = None,
    slug: Annotated[
        str | None, Field(description="Explicit slug; default people/<title> etc.")
    ] = None,
    summary: Annotated[
        str | None, Field(description="One line; default the first line of the body.")
    ] = None,
    tags: TagsArg = None,
    relations: Annotated[
        list[RelationArg] | None,
        Field(description="Typed edges to existing pages, e.g. works_at a company."),
    ] = None,
    visibility: Annotated[
        Literal["world", "private"] | None,
        Field(description="world (default) or private (trusted readers only)."),
    ] = None,
    source: SourceArg = None,
) -> dict[str, Any]:
    """brain_add → ``brain.services.pages.page_add`` in the caller's write source."""
    result = page_add(
        source=caller.write_source(source),
        actor=caller,
        slug=slug,
        title=title,
        body=body,
        type_name=type,
        summary=summary,
        tags=tags,
        relations=[r.model_dump() for r in relations or []],
        visibility=visibility,
        provenance={"from": provenance, "ingested_via": "mcp:brain_add"},
    )
    return _write_out(result)


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
    source: SourceArg = None,
) -> dict[str, Any]:
    """brain_update → ``brain.services.pages.page_update`` in the write source."""
    result = page_update(
        mode=mode,
        source=caller.write_source(source),
        actor=caller,
        slug=slug,
        title=title,
        body=body,
        summary=summary,
        tags=tags,
        allow_empty=allow_empty,
        provenance={"from": provenance, "ingested_via": "mcp:brain_update"},
    )
    return _write_out(result)


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
) -> dict[str, Any]:
    """open_loops → ``loops.selectors.loop_list`` over every readable source."""
    if loop_type and loop_type not in LoopType.values:
        raise InvalidParams(
            f"Unknown loop_type '{loop_type}'.",
            suggestion=f"Use one of {', '.join(LoopType.values)}.",
            detail={"allowed": list(LoopType.values)},
        )
    scope = caller.read_scope([source]) if source else caller.all_readable_scope()
    qs = loop_list(
        scope=scope, status=status, loop_type=loop_type, counterparty=counterparty
    )
    return {
        "loops": [
            loop_view(loop).as_dict(trusted=caller.trusted) for loop in qs[:limit]
        ],
        "count": qs.count(),
        "redacted": not caller.trusted,
        "protocol_version": 1,
    }


def _loop_for_write(caller: Caller, loop_id: str) -> OpenLoop:
    readable = (
        None
        if caller.readable_source_ids is None
        else tuple(caller.readable_source_ids)
    )
    loop = loop_get(loop_id=loop_id, source_ids=readable)
    caller.write_source(loop.source_id)  # a read grant never authorises a write
    return loop


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
    """loops_close → ``loops.services.loop_close`` (expires its commitment fact)."""
    loop = _loop_for_write(caller, str(id))
    result = loop_close(loop=loop, status=status, actor=caller.actor, note=note or "")
    return {**result, "protocol_version": 1}


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
    """loops_mute → ``loops.services.loop_mute`` in the caller's write source."""
    src = caller.write_source(source)
    row, created = loop_mute(source=src, kind=kind, value=value, actor=caller.actor)
    return {
        "kind": row.kind,
        "value": row.value,
        "source_id": src.id,
        "created": created,
        "protocol_version": 1,
    }


def loops_unmute(
    caller: Caller, *, kind: MuteKindArg, value: MuteValueArg, source: SourceArg = None
) -> dict[str, Any]:
    """loops_unmute → ``loops.services.loop_unmute`` in the caller's write source."""
    src = caller.write_source(source)
    removed = loop_unmute(source=src, kind=kind, value=value, actor=caller.actor)
    return {
        "kind": kind,
        "value": value.strip().lower(),
        "source_id": src.id,
        "removed": removed,
        "protocol_version": 1,
    }


# --- admin-ish extras (full surface) ------------------------------------------------


def whoami(caller: Caller) -> dict[str, Any]:
    """The caller: trust, scopes, write source, readable sources (null = all)."""
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
        name="brain_search",
        group=BRAIN,
        fn=brain_search,
        title="Search pages",
        description=(
            "Hybrid search (keyword + meaning) over the pages you may read. Each "
            "result has slug, title, source_id, similarity (cosine), chunk (the "
            "matching excerpt), score, evidence and create_safety. ALWAYS search "
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
            "Read one page by slug: title, type, frontmatter, tags, visibility and the "
            "full markdown body. Use it before brain_update to see what is there."
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
            "from the title under the type's folder (people/, companies/…)."
        ),
        read_only=False,
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
            "for what you add. Every change is a revision that can be reverted."
        ),
        read_only=False,
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
            "loop_type, counterparty or source. Remote keys see summary and due date "
            "only."
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
            "newsletter. Existing loops keep their state; undo with loops_unmute."
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
