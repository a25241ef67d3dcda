"""Which page an unqualified slug or name picks when several readable pages answer
(SPEC §8 trust and isolation, §2.1 sources, §2.3 aliases, §4 entity, §9 push): the
one home of the precedence rule.

Slugs are unique per source, so an unqualified read of a slug two readable sources
hold has to pick one, and so does a name several pages answer to. Writing recently
must never decide it: a remote (untrusted) key that may write a federated source
(``default``) could otherwise take over a real person's slug, name or address by
creating a page after the genuine one.

The rule, applied by every reader that picks one page for an unqualified slug or
name (``brain.selectors.page_get``, ``brain.services.entities.entity_resolve`` and
so entity, recall, context_pack, delta, remember and the hints, the push resolver,
the update refusal that names the other holder):

1. **Trust first.** A page a trusted writer created (connectors, the CLI, MCP over
   stdio, staff, trusted keys) comes before a page a remote caller created
   (``Page.created_by_remote``, set by the one write function). For names this
   comes before SPEC §4's arms, because the strongest arm (aliases) is written by
   the page's own writer: a remote page that declares a person's address as an
   alias must not beat that person's genuine page matched by title. A
   remote-created page is picked only when no trusted-created page answers at all.
2. **Slugs: the first holder.** Earliest ``created_at``, then source id; never the
   most recently updated, so a later write cannot take a slug over.
3. **Names: SPEC §4.** Alias > exact title or slug > slug suffix, ties to the most
   recently touched, then the slug. Push (§9) keeps its own arms and its
   "ambiguous means nothing" among the pages of the winning trust tier.

Explicit source scoping (``source=``) narrows the candidates before the rule runs,
so a caller can always reach its own page of a contested slug. The rule orders only
what the caller may already read (it runs after ``brain.access`` scoping), so it
reveals nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Set
from datetime import datetime
from typing import TypeVar

from django.db.models import QuerySet

from brain.models import Page

T = TypeVar("T")

# ORM order of the holders of one slug: trusted-created first, then the first holder.
SLUG_ORDER = ("created_by_remote", "created_at", "source_id")


def slug_holder(pages: QuerySet[Page]) -> Page | None:
    """The page an unqualified read of a slug returns among ``pages`` (live pages of
    one slug, already scoped to what the caller may read), or None when empty:
    trusted-created before remote-created, then the earliest created, then the
    lowest source id."""
    return pages.order_by(*SLUG_ORDER).first()


def trust_order_sql(page_alias: str) -> str:
    """The SQL ``ORDER BY`` term that puts trusted-created pages of the table alias
    ``page_alias`` first (``false`` sorts before ``true``); raw-SQL readers lead
    their ordering with it so a ``LIMIT`` never cuts a trusted page for remote ones."""
    return f"{page_alias}.created_by_remote"


def name_rank(
    *, created_by_remote: bool, arm: int, touched: datetime, slug: str
) -> tuple[bool, int, float, str]:
    """The sort key of a page answering a name (lowest wins): trust tier, then the
    SPEC §4 arm number (0 alias, 1 exact, 2 slug suffix), then the most recently
    touched (``touched``, aware datetime), then the slug."""
    return (created_by_remote, arm, -touched.timestamp(), slug)


def trusted_first(
    match: Callable[[Set[int]], T | None], remote_ids: Set[int]
) -> T | None:
    """Resolve with the trusted-created pages first: ``match(excluded)`` is a
    resolver that ignores the page ids in ``excluded``; it runs once with every
    remote-created id of ``remote_ids`` excluded and, only when that finds nothing,
    once with nothing excluded (push context's arm cascade, SPEC §9)."""
    if remote_ids:
        found = match(remote_ids)
        if found is not None:
            return found
    return match(frozenset())


def trusted_over(preferred: Page | None, fallback: Page | None) -> Page | None:
    """Pick between a preferred page (say, the one a name resolves to in the
    caller's own write source) and a fallback (the same name resolved wider): the
    preferred one unless it is missing, or remote-created while the fallback was
    created by a trusted writer (rule 1 outranks any narrower preference)."""
    if preferred is None:
        return fallback
    if preferred.created_by_remote and fallback is not None:
        return preferred if fallback.created_by_remote else fallback
    return preferred
