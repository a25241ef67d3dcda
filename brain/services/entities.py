"""Entity resolution and the entity card (SPEC §4 ``entity``; digest §3).

Resolution precedence is frozen: alias > exact title or slug > slug suffix; ties go
to the most recently touched page (max of ``updated_at`` and ``last_retrieved_at``).
A miss is never an error: callers get near-miss suggestions from pg_trgm instead.
Every query is scoped by a ``ReadScope`` (SPEC §8): remote callers never resolve
private pages and never see private facts in a card.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.apps import apps
from django.contrib.postgres.search import TrigramSimilarity
from django.db.models import Count, F, QuerySet, Window
from django.utils import timezone

from brain.access import ReadScope, scope_queryset
from brain.models import Alias, Fact, Page, Relation, TimelineEntry, Visibility
from brain.selectors_facts import fact_list_active
from brain.text import normalize_alias, slugify_title

# Digest §3.2 card limits.
CARD_OPEN_THREADS = 3
CARD_EDGES = 10
CARD_AKA = 20
ACTIVE_FACT_COUNT_CAP = 100
RECENT_EVENT_DAYS = 90
TIMELINE_LOOKBACK = 5
SUGGESTIONS = 3
SUMMARY_CHARS = 400
# last_retrieved_at is refreshed at most this often, so reads do not become a write each.
TOUCH_EVERY = timedelta(minutes=1)
MENTIONS = "mentions"

ARM_ALIAS, ARM_EXACT, ARM_SUFFIX = 0, 1, 2
ARM_NAMES = {ARM_ALIAS: "alias", ARM_EXACT: "exact", ARM_SUFFIX: "slug_suffix"}


def iso_ms(value: datetime | None) -> str | None:
    """A UTC timestamp as millisecond ISO 8601 with ``Z`` (SPEC §4), or None."""
    if value is None:
        return None
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def iso_date(value: date | None) -> str | None:
    """A date as ``YYYY-MM-DD``, or None."""
    return value.isoformat() if value is not None else None


@dataclass
class EntityResolution:
    """The outcome of ``entity_resolve``: the chosen page (or None), the arm that
    matched it (``alias``, ``exact``, ``slug_suffix``) and up to 3 runners-up."""

    page: Page | None
    arm: str | None = None
    runners_up: list[Page] = field(default_factory=list)


def entity_pages(scope: ReadScope) -> QuerySet[Page]:
    """Live (not soft-deleted) pages readable in ``scope``."""
    return scope_queryset(Page.objects.filter(deleted_at__isnull=True), scope)


_RESOLVE_SQL = """
(SELECT 0 AS arm, p.*, t.name AS type_name,
        GREATEST(p.updated_at, COALESCE(p.last_retrieved_at, p.updated_at)) AS touched
   FROM brain_alias a
   JOIN brain_page p ON p.id = a.page_id
   JOIN brain_pagetype t ON t.id = p.type_id
  WHERE a.source_id = ANY(%(sources)s) AND a.alias = %(alias)s
    AND p.source_id = ANY(%(sources)s) AND p.deleted_at IS NULL
    AND p.visibility = ANY(%(visibilities)s)
  ORDER BY touched DESC, p.slug
  LIMIT %(limit)s)
UNION ALL
(SELECT CASE WHEN lower(p.title) = %(lower)s OR p.slug = ANY(%(slugs)s) THEN 1 ELSE 2 END
        AS arm, p.*, t.name AS type_name,
        GREATEST(p.updated_at, COALESCE(p.last_retrieved_at, p.updated_at)) AS touched
   FROM brain_page p
   JOIN brain_pagetype t ON t.id = p.type_id
  WHERE (lower(p.title) = %(lower)s OR p.slug = ANY(%(slugs)s)
         OR reverse(p.slug) LIKE %(suffix)s)
    AND p.source_id = ANY(%(sources)s) AND p.deleted_at IS NULL
    AND p.visibility = ANY(%(visibilities)s)
  ORDER BY arm, touched DESC, p.slug
  LIMIT %(limit)s)
