"""The one write path for pages (SPEC §2.3) and the search index behind it (SPEC §3).

Every writer (HTTP API, MCP, admin, connectors, markdown import, dream) calls
``page_write`` (or its ``page_add`` / ``page_update`` shorthands), or ``pages_write``
for a batch (mail importers; ``page_write`` is ``pages_write`` with one page). One call
validates the input against the Schema, then writes the raw layer (``RawRecord``), the
wiki layer (``Page``), its ``PageRevision``, aliases and relations, and the keyword
half of the index (chunks with their tsvector) in ONE transaction: neither layer is
ever updated without the other. A batch costs a fixed number of statements, not a
number per page (``brain.bulk``; SPEC §11 ingest rate). Embeddings are network or CPU-heavy work, so they run after the
transaction commits (STYLE rule 15), only for the page that was written and only when
its content hash changed; ``Page.indexed_hash`` records the content the index was
built from, so ``indexed_hash != content_hash`` means "index behind".
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from brain import embeddings
from brain.access import Caller
from brain.bulk import bulk_insert, bulk_insert_objects
from brain.chunking import chunk_body, chunk_tokens
from brain.exceptions import AlreadyExists, BrainError, InvalidParams, NotFound
from brain.models import (
    Alias,
    AuditEvent,
    Chunk,
    Page,
    PageRevision,
    PageType,
    RawRecord,
    Relation,
    RelationType,
    Source,
    TimelineEntry,
    Visibility,
)
from brain.services.schema import (
    schema_page_type,
    schema_page_type_for_slug,
    schema_relation_type,
    schema_required_fields,
)
from brain.text import normalize_alias, sha256_hex, slugify_title, validate_slug

MODES = ("create", "append", "replace", "upsert")
AGENT_INPUT_TAG = "agent-input"
EPHEMERAL_KEYS = frozenset({"provenance"})
EMBED_BATCH = 64


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


# --- the write path ------------------------------------------------------------------


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


def page_write(
    *,
    source: Source | str,
    mode: str,
    actor: Caller,
    embed: bool = True,
    **fields: Any,
) -> WriteResult:
    """Write one page through the single write path (SPEC §2.3).

    ``mode``: ``create`` (refused with ``AlreadyExists`` when the slug exists, pointing
    at update), ``append`` (body appended; frontmatter kept), ``replace`` (body
    swapped; title, summary and tags kept unless given), ``upsert`` (create when
    missing, else replace; connectors re-rendering a page). ``append``/``replace`` on
    a missing page raise ``NotFound`` suggesting add; an empty body over a non-empty
    page raises ``InvalidParams`` unless ``allow_empty``.

    The slug is ``slug`` (validated, ``InvalidParams`` when unsafe) or derived from
    ``title`` under the type's first path prefix (``people/<slug>``). The type is
    ``type_name`` (``SchemaViolation`` when unknown) or inferred from the slug prefix.
    Frontmatter keeps ``title``, ``summary`` (default: first non-empty body line) and
    ``tags``; required fields of the type are checked. Remote callers (SPEC §8) get
    the ``agent-input`` tag and server-stamped provenance ``{key, client, at}``.

    ``raws`` are stored in the raw layer (an existing (source, external_id) is reused,
    never rewritten) and linked to the page; with no raws, a changed write stores the
    submitted text as an ``agent_input`` raw record. ``relations`` are explicit
    ``RelationInput(type, to_slug, context)`` edges to existing pages of the source
    (``NotFound`` otherwise); nothing is ever extracted from free text here.
    ``timeline`` entries are added (duplicates ignored) even when the body is unchanged.

    Everything above happens in one transaction. Chunks (text + tsvector) are rebuilt
    in it when the content hash changed; embeddings are computed after commit unless
    ``embed=False`` (bulk importers; ``pages_embed_pending`` fills them later).
    ``frontmatter`` is merged over the stored one unless ``replace_frontmatter``
    (admin edits and markdown re-imports, where the given set is complete).
    The other keyword arguments are the fields of ``PageInput``. Returns a
    ``WriteResult``; this is ``pages_write`` with one page.
    """
    (result,) = pages_write(
        source=source,
        actor=actor,
        items=[PageInput(mode=mode, **fields)],
        embed=embed,
    )
    assert isinstance(result, WriteResult)  # errors="raise" never returns one
    return result


def pages_write(
    *,
    source: Source | str,
    actor: Caller,
    items: Sequence[PageInput],
    embed: bool = True,
    errors: str = "raise",
) -> list[WriteResult | BrainError]:
    """Write many pages of one source in one transaction with a constant number of
    queries (SPEC §2.3, §11 ingest rate): the batched form of ``page_write``, which
    bulk importers (mail, calendar, contacts) call once per batch of threads.

    Every item is first checked and planned against the locked current pages (the
    Schema, slugs, modes, relation targets, raw records) before anything is written.
    With ``errors="raise"`` the first refused item raises its ``BrainError`` and
    nothing is written; with ``errors="collect"`` its place in the returned list
    holds the error and the other items are written. A slug may appear once per
    call (a repeat is refused with ``InvalidParams``). Relation targets may be
    existing pages or pages of the same call. A concurrent writer that creates one
    of the slugs first makes the batch re-plan once (creates then meet
    ``AlreadyExists``). Returns one ``WriteResult`` (or error) per item, in order;
    embeddings run after commit for the changed pages, in batches, unless
    ``embed=False``.
    """
    if errors not in ("raise", "collect"):
        raise ValueError(f"errors must be 'raise' or 'collect', not {errors!r}")
    src = _resolve_source(source)
    schema = _SchemaCache()
    for attempt in range(2):
        try:
            results = _write_batch(
                src=src, actor=actor, items=items, schema=schema, errors=errors
            )
            break
        except IntegrityError:
            # A concurrent writer created one of the slugs between our read and
            # insert: re-plan once against the pages as they are now.
            if attempt == 0:
                continue
            slugs = sorted({i.slug or "" for i in items} - {""})
            raise AlreadyExists(
                f"A page with slug {', '.join(map(repr, slugs)) or 'of this write'} "
                f"already exists in source {src.id!r}.",
                suggestion="Use update_page (mode 'append' or 'replace') to change it.",
                detail={"slugs": slugs, "source": src.id},
            ) from None

    pending = [
        (r.page.pk, r.page.content_hash)
        for r in results
        if isinstance(r, WriteResult) and r.changed and not r.index_current
    ]
    if embed and pending:
        if connection.in_atomic_block:
            # The caller holds an outer transaction: embed once it commits.
            transaction.on_commit(lambda: _embed_pages(pending))
        else:
            current = _embed_pages(pending)
            for r in results:
                if isinstance(r, WriteResult) and r.page.pk in current:
                    r.index_current = True
                    r.page.indexed_hash = r.page.content_hash
    for r in results:
        if isinstance(r, WriteResult) and not r.changed:
            r.index_current = r.page.indexed_hash == r.page.content_hash
    return results


class _SchemaCache:
    """Schema rows read once per ``pages_write`` call (admin edits apply to the next
    call); the errors are those of ``brain.services.schema``."""

    def __init__(self) -> None:
        self._types: dict[str, PageType] = {}
        self._relations: dict[tuple[str, int, int], RelationType] = {}

    def page_type(self, name: str) -> PageType:
        if name not in self._types:
            self._types[name] = schema_page_type(name=name)
        return self._types[name]

    def page_type_for_slug(self, slug: str) -> PageType:
        # Not cached: the longest matching prefix decides, and importers name types.
        return schema_page_type_for_slug(slug=slug)

    def relation_type(
        self, name: str, from_type: PageType, to_type: PageType
    ) -> RelationType:
        key = (name, from_type.pk, to_type.pk)
        if key not in self._relations:
            self._relations[key] = schema_relation_type(
                name=name, from_type=from_type, to_type=to_type
            )
        return self._relations[key]


@dataclass
class _Plan:
    """What one item of ``pages_write`` will write (computed before any write)."""

    index: int
    slug: str
    page: Page | None
    operation: str
    title: str
    body: str
    summary: str
    tags: list[str]
    frontmatter: dict[str, Any]
    page_type: PageType
    visibility: str
    effective_date: date | None
    content_hash: str
    content_changed: bool
    changed: bool
    raws: list[RawInput]
    relations: list[RelationInput]
    timeline: Sequence[TimelineInput]
    provenance: dict[str, Any]
    previous: dict[str, Any]
    relation_types: list[RelationType] = field(default_factory=list)


def _plan_slug(item: PageInput, schema: _SchemaCache) -> tuple[str, PageType | None]:
    """Check the item's mode and visibility; return its slug and requested type."""
    if item.mode not in MODES:
        raise InvalidParams(
            f"Unknown write mode {item.mode!r}.",
            suggestion=f"Use one of: {', '.join(MODES)}.",
            detail={"field": "mode", "allowed": list(MODES)},
        )
    if item.visibility is not None and item.visibility not in Visibility.values:
        raise InvalidParams(
            f"Unknown visibility {item.visibility!r}.",
            suggestion="Use 'world' or 'private'.",
            detail={"field": "visibility", "allowed": list(Visibility.values)},
        )
    requested = schema.page_type(item.type_name) if item.type_name else None
    # A title-derived slug lives under its type's prefix; no type means a note.
    prefix_type = requested or (None if item.slug else schema.page_type("note"))
    slug = _resolve_slug(slug=item.slug, title=item.title, page_type=prefix_type)
    return slug, requested


