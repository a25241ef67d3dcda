"""Loop reads shown by brain's views (SPEC §5, §9): the entity card's open threads,
``delta``'s loop stream, push context's due loops (and dream's loop sweep). Registered into
``brain.extensions`` by ``LoopsConfig.ready`` so brain never imports loops."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F, Q
from django.utils import timezone

from brain.access import ReadScope
from brain.extensions import LoopViews
from brain.models import Page
from brain.services.entities import CARD_OPEN_THREADS, iso_ms
from brain.services.verbs import after_keyed, key_for
from loops.models import LoopStatus, OpenLoop
from loops.pipeline import loops_sweep

# Open loops count as due when overdue or due within this window (or with no date:
# a reply owed is due now).
LOOP_DUE_WINDOW = timedelta(days=7)
MAX_LOOPS_PER_PAGE = 3

_LOOP_DIRECTION = {
    "commitment_owed_by_me": "owed_by_me",
    "unanswered_inbound": "owed_by_me",
    "commitment_owed_to_me": "owed_to_me",
    "unanswered_outbound": "owed_to_me",
    "decision_pending": "decision",
}


def card_threads(
    *, scope: ReadScope, pages: list[Page], limit: int = CARD_OPEN_THREADS
) -> dict[int, list[dict[str, Any]]]:
    """Open loops whose counterparty is one of ``pages`` (SPEC §5), as card threads
    ``{kind: commitment, text, date, direction, due, counterparty, status, loop_id,
    fact_id}`` (``fact_id``: the loop's projected commitment fact, or None),
    due soonest first, at most ``limit`` per page. Loop summaries are not redacted
    (SPEC §5.5 lets remote callers see summary, counterparty and due date)."""
    if not pages:
        return {}
    by_page: dict[int, list[dict[str, Any]]] = {}
    slug_of = {p.pk: p.slug for p in pages}
    rows = OpenLoop.objects.filter(
        source_id__in=scope.source_ids,
        counterparty_id__in=list(slug_of),
        status=LoopStatus.OPEN,
    ).order_by(F("due_at").asc(nulls_last=True), "-opened_at", "pk")
    # Plain rows, no model instances: the card is on entity()'s latency path.
    fields = ("counterparty_id", "pk", "summary", "opened_at", "loop_type", "due_at")
    for (
        page_id,
        pk,
        summary,
        opened_at,
        loop_type,
        due_at,
        status,
        fact_id,
    ) in rows.values_list(*fields, "status", "fact_id")[: limit * len(pages)]:
        if page_id is None:  # excluded by the filter; narrows the type
            continue
        items = by_page.setdefault(page_id, [])
        if len(items) >= limit:
            continue
        items.append(
            {
                "kind": "commitment",
                "text": summary,
                "date": iso_ms(opened_at),
                "direction": _LOOP_DIRECTION.get(loop_type, loop_type),
                "due": iso_ms(due_at),
                "counterparty": slug_of[page_id],
                "status": status,
                "loop_id": str(pk),
                # The loop's projected commitment fact, so the card lists it once.
                "fact_id": str(fact_id) if fact_id else None,
            }
        )
    return by_page


def delta_stream(
    *,
    scope: ReadScope,
    since: datetime,
    after_key: str,
    entity_ids: list[int] | None,
    limit: int,
) -> list[tuple[datetime, str, dict[str, Any]]]:
    """Loop changes (opened, updated, closed) after the ``delta`` cursor
    ``(since, after_key)``, oldest first, at most ``limit``, as
    ``(updated_at, "loops/<id>", loop dict)`` (SPEC §4 delta)."""
    qs = OpenLoop.objects.filter(source_id__in=scope.source_ids).filter(
        after_keyed("updated_at", "loops", since, after_key), updated_at__gte=since
    )
    if entity_ids is not None:
        qs = qs.filter(counterparty_id__in=entity_ids)
    rows = qs.select_related("counterparty").order_by("updated_at", "pk")[:limit]
    out = []
    for loop in rows:
        counterparty = loop.counterparty
        out.append(
            (
                loop.updated_at,
                key_for("loops", loop.pk),
                {
                    "loop_id": str(loop.pk),
                    "loop_type": loop.loop_type,
                    "status": loop.status,
                    "summary": loop.summary,
                    "due": iso_ms(loop.due_at),
                    "counterparty": counterparty.slug if counterparty else None,
                    "updated_at": iso_ms(loop.updated_at),
                },
            )
        )
    return out


def due_by_page(
    *, page_ids: Sequence[int], scope: ReadScope
) -> dict[int, list[dict[str, Any]]]:
    """Due open loops with each person page, at most 3 per page (SPEC §5, §9).

    Due = status open and (no due date, e.g. a reply owed, or due within 7 days or
    overdue); soonest due first. Only loops in the read scope; the fields are the ones
    SPEC §5.5 allows remote callers (no quotes). "Now" is the wall clock (UTC).
    Returns ``{page_id: [loop, ...]}``.
    """
    if not page_ids:
        return {}
    now = timezone.now()
    rows = (
        OpenLoop.objects.filter(
            counterparty_id__in=page_ids,
            source_id__in=scope.source_ids,
            status=LoopStatus.OPEN,
        )
        .filter(Q(due_at__isnull=True) | Q(due_at__lte=now + LOOP_DUE_WINDOW))
        .order_by(F("due_at").asc(nulls_last=True), "opened_at", "id")
        .values("id", "counterparty_id", "loop_type", "summary", "due_at")
    )
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        bucket = out[row["counterparty_id"]]
        if len(bucket) < MAX_LOOPS_PER_PAGE:
            bucket.append(
                {
                    "loop_id": str(row["id"]),
                    "loop_type": row["loop_type"],
                    "summary": row["summary"],
                    "due_at": row["due_at"],
                    "overdue": bool(row["due_at"] and row["due_at"] < now),
                }
            )
    return dict(out)


LOOP_VIEWS = LoopViews(
    card_threads=card_threads,
    delta_stream=delta_stream,
    due_by_page=due_by_page,
    sweep=loops_sweep,
)
