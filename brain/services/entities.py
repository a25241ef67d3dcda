"""Entity resolution and the entity card (SPEC §4 ``entity``; digest §3).

Resolution precedence is frozen: alias > exact title or slug > slug suffix; ties go
to the most recently touched page (max of ``updated_at`` and ``last_retrieved_at``).
Above the arms sits the trust tier of ``brain.precedence`` (SPEC §8): a page a remote
caller created is picked only when no page a trusted writer created answers the name.
A miss is never an error: callers get near-miss suggestions instead (pages holding
the name's words or their nearest title words, ranked by pg_trgm similarity).
Every query is scoped by a ``ReadScope`` (SPEC §8): remote callers never resolve
private pages and never see private facts in a card.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.db import OperationalError, connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from brain.access import ReadScope, scope_queryset
from brain.extensions import loop_views
from brain.models import Fact, Page, TimelineEntry, Visibility
from brain.people import name_keys
from brain.precedence import name_rank, trust_order_sql
from brain.selectors import backlinks_sql
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
# Near misses (entity_suggestions): the words of a name considered, the lexicon
# words kept per unknown word, candidate pages examined per tier and per word of
# the last tier, and each statement's budget.
SUGGESTION_WORDS = 8
WORD_VARIANTS = 5
SUGGESTION_CANDIDATES = 200
SUGGESTION_SAMPLE = 50
SUGGESTION_TIMEOUT_MS = 20
# Near-miss similarity: the pg_trgm default threshold, and where a title is a
# probable match (create_safety).
MIN_SIMILARITY = 0.3
PROBABLE_SIMILARITY = 0.6
SUMMARY_CHARS = 400
# last_retrieved_at is refreshed at most this often, so reads do not become a write each.
TOUCH_EVERY = timedelta(minutes=1)
MENTIONS = "mentions"

ARM_ALIAS, ARM_EXACT, ARM_SUFFIX = 0, 1, 2
logger = logging.getLogger(__name__)
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
  WHERE a.source_id = ANY(%(sources)s) AND a.alias = ANY(%(aliases)s)
    AND p.source_id = ANY(%(sources)s) AND p.deleted_at IS NULL
    AND p.visibility = ANY(%(visibilities)s)
  ORDER BY {trust}, touched DESC, p.slug
  LIMIT %(limit)s)
UNION ALL
(SELECT CASE WHEN lower(p.title) = ANY(%(lowers)s) OR p.slug = ANY(%(slugs)s) THEN 1 ELSE 2 END
        AS arm, p.*, t.name AS type_name,
        GREATEST(p.updated_at, COALESCE(p.last_retrieved_at, p.updated_at)) AS touched
   FROM brain_page p
   JOIN brain_pagetype t ON t.id = p.type_id
  WHERE (lower(p.title) = ANY(%(lowers)s) OR p.slug = ANY(%(slugs)s)
         OR reverse(p.slug) LIKE %(suffix)s)
    AND p.source_id = ANY(%(sources)s) AND p.deleted_at IS NULL
    AND p.visibility = ANY(%(visibilities)s)
  ORDER BY {trust}, arm, touched DESC, p.slug
  LIMIT %(limit)s)
""".replace("{trust}", trust_order_sql("p"))