def _check_raws(raws: Sequence[RawInput]) -> None:
    for raw in raws:
        if not raw.external_id:
            raise InvalidParams(
                "A raw record needs an external_id.",
                suggestion="Pass a stable id such as the Message-ID or file path.",
                detail={"field": "raws.external_id"},
            )
        if raw.kind not in RawRecord.Kind.values:
            raise InvalidParams(
                f"Unknown raw record kind {raw.kind!r}.",
                suggestion=f"Use one of: {', '.join(RawRecord.Kind.values)}.",
                detail={"field": "raws.kind", "allowed": list(RawRecord.Kind.values)},
            )


def _plan_item(
    *,
    index: int,
    item: PageInput,
    slug: str,
    requested_type: PageType | None,
    page: Page | None,
    actor: Caller,
    now: Any,
    schema: _SchemaCache,
) -> _Plan:
    """Decide what ``item`` writes over ``page`` (the locked current row or None).
    Raises the ``BrainError`` that refuses the item; writes nothing."""
    mode = item.mode
    if page is not None and page.deleted_at is not None and mode != "upsert":
        if mode == "create":
            raise AlreadyExists(
                f"Page {slug!r} exists but is deleted.",
                suggestion="Restore it in admin (action 'restore') or pick another slug.",
                detail={"slug": slug, "source": page.source_id, "deleted": True},
            )
        page = None  # append/replace on a deleted page: treated as missing
    if mode == "create" and page is not None:
        raise AlreadyExists(
            f"A page with slug {slug!r} already exists in source {page.source_id!r}.",
            suggestion="Use update_page (mode 'append' or 'replace') to change it.",
            detail={"slug": slug, "source": page.source_id},
        )
    if mode in ("append", "replace") and page is None:
        raise NotFound(
            f"No page {slug!r} in this source.",
            suggestion="Use add_page to create it.",
            detail={"slug": slug},
        )
    _check_raws(item.raws)
    operation = "create" if page is None else ("replace" if mode == "upsert" else mode)
    body, frontmatter, summary, tags = (
        item.body,
        item.frontmatter,
        item.summary,
        item.tags,
    )

    old_body = page.body if page else ""
    old_fm: dict[str, Any] = dict(page.frontmatter) if page else {}
    new_body = old_body
    if operation == "create":
        new_body = (body or "").strip("\n")
    elif operation == "append":
        addition = (body or "").strip("\n")
        if addition.strip():
            new_body = (
                f"{old_body.rstrip()}\n\n{addition}" if old_body.strip() else addition
            )
    elif body is not None:  # replace
        if not body.strip() and old_body.strip() and not item.allow_empty:
            raise InvalidParams(
                f"Refusing to replace the non-empty body of {slug!r} with an empty one.",
                suggestion="Pass allow_empty=true if you really want to empty the page.",
                detail={"slug": slug, "field": "body"},
            )
        new_body = body.strip("\n")

    base_fm = {} if item.replace_frontmatter and frontmatter is not None else old_fm
    fm: dict[str, Any] = {**base_fm, **_json_safe(frontmatter or {})}
    new_title = (
        (item.title or "").strip()
        or str(fm.get("title") or "")
        or (page.title if page else "")
    )
    if not new_title:
        new_title = slug.rsplit("/", 1)[-1].replace("-", " ").strip() or slug
    new_title = new_title[:500]
    if summary is not None:
        # A blank summary asks for the default (the body's first line).
        new_summary = summary.strip() or _first_line(new_body)
    elif frontmatter and str(frontmatter.get("summary") or "").strip():
        new_summary = str(frontmatter["summary"]).strip()
    elif page is not None and page.summary:
        new_summary = page.summary
    else:
        new_summary = _first_line(new_body)
    if tags is not None:
        new_tags = [str(t).strip() for t in tags if str(t).strip()]
    elif frontmatter and isinstance(frontmatter.get("tags"), list):
        new_tags = [str(t).strip() for t in frontmatter["tags"] if str(t).strip()]
    else:
        new_tags = list(page.tags) if page else []
    if actor.remote and AGENT_INPUT_TAG not in new_tags:
        new_tags.append(AGENT_INPUT_TAG)
    new_tags = list(dict.fromkeys(t[:100] for t in new_tags))

    stamped = _json_safe(dict(item.provenance or {}))
    if actor.remote:
        stamped.update(
            {"key": actor.actor, "client": actor.client, "at": now.isoformat()}
        )
        fm["provenance"] = stamped
    else:
        stamped.setdefault("actor", actor.actor)
        stamped.setdefault("at", now.isoformat())

    fm["title"] = new_title
    fm["summary"] = new_summary
    fm["tags"] = new_tags

    if requested_type is not None:
        page_type = requested_type
    elif page is not None:
        page_type = page.type
    elif fm.get("type"):
        page_type = schema.page_type(str(fm["type"]))
    else:
        page_type = schema.page_type_for_slug(slug)
    fm["type"] = page_type.name
    schema_required_fields(page_type=page_type, frontmatter=fm)

    new_visibility = item.visibility or (page.visibility if page else Visibility.WORLD)
    if item.effective_date is not None:
        new_effective = item.effective_date
    else:
        new_effective = page.effective_date if page else None
    content_hash = _page_content_hash(
        title=new_title, body=new_body, frontmatter=fm, type_name=page_type.name
    )
    content_changed = page is None or content_hash != page.content_hash
    meta_changed = page is not None and (
        new_visibility != page.visibility
        or new_effective != page.effective_date
        or page.deleted_at is not None
    )
    changed = content_changed or meta_changed
    raws = list(item.raws)
    if changed and not raws:
        raws = [
            RawInput(
                external_id=f"input:{uuid.uuid4()}",
                kind=RawRecord.Kind.AGENT_INPUT,
                content=body or "",
                payload=_json_safe(
                    {
                        "mode": mode,
                        "slug": slug,
                        "title": item.title,
                        "summary": summary,
                        "tags": list(tags) if tags is not None else None,
                        "frontmatter": frontmatter,
                    }
                ),
                metadata={"actor": actor.actor, "client": actor.client},
            )
        ]
    return _Plan(
        index=index,
        slug=slug,
        page=page,
        operation=operation if changed else "noop",
        title=new_title,
        body=new_body,
        summary=new_summary,
        tags=new_tags,
        frontmatter=fm,
        page_type=page_type,
        visibility=new_visibility,
        effective_date=new_effective,
        content_hash=content_hash,
        content_changed=content_changed,
        changed=changed,
        raws=raws,
        relations=[
            r if isinstance(r, RelationInput) else RelationInput(**r)
            for r in item.relations
        ],
        timeline=item.timeline,
        provenance=stamped,
        previous=(
            {"title": page.title, "body": page.body, "frontmatter": page.frontmatter}
            if page
            else {"title": "", "body": "", "frontmatter": {}}
        ),
    )


