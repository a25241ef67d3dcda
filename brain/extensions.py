"""Views of data owned by apps above brain, registered by those apps (SPEC §5, §9).

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
