"""The page input fields every transport takes (SPEC §2.3 Add, §4: one contract on
every transport, issue 47).

``PageFields`` is the one model of what a new page is made of: HTTP ``POST /api/pages``
takes it as its body (``interfaces.http.schemas.pages.PageIn``) and MCP ``brain_add``
takes its fields as the tool's arguments (``interfaces.mcp.server`` builds the tool
signature from it), with the same names, types and descriptions. ``page_add_from``
writes it, so both transports make the same page from the same payload.

MCP alone still takes a legacy string ``provenance`` (``legacy_provenance``): it is
kept as ``{"note": text}``; the published schema is the object on both transports.
"""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from ninja import Field, Schema
from pydantic import AliasChoices, BeforeValidator

from brain.access import Caller
from brain.services.pages import RelationInput, WriteResult, page_add


class RelationIn(Schema):
    """An explicit typed edge to an existing page of the same source."""

    type: str = Field(..., description="A Schema relation type, e.g. works_at.")
    to: str = Field(
        ...,
        validation_alias=AliasChoices("to", "to_slug"),
        description="Slug of the target page (it must exist; MCP also takes to_slug).",
    )
    context: str = Field(
        "", max_length=200, description="Why the edge holds (at most 200 characters)."
    )


class PageFields(Schema):
    """A new page: title, body and the optional rest (SPEC §2.3 Add)."""

    title: str = Field(
        ...,
        min_length=1,
        max_length=500,
        description="Page title; the slug comes from it unless slug is given.",
    )
    body: str = Field("", description="Markdown body: the compiled truth.")
    slug: str | None = Field(None, description="Omit to derive it from the title.")
    type: str | None = Field(
        None,
        description=(
            "Schema page type: person, company, organization, project, deal, email, "
            "meeting, note, concept, document (default note, or from the slug)."
        ),
    )
    summary: str | None = Field(
        None, description="One line; default the first line of the body."
    )
    tags: list[str] | None = Field(None, description="Tags, e.g. ['customer', 'q3'].")
    frontmatter: dict[str, Any] | None = Field(
        None,
        description=(
            "Extra frontmatter keys (JSON object); title, summary and tags come "
            "from their own fields."
        ),
    )
    visibility: Literal["world", "private"] | None = Field(
        None,
        description=(
            "world or private (trusted readers only); default: the source's "
            "(private in mail sources, world in harness and markdown ones)."
        ),
    )
    effective_date: date | None = Field(
        None, description="The date the page's content is about (YYYY-MM-DD)."
    )
    provenance: dict[str, Any] | None = Field(
        None,
        description=(
            "Where this knowledge comes from, as a JSON object, e.g. "
            '{"note": "kickoff meeting 2026-11-18", "url": "…"}. The server adds '
            "who wrote it and when."
        ),
    )
    relations: list[RelationIn] = Field(
        default_factory=list,
        description="Typed edges to existing pages, e.g. works_at a company.",
    )
    source: str | None = Field(
        None, description="Write source id; default: the caller's write source."
    )


def _note(value: Any) -> Any:
    """A legacy string provenance becomes ``{"note": text}``; anything else as is."""
    return {"note": value} if isinstance(value, str) else value


# MCP's legacy string provenance (``brain_add`` took a string before issue 47).
legacy_provenance = BeforeValidator(_note)


def page_add_from(caller: Caller, fields: PageFields) -> WriteResult:
    """Write ``fields`` as a new page in the caller's write source (or ``source``):
    the one call behind HTTP ``add_page`` and MCP ``brain_add``. Raises what
    ``brain.services.pages.page_add`` raises (``InvalidParams`` for an existing slug,
    ``ScopeDenied``, ``NotFound`` for a relation target)."""
    return page_add(
        source=caller.write_source(fields.source),
        actor=caller,
        slug=fields.slug,
        title=fields.title,
        body=fields.body,
        type_name=fields.type,
        summary=fields.summary,
        tags=fields.tags,
        frontmatter=fields.frontmatter,
        visibility=fields.visibility,
        effective_date=fields.effective_date,
        provenance=fields.provenance,
        relations=[RelationInput(r.type, r.to, r.context) for r in fields.relations],
    )