def _plan_relations(
    *, src: Source, plans: list[_Plan], schema: _SchemaCache
) -> dict[int, BrainError]:
    """Check every plan's relations (target exists in the source or is planned in
    this call; Schema endpoint types). Returns errors by item index."""
    wanted = {r.to_slug for p in plans if p.changed for r in p.relations}
    if not wanted:
        return {}
    targets: dict[str, PageType] = {
        slug: page_type
        for slug, page_type in (
            (p.slug, p.type)
            for p in Page.objects.select_related("type").filter(
                source=src, slug__in=wanted, deleted_at__isnull=True
            )
        )
    }
    targets.update({p.slug: p.page_type for p in plans if p.slug in wanted})
    refused: dict[int, BrainError] = {}
    for plan in plans:
        if not plan.changed:
            continue
        try:
            for rel in plan.relations:
                target_type = targets.get(rel.to_slug)
                if target_type is None:
                    raise NotFound(
                        f"Relation target {rel.to_slug!r} does not exist in source "
                        f"{src.id!r}.",
                        suggestion="Add the target page first, or drop the relation.",
                        detail={"slug": rel.to_slug, "relation_type": rel.type},
                    )
                plan.relation_types.append(
                    schema.relation_type(rel.type, plan.page_type, target_type)
                )
        except BrainError as exc:
            refused[plan.index] = exc
    return refused


