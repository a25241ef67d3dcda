"""Entry point the connectors call after importing mail (SPEC §5.2, §5.3).

``process_threads`` runs the deterministic detector on every touched thread and
queues commitment extraction. It never raises into the caller: a detector failure is
logged and must not fail a sync.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

logger = logging.getLogger(__name__)


def process_threads(*, source_id: str, thread_ids: Iterable[str]) -> None:
    """Run loop detection for ``thread_ids`` of ``source_id`` (wired by the loops app)."""
    # The loops app replaces this body with the detector and extractor pipeline.
    list(thread_ids)
