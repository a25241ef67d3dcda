"""Body ``[[wiki-links]]`` of a page write become relations (SPEC §2.3; GBrain's
auto-link / extract pass), in the write's transaction, with a constant number of
queries per batch."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef

from brain.access import Caller
from brain.exceptions import SchemaViolation
from brain.links import DEFAULT_LINK_TYPE, WikiLink, parse_wikilinks
from brain.models import Alias, DanglingLink, Page, PageType, RelationType, Source
from brain.services.pages.inputs import _aliases_from
from brain.services.pages.plan import _Plan, _SchemaCache
from brain.services.relations import relations_reconcile_links
from brain.text import normalize_alias


@dataclass
class _Linked:
    """A page whose body links are (re)resolved."""

    pk: int
    page_type: PageType
    body: str
    provenance: dict[str, Any]


def _link_type(
    schema: _SchemaCache, name: str, from_type: PageType, to_type: PageType
) -> RelationType:
    """The inferred type when the Schema allows it between these page types, else
    ``mentions`` (which allows any endpoints)."""
    if name != DEFAULT_LINK_TYPE:
        # When the Schema refuses the inferred type here, fall back to mentions.
        with contextlib.suppress(SchemaViolation):
            return schema.relation_type(name, from_type, to_type)
    return schema.relation_type(DEFAULT_LINK_TYPE, from_type, to_type)


def _targets(
    src: Source, keys: set[str], schema: _SchemaCache
) -> dict[str, tuple[int, PageType]]:
    """Live pages of ``src`` by normalised key: slug first, then a title or alias
    naming exactly one page (an ambiguous alias picks nothing, SPEC §2.3). Two
    queries of plain values (no model rows: a bulk import resolves thousands)."""
    if not keys:
        return {}
    found: dict[str, tuple[int, PageType]] = {
        slug: (pk, schema.page_type_by_id(type_id))
        for slug, pk, type_id in Page.objects.filter(
            source=src, slug__in=list(keys), deleted_at__isnull=True
        ).values_list("slug", "pk", "type_id")
    }
    by_alias: dict[str, dict[int, int]] = {}
    for alias, page_id, type_id in Alias.objects.filter(
        source=src, alias__in=list(keys - set(found)), page__deleted_at__isnull=True
    ).values_list("alias", "page_id", "page__type_id"):
        by_alias.setdefault(alias, {})[page_id] = type_id
    for key, pages in by_alias.items():
        if len(pages) == 1:
            page_id, type_id = next(iter(pages.items()))
            found[key] = (page_id, schema.page_type_by_id(type_id))
    return found


def _link(
    *, src: Source, pages: Sequence[_Linked], actor: Caller, schema: _SchemaCache
) -> None:
    """Parse, resolve and store the links of ``pages``: relations through
    ``relations_reconcile_links``, unresolved targets as ``DanglingLink`` rows (the
    pages' old rows replaced)."""
    if not pages:
        return
    parsed: dict[int, list[WikiLink]] = {p.pk: parse_wikilinks(p.body) for p in pages}
    targets = _targets(
        src, {link.key for links in parsed.values() for link in links}, schema
    )
    wanted: dict[int, list[tuple[int, RelationType, str]]] = {}
    dangling: list[DanglingLink] = []
    for page in pages:
        for link in parsed[page.pk]:
            target = targets.get(link.key)
            if target is None:
                dangling.append(
                    DanglingLink(
                        source=src,
                        from_page_id=page.pk,
                        target=link.target[:320],
                        key=link.key[:320],
                        type_name=link.type_name,
                        context=link.context,
                    )
                )
                continue
            to_id, to_type = target
            relation_type = _link_type(schema, link.type_name, page.page_type, to_type)
            wanted.setdefault(page.pk, []).append((to_id, relation_type, link.context))
    relations_reconcile_links(
        source_id=src.id,
        from_page_ids=[p.pk for p in pages],
        wanted=wanted,
        provenance={p.pk: p.provenance for p in pages},
        created_by=actor.actor,
    )
    DanglingLink.objects.filter(from_page_id__in=[p.pk for p in pages]).delete()
    if dangling:
        DanglingLink.objects.bulk_create(dangling, ignore_conflicts=True)


def _sync_links(
    *,
    src: Source,
    plans: Sequence[_Plan],
    actor: Caller,
    schema: _SchemaCache,
    link_waiting: bool = True,
) -> None:
    """The link step of ``pages_write`` for the changed ``plans``: (1) pages whose
    new or previous body holds ``[[`` get their links reconciled (a removed link
    loses its relation; bodies without ``[[`` cost nothing); remote writers'
    bodies are not linked (SPEC §8: planted text must not create edges); (2) any
    dangling link whose key is the slug, title or an alias of a page written here
    resolves: its from page is re-linked, unless ``link_waiting`` is False (a bulk
    import resolves them once at its end, ``pages_link_waiting``).
    ``settings.BRAIN_AUTO_LINK`` False turns the whole step off (benchmarks'
    baseline; GBrain's ``auto_link``)."""
    if not getattr(settings, "BRAIN_AUTO_LINK", True):
        return
    linked = [
        _Linked(p.stored.pk, p.page_type, p.body, p.provenance)
        for p in plans
        if not actor.remote and ("[[" in p.body or "[[" in p.previous["body"])
    ]
    _link(src=src, pages=linked, actor=actor, schema=schema)
    if not link_waiting:
        return
    keys: set[str] = set()
    for p in plans:
        keys.add(normalize_alias(p.slug))
        keys.update(_aliases_from(p.title, p.frontmatter))
    done = {p.pk for p in linked}
    waiting = set(
        DanglingLink.objects.filter(source=src, key__in=list(keys))
        .exclude(from_page_id__in=done)
        .values_list("from_page_id", flat=True)
    )
    if not waiting:
        return
    _link(
        src=src,
        pages=[
            _Linked(p.pk, p.type, p.body, {"resolved_by": actor.actor[:200]})
            for p in Page.objects.select_related("type").filter(
                pk__in=waiting, deleted_at__isnull=True
            )
        ],
        actor=actor,
        schema=schema,
    )


def pages_link_waiting(*, source: Source, actor: Caller, batch: int = 200) -> int:
    """Resolve every dangling link of ``source`` whose key is now the slug, title
    or an alias of a live page of the source (SPEC §2.3): each page holding such a
    link is re-linked once, ``batch`` pages per transaction. A bulk import calls
    this once at its end instead of re-linking earlier pages in every batch (issue
    48: the per-batch re-link grew with the pages already imported). Returns the
    number of pages re-linked; 0 with ``settings.BRAIN_AUTO_LINK`` off."""
    if not getattr(settings, "BRAIN_AUTO_LINK", True):
        return 0
    live = Page.objects.filter(source=source, deleted_at__isnull=True)
    waiting = sorted(
        set(
            DanglingLink.objects.filter(source=source)
            .filter(
                Exists(live.filter(slug=OuterRef("key")))
                | Exists(
                    Alias.objects.filter(
                        source=source,
                        alias=OuterRef("key"),
                        page__deleted_at__isnull=True,
                    )
                )
            )
            .values_list("from_page_id", flat=True)
        )
    )
    schema = _SchemaCache()
    for start in range(0, len(waiting), batch):
        with transaction.atomic():
            _link(
                src=source,
                pages=[
                    _Linked(p.pk, p.type, p.body, {"resolved_by": actor.actor[:200]})
                    for p in live.select_related("type").filter(
                        pk__in=waiting[start : start + batch]
                    )
                ],
                actor=actor,
                schema=schema,
            )
    return len(waiting)