def _write_batch(
    *,
    src: Source,
    actor: Caller,
    items: Sequence[PageInput],
    schema: _SchemaCache,
    errors: str,
) -> list[WriteResult | BrainError]:
    """The transactional part of ``pages_write``: plan every item, then write the
    raw records, pages, revisions, aliases, relations, timeline and chunks with
    one bulk statement each."""
    now = timezone.now()
    refused: dict[int, BrainError] = {}

    def refuse(index: int, exc: BrainError) -> None:
        if errors == "raise":
            raise exc
        refused[index] = exc

    with transaction.atomic():
        wanted: dict[int, tuple[str, PageType | None]] = {}
        seen: set[str] = set()
        for index, item in enumerate(items):
            try:
                slug, requested = _plan_slug(item, schema)
                if slug in seen:
                    raise InvalidParams(
                        f"Slug {slug!r} appears twice in one write.",
                        suggestion="Write each page once per call.",
                        detail={"slug": slug},
                    )
            except BrainError as exc:
                refuse(index, exc)
                continue
            seen.add(slug)
            wanted[index] = (slug, requested)
        current = {
            p.slug: p
            for p in Page.objects.select_for_update(of=("self",))
            .select_related("type")
            .filter(source=src, slug__in=list(seen))
            .order_by("pk")
        }
        plans: list[_Plan] = []
        for index, (slug, requested) in wanted.items():
            try:
                plans.append(
                    _plan_item(
                        index=index,
                        item=items[index],
                        slug=slug,
                        requested_type=requested,
                        page=current.get(slug),
                        actor=actor,
                        now=now,
                        schema=schema,
                    )
                )
            except BrainError as exc:
                refuse(index, exc)
        # A refused page cannot be a relation target of the same call: repeat until
        # no plan points at a refused one.
        while True:
            for plan in plans:
                plan.relation_types = []
            newly = _plan_relations(src=src, plans=plans, schema=schema)
            for index, exc in newly.items():
                refuse(index, exc)
            plans = [p for p in plans if p.index not in refused]
            if not newly:
                break

        changed = [p for p in plans if p.changed]
        created = _save_pages(src=src, plans=changed, now=now)
        raw_records = _store_raws(
            src=src, raws=[(r, p.page) for p in plans for r in p.raws]
        )
        linked = []
        for plan in plans:
            for raw in plan.raws:
                record = raw_records[raw.external_id[:512]]
                if record.page_id != plan.page.pk:
                    record.page = plan.page
                    linked.append(record)
        if linked:
            RawRecord.objects.bulk_update(linked, ["page"])
        bulk_insert_objects(
            [
                PageRevision(
                    page=p.page,
                    actor=actor.actor[:200],
                    provenance=p.provenance,
                    operation=p.operation,
                    previous_title=p.previous["title"],
                    previous_body=p.previous["body"],
                    previous_frontmatter=p.previous["frontmatter"],
                    content_hash=p.content_hash,
                    raw_record=(
                        raw_records[p.raws[0].external_id[:512]] if p.raws else None
                    ),
                    created_at=now,
                )
                for p in changed
            ]
        )
        Alias.objects.bulk_create(
            [
                Alias(source=src, page=p.page, alias=a, kind=_alias_kind(a))
                for p in changed
                for a in _aliases_from(p.title, p.frontmatter)
            ],
            ignore_conflicts=True,
        )
        _add_relations(src=src, plans=changed, actor=actor)
        _add_timeline(plans=plans)
        waiting = _rebuild_chunks_many(
            [
                p.page
                for p in changed
                if p.content_changed or p.page.indexed_hash != p.content_hash
            ]
        )
        current_ids = [p.page.pk for p in changed if waiting.get(p.page.pk, 0) == 0]
        if current_ids:
            # Nothing to embed (provider none, or every vector was reused).
            Page.objects.filter(pk__in=current_ids).update(
                indexed_hash=F("content_hash")
            )
        for p in changed:
            if p.page.pk in current_ids:
                p.page.indexed_hash = p.content_hash

    results: list[Any] = [refused.get(i) for i in range(len(items))]
    for p in plans:
        results[p.index] = WriteResult(
            page=p.page,
            created=p.page.pk in created,
            changed=p.changed,
            index_current=p.changed and p.page.indexed_hash == p.content_hash,
            raw_records=[raw_records[r.external_id[:512]] for r in p.raws],
            operation=p.operation,
        )
    return results


