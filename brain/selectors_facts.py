"""Reads of facts (SPEC §2.4): the active filter, scoping and decay ranking.

Kept apart from ``brain.selectors`` (pages and search) so the two grow independently.
Every function takes a ``ReadScope`` from ``Caller.read_scope`` (SPEC §8); nothing
here widens it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.db.models import Q, QuerySet
from django.utils import timezone

from brain.access import ReadScope, scope_queryset
from brain.models import Fact
from brain.models.facts import fact_lifetime

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime

# SPEC §2.4 decay half-lives in days, per fact kind.
HALF_LIFE_DAYS: dict[str, float] = {
    Fact.Kind.EVENT: 7.0,
    Fact.Kind.COMMITMENT: 90.0,
    Fact.Kind.PREFERENCE: 90.0,
    Fact.Kind.BELIEF: 365.0,
    Fact.Kind.FACT: 365.0,
}


def fact_active_q(*, now: datetime | None = None, prefix: str = "") -> Q:
    """The SPEC §2.4 active condition as a ``Q``: ``expired_at IS NULL`` and
    ``valid_until`` null or in the future. ``prefix`` targets a related fact
    (``"facts__"``)."""
    now = now or timezone.now()
    return Q(**{f"{prefix}expired_at__isnull": True}) & (
        Q(**{f"{prefix}valid_until__isnull": True})
        | Q(**{f"{prefix}valid_until__gt": now})
    )


def fact_list_active(
    *,
    scope: ReadScope,
    entity_ids: Iterable[int] | None = None,
    entity_refs: Iterable[str] | None = None,
    since: datetime | None = None,
    kinds: Iterable[str] | None = None,
    now: datetime | None = None,
) -> QuerySet[Fact]:
    """Active facts readable in ``scope`` (sources and visibility), optionally only
    about the pages ``entity_ids`` (or unresolved entity references ``entity_refs``,
    see ``fact_remember``), recorded at or after ``since``, of ``kinds``.

    Superseded, forgotten and lapsed facts are never returned (no ghosts, SPEC §2.4).
    The queryset selects ``entity`` and defers the embedding.
    """
    qs = scope_queryset(Fact.objects.all(), scope).filter(fact_active_q(now=now))
    if entity_ids is not None or entity_refs is not None:
        cond = Q(pk__in=[])
        ids = list(entity_ids or [])
        refs = [r for r in (entity_refs or []) if r]
        if ids:
            cond |= Q(entity_id__in=ids)
        if refs:
            cond |= Q(entity__isnull=True, evidence__entity_ref__in=refs)
        qs = qs.filter(cond)
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    if kinds is not None:
        qs = qs.filter(kind__in=list(kinds))
    return qs.select_related("entity").defer("embedding")


def fact_decay_score(fact: Fact, *, now: datetime | None = None) -> float:
    """Ranking weight (SPEC §2.4): confidence × exp(−age_days / half-life of the kind);
    0 once the fact is no longer active. Age counts from ``valid_from``."""
    now = now or timezone.now()
    if fact.expired_at is not None or (
        fact.valid_until is not None and fact.valid_until <= now
    ):
        return 0.0
    age_days = max(0.0, (now - fact.valid_from).total_seconds() / 86400.0)
    half_life = HALF_LIFE_DAYS.get(fact.kind, 365.0)
    return fact.confidence * math.exp(-age_days / half_life)


def fact_rank(facts: Iterable[Fact], *, now: datetime | None = None) -> list[Fact]:
    """Sort facts by decay score, highest first; ties newest first, then by id."""
    now = now or timezone.now()
    return sorted(
        facts,
        key=lambda f: (-fact_decay_score(f, now=now), -f.created_at.timestamp(), -f.pk),
    )


FORGOTTEN_LIMIT = 200


def fact_list_forgotten(
    *,
    scope: ReadScope,
    delivered_before: datetime,
    expired_after: datetime,
    now: datetime | None = None,
    entity_ids: Iterable[int] | None = None,
) -> QuerySet[Fact]:
    """Facts readable in ``scope`` recorded at or before ``delivered_before`` (so a
    delta reader already received them) that expired (forgotten, superseded, page
    deleted, lapsed) after ``expired_after`` and by ``now``: what ``delta`` reports
    as ``forgotten`` (SPEC §4). Oldest expiry first, at most 200; only ``pk`` and
    ``expired_at`` are loaded."""
    now = now or timezone.now()
    qs = scope_queryset(Fact.objects.all(), scope).filter(expired_at__lte=now)
    if delivered_before <= expired_after:
        # created_at <= delivered_before and expired_at > expired_after: the fact's
        # lifetime [created_at, expired_at) holds all of [delivered_before,
        # expired_after] — one probe of the brain_fact_lifetime GiST index.
        qs = qs.alias(lifetime=fact_lifetime()).filter(
            expired_at__isnull=False,
            lifetime__contains=DateTimeTZRange(
                delivered_before, expired_after, bounds="[]"
            ),
        )
    else:
        qs = qs.filter(created_at__lte=delivered_before, expired_at__gt=expired_after)
    if entity_ids is not None:
        qs = qs.filter(entity_id__in=list(entity_ids))
    return qs.only("pk", "expired_at").order_by("expired_at", "pk")[:FORGOTTEN_LIMIT]
