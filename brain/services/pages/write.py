"""The one write path for pages (SPEC §2.3): ``page_write`` / ``pages_write`` and the batch writer."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from brain.access import Caller
from brain.bulk import JsonText, bulk_insert, bulk_insert_objects
from brain.exceptions import AlreadyExists, BrainError, InvalidParams
from brain.extensions import embed_queue
from brain.models import (
    Alias,
    Chunk,
    Page,
    PageRevision,
    PageType,
    RawRecord,
    Relation,
    Source,
    TimelineEntry,
)
from brain.services.facts import facts_attach_waiting
from brain.services.pages.index import (
    _chunks_to_embed,
    _embed_pages,
    _rebuild_chunks_many,
)
from brain.services.pages.inputs import (
    INLINE_EMBED_CHUNKS,
    PageInput,
    RawInput,
    WriteResult,
    _alias_kind,
    _aliases_from,
    _resolve_source,
)
from brain.services.pages.links import _sync_links
from brain.services.pages.plan import (
    _check_raws,
    _Plan,
    _plan_item,
    _plan_relations,
    _plan_slug,
    _SchemaCache,
)
from brain.text import sha256_hex

# --- the write path ------------------------------------------------------------------


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
    (``NotFound`` otherwise). Body wiki-links (``[[slug]]``, ``[[slug|label]]``,
    ``[[Title]]``) of trusted writers become relations (``mentions``, or the type
    the words before the link imply when the Schema allows it, ``brain.links``),
    resolved by slug, then a title or alias naming one page of the source;
    unresolved ones are kept as ``DanglingLink`` rows and resolve when their target
    page is written; a link removed from the body loses its relation.
    ``timeline`` entries are added (duplicates ignored) even when the body is unchanged.
    Facts remembered earlier for a name that now resolves to a written page attach
    to it (``brain.services.facts.facts_attach_waiting``, SPEC §2.4).

    Everything above happens in one transaction. Chunks (text + tsvector) are rebuilt
    in it when the content hash changed; embeddings are computed after commit unless
    ``embed=False`` (bulk importers; ``pages_embed_pending`` fills them later), or,
    when the write leaves more than ``INLINE_EMBED_CHUNKS`` chunks to embed and the
    jobs app registered its queue (``brain.extensions.embed_queue``), by an
    ``embed_pending`` job queued at commit (``index_current`` false until it ran).
    ``frontmatter`` is merged over the stored one unless ``replace_frontmatter``
    (admin edits and markdown re-imports, where the given set is complete).
    ``base_revision`` (the revision the writer read, ``page_revision``) makes a
    write to a page changed since then raise ``Conflict`` (SPEC §4: HTTP 409 with
    the current revision and a diff), checked on the locked row; without it
    appends and replaces apply as they come (appends commute).
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
    link_waiting: bool = True,
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
    ``embed=False``. ``link_waiting=False`` leaves earlier pages' dangling links to
    these pages for the caller to resolve once (``pages_link_waiting``: a bulk
    import's end).
    """
    if errors not in ("raise", "collect"):
        raise ValueError(f"errors must be 'raise' or 'collect', not {errors!r}")
    src = _resolve_source(source)
    schema = _SchemaCache()
    for attempt in range(2):
        try:
            results = _write_batch(
                src=src,
                actor=actor,
                items=items,
                schema=schema,
                errors=errors,
                link_waiting=link_waiting,
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
    queue = embed_queue() if embed and pending else None
    if queue is not None and _chunks_to_embed(pending) > INLINE_EMBED_CHUNKS:
        # Too much for the request (a 1 MB note is ~1,000 chunks, minutes on CPU):
        # the job embeds it; the result says ``index_current`` false meanwhile.
        transaction.on_commit(lambda: queue([src.id]))
    elif embed and pending:
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


def _write_batch(
    *,
    src: Source,
    actor: Caller,
    items: Sequence[PageInput],
    schema: _SchemaCache,
    errors: str,
    link_waiting: bool = True,
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
                        default_visibility=src.page_visibility,
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
            for index, error in newly.items():
                refuse(index, error)
            plans = [p for p in plans if p.index not in refused]
            if not newly:
                break

        changed = [p for p in plans if p.changed]
        created = _save_pages(src=src, plans=changed, now=now, remote=actor.remote)
        title_words_add(
            source_id=src.id,
            titles=[p.title for p in changed if p.title != p.previous["title"]],
        )
        raw_records = _store_raws(
            src=src, raws=[(r, p.stored) for p in plans for r in p.raws]
        )
        linked = []
        for plan in plans:
            for raw in plan.raws:
                record = raw_records[raw.external_id[:512]]
                if record.page_id != plan.stored.pk:
                    record.page = plan.stored
                    linked.append(record)
        if linked:
            RawRecord.objects.bulk_update(linked, ["page"])
        bulk_insert_objects(
            [
                PageRevision(
                    page=p.stored,
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
        bulk_insert(
            Alias,
            [
                {
                    "source_id": src.id,
                    "page_id": p.stored.pk,
                    "alias": a,
                    "kind": _alias_kind(a),
                }
                for p in changed
                for a in _aliases_from(p.title, p.frontmatter)
            ],
            conflict=["source", "alias", "page"],  # Alias's one unique constraint
        )
        _add_relations(src=src, plans=changed, actor=actor)
        _sync_links(
            src=src,
            plans=changed,
            actor=actor,
            schema=schema,
            link_waiting=link_waiting,
        )
        # SPEC §2.4: facts remembered for a name before its page existed attach now.
        facts_attach_waiting(actor=actor.actor, pages=[p.stored for p in changed])
        _add_timeline(plans=plans)
        waiting = _rebuild_chunks_many(
            [
                p.stored
                for p in changed
                if p.content_changed or p.stored.indexed_hash != p.content_hash
            ],
            new_ids=created,
        )
        current_ids = [p.stored.pk for p in changed if waiting.get(p.stored.pk, 0) == 0]
        if current_ids:
            # Nothing to embed (provider none, or every vector was reused).
            Page.objects.filter(pk__in=current_ids).update(
                indexed_hash=F("content_hash")
            )
        for p in changed:
            if p.stored.pk in current_ids:
                p.stored.indexed_hash = p.content_hash

    results: list[Any] = [refused.get(i) for i in range(len(items))]
    for p in plans:
        results[p.index] = WriteResult(
            page=p.stored,
            created=p.stored.pk in created,
            changed=p.changed,
            index_current=p.changed and p.stored.indexed_hash == p.content_hash,
            raw_records=[raw_records[r.external_id[:512]] for r in p.raws],
            operation=p.operation,
        )
    return results


def _save_pages(*, src: Source, plans: list[_Plan], now: Any, remote: bool) -> set[int]:
    """Insert the new pages and update the changed ones (two statements); sets
    ``plan.page``. Returns the ids of the pages created. A slug created meanwhile
    by another writer raises ``IntegrityError`` (``pages_write`` re-plans).

    ``remote`` (the writer is an untrusted caller, ``Caller.remote``) marks the pages
    it creates, and the soft-deleted ones it revives, ``created_by_remote`` (the
    precedence rule's input, ``brain.precedence``); the mark is never cleared."""
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
                created_by_remote=remote,
                created_at=now,
                updated_at=now,
            )
            new_pages.append(p.page)
            continue
        page = p.page
        if page.deleted_at is not None and remote:
            page.created_by_remote = True  # a revival is a re-creation
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
                "created_by_remote",
            ],
        )
    for visibility, pages in visibility_moves.items():
        # Chunks carry the page's visibility; never let them lag behind it.
        Chunk.objects.filter(page__in=pages).update(visibility=visibility)
    return {page.pk for page in new_pages}


_TITLE_WORDS_SQL = """
INSERT INTO brain_titleword (source_id, word)
SELECT DISTINCT %(source)s, w.word
  FROM unnest(%(titles)s::text[]) AS t(title),
       unnest(tsvector_to_array(to_tsvector('simple'::regconfig, t.title))) AS w(word)
 ORDER BY 2
ON CONFLICT DO NOTHING
"""


def title_words_add(*, source_id: str, titles: Sequence[str]) -> None:
    """Add the words of ``titles`` to the source's ``TitleWord`` lexicon (the entity
    near-miss suggestions' dictionary, SPEC §4), one statement; words already there
    are skipped. The page write path calls it for every page it creates or renames
    (the lexicon's only writer); bulk loaders that bypass that path (the entity
    benchmark's COPY) call it once for what they loaded. Words go in sorted, so two
    writers adding overlapping words wait for each other instead of deadlocking."""
    if not titles:
        return
    with connection.cursor() as cursor:
        cursor.execute(_TITLE_WORDS_SQL, {"source": source_id, "titles": list(titles)})


def raws_store(
    *, source: Source | str, raws: Sequence[RawInput]
) -> dict[str, RawRecord]:
    """Store raw records that belong to no page (a mail thread that is not rendered,
    SPEC §6.1 noise) in one statement; an existing (source, external_id) record is
    reused untouched. Returns the records by external id. Raises ``InvalidParams``
    for a raw record without an id or of an unknown kind."""
    _check_raws(raws)
    return _store_raws(src=_resolve_source(source), raws=[(raw, None) for raw in raws])


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
    # The JSON columns as stored (``_json_safe``: Django's encoder, read back),
    # for the records returned; the text encoded once goes to the insert as is.
    stored_json: dict[str, dict[str, Any]] = {}
    for raw, page in raws:
        external_id = raw.external_id[:512]
        if external_id in rows:
            continue  # the first of repeated ids is the one written
        payload_text = (
            json.dumps(raw.payload, cls=DjangoJSONEncoder)
            if raw.payload is not None
            else None
        )
        payload = json.loads(payload_text) if payload_text is not None else None
        metadata_text = json.dumps(raw.metadata, cls=DjangoJSONEncoder)
        stored_json[external_id] = {
            "payload": payload,
            "metadata": json.loads(metadata_text),
        }
        digest_source = raw.content or json.dumps(payload, sort_keys=True)
        digest = (
            hashlib.sha256(raw.data).hexdigest()
            if raw.data is not None
            else sha256_hex(digest_source or "")
        )
        rows[external_id] = {
            "source_id": src.id,
            "external_id": external_id,
            "kind": raw.kind,
            "content": raw.content,
            "payload": JsonText(payload_text) if payload_text is not None else None,
            "metadata": JsonText(metadata_text),
            "content_hash": digest,
            "data": raw.data,
            "page_id": page.pk if page is not None else None,
        }
    written = bulk_insert(
        RawRecord,
        list(rows.values()),
        conflict=["source", "external_id"],
        returning=["id", "external_id", "captured_at"],
    )
    records: dict[str, RawRecord] = {}
    for pk, external_id, captured_at in written:
        record = RawRecord(
            pk=pk,
            captured_at=captured_at,
            **{**rows[external_id], **stored_json[external_id]},
        )
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
                from_page=p.stored,
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
            page=p.stored,
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