def _save_pages(*, src: Source, plans: list[_Plan], now: Any) -> set[int]:
    """Insert the new pages and update the changed ones (two statements); sets
    ``plan.page``. Returns the ids of the pages created. A slug created meanwhile
    by another writer raises ``IntegrityError`` (``pages_write`` re-plans)."""
    new_pages: list[Page] = []
    updated: list[Page] = []
    visibility_moves: dict[str, list[Page]] = {}
    for p in plans:
        if p.page is None:
            p.page = Page(
                source=src,
                slug=p.slug,
                type=p.page_type,
                title=p.title,
                frontmatter=p.frontmatter,
                body=p.body,
                summary=p.summary,
                tags=p.tags,
                visibility=p.visibility,
                effective_date=p.effective_date,
                content_hash=p.content_hash,
                created_at=now,
                updated_at=now,
            )
            new_pages.append(p.page)
            continue
        page = p.page
        if p.visibility != page.visibility:
            visibility_moves.setdefault(p.visibility, []).append(page)
        page.type = p.page_type
        page.title = p.title
        page.frontmatter = p.frontmatter
        page.body = p.body
        page.summary = p.summary
        page.tags = p.tags
        page.visibility = p.visibility
        page.effective_date = p.effective_date
        page.content_hash = p.content_hash
        page.deleted_at = None
        page.updated_at = now
        updated.append(page)
    bulk_insert_objects(new_pages)
    if updated:
        Page.objects.bulk_update(
            updated,
            [
                "type",
                "title",
                "frontmatter",
                "body",
                "summary",
                "tags",
                "visibility",
                "effective_date",
                "content_hash",
                "deleted_at",
                "updated_at",
            ],
        )
    for visibility, pages in visibility_moves.items():
        # Chunks carry the page's visibility; never let them lag behind it.
        Chunk.objects.filter(page__in=pages).update(visibility=visibility)
    return {page.pk for page in new_pages}


