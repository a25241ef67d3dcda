"""Views of data owned by apps above brain, and queues run by them, registered by
those apps (SPEC §5, §7, §9).

brain sits at the bottom of the stack and never imports ``loops``; yet the entity card
shows a person's open threads, ``delta`` streams loop changes, push context lists
due loops and dream sweeps loops. The loops app registers these here from ``LoopsConfig.ready``
(``loops.brain_views``); while nothing is registered brain shows no loop data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LoopViews:
    """The loop reads brain's views show, and the sweep dream runs.

    - ``card_threads(*, scope, pages, limit) -> {page_id: [thread dict]}``
    - ``delta_stream(*, scope, since, after_key, entity_ids, limit)
      -> [(updated_at, key, loop dict)]``
    - ``due_by_page(*, page_ids, scope) -> {page_id: [loop dict]}``
    - ``sweep() -> counts``: dream's loops phase (staleness and grace re-checks)
    """

    card_threads: Callable[..., dict[int, list[dict[str, Any]]]]
    delta_stream: Callable[..., list[tuple[Any, str, dict[str, Any]]]]
    due_by_page: Callable[..., dict[int, list[dict[str, Any]]]]
    sweep: Callable[[], Any]


_registry: dict[str, LoopViews] = {}


def register_loop_views(views: LoopViews) -> None:
    """Register the loop reads (called once from ``LoopsConfig.ready``)."""
    _registry["loops"] = views


def loop_views() -> LoopViews | None:
    """The registered loop reads, or None when no loops app is installed."""
    return _registry.get("loops")


# Large writes embed in a job (SPEC §7): jobs registers its ``embed_pending`` queue.
EmbedQueue = Callable[[list[str]], Any]
_embed_queue: dict[str, EmbedQueue] = {}


def register_embed_queue(queue: EmbedQueue) -> None:
    """Register ``queue(source_ids)``, which queues the embedding of the pending chunks
    of those sources outside the caller's request (called once from
    ``JobsConfig.ready``)."""
    _embed_queue["jobs"] = queue


def embed_queue() -> EmbedQueue | None:
    """The registered embedding queue, or None (no jobs app: writes embed inline)."""
    return _embed_queue.get("jobs")
