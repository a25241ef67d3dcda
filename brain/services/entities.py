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
from django.db.models import F, Q, QuerySet
from django.db.models.functions import Coalesce, Greatest, Lower
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


def _touched(qs: QuerySet[Page]) -> QuerySet[Page]:
    return qs.annotate(
        _touched=Greatest("updated_at", Coalesce("last_retrieved_at", "updated_at"))
    )


def entity_resolve(
    *, scope: ReadScope, name: str, limit: int = SUGGESTIONS + 1
) -> EntityResolution:
    """Resolve a free-text ``name`` to a page in ``scope`` (SPEC §4, digest §3.1).

    Arms: alias (``normalize_alias(name)`` in ``Alias``), exact (case-insensitive title,
    or slug equal to ``name`` or ``slugify(name)``), slug suffix (slug ends with
    ``/<slugify(name)>``). Candidates rank by arm, then most recently touched. Returns
    an empty resolution for blank input. Three indexed queries; no errors for data.
    """
    text = (name or "").strip()
    if not text:
        return EntityResolution(page=None)
    norm = normalize_alias(text)
    slug = slugify_title(text, max_length=255)
    base = _touched(entity_pages(scope).select_related("type"))

    candidates: dict[int, tuple[int, datetime, Page]] = {}

    def add(arm: int, rows: QuerySet[Page]) -> None:
        for page in rows.order_by("-_touched", "slug")[:limit]:
            if page.pk not in candidates:
                candidates[page.pk] = (arm, page._touched, page)  # type: ignore[attr-defined]

    if norm:
        alias_page_ids = Alias.objects.filter(
            source_id__in=scope.source_ids, alias=norm
        ).values("page_id")
        add(ARM_ALIAS, base.filter(pk__in=alias_page_ids))
    exact_slugs = {text.lower()} | ({slug} if slug else set())
    add(
        ARM_EXACT,
        base.annotate(_ltitle=Lower("title")).filter(
            Q(_ltitle=text.lower()) | Q(slug__in=sorted(exact_slugs))
        ),
    )
    if slug:
        # reverse(slug) LIKE reverse('/<slug>') || '%' uses brain_page_slug_reverse.
        suffix = ("/" + slug)[::-1] + "%"
        add(
            ARM_SUFFIX,
            base.extra(where=["reverse(brain_page.slug) LIKE %s"], params=[suffix]),
        )
    if not candidates:
        return EntityResolution(page=None)
    ranked = sorted(
        candidates.values(), key=lambda c: (c[0], -c[1].timestamp(), c[2].slug)
    )
    best_arm, _, best = ranked[0]
    return EntityResolution(
        page=best,
        arm=ARM_NAMES[best_arm],
        runners_up=[c[2] for c in ranked[1 : 1 + SUGGESTIONS]],
    )


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
            "type": p.type.name,
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
    *, scope: ReadScope, page: Page, now: datetime | None = None
) -> dict[str, Any]:
    """Assemble the entity card of ``page`` (SPEC §4, digest §3.2) within ``scope``.

    Shape: ``{entity{slug,title,type}, source_id, aka[], summary,
    last_touched{updated_at,last_retrieved_at,last_timeline_date}, open_threads[≤3],
    edges[≤10], backlink_count, active_fact_count}``. Open threads: open loops with this
    counterparty, then active commitment facts, then timeline entries of the last 90
    days (among the latest 5). Edges exclude ``mentions``, outgoing first, both ends in
    the page's source and readable. Counts exclude ``mentions`` and private rows the
    scope may not read. Depth-1 indexed reads only.
    """
    now = now or timezone.now()
    aka = list(
        Alias.objects.filter(page=page).order_by("alias").values_list("alias", flat=True)[
            :CARD_AKA
        ]
    )
    threads: list[dict[str, Any]] = list(
        entity_loop_threads(scope=scope, pages=[page]).get(page.pk, [])
    )
    if len(threads) < CARD_OPEN_THREADS:
        commitments = fact_list_active(
            scope=scope, entity_ids=[page.pk], kinds=[Fact.Kind.COMMITMENT], now=now
        ).order_by(F("valid_until").asc(nulls_last=True), "-valid_from", "-pk")
        threads += [fact_thread(f) for f in commitments[: CARD_OPEN_THREADS - len(threads)]]
    timeline = list(
        TimelineEntry.objects.filter(page=page).order_by("-date", "-id")[:TIMELINE_LOOKBACK]
    )
    horizon = (now - timedelta(days=RECENT_EVENT_DAYS)).date()
    for entry in timeline:
        if len(threads) >= CARD_OPEN_THREADS:
            break
        if entry.date >= horizon:
            threads.append(
                {"kind": "recent_event", "text": entry.summary, "date": iso_date(entry.date)}
            )

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
    incoming = edge_base.filter(to_page=page).filter(
        **{f"from_page__{k}": v for k, v in _q_kwargs(scope).items()}
    )
    if len(edges) < CARD_EDGES:
        in_rows = incoming.select_related("relation_type", "from_page").order_by(
            "relation_type__name", "from_page__slug"
        )[: CARD_EDGES - len(edges)]
        edges += [
            {
                "type": r.relation_type.name,
                "direction": "in",
                "slug": r.from_page.slug,
                "title": r.from_page.title,
                "context": r.context,
            }
            for r in in_rows
        ]
    active_fact_count = len(
        fact_list_active(scope=scope, entity_ids=[page.pk], now=now).values_list(
            "pk", flat=True
        )[:ACTIVE_FACT_COUNT_CAP]
    )
    return {
        "entity": {"slug": page.slug, "title": page.title, "type": page.type.name},
        "source_id": page.source_id,
        "aka": aka,
        "summary": page_synopsis(page),
        "last_touched": {
            "updated_at": iso_ms(page.updated_at),
            "last_retrieved_at": iso_ms(page.last_retrieved_at),
            "last_timeline_date": iso_date(timeline[0].date) if timeline else None,
        },
        "open_threads": threads[:CARD_OPEN_THREADS],
        "edges": edges,
        "backlink_count": incoming.count(),
        "active_fact_count": active_fact_count,
    }


def _q_kwargs(scope: ReadScope) -> dict[str, Any]:
    """Filter kwargs that keep a related page live and readable in ``scope``."""
    kwargs: dict[str, Any] = {"deleted_at__isnull": True}
    if not scope.include_private:
        kwargs["visibility"] = Visibility.WORLD
    return kwargs