def _store_raws(
    *, src: Source, raws: Sequence[tuple[RawInput, Page | None]]
) -> dict[str, RawRecord]:
    """Insert raw records (checked by ``_check_raws``), each linked to its page;
    an existing (source, external_id) row is reused untouched (its page link is the
    caller's to update). Returns the records by external id (truncated to 512
    characters, the column's width)."""
    if not raws:
        return {}
    rows: dict[str, dict[str, Any]] = {}
    for raw, page in raws:
        payload = _json_safe(raw.payload) if raw.payload is not None else None
        digest_source = raw.content or json.dumps(payload, sort_keys=True)
        external_id = raw.external_id[:512]
        rows.setdefault(
            external_id,
            {
                "source_id": src.id,
                "external_id": external_id,
                "kind": raw.kind,
                "content": raw.content,
                "payload": payload,
                "metadata": _json_safe(raw.metadata),
                "content_hash": sha256_hex(digest_source or ""),
                "page_id": page.pk if page is not None else None,
            },
        )
    written = bulk_insert(
        RawRecord,
        list(rows.values()),
        conflict=["source", "external_id"],
        returning=["id", "external_id", "captured_at"],
    )
    records: dict[str, RawRecord] = {}
    for pk, external_id, captured_at in written:
        record = RawRecord(pk=pk, captured_at=captured_at, **rows[external_id])
        record._state.adding = False
        records[external_id] = record
    missing = [key for key in rows if key not in records]
    if missing:
        records.update(
            (r.external_id, r)
            for r in RawRecord.objects.filter(source=src, external_id__in=missing).only(
                "id", "external_id", "page_id", "kind", "source_id", "content_hash"
            )
        )
    return records


def _add_relations(*, src: Source, plans: list[_Plan], actor: Caller) -> None:
    """Create the plans' explicit relations (checked by ``_plan_relations``)."""
    wanted = {r.to_slug for p in plans for r in p.relations}
    if not wanted:
        return
    targets = dict(
        Page.objects.filter(
            source=src, slug__in=wanted, deleted_at__isnull=True
        ).values_list("slug", "pk")
    )
    Relation.objects.bulk_create(
        [
            Relation(
                source=src,
                from_page=p.page,
                to_page_id=targets[rel.to_slug],
                relation_type=relation_type,
                context=rel.context[:200],
                provenance=p.provenance,
                created_by=actor.actor[:200],
            )
            for p in plans
            for rel, relation_type in zip(p.relations, p.relation_types, strict=True)
        ],
        ignore_conflicts=True,
    )


def _add_timeline(*, plans: list[_Plan]) -> None:
    """Insert the plans' timeline entries; the dedup constraint drops repeats."""
    rows = [
        TimelineEntry(
            page=p.page,
            date=e.date,
            summary=e.summary.strip(),
            summary_hash=sha256_hex(e.summary.strip()),
            source_ref=e.source_ref[:500],
        )
        for p in plans
        for e in p.timeline
        if e.summary.strip()
    ]
    if rows:
        TimelineEntry.objects.bulk_create(rows, ignore_conflicts=True)


def page_add(**kwargs: Any) -> WriteResult:
    """``page_write(mode="create", ...)``: add a new page (SPEC §2.3 Add)."""
    return page_write(mode="create", **kwargs)


def page_update(*, mode: str = "append", **kwargs: Any) -> WriteResult:
    """``page_write`` with ``mode`` ``append`` (default) or ``replace`` (SPEC §2.3
    Update). Raises ``InvalidParams`` for any other mode."""
    if mode not in ("append", "replace"):
        raise InvalidParams(
            f"Unknown update mode {mode!r}.",
            suggestion="Use 'append' (default) or 'replace'.",
            detail={"field": "mode", "allowed": ["append", "replace"]},
        )
    return page_write(mode=mode, **kwargs)


# --- soft delete and restore -----------------------------------------------------------


def page_soft_delete(*, page: Page, actor: Caller, reason: str = "") -> bool:
    """Soft-delete a page: set ``deleted_at``, drop its chunks (so no search arm can
    return it), write a revision and an audit row. Idempotent: returns False when it
    was already deleted. Dream purges it after 72 h (SPEC §10)."""
    with transaction.atomic():
        locked = Page.objects.select_for_update().get(pk=page.pk)
        if locked.deleted_at is not None:
            return False
        locked.deleted_at = timezone.now()
        locked.indexed_hash = ""
        locked.save(update_fields=["deleted_at", "indexed_hash", "updated_at"])
        Chunk.objects.filter(page=locked).delete()
        PageRevision.objects.create(
            page=locked,
            actor=actor.actor[:200],
            provenance={"reason": reason} if reason else {},
            operation="delete",
            previous_title=locked.title,
            previous_body=locked.body,
            previous_frontmatter=locked.frontmatter,
            content_hash=locked.content_hash,
        )
        AuditEvent.objects.create(
            actor=actor.actor[:200],
            action=AuditEvent.Action.PAGE_DELETED,
            source=locked.source,
            target_type="page",
            target_id=f"{locked.source_id}:{locked.slug}",
            extra_data={"reason": reason},
        )
    page.deleted_at, page.indexed_hash = locked.deleted_at, ""
    return True