"""


def entity_resolve(
    *, scope: ReadScope, name: str, limit: int = SUGGESTIONS + 1
) -> EntityResolution:
    """Resolve a free-text ``name`` to a page in ``scope`` (SPEC §4, digest §3.1).

    Arms: alias (``normalize_alias(name)`` in ``Alias``), exact (case-insensitive title,
    or slug equal to ``name`` or ``slugify(name)``), slug suffix (slug ends with
    ``/<slugify(name)>``). Candidates rank by arm, then most recently touched. Returns
    an empty resolution for blank input. One round trip: both halves are index scans
    (``brain_alias`` (source, alias); ``brain_page_title_lower``, the slug unique index
    and ``brain_page_slug_reverse``). Pages carry ``type_name``; no errors for data.
    """
    text = (name or "").strip()
    if not text or not scope.source_ids:
        return EntityResolution(page=None)
    slug = slugify_title(text, max_length=255)
    params = {
        "sources": list(scope.source_ids),
        "visibilities": list(scope.visibilities),
        "alias": normalize_alias(text),
        "lower": text.lower(),
        "slugs": sorted({text.lower()} | ({slug} if slug else set())),
        # reverse(slug) LIKE reverse('/<slug>') || '%': the slug ends with '/<slug>'.
        # Slugified text has no LIKE wildcards; a blank slug matches nothing.
        "suffix": ("/" + slug)[::-1] + "%" if slug else "",
        "limit": limit,
    }
    best: dict[int, tuple[int, datetime, Page]] = {}
    for page in Page.objects.raw(_RESOLVE_SQL, params):
        arm = int(page.arm)  # type: ignore[attr-defined]
        if page.pk not in best or arm < best[page.pk][0]:
            best[page.pk] = (arm, page.touched, page)  # type: ignore[attr-defined]
    if not best:
        return EntityResolution(page=None)
    ranked = sorted(best.values(), key=lambda c: (c[0], -c[1].timestamp(), c[2].slug))
    return EntityResolution(
        page=ranked[0][2],
        arm=ARM_NAMES[ranked[0][0]],
        runners_up=[c[2] for c in ranked[1 : 1 + SUGGESTIONS]],
    )


def page_type_name(page: Page) -> str:
    """The page's type name, without a query when the resolver already joined it."""
    return getattr(page, "type_name", None) or page.type.name


def entity_suggestions(*, scope: ReadScope, name: str) -> list[dict[str, Any]]:
    """Up to 3 near-miss pages for an unresolved ``name`` (pg_trgm similarity on the
    title, using ``brain_page_title_trgm``), each ``{slug, title, type, similarity,
    create_safety}``; ``create_safety`` is ``probable`` at similarity ≥ 0.6, else
    ``unknown`` (digest §2.6: the safe direction)."""
    text = (name or "").strip()
    if not text:
        return []
    rows = (
        entity_pages(scope)
        .filter(title__trigram_similar=text)
        .annotate(similarity=TrigramSimilarity("title", text))
        .select_related("type")
        .order_by("-similarity", "slug")[:SUGGESTIONS]
    )
    return [
        {
            "slug": p.slug,
            "title": p.title,
            "type": page_type_name(p),
            "similarity": round(float(p.similarity), 3),  # type: ignore[attr-defined]
            "create_safety": "probable" if p.similarity >= 0.6 else "unknown",  # type: ignore[attr-defined]
        }
        for p in rows
    ]


def entity_touch(*, page: Page, now: datetime | None = None) -> None:
    """Record that ``page`` was retrieved (``last_retrieved_at``), at most once a
    minute; ``updated_at`` is left alone so delta does not see a change."""
    now = now or timezone.now()
    if page.last_retrieved_at is None or now - page.last_retrieved_at > TOUCH_EVERY:
        Page.objects.filter(pk=page.pk).update(last_retrieved_at=now)
        page.last_retrieved_at = now


def page_synopsis(page: Page) -> str:
    """A safe one-paragraph synopsis: the page summary, else frontmatter ``summary``,
    else the first non-empty, non-heading body line; cut at 400 characters."""
    text = page.summary or str((page.frontmatter or {}).get("summary") or "")
    if not text:
        for line in (page.body or "").splitlines():
            line = line.strip()
            if line and not line.startswith(("#", "<!--", "```", "|")):
                text = line
                break
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