def entity_resolve(
    *, scope: ReadScope, name: str, limit: int = SUGGESTIONS + 1
) -> EntityResolution:
    """Resolve a free-text ``name`` to a page in ``scope`` (SPEC §4, digest §3.1).

    Arms: alias (``normalize_alias(name)`` or one of its ``brain.people.name_keys``,
    so every export form of a person's name or address resolves, in ``Alias``), exact
    (case-insensitive title equal to the name or one of those keys, or slug equal to
    ``name`` or ``slugify(name)``), slug suffix (slug ends with
    ``/<slugify(name)>``). Candidates rank by ``brain.precedence.name_rank``: pages a
    trusted writer created before pages a remote caller created (whatever the arm),
    then by arm, then most recently touched. Returns
    an empty resolution for blank input. One round trip: both halves are index scans
    (``brain_alias`` (source, alias); ``brain_page_title_lower``, the slug unique index
    and ``brain_page_slug_reverse``). Pages carry ``type_name``; no errors for data.
    """
    text = (name or "").strip()
    if not text or not scope.source_ids:
        return EntityResolution(page=None)
    slug = slugify_title(text, max_length=255)
    # Every form of a person's name or address meets on the same keys (issue 25):
    # "Harlow, Quinn", "Harlow, Quinn </O=…>", "Quinn Harlow/HOU/ECT@ECT" and a
    # gateway-wrapped "\"Quinn Harlow\" <q@x.org>@ENRON" all try "quinn harlow".
    keys = list(dict.fromkeys([normalize_alias(text), *name_keys(text)]))
    params = {
        "sources": list(scope.source_ids),
        "visibilities": list(scope.visibilities),
        "aliases": keys,
        "lowers": sorted({text.lower(), *keys}),
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
    ranked = sorted(
        best.values(),
        key=lambda c: name_rank(
            created_by_remote=c[2].created_by_remote,
            arm=c[0],
            touched=c[1],
            slug=c[2].slug,
        ),
    )
    return EntityResolution(
        page=ranked[0][2],
        arm=ARM_NAMES[ranked[0][0]],
        runners_up=[c[2] for c in ranked[1 : 1 + SUGGESTIONS]],
    )


def page_type_name(page: Page) -> str:
    """The page's type name, without a query when the resolver already joined it."""
    return getattr(page, "type_name", None) or page.type.name


def _name_words(text: str) -> list[str]:
    """The distinct lower-cased words of ``text`` (runs of letters and digits), in
    order, at most ``SUGGESTION_WORDS``."""
    return list(dict.fromkeys(re.findall(r"[^\W_]+", text.lower())))[:SUGGESTION_WORDS]


# The title words each word of the name stands for: itself when some title of the
# scope has it, else its nearest lexicon words by trigrams (pg_trgm ``%``:
# similarity >= pg_trgm.similarity_threshold, 0.3 unless changed). The one row
# also arms the candidate lookup's statement_timeout (``set_config(..., true)``:
# this transaction only).
_WORDS_SQL = """
WITH word AS (
  SELECT w.word, w.ord::int AS ord
    FROM unnest(%(words)s::text[]) WITH ORDINALITY AS w(word, ord)
), known AS (
  SELECT w.ord, w.word FROM word w
   WHERE EXISTS (SELECT 1 FROM brain_titleword t
                  WHERE t.source_id = ANY(%(sources)s) AND t.word = w.word)
), near AS (
  SELECT w.ord, n.word FROM word w
   CROSS JOIN LATERAL (
     SELECT DISTINCT t.word, similarity(t.word, w.word) AS sim
       FROM brain_titleword t
      WHERE t.source_id = ANY(%(sources)s) AND t.word %% w.word
      ORDER BY sim DESC, t.word
      LIMIT %(variants)s
   ) n
   WHERE w.ord NOT IN (SELECT ord FROM known)
)
SELECT set_config('statement_timeout', %(budget)s, true),
       ARRAY(SELECT json_build_array(ord, word) FROM known
             UNION ALL SELECT json_build_array(ord, word) FROM near)
"""


def _word_forms(*, scope: ReadScope, words: list[str]) -> list[list[str]]:
    """For each word of ``words``, the title words of the scope it stands for
    (``_WORDS_SQL``): ``[word]`` when a title has it, else up to ``WORD_VARIANTS``
    most similar lexicon words at trigram similarity >= 0.3; words with neither are
    left out. Also arms ``statement_timeout`` (``SUGGESTION_TIMEOUT_MS``) for the
    rest of the caller's transaction."""
    with connection.cursor() as cursor:
        cursor.execute(
            _WORDS_SQL,
            {
                "words": words,
                "sources": list(scope.source_ids),
                "variants": WORD_VARIANTS,
                "budget": str(SUGGESTION_TIMEOUT_MS),
            },
        )
        _, found = cursor.fetchone()
    groups: dict[int, list[str]] = {}
    for ord_, word in found:
        if word not in groups.setdefault(ord_, []):
            groups[ord_].append(word)
    return [groups[ord_] for ord_ in sorted(groups)]


# One tier of near-miss candidates: the pages whose titles' words
# (``brain_page_title_words``) match one of the tsqueries, at most %(candidates)s per
# tsquery in storage order, ranked by trigram similarity of the title to the name.
_CANDIDATES_SQL = """
SELECT DISTINCT c.id, c.slug, c.title, t.name AS type_name,
       similarity(c.title, %(name)s) AS similarity
  FROM unnest(%(queries)s::tsquery[]) AS g(q)
 CROSS JOIN LATERAL (
   SELECT p.id, p.slug, p.title, p.type_id FROM brain_page p
    WHERE to_tsvector('simple'::regconfig, COALESCE(p.title, '')) @@ g.q
      AND p.source_id = ANY(%(sources)s) AND p.deleted_at IS NULL
      AND p.visibility = ANY(%(visibilities)s)
    LIMIT %(candidates)s
 ) c
  JOIN brain_pagetype t ON t.id = c.type_id
 WHERE similarity(c.title, %(name)s) >= %(min)s
 ORDER BY similarity DESC, c.slug
 LIMIT %(n)s
"""


def _lexeme(word: str) -> str:
    """``word`` as one quoted tsquery lexeme (quotes doubled, backslashes escaped)."""
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def _tiers(groups: list[list[str]]) -> list[tuple[list[str], int]]:
    """The candidate tiers for the word forms ``groups`` (one list per word of the
    name), strictest first, as (tsqueries, candidates per tsquery): titles holding a
    form of every word; of every word but one (from three words on); of any one
    word (``SUGGESTION_SAMPLE`` each: a common word gives a sample)."""
    terms = ["(" + " | ".join(_lexeme(w) for w in group) + ")" for group in groups]
    tiers = [([" & ".join(terms)], SUGGESTION_CANDIDATES)]
    if len(terms) >= 3:
        but_one = [" & ".join(terms[:i] + terms[i + 1 :]) for i in range(len(terms))]
        tiers.append(([" | ".join(f"({q})" for q in but_one)], SUGGESTION_CANDIDATES))
    if len(terms) >= 2:
        tiers.append((terms, SUGGESTION_SAMPLE))
    return tiers


def _suggestion_rows(
    *, scope: ReadScope, text: str, groups: list[list[str]]
) -> list[tuple[Page, float]]:
    """``(page, similarity)`` of the near misses of ``text`` from the first tier of
    ``_tiers(groups)`` that has any at similarity >= ``MIN_SIMILARITY``, most
    similar first, at most ``SUGGESTIONS``; one statement per tier tried. Pages
    carry ``slug``, ``title`` and ``type_name`` only."""
    for queries, candidates in _tiers(groups):
        rows = list(
            Page.objects.raw(
                _CANDIDATES_SQL,
                {
                    "name": text,
                    "queries": queries,
                    "sources": list(scope.source_ids),
                    "visibilities": list(scope.visibilities),
                    "candidates": candidates,
                    "min": MIN_SIMILARITY,
                    "n": SUGGESTIONS,
                },
            )
        )
        if rows:
            return [(p, float(p.similarity)) for p in rows]  # type: ignore[attr-defined]
    return []


def entity_suggestions(*, scope: ReadScope, name: str) -> list[dict[str, Any]]:
    """Up to 3 near-miss pages for an unresolved ``name`` (SPEC §4; the digest's
    "keyword near-misses"): pages whose titles share the name's words, in tiers,
    ranked within a tier by pg_trgm similarity of the whole title to the name
    (>= 0.3), most similar first. Each ``{slug, title, type, similarity,
    create_safety}``; ``create_safety`` is ``probable`` at similarity >= 0.6, else
    ``unknown`` (digest §2.6: the safe direction).

    Words, not whole titles, are looked up (the pg_trgm documentation's pattern for
    spelling suggestions): each word of the name (the first 8) stands for itself
    when it is in the scope's ``TitleWord`` lexicon (the words its titles have had),
    else for its up to 5 nearest lexicon words at trigram similarity >= 0.3; a word
    with neither is left out. The tiers, the first with any title at similarity
    >= 0.3 answering: titles holding a form of every word (up to 200 examined); of
    every word but one (from three words with forms on; up to 200); of any one word
    (up to 50 per word, in storage order, so a very common word contributes a
    sample). So a typo of a stored name, or the name with one word added, dropped
    or changed, finds that page unless its other words are shared by more titles
    than a tier examines; a title sharing no word form with the name is never
    suggested, however similar its trigrams.

    Runs in a transaction that is rolled back (nothing is written; the local
    ``statement_timeout`` goes with it): the lexicon lookup, then one statement per
    tier tried. Fails soft: a tier's statement past ``SUGGESTION_TIMEOUT_MS`` (20 ms)
    is cancelled and the answer is ``[]``.
    """
    text = (name or "").strip()
    words = _name_words(text)
    if not words or not scope.source_ids:
        return []
    found: list[tuple[Page, float]] = []
    try:
        with transaction.atomic():
            groups = _word_forms(scope=scope, words=words)
            if groups:
                found = _suggestion_rows(scope=scope, text=text, groups=groups)
            transaction.set_rollback(True)
    except OperationalError:
        logger.info("entity suggestions for %r timed out", text)
        return []
    return [
        {
            "slug": p.slug,
            "title": p.title,
            "type": page_type_name(p),
            "similarity": round(similarity, 3),
            "create_safety": "probable"
            if similarity >= PROBABLE_SIMILARITY
            else "unknown",
        }
        for p, similarity in found
    ]


def touch_due(page: Page, now: datetime) -> bool:
    """True when ``page``'s ``last_retrieved_at`` should be refreshed at ``now``: never
    set, or older than ``TOUCH_EVERY`` (reads do not become a write each)."""
    return page.last_retrieved_at is None or now - page.last_retrieved_at > TOUCH_EVERY


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


def entity_loop_threads(
    *, scope: ReadScope, pages: list[Page], limit: int = CARD_OPEN_THREADS
) -> dict[int, list[dict[str, Any]]]:
    """Open loops whose counterparty is one of ``pages`` (SPEC §5), as card threads
    (the shape of ``loops.brain_views.card_threads``); ``{}`` while no app above
    brain has registered loop views (``brain.extensions``)."""
    views = loop_views()
    if views is None or not pages:
        return {}
    return views.card_threads(scope=scope, pages=pages, limit=limit)


def _commitment_thread(
    pk: int, text: str, valid_from: datetime, valid_until: datetime | None
) -> dict[str, Any]:
    """An active commitment fact as a card thread ``{kind, text, date, due, fact_id}``."""
    return {
        "kind": "commitment",
        "text": text,
        "date": iso_ms(valid_from),
        "due": iso_ms(valid_until),
        "fact_id": str(pk),
    }


_CARD_SQL = (
    """
WITH touched AS (
  -- The retrieval touch (``entity_touch``'s statement), in the card's own round trip
  -- when %(touch)s: a data-modifying CTE runs whether or not the SELECT reads it.
  UPDATE brain_page SET last_retrieved_at = %(now)s
   WHERE id = %(page)s AND %(touch)s
     AND set_config('synchronous_commit', 'off', true) IS NOT NULL
  RETURNING 1
)
SELECT
  (SELECT coalesce(json_agg(a.alias ORDER BY a.alias), '[]') FROM (
     SELECT alias FROM brain_alias WHERE page_id = %(page)s ORDER BY alias LIMIT %(aka)s
   ) a) AS aka,
  (SELECT coalesce(json_agg(json_build_array(t.date, t.summary) ORDER BY t.date DESC, t.id DESC),
                   '[]') FROM (
     SELECT id, date, summary FROM brain_timelineentry WHERE page_id = %(page)s
      ORDER BY date DESC, id DESC LIMIT %(timeline)s
   ) t) AS timeline,
  (SELECT coalesce(json_agg(json_build_array(f.id, f.text, f.kind, f.valid_from, f.valid_until)
                            ORDER BY f.created_at DESC, f.id DESC), '[]') FROM (
     SELECT id, text, kind, valid_from, valid_until, created_at FROM brain_fact
      WHERE entity_id = %(page)s AND source_id = ANY(%(sources)s)
        AND visibility = %(world)s AND expired_at IS NULL
        AND (valid_until IS NULL OR valid_until > %(now)s)
      ORDER BY created_at DESC, id DESC LIMIT %(facts)s
   ) f) AS facts,
  (SELECT coalesce(json_agg(json_build_array(e.type, e.slug, e.title, e.context)
                            ORDER BY e.type, e.slug), '[]') FROM (
     SELECT rt.name AS type, p.slug, p.title, r.context FROM brain_relation r
       JOIN brain_relationtype rt ON rt.id = r.relation_type_id
       JOIN brain_page p ON p.id = r.to_page_id
      WHERE r.from_page_id = %(page)s AND r.source_id = %(source)s
        AND rt.name <> 'mentions' AND p.deleted_at IS NULL
        AND p.visibility = ANY(%(visibilities)s)
      ORDER BY rt.name, p.slug LIMIT %(edges)s
   ) e) AS edges_out,
  (SELECT coalesce(json_agg(json_build_array(e.type, e.slug, e.title, e.context)
                            ORDER BY e.type, e.slug), '[]') FROM (
     SELECT rt.name AS type, p.slug, p.title, r.context FROM brain_relation r
       JOIN brain_relationtype rt ON rt.id = r.relation_type_id
       JOIN brain_page p ON p.id = r.from_page_id
      WHERE r.to_page_id = %(page)s AND r.source_id = %(source)s
        AND rt.name <> 'mentions' AND p.deleted_at IS NULL
        AND p.visibility = ANY(%(visibilities)s)
      ORDER BY rt.name, p.slug LIMIT %(edges)s
   ) e) AS edges_in,
  """
    + backlinks_sql("%(page)s", source_param="source", vis_param="visibilities")
    + """ AS backlinks,
  (SELECT count(*) FROM touched) AS touched
"""
)


def _dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def entity_card(
    *, scope: ReadScope, page: Page, now: datetime | None = None, touch: bool = False
) -> dict[str, Any]:
    """Assemble the entity card of ``page`` (SPEC §4, digest §3.2) within ``scope``.

    Shape: ``{entity{slug,title,type}, source_id, aka[], summary,
    last_touched{updated_at,last_retrieved_at,last_timeline_date}, open_threads[≤3],
    edges[≤10], backlink_count, active_fact_count}``. Open threads: open loops with this
    counterparty, then active commitment facts (soonest due first), then timeline
    entries of the last 90 days (among the latest 5). Edges exclude ``mentions``,
    outgoing first, both ends in the page's source, live and readable. Counts exclude
    ``mentions`` and rows the scope may not read; ``active_fact_count`` stops at 100.
    Facts in the card (commitment threads, ``active_fact_count``) are world-visibility
    only, whoever asks: private detail comes from recall or
    ``context_pack(include_private)``.
    One query of depth-1 indexed sub-selects (plus one for loops when installed).

    ``touch``: record the retrieval in the same statement (``last_retrieved_at`` set
    to ``now`` when ``touch_due``; ``updated_at`` left alone so delta does not see a
    change). The touch's transaction does not wait for the WAL flush
    (``synchronous_commit`` off for that transaction only): a touch lost in a crash
    is harmless.
    """
    now = now or timezone.now()
    touching = touch and touch_due(page, now)
    params: dict[str, Any] = {
        "page": page.pk,
        "source": page.source_id,
        "sources": list(scope.source_ids),
        "visibilities": list(scope.visibilities),
        # A card never carries private fact text, for any caller (SPEC §4).
        "world": Visibility.WORLD,
        "now": now,
        "aka": CARD_AKA,
        "timeline": TIMELINE_LOOKBACK,
        "facts": ACTIVE_FACT_COUNT_CAP,
        "edges": CARD_EDGES,
        "touch": touching,
    }
    with connection.cursor() as cursor:
        cursor.execute(_CARD_SQL, params)
        aka, timeline, facts, edges_out, edges_in, backlinks, _ = cursor.fetchone()
    if touching:
        page.last_retrieved_at = now
    timeline_rows = [(date.fromisoformat(d), summary) for d, summary in timeline]
    commitments = [
        (pk, text, datetime.fromisoformat(valid_from), _dt(valid_until))
        for pk, text, kind, valid_from, valid_until in facts
        if kind == Fact.Kind.COMMITMENT
    ]
    threads = _threads(
        scope=scope, page=page, commitments=commitments, timeline=timeline_rows, now=now
    )
    edges = [
        {"type": t, "direction": "out", "slug": slug, "title": title, "context": ctx}
        for t, slug, title, ctx in edges_out
    ]
    edges += [
        {"type": t, "direction": "in", "slug": slug, "title": title, "context": ctx}
        for t, slug, title, ctx in edges_in
    ][: CARD_EDGES - len(edges)]
    return {
        "entity": {
            "slug": page.slug,
            "title": page.title,
            "type": page_type_name(page),
        },
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
        "backlink_count": backlinks,
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


def _threads(
    *,
    scope: ReadScope,
    page: Page,
    commitments: list[tuple[int, str, datetime, datetime | None]],
    timeline: list[tuple[date, str]],
    now: datetime,
) -> Threads:
    items: list[dict[str, Any]] = list(
        entity_loop_threads(scope=scope, pages=[page]).get(page.pk, [])
    )
    # A commitment fact an open loop projected is that loop: listed once.
    projected = {t.get("fact_id") for t in items if t.get("fact_id")}
    commitments = [c for c in commitments if str(c[0]) not in projected]
    far = datetime.max.replace(tzinfo=UTC)
    ordered = sorted(commitments, key=lambda c: (c[3] or far, -c[2].timestamp(), -c[0]))
    items += [
        _commitment_thread(*c)
        for c in ordered[: max(0, CARD_OPEN_THREADS - len(items))]
    ]
    horizon = (now - timedelta(days=RECENT_EVENT_DAYS)).date()
    for day, summary in timeline:
        if len(items) >= CARD_OPEN_THREADS:
            break
        if day >= horizon:
            items.append(
                {"kind": "recent_event", "text": summary, "date": iso_date(day)}
            )
    return Threads(
        items=items[:CARD_OPEN_THREADS],
        last_timeline_date=iso_date(timeline[0][0]) if timeline else None,
    )


def entity_threads(
    *, scope: ReadScope, page: Page, facts: list[Fact], now: datetime | None = None
) -> Threads:
    """Open threads of ``page`` (digest §3.2): open loops first, then active
    commitment facts among ``facts`` (soonest due, then newest), then timeline entries
    of the last 90 days among the latest 5."""
    now = now or timezone.now()
    timeline = list(
        TimelineEntry.objects.filter(page=page)
        .order_by("-date", "-id")
        .values_list("date", "summary")[:TIMELINE_LOOKBACK]
    )
    commitments = [
        (f.pk, f.text, f.valid_from, f.valid_until)
        for f in facts
        if f.kind == Fact.Kind.COMMITMENT
    ]
    return _threads(
        scope=scope, page=page, commitments=commitments, timeline=timeline, now=now
    )
