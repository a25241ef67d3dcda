"""The one write path for pages (SPEC §2.3) and the search index behind it (SPEC §3).

Every writer (HTTP API, MCP, admin, connectors, markdown import, dream) calls
``page_write`` (or its ``page_add`` / ``page_update`` shorthands). One call validates
the input against the Schema, then writes the raw layer (``RawRecord``), the wiki layer
(``Page``), its ``PageRevision``, aliases and relations, and the keyword half of the
index (chunks with their tsvector) in ONE transaction: neither layer is ever updated
without the other. Embeddings are network or CPU-heavy work, so they run after the
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
from django.contrib.postgres.search import SearchVector
from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q, Value
from django.utils import timezone

from brain.access import Caller
from brain.chunking import chunk_body, chunk_tokens
from brain import embeddings
from brain.exceptions import AlreadyExists, InvalidParams, NotFound
from brain.models import (
    Alias,
    AuditEvent,
    Chunk,
    Page,
    PageRevision,
    PageType,
    RawRecord,
    Relation,
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
    frontmatter with sorted keys)."""
    canonical = json.dumps(
        {"title": title, "type": type_name, "body": body, "frontmatter": frontmatter},
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


def page_write(
    *,
    source: Source | str,
    mode: str,
    actor: Caller,
    slug: str | None = None,
    title: str | None = None,
    body: str | None = None,
    type_name: str | None = None,
    summary: str | None = None,
    tags: Sequence[str] | None = None,
    frontmatter: dict[str, Any] | None = None,
    visibility: str | None = None,
    effective_date: date | None = None,
    raws: Sequence[RawInput] = (),
    provenance: dict[str, Any] | None = None,
    allow_empty: bool = False,
    relations: Sequence[RelationInput | dict[str, str]] = (),
    embed: bool = True,
    replace_frontmatter: bool = False,
    timeline: Sequence[TimelineInput] = (),
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
    Returns a ``WriteResult``.
    """
    if mode not in MODES:
        raise InvalidParams(
            f"Unknown write mode {mode!r}.",
            suggestion=f"Use one of: {', '.join(MODES)}.",
            detail={"field": "mode", "allowed": list(MODES)},
        )
    src = _resolve_source(source)
    if visibility is not None and visibility not in Visibility.values:
        raise InvalidParams(
            f"Unknown visibility {visibility!r}.",
            suggestion="Use 'world' or 'private'.",
            detail={"field": "visibility", "allowed": list(Visibility.values)},
        )
    requested_type = schema_page_type(name=type_name) if type_name else None
    # A title-derived slug lives under its type's prefix; no type means a note.
    prefix_type = requested_type or (None if slug else schema_page_type(name="note"))
    resolved_slug = _resolve_slug(slug=slug, title=title, page_type=prefix_type)
    wanted_relations = [
        r if isinstance(r, RelationInput) else RelationInput(**r) for r in relations
    ]

    for attempt in range(2):
        try:
            result = _write_locked(
                src=src,
                mode=mode,
                actor=actor,
                slug=resolved_slug,
                title=title,
                body=body,
                requested_type=requested_type,
                summary=summary,
                tags=tags,
                frontmatter=frontmatter,
                visibility=visibility,
                effective_date=effective_date,
                raws=raws,
                provenance=provenance,
                allow_empty=allow_empty,
                relations=wanted_relations,
                replace_frontmatter=replace_frontmatter,
                timeline=timeline,
            )
            break
        except IntegrityError:
            # A concurrent writer created the same slug between our read and insert.
            if mode == "upsert" and attempt == 0:
                continue
            raise AlreadyExists(
                f"A page with slug {resolved_slug!r} already exists in source {src.id!r}.",
                suggestion="Use update_page (mode 'append' or 'replace') to change it.",
                detail={"slug": resolved_slug, "source": src.id},
            ) from None

    if result.changed and embed and not result.index_current:
        page_id, content_hash = result.page.pk, result.page.content_hash
        if connection.in_atomic_block:
            # The caller holds an outer transaction: embed once it commits.
            transaction.on_commit(lambda: _embed_page(page_id, content_hash))
        else:
            result.index_current = _embed_page(page_id, content_hash)
            result.page.indexed_hash = content_hash if result.index_current else ""
    elif not result.changed:
        result.index_current = result.page.indexed_hash == result.page.content_hash
    return result


def _write_locked(
    *,
    src: Source,
    mode: str,
    actor: Caller,
    slug: str,
    title: str | None,
    body: str | None,
    requested_type: PageType | None,
    summary: str | None,
    tags: Sequence[str] | None,
    frontmatter: dict[str, Any] | None,
    visibility: str | None,
    effective_date: date | None,
    raws: Sequence[RawInput],
    provenance: dict[str, Any] | None,
    allow_empty: bool,
    relations: list[RelationInput],
    replace_frontmatter: bool,
    timeline: Sequence[TimelineInput],
) -> WriteResult:
    """The transactional part of ``page_write``; see there."""
    now = timezone.now()
    with transaction.atomic():
        page = (
            Page.objects.select_for_update()
            .select_related("type")
            .filter(source=src, slug=slug)
            .first()
        )
        if page is not None and page.deleted_at is not None and mode != "upsert":
            if mode == "create":
                raise AlreadyExists(
                    f"Page {slug!r} exists but is deleted.",
                    suggestion="Restore it in admin (action 'restore') or pick another slug.",
                    detail={"slug": slug, "source": src.id, "deleted": True},
                )
            page = None  # append/replace on a deleted page: treated as missing
        if mode == "create" and page is not None:
            raise AlreadyExists(
                f"A page with slug {slug!r} already exists in source {src.id!r}.",
                suggestion="Use update_page (mode 'append' or 'replace') to change it.",
                detail={"slug": slug, "source": src.id},
            )
        if mode in ("append", "replace") and page is None:
            raise NotFound(
                f"No page {slug!r} in source {src.id!r}.",
                suggestion="Use add_page to create it.",
                detail={"slug": slug, "source": src.id},
            )
        operation = "create" if page is None else ("replace" if mode == "upsert" else mode)
        created = page is None

        old_body = page.body if page else ""
        old_fm: dict[str, Any] = dict(page.frontmatter) if page else {}
        new_body = old_body
        if operation == "create":
            new_body = (body or "").strip("\n")
        elif operation == "append":
            addition = (body or "").strip("\n")
            if addition.strip():
                new_body = f"{old_body.rstrip()}\n\n{addition}" if old_body.strip() else addition
        elif body is not None:  # replace
            if not body.strip() and old_body.strip() and not allow_empty:
                raise InvalidParams(
                    f"Refusing to replace the non-empty body of {slug!r} with an empty one.",
                    suggestion="Pass allow_empty=true if you really want to empty the page.",
                    detail={"slug": slug, "field": "body"},
                )
            new_body = body.strip("\n")

        base_fm = {} if replace_frontmatter and frontmatter is not None else old_fm
        fm: dict[str, Any] = {**base_fm, **_json_safe(frontmatter or {})}
        new_title = (title or "").strip() or str(fm.get("title") or "") or (
            page.title if page else ""
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

        stamped = _json_safe(dict(provenance or {}))
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
            page_type = schema_page_type(name=str(fm["type"]))
        else:
            page_type = schema_page_type_for_slug(slug=slug)
        fm["type"] = page_type.name
        schema_required_fields(page_type=page_type, frontmatter=fm)

        new_visibility = visibility or (page.visibility if page else Visibility.WORLD)
        if effective_date is not None:
            new_effective = effective_date
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

        stored_raws = _store_raws(src=src, raws=raws)
        if not content_changed and not meta_changed:
            if stored_raws:
                RawRecord.objects.filter(pk__in=[r.pk for r in stored_raws]).update(page=page)
            _add_timeline(page=page, entries=timeline)
            return WriteResult(
                page=page,
                created=False,
                changed=False,
                index_current=False,
                raw_records=stored_raws,
                operation="noop",
            )
        if not stored_raws:
            stored_raws = _store_raws(
                src=src,
                raws=[
                    RawInput(
                        external_id=f"input:{uuid.uuid4()}",
                        kind=RawRecord.Kind.AGENT_INPUT,
                        content=body or "",
                        payload=_json_safe(
                            {
                                "mode": mode,
                                "slug": slug,
                                "title": title,
                                "summary": summary,
                                "tags": list(tags) if tags is not None else None,
                                "frontmatter": frontmatter,
                            }
                        ),
                        metadata={"actor": actor.actor, "client": actor.client},
                    )
                ],
            )

        previous = (
            {"title": page.title, "body": page.body, "frontmatter": page.frontmatter}
            if page
            else {"title": "", "body": "", "frontmatter": {}}
        )
        if page is None:
            page = Page.objects.create(
                source=src,
                slug=slug,
                type=page_type,
                title=new_title,
                frontmatter=fm,
                body=new_body,
                summary=new_summary,
                tags=new_tags,
                visibility=new_visibility,
                effective_date=new_effective,
                content_hash=content_hash,
            )
        else:
            visibility_changed = new_visibility != page.visibility
            page.type = page_type
            page.title = new_title
            page.frontmatter = fm
            page.body = new_body
            page.summary = new_summary
            page.tags = new_tags
            page.visibility = new_visibility
            page.effective_date = new_effective
            page.content_hash = content_hash
            page.deleted_at = None
            page.save()
            if visibility_changed:
                # Chunks carry the page's visibility; never let them lag behind it.
                Chunk.objects.filter(page=page).update(visibility=new_visibility)

        RawRecord.objects.filter(pk__in=[r.pk for r in stored_raws]).update(page=page)
        PageRevision.objects.create(
            page=page,
            actor=actor.actor[:200],
            provenance=stamped,
            operation=operation,
            previous_title=previous["title"],
            previous_body=previous["body"],
            previous_frontmatter=previous["frontmatter"],
            content_hash=content_hash,
            raw_record=stored_raws[0] if stored_raws else None,
        )
        Alias.objects.bulk_create(
            [
                Alias(source=src, page=page, alias=a, kind=_alias_kind(a))
                for a in _aliases_from(new_title, fm)
            ],
            ignore_conflicts=True,
        )
        _add_relations(page=page, relations=relations, actor=actor, provenance=stamped)
        _add_timeline(page=page, entries=timeline)
        index_current = page.indexed_hash == content_hash
        if content_changed or not index_current:
            index_current = _rebuild_chunks(page) == 0
            if index_current:
                # Nothing to embed (provider none, or every vector was reused).
                Page.objects.filter(pk=page.pk).update(indexed_hash=content_hash)
                page.indexed_hash = content_hash
    return WriteResult(
        page=page,
        created=created,
        changed=True,
        index_current=index_current,
        raw_records=stored_raws,
        operation=operation,
    )


def _store_raws(*, src: Source, raws: Iterable[RawInput]) -> list[RawRecord]:
    """Insert raw records; an existing (source, external_id) row is reused untouched."""
    stored: list[RawRecord] = []
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
        payload = _json_safe(raw.payload) if raw.payload is not None else None
        digest_source = raw.content or json.dumps(payload, sort_keys=True)
        record, _ = RawRecord.objects.get_or_create(
            source=src,
            external_id=raw.external_id[:512],
            defaults={
                "kind": raw.kind,
                "content": raw.content,
                "payload": payload,
                "metadata": _json_safe(raw.metadata),
                "content_hash": sha256_hex(digest_source or ""),
            },
        )
        stored.append(record)
    return stored


def _add_relations(
    *,
    page: Page,
    relations: list[RelationInput],
    actor: Caller,
    provenance: dict[str, Any],
) -> None:
    """Create explicit relations (Schema-checked) to existing pages of the source."""
    for rel in relations:
        target = (
            Page.objects.select_related("type")
            .filter(source=page.source, slug=rel.to_slug, deleted_at__isnull=True)
            .first()
        )
        if target is None:
            raise NotFound(
                f"Relation target {rel.to_slug!r} does not exist in source "
                f"{page.source_id!r}.",
                suggestion="Add the target page first, or drop the relation.",
                detail={"slug": rel.to_slug, "relation_type": rel.type},
            )
        relation_type = schema_relation_type(
            name=rel.type, from_type=page.type, to_type=target.type
        )
        Relation.objects.get_or_create(
            from_page=page,
            to_page=target,
            relation_type=relation_type,
            defaults={
                "source": page.source,
                "context": rel.context[:200],
                "provenance": provenance,
                "created_by": actor.actor[:200],
            },
        )


def _add_timeline(*, page: Page, entries: Sequence[TimelineInput]) -> None:
    """Insert timeline entries; the dedup constraint drops repeats."""
    rows = [
        TimelineEntry(
            page=page,
            date=e.date,
            summary=e.summary.strip(),
            summary_hash=sha256_hex(e.summary.strip()),
            source_ref=e.source_ref[:500],
        )
        for e in entries
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
    """Replace the page's chunks (text + tsvector) inside the caller's transaction.

    Embeddings of chunks whose text (and title) did not change are carried over when
    they came from the current provider, so an edit re-embeds only what changed.
    Returns the number of chunks still waiting for an embedding (0 with provider
    ``none``: there is nothing to embed).
    """
    provider = embeddings.get_provider()
    model = provider.name if provider else ""
    old = {
        c.content_hash: c
        for c in Chunk.objects.filter(page=page, embedding__isnull=False).only(
            "content_hash", "embedding", "embedding_model"
        )
    }
    Chunk.objects.filter(page=page).delete()
    texts = chunk_body(page.body) or ([page.title] if page.title else [])
    rows = []
    for ordinal, text in enumerate(texts):
        digest = _chunk_hash(page.title, text)
        reuse = old.get(digest)
        keep = reuse is not None and model and reuse.embedding_model == model
        rows.append(
            Chunk(
                page=page,
                source_id=page.source_id,
                visibility=page.visibility,
                ordinal=ordinal,
                text=text,
                token_count=chunk_tokens(text),
                content_hash=digest,
                embedding=reuse.embedding if keep else None,
                embedding_model=reuse.embedding_model if keep else "",
            )
        )
    Chunk.objects.bulk_create(rows)
    language = settings.BRAIN_FTS_LANGUAGE
    Chunk.objects.filter(page=page).update(
        tsv=SearchVector(Value(page.title), weight="A", config=language)
        + SearchVector("text", weight="D", config=language)
    )
    if provider is None:
        return 0
    return sum(1 for row in rows if row.embedding is None)


def _embed_chunks(chunks: list[Chunk], titles: dict[int, str]) -> str | None:
    """Embed ``chunks`` (title + text) and store the vectors; returns the model name,
    or None when no provider is configured or it failed (chunks stay pending)."""
    if not chunks:
        provider = embeddings.get_provider()
        return provider.name if provider else None
    vectors, model = embeddings.embed_texts([f"{titles[c.page_id]}\n\n{c.text}" for c in chunks])
    if vectors is None:
        return None
    for chunk, vector in zip(chunks, vectors, strict=True):
        chunk.embedding = vector
        chunk.embedding_model = model
    Chunk.objects.bulk_update(chunks, ["embedding", "embedding_model"])
    return model


def _mark_indexed(page_ids: Iterable[int], model: str) -> None:
    """Set ``indexed_hash = content_hash`` for pages whose chunks all carry an
    embedding from ``model`` (compare-and-set: a page rewritten meanwhile stays
    behind)."""
    ids = list(page_ids)
    if not ids:
        return
    pending = set(
        Chunk.objects.filter(page_id__in=ids)
        .filter(Q(embedding__isnull=True) | ~Q(embedding_model=model))
        .values_list("page_id", flat=True)
    )
    done = [i for i in ids if i not in pending]
    Page.objects.filter(pk__in=done, deleted_at__isnull=True).exclude(
        indexed_hash=F("content_hash")
    ).update(indexed_hash=F("content_hash"))


def _embed_page(page_id: int, content_hash: str) -> bool:
    """Embed the page's pending chunks outside any transaction (STYLE rule 15).

    Returns True when the index is current afterwards. A provider of ``none`` counts
    as current once the chunks exist (nothing to embed); a failing provider leaves the
    page behind for ``pages_embed_pending``.
    """
    provider = embeddings.get_provider()
    page = Page.objects.filter(pk=page_id).only("title", "content_hash").first()
    if page is None or page.content_hash != content_hash:
        return False
    if provider is None:
        return bool(
            Page.objects.filter(pk=page_id, content_hash=content_hash).update(
                indexed_hash=content_hash
            )
        )
    chunks = list(
        Chunk.objects.filter(page_id=page_id)
        .filter(Q(embedding__isnull=True) | ~Q(embedding_model=provider.name))
        .only("id", "page_id", "text")
        .order_by("ordinal")
    )
    model = _embed_chunks(chunks, {page_id: page.title})
    if model is None:
        return False
    if Chunk.objects.filter(page_id=page_id).filter(
        Q(embedding__isnull=True) | ~Q(embedding_model=model)
    ).exists():
        return False
    return bool(
        Page.objects.filter(pk=page_id, content_hash=content_hash).update(
            indexed_hash=content_hash
        )
    )


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
) -> int:
    """Fill missing or stale chunk embeddings (job ``embed_pending``, SPEC §7, §10).

    Embeds chunks with no embedding or one from another model (a managed re-embed
    after a provider change), in batches of 64, at most ``limit`` chunks; calls
    ``progress(n)`` after each batch with the number embedded in it. Pages whose
    chunks are all embedded get ``indexed_hash = content_hash``. Returns the number of
    chunks embedded; 0 with provider ``none`` or when the provider fails (logged).
    Idempotent: a second run finds nothing to do.
    """
    provider = embeddings.get_provider()
    if provider is None:
        return 0
    total = 0
    stale = Q(embedding__isnull=True) | ~Q(embedding_model=provider.name)
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
            Page.objects.filter(pk__in={c.page_id for c in batch}).values_list("pk", "title")
        )
        model = _embed_chunks(batch, titles)
        if model is None:
            break
        total += len(batch)
        _mark_indexed({c.page_id for c in batch}, model)
        if progress is not None:
            progress(len(batch))
    return total