_LOOP_FIELDS = {"source", "counterparty", "loop_type", "summary", "due_at", "status",
                "opened_at"}
_LOOP_DIRECTION = {
    "commitment_owed_by_me": "owed_by_me",
    "unanswered_inbound": "owed_by_me",
    "commitment_owed_to_me": "owed_to_me",
    "unanswered_outbound": "owed_to_me",
    "decision_pending": "decision",
}


def entity_loop_threads(
    *, scope: ReadScope, pages: list[Page], limit: int = CARD_OPEN_THREADS
) -> dict[int, list[dict[str, Any]]]:
    """Open loops whose counterparty is one of ``pages`` (SPEC §5), as card threads
    ``{kind: commitment, text, date, direction, due, counterparty, status, loop_id}``,
    due soonest first, at most ``limit`` per page. Returns ``{}`` while the loops app
    has no ``OpenLoop`` model. Loop summaries are not redacted (SPEC §5.5 lets remote
    callers see summary, counterparty and due date)."""
    try:
        model = apps.get_model("loops", "OpenLoop")
    except LookupError:
        return {}
    names = {f.name for f in model._meta.get_fields()}
    if not _LOOP_FIELDS <= names or not pages:
        return {}
    by_page: dict[int, list[dict[str, Any]]] = {}
    slug_of = {p.pk: p.slug for p in pages}
    rows = (
        model.objects.filter(
            source_id__in=scope.source_ids,
            counterparty_id__in=list(slug_of),
            status="open",
        )
        .order_by(F("due_at").asc(nulls_last=True), "-opened_at", "pk")
    )
    for loop in rows[: limit * len(pages)]:
        items = by_page.setdefault(loop.counterparty_id, [])
        if len(items) >= limit:
            continue
        items.append(
            {
                "kind": "commitment",
                "text": loop.summary,
                "date": iso_ms(loop.opened_at),
                "direction": _LOOP_DIRECTION.get(loop.loop_type, loop.loop_type),
                "due": iso_ms(loop.due_at),
                "counterparty": slug_of[loop.counterparty_id],
                "status": loop.status,
                "loop_id": str(loop.pk),
            }
        )
    return by_page


def fact_thread(fact: Fact) -> dict[str, Any]:
    """An active commitment fact as a card thread ``{kind, text, date, due, fact_id}``."""
    return {
        "kind": "commitment",
        "text": fact.text,
        "date": iso_ms(fact.valid_from),
        "due": iso_ms(fact.valid_until),
        "fact_id": str(fact.pk),
    }


