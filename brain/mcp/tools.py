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

from pydantic import Field

from brain.access import Caller
from brain.models import Source

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
