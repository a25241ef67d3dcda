"""Inputs and results of the page write path (SPEC §2.3): raw records, relations, timeline entries, the page input, the write result, and small helpers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from brain.exceptions import InvalidParams, NotFound
from brain.models import (
    Alias,
    Page,
    PageType,
    RawRecord,
    Source,
)
from brain.text import normalize_alias, sha256_hex, slugify_title, validate_slug

MODES = ("create", "append", "replace", "upsert")
AGENT_INPUT_TAG = "agent-input"
EPHEMERAL_KEYS = frozenset({"provenance"})
EMBED_BATCH = 64
# A write whose pending chunks exceed this embeds in an ``embed_pending`` job instead
# of in the caller's request (SPEC §7, §11): one model batch is about a second on CPU.
INLINE_EMBED_CHUNKS = EMBED_BATCH


@dataclass(frozen=True)
class RawInput:
    """One raw-layer item to store with a page write (SPEC §2.3 raw layer).

    ``external_id`` is unique per source (a Message-ID, a Gmail id, a file path);
    an existing record with the same id is reused as it is, never rewritten.
    """

    external_id: str
    kind: str
    content: str = ""
    payload: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # The original bytes exactly (SPEC §6 "Every importer"); ``content`` is then
    # derived text and the content hash is the bytes' hash.
    data: bytes | None = None


@dataclass(frozen=True)
class RelationInput:
    """An explicit typed edge from the written page to ``to_slug`` in the same source."""

    type: str
    to_slug: str
    context: str = ""


@dataclass(frozen=True)
class TimelineInput:
    """A dated timeline line for the page (SPEC §2.3); deduplicated on (page, date,
    summary hash, source_ref)."""

    date: date
    summary: str
    source_ref: str = ""


@dataclass
class WriteResult:
    """What ``page_write`` did.

    ``created``: a new page row; ``changed``: the content hash changed (a revision was
    written); ``index_current``: chunks and embeddings match the content right now
    (False while embedding is deferred to commit time, to ``embed_pending``, or the
    provider failed); ``operation``: the resolved mode (``create``, ``append``,
    ``replace``, or ``noop`` when nothing changed).
    """

    page: Page
    created: bool
    changed: bool
    index_current: bool
    raw_records: list[RawRecord]
    operation: str


# --- helpers ------------------------------------------------------------------------


def _json_safe(value: Any) -> Any:
    """Round-trip through JSON with Django's encoder (dates → ISO strings)."""
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


def _first_line(body: str) -> str:
    """The first non-empty line of ``body`` without leading markdown heading marks."""
    for line in (body or "").splitlines():
        text = line.strip().lstrip("#").strip()
        if text:
            return text[:500]
    return ""


def _page_content_hash(
    *, title: str, body: str, frontmatter: dict[str, Any], type_name: str
) -> str:
    """SHA-256 of the canonical JSON of what a page file holds (title, type, body,
    frontmatter with sorted keys). The server-stamped ``provenance`` key is left out:
    re-saving the same content is a no-op even though the stamp's time differs."""
    stable = {k: v for k, v in frontmatter.items() if k not in EPHEMERAL_KEYS}
    canonical = json.dumps(
        {"title": title, "type": type_name, "body": body, "frontmatter": stable},
        sort_keys=True,
        ensure_ascii=False,
        cls=DjangoJSONEncoder,
    )
    return sha256_hex(canonical)


def _alias_kind(alias: str) -> str:
    if alias.startswith("@"):
        return Alias.Kind.HANDLE
    if "@" in alias and "." in alias.split("@")[-1]:
        return Alias.Kind.EMAIL
    return Alias.Kind.NAME


def _aliases_from(title: str, frontmatter: dict[str, Any]) -> list[str]:
    """Title plus frontmatter ``aliases`` (a list or a comma string), normalised."""
    raw: list[str] = [title]
    declared = frontmatter.get("aliases")
    if isinstance(declared, str):
        raw.extend(declared.split(","))
    elif isinstance(declared, list):
        raw.extend(str(a) for a in declared if a is not None)
    seen: list[str] = []
    for item in raw:
        norm = normalize_alias(item)[:320]
        if norm and norm not in seen:
            seen.append(norm)
    return seen


def _resolve_source(source: Source | str) -> Source:
    if isinstance(source, Source):
        return source
    found = Source.objects.filter(id=source).first()
    if found is None:
        raise NotFound(
            f"Source {source!r} does not exist.",
            suggestion="Create the source in admin → Sources (or with the connector's "
            "import command) first.",
            detail={"source": source},
        )
    return found


def _resolve_slug(
    *, slug: str | None, title: str | None, page_type: PageType | None
) -> str:
    """Explicit slugs are validated (refused when unsafe); titles are sanitised under
    the type's first path prefix (never refused, SPEC §2.3)."""
    if slug:
        return validate_slug(slug.strip())
    if not title or not title.strip():
        raise InvalidParams(
            "A page needs a slug or a title.",
            suggestion="Pass 'title' (the slug is derived from it) or an explicit 'slug'.",
            detail={"fields": ["slug", "title"]},
        )
    segment = slugify_title(title) or f"untitled-{sha256_hex(title)[:8]}"
    prefix = ""
    if page_type is not None and page_type.path_prefixes:
        prefix = page_type.path_prefixes[0].strip("/")
        prefix = f"{prefix}/" if prefix else ""
    return validate_slug(prefix + segment)


@dataclass(frozen=True)
class PageInput:
    """One page to write with ``pages_write``: the per-page arguments of
    ``page_write`` (see there for what each field means)."""

    mode: str
    slug: str | None = None
    title: str | None = None
    body: str | None = None
    type_name: str | None = None
    summary: str | None = None
    tags: Sequence[str] | None = None
    frontmatter: dict[str, Any] | None = None
    visibility: str | None = None
    effective_date: date | None = None
    raws: Sequence[RawInput] = ()
    provenance: dict[str, Any] | None = None
    allow_empty: bool = False
    relations: Sequence[RelationInput | dict[str, str]] = ()
    replace_frontmatter: bool = False
    timeline: Sequence[TimelineInput] = ()
    # The revision the writer read (``brain.services.pages.revisions``); a stale
    # one refuses the write with ``Conflict`` (SPEC §4). None: no check.
    base_revision: str | None = None