def entity_card(
    *, scope: ReadScope, page: Page, now: datetime | None = None,
    facts: list[Fact] | None = None,
) -> dict[str, Any]:
    """Assemble the entity card of ``page`` (SPEC §4, digest §3.2) within ``scope``.

    Shape: ``{entity{slug,title,type}, source_id, aka[], summary,
    last_touched{updated_at,last_retrieved_at,last_timeline_date}, open_threads[≤3],
    edges[≤10], backlink_count, active_fact_count}``. Open threads: open loops with this
    counterparty, then active commitment facts (soonest due first), then timeline
    entries of the last 90 days (among the latest 5). Edges exclude ``mentions``,
    outgoing first, both ends in the page's source, live and readable. Counts exclude
    ``mentions`` and rows the scope may not read; ``active_fact_count`` stops at 100.
    ``facts`` may pass the entity's active facts already fetched with
    ``entity_facts``. Depth-1 indexed reads only (6 queries, 7 with loops).
    """
    now = now or timezone.now()
    aka = list(
        Alias.objects.filter(page=page).order_by("alias").values_list("alias", flat=True)[
            :CARD_AKA
        ]
    )
    if facts is None:
        facts = entity_facts(scope=scope, page=page, now=now)
    threads = entity_threads(scope=scope, page=page, facts=facts, now=now)
    edge_base = Relation.objects.filter(source_id=page.source_id).exclude(
        relation_type__name=MENTIONS
    )
    out_rows = (
        edge_base.filter(from_page=page)
        .filter(**{f"to_page__{k}": v for k, v in _q_kwargs(scope).items()})
        .select_related("relation_type", "to_page")
        .order_by("relation_type__name", "to_page__slug")[:CARD_EDGES]
    )
    edges = [
        {
            "type": r.relation_type.name,
            "direction": "out",
            "slug": r.to_page.slug,
            "title": r.to_page.title,
            "context": r.context,
        }
        for r in out_rows
    ]
    # One query for both the incoming edges shown and the backlink count.
    in_rows = list(
        edge_base.filter(to_page=page)
        .filter(**{f"from_page__{k}": v for k, v in _q_kwargs(scope).items()})
        .annotate(_total=Window(Count("pk")))
        .select_related("relation_type", "from_page")
        .order_by("relation_type__name", "from_page__slug")[: max(1, CARD_EDGES - len(edges))]
    )
    backlink_count = in_rows[0]._total if in_rows else 0  # type: ignore[attr-defined]
    edges += [
        {
            "type": r.relation_type.name,
            "direction": "in",
            "slug": r.from_page.slug,
            "title": r.from_page.title,
            "context": r.context,
        }
        for r in in_rows[: CARD_EDGES - len(edges)]
    ]
    return {
        "entity": {"slug": page.slug, "title": page.title, "type": page_type_name(page)},
        "source_id": page.source_id,
        "aka": aka,
        "summary": page_synopsis(page),
        "last_touched": {
            "updated_at": iso_ms(page.updated_at),
            "last_retrieved_at": iso_ms(page.last_retrieved_at),
            "last_timeline_date": threads.last_timeline_date,
        },
        "open_threads": threads.items,
        "edges": edges,
        "backlink_count": backlink_count,
        "active_fact_count": len(facts),
    }


def entity_facts(
    *, scope: ReadScope, page: Page, now: datetime | None = None
) -> list[Fact]:
    """The active facts about ``page`` readable in ``scope``, newest first, at most
    100 (the card's ``active_fact_count`` cap)."""
    return list(
        fact_list_active(scope=scope, entity_ids=[page.pk], now=now).order_by(
            "-created_at", "-pk"
        )[:ACTIVE_FACT_COUNT_CAP]
    )


@dataclass
class Threads:
    """Open threads of a card (≤ 3) and the date of the newest timeline entry."""

    items: list[dict[str, Any]]
    last_timeline_date: str | None


def entity_threads(
    *, scope: ReadScope, page: Page, facts: list[Fact], now: datetime | None = None
) -> Threads:
    """Open threads of ``page`` (digest §3.2): open loops first, then active
    commitment facts among ``facts`` (soonest due, then newest), then timeline entries
    of the last 90 days among the latest 5."""
    now = now or timezone.now()
    items: list[dict[str, Any]] = list(
        entity_loop_threads(scope=scope, pages=[page]).get(page.pk, [])
    )
    far = datetime.max.replace(tzinfo=UTC)
    commitments = sorted(
        (f for f in facts if f.kind == Fact.Kind.COMMITMENT),
        key=lambda f: (f.valid_until or far, -f.valid_from.timestamp(), -f.pk),
    )
    items += [fact_thread(f) for f in commitments[: max(0, CARD_OPEN_THREADS - len(items))]]
    timeline = list(
        TimelineEntry.objects.filter(page=page)
        .order_by("-date", "-id")
        .values_list("date", "summary")[:TIMELINE_LOOKBACK]
    )
    horizon = (now - timedelta(days=RECENT_EVENT_DAYS)).date()
    for day, summary in timeline:
        if len(items) >= CARD_OPEN_THREADS:
            break
        if day >= horizon:
            items.append({"kind": "recent_event", "text": summary, "date": iso_date(day)})
    return Threads(
        items=items[:CARD_OPEN_THREADS],
        last_timeline_date=iso_date(timeline[0][0]) if timeline else None,
    )


def _q_kwargs(scope: ReadScope) -> dict[str, Any]:
    """Filter kwargs that keep a related page live and readable in ``scope``."""
    kwargs: dict[str, Any] = {"deleted_at__isnull": True}
    if not scope.include_private:
        kwargs["visibility"] = Visibility.WORLD
    return kwargs
