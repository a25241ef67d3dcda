"""Planning a batch of page writes: slugs, Schema checks, merges with the stored page (SPEC §2.3)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from brain.access import Caller, page_not_found
from brain.exceptions import AlreadyExists, BrainError, InvalidParams, NotFound
from brain.models import (
    Page,
    PageType,
    RawRecord,
    RelationType,
    Source,
    Visibility,
)
from brain.services.pages.inputs import (
    AGENT_INPUT_TAG,
    MODES,
    PageInput,
    RawInput,
    RelationInput,
    TimelineInput,
    _first_line,
    _json_safe,
    _page_content_hash,
    _resolve_slug,
)
from brain.services.pages.revisions import check_base_revision
from brain.services.schema import (
    schema_check_endpoints,
    schema_page_type,
    schema_page_type_for_slug,
    schema_relation_type,
    schema_relation_types,
    schema_required_fields,
)


class _SchemaCache:
    """Schema rows read once per ``pages_write`` call (admin edits apply to the next
    call); the errors are those of ``brain.services.schema``."""

    def __init__(self) -> None:
        self._types: dict[str, PageType] = {}
        self._relations: dict[tuple[str, int, int], RelationType] = {}
        self._relation_types: dict[str, RelationType] | None = None
        self._types_by_id: dict[int, PageType] = {}

    def page_type(self, name: str) -> PageType:
        if name not in self._types:
            self._types[name] = schema_page_type(name=name)
        return self._types[name]

    def page_type_by_id(self, pk: int) -> PageType:
        """A page type by primary key (every type read once per cache)."""
        if pk not in self._types_by_id:
            self._types_by_id.update(PageType.objects.in_bulk())
        return self._types_by_id[pk]

    def page_type_for_slug(self, slug: str) -> PageType:
        # Not cached: the longest matching prefix decides, and importers name types.
        return schema_page_type_for_slug(slug=slug)

    def relation_type(
        self, name: str, from_type: PageType, to_type: PageType
    ) -> RelationType:
        key = (name, from_type.pk, to_type.pk)
        if key not in self._relations:
            if self._relation_types is None:
                self._relation_types = schema_relation_types()
            known = self._relation_types.get(name)
            if known is None:  # created since the read, or unknown: ask the Schema
                known = schema_relation_type(
                    name=name, from_type=from_type, to_type=to_type
                )
            schema_check_endpoints(
                relation_type=known, from_type=from_type, to_type=to_type
            )
            self._relations[key] = known
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

    @property
    def stored(self) -> Page:
        """The page this plan writes: the existing one, or the new one once
        ``_save_pages`` created it (``RuntimeError`` before that)."""
        if self.page is None:
            raise RuntimeError(f"The page {self.slug!r} is not saved yet.")
        return self.page


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
    default_visibility: str = Visibility.WORLD,
) -> _Plan:
    """Decide what ``item`` writes over ``page`` (the locked current row or None);
    a new page without a visibility gets ``default_visibility`` (its source's).
    Raises the ``BrainError`` that refuses the item; writes nothing."""
    mode = item.mode
    if page is not None:
        # A page the caller cannot read answers exactly as a read would (SPEC §8).
        actor.check_existing_write(
            source_id=page.source_id, visibility=page.visibility, slug=slug
        )
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
        # The same answer as a page the caller may not read (SPEC §8).
        raise page_not_found(slug)
    if page is not None and page.deleted_at is None:
        # Under the row lock ``_write_batch`` took: nobody changes it until commit.
        check_base_revision(page, item.base_revision)
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
    # A summary that was only the old body's first line is derived data: when the
    # body changes it follows the new body (an export carries it in frontmatter).
    derived = (
        _first_line(old_body) if page is not None and new_body != old_body else None
    )
    if summary is not None:
        # A blank summary asks for the default (the body's first line).
        new_summary = summary.strip() or _first_line(new_body)
    elif frontmatter and str(frontmatter.get("summary") or "").strip() not in (
        "",
        derived,
    ):
        new_summary = str(frontmatter["summary"]).strip()
    elif page is not None and page.summary and page.summary != derived:
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

    new_visibility = item.visibility or (
        page.visibility if page else default_visibility
    )
    new_effective: date | None
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