def page_restore(*, page: Page, actor: Caller, embed: bool = True) -> bool:
    """Undo a soft delete: clear ``deleted_at``, rebuild chunks (embeddings after
    commit), audit it. Idempotent: returns False when the page was not deleted."""
    with transaction.atomic():
        locked = Page.objects.select_for_update().get(pk=page.pk)
        if locked.deleted_at is None:
            return False
        locked.deleted_at = None
        locked.save(update_fields=["deleted_at", "updated_at"])
        if _rebuild_chunks(locked) == 0:
            Page.objects.filter(pk=locked.pk).update(indexed_hash=locked.content_hash)
        PageRevision.objects.create(
            page=locked,
            actor=actor.actor[:200],
            operation="restore",
            previous_title=locked.title,
            previous_body=locked.body,
            previous_frontmatter=locked.frontmatter,
            content_hash=locked.content_hash,
        )
        AuditEvent.objects.create(
            actor=actor.actor[:200],
            action=AuditEvent.Action.PAGE_RESTORED,
            source=locked.source,
            target_type="page",
            target_id=f"{locked.source_id}:{locked.slug}",
        )
    page.deleted_at = None
    if embed:
        transaction.on_commit(lambda: _embed_page(locked.pk, locked.content_hash))
    return True


# --- the index: chunks and embeddings ----------------------------------------------------


def _chunk_hash(title: str, text: str) -> str:
    return sha256_hex(f"{title}\n\n{text}")


def _rebuild_chunks(page: Page) -> int:
    """``_rebuild_chunks_many`` for one page; returns its chunks still waiting for
    an embedding."""
    return _rebuild_chunks_many([page]).get(page.pk, 0)


def _rebuild_chunks_many(pages: Sequence[Page]) -> dict[int, int]:
    """Replace the chunks (text + tsvector) of ``pages`` inside the caller's
    transaction, with three statements whatever the number of pages.

    Embeddings of chunks whose text (and title) did not change are carried over when
    they came from the current provider, so an edit re-embeds only what changed.
    Returns, per page id, the number of chunks still waiting for an embedding (0 with
    provider ``none``: there is nothing to embed).
    """
    if not pages:
        return {}
    provider = embeddings.get_provider()
    model = provider.name if provider else ""
    ids = [page.pk for page in pages]
    old: dict[tuple[int, str], Chunk] = {}
    if model:
        old = {
            (c.page_id, c.content_hash): c
            for c in Chunk.objects.filter(
                page_id__in=ids, embedding__isnull=False, embedding_model=model
            ).only("page_id", "content_hash", "embedding", "embedding_model")
        }
    Chunk.objects.filter(page_id__in=ids).delete()
    rows: list[dict[str, Any]] = []
    waiting: dict[int, int] = {}
    for page in pages:
        texts = chunk_body(page.body) or ([page.title] if page.title else [])
        waiting[page.pk] = 0
        for ordinal, text in enumerate(texts):
            digest = _chunk_hash(page.title, text)
            reuse = old.get((page.pk, digest))
            if reuse is None:
                waiting[page.pk] += 1
            rows.append(
                {
                    "page_id": page.pk,
                    "source_id": page.source_id,
                    "visibility": page.visibility,
                    "ordinal": ordinal,
                    "text": text,
                    "token_count": chunk_tokens(text),
                    "content_hash": digest,
                    "embedding": reuse.embedding if reuse else None,
                    "embedding_model": reuse.embedding_model if reuse else "",
                    "title": page.title,
                }
            )
    language = settings.BRAIN_FTS_LANGUAGE
    # The tsvector (title weight A, text weight D) is computed by the INSERT itself.
    bulk_insert(
        Chunk,
        rows,
        extra={"title": "text"},
        computed={
            "tsv": (
                "setweight(to_tsvector(%s::regconfig, COALESCE(r.title, '')), 'A') || "
                "setweight(to_tsvector(%s::regconfig, COALESCE(r.text, '')), 'D')",
                [language, language],
            )
        },
    )
    if provider is None:
        return dict.fromkeys(ids, 0)
    return waiting


def _embed_chunks(chunks: list[Chunk], titles: dict[int, str]) -> str | None:
    """Embed ``chunks`` (title + text) and store the vectors; returns the model name,
    or None when no provider is configured or it failed (chunks stay pending)."""
    if not chunks:
        provider = embeddings.get_provider()
        return provider.name if provider else None
    vectors, model = embeddings.embed_texts(
        [f"{titles[c.page_id]}\n\n{c.text}" for c in chunks]
    )
    if vectors is None:
        return None
    for chunk, vector in zip(chunks, vectors, strict=True):
        chunk.embedding = vector
        chunk.embedding_model = model
    Chunk.objects.bulk_update(chunks, ["embedding", "embedding_model"])
    return model


