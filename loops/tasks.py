"""Background tasks of the loops app (SPEC §7 kinds ``extract_loops`` and
``loops_sweep``): thin adapters that take ids, re-fetch, and call one service."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 3


def extract_loops(source_id: str, thread_id: str) -> dict[str, Any]:
    """LLM extraction of one thread revision, retrying retryable failures
    (malformed or truncated answers, API errors) up to 3 attempts. Idempotent per
    thread revision; returns the outcome dict."""
    from brain.models import Source
    from loops.extractors.llm import RetryableExtraction, llm_extract
    from loops.selectors import (
        mutes_for,
        newest_message_at,
        thread_messages,
        thread_page,
    )

    source = Source.objects.filter(id=source_id).first()
    if source is None:
        return {"status": "skipped", "reason": "source_missing"}
    messages = thread_messages(source_id=source_id, thread_id=thread_id)
    if not messages:
        return {"status": "skipped", "reason": "thread_missing"}
    newest = newest_message_at(source_id=source_id)
    reason = ""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            result = llm_extract(
                source=source,
                thread_id=thread_id,
                messages=messages,
                page=thread_page(source_id=source_id, thread_id=thread_id),
                mutes=mutes_for(source_id=source_id),
                source_newest=newest or max(m.date for m in messages if m.date),  # type: ignore[type-var]
            )
        except RetryableExtraction as exc:
            reason = exc.reason
            logger.info(
                "extract_loops %s/%s attempt %d: %s",
                source_id,
                thread_id,
                attempt,
                reason,
            )
            if reason == "llm_unavailable":
                break
            continue
        return {
            "status": result.status,
            "reason": result.reason,
            "loops": result.loop_ids,
            "attempts": attempt,
            "dropped_quotes": result.dropped_quotes,
        }
    return {"status": "failed", "reason": reason, "retryable": True}


def enqueue_extract_loops(*, source_id: str, thread_id: str) -> None:
    """Queue ``extract_loops`` after the current transaction commits."""
    from django_q.tasks import async_task

    transaction.on_commit(
        lambda: async_task(
            "loops.tasks.extract_loops",
            source_id,
            thread_id,
            task_name=f"extract_loops:{source_id}:{thread_id}"[:100],
        )
    )


def loops_sweep(source_id: str | None = None) -> dict[str, Any]:
    """The hourly sweep: grace re-checks and staleness (``pipeline.loops_sweep``)."""
    from loops.pipeline import loops_sweep as sweep

    return sweep(source_ids=[source_id] if source_id else None)
