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


# Merges move rows of tables owned above brain (the loops app's open loops): each app
# registers a mover whose ``move(*, keep_id, merge_id) -> {kind: [row ids]}`` repoints
# its rows from the merged page to the kept one, and whose ``restore(*, keep_id,
# merge_id, moved)`` puts exactly those rows back (SPEC §10; issue 46).


@dataclass(frozen=True)
class MergeMover:
    """The page-merge hooks of one app (see above)."""

    move: Callable[..., dict[str, list[int]]]
    restore: Callable[..., int]


_merge_movers: dict[str, MergeMover] = {}


def register_merge_mover(name: str, mover: MergeMover) -> None:
    """Register ``mover`` under ``name`` (called once from an app's ``ready``)."""
    _merge_movers[name] = mover


def merge_movers() -> dict[str, MergeMover]:
    """The registered merge movers by app name (empty when none is installed)."""
    return dict(_merge_movers)