def _mark_indexed(page_ids: Iterable[int], model: str) -> set[int]:
    """Set ``indexed_hash = content_hash`` for pages whose chunks all carry an
    embedding from ``model``, in one compare-and-set statement (a page rewritten
    meanwhile has new chunks without vectors and stays behind). Returns the ids
    of ``page_ids`` whose index is current afterwards."""
    ids = list(page_ids)
    if not ids:
        return set()
    stale = Chunk.objects.filter(page_id=OuterRef("pk")).filter(
        Q(embedding__isnull=True) | ~Q(embedding_model=model)
    )
    Page.objects.filter(pk__in=ids, deleted_at__isnull=True).exclude(
        indexed_hash=F("content_hash")
    ).exclude(Exists(stale)).update(indexed_hash=F("content_hash"))
    return set(
        Page.objects.filter(pk__in=ids, indexed_hash=F("content_hash")).values_list(
            "pk", flat=True
        )
    )


def _embed_pages(pages: Sequence[tuple[int, str]]) -> set[int]:
    """Embed the pending chunks of ``pages`` ((page id, content hash when written)
    pairs) outside any transaction (STYLE rule 15), ``EMBED_BATCH`` chunks per
    model call whatever page they belong to.

    A page rewritten since (another content hash) is left to its own writer.
    Returns the ids whose index is current afterwards. A provider of ``none``
    counts as current once the chunks exist (nothing to embed); a failing provider
    leaves the pages behind for ``pages_embed_pending``.
    """
    wanted = dict(pages)
    titles = {
        pk: title
        for pk, title, content_hash in Page.objects.filter(
            pk__in=list(wanted)
        ).values_list("pk", "title", "content_hash")
        if content_hash == wanted[pk]
    }
    if not titles:
        return set()
    provider = embeddings.get_provider()
    if provider is None:
        Page.objects.filter(pk__in=list(titles)).update(indexed_hash=F("content_hash"))
        return set(titles)
    chunks = list(
        Chunk.objects.filter(page_id__in=list(titles))
        .filter(Q(embedding__isnull=True) | ~Q(embedding_model=provider.name))
        .only("id", "page_id", "text")
        .order_by("page_id", "ordinal")
    )
    model = provider.name
    for offset in range(0, len(chunks), EMBED_BATCH):
        model = _embed_chunks(chunks[offset : offset + EMBED_BATCH], titles)
        if model is None:
            return set()
    return _mark_indexed(titles, model)


def _embed_page(page_id: int, content_hash: str) -> bool:
    """``_embed_pages`` for one page: True when its index is current afterwards."""
    return page_id in _embed_pages([(page_id, content_hash)])


def page_reindex(*, page: Page) -> bool:
    """Force a rebuild of one page's chunks and embeddings (admin "re-embed").

    Chunks are rebuilt in a transaction, then embedded after it; returns True when the
    index is current afterwards (False while deferred to an outer commit or when the
    provider failed)."""
    with transaction.atomic():
        locked = Page.objects.select_for_update().get(pk=page.pk)
        if locked.deleted_at is not None:
            return False
        Chunk.objects.filter(page=locked).update(embedding=None, embedding_model="")
        Page.objects.filter(pk=locked.pk).update(indexed_hash="")
        if _rebuild_chunks(locked) == 0:
            Page.objects.filter(pk=locked.pk).update(indexed_hash=locked.content_hash)
            return True
    if connection.in_atomic_block:
        transaction.on_commit(lambda: _embed_page(locked.pk, locked.content_hash))
        return False
    return _embed_page(locked.pk, locked.content_hash)


def pages_embed_pending(
    *,
    limit: int | None = None,
    progress: Callable[[int], None] | None = None,
    source_ids: Sequence[str] | None = None,
) -> int:
    """Fill missing or stale chunk embeddings (job ``embed_pending``, SPEC §7, §10).

    Embeds chunks with no embedding or one from another model (a managed re-embed
    after a provider change), in batches of 64, at most ``limit`` chunks; calls
    ``progress(n)`` after each batch with the number embedded in it. Pages whose
    chunks are all embedded get ``indexed_hash = content_hash``. Returns the number of
    chunks embedded; 0 with provider ``none`` or when the provider fails (logged).
    ``source_ids`` limits it to those sources (an importer filling its own pages).
    Idempotent: a second run finds nothing to do.
    """
    provider = embeddings.get_provider()
    if provider is None:
        return 0
    total = 0
    stale = Q(embedding__isnull=True) | ~Q(embedding_model=provider.name)
    if source_ids is not None:
        stale &= Q(source_id__in=list(source_ids))
    while limit is None or total < limit:
        size = EMBED_BATCH if limit is None else min(EMBED_BATCH, limit - total)
        batch = list(
            Chunk.objects.filter(stale, page__deleted_at__isnull=True)
            .only("id", "page_id", "text")
            .order_by("id")[:size]
        )
        if not batch:
            break
        titles = dict(
            Page.objects.filter(pk__in={c.page_id for c in batch}).values_list(
                "pk", "title"
            )
        )
        model = _embed_chunks(batch, titles)
        if model is None:
            break
        total += len(batch)
        _mark_indexed({c.page_id for c in batch}, model)
        if progress is not None:
            progress(len(batch))
    return total
