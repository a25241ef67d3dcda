"""LLM commitment extraction of one thread, run after detection (SPEC §5.3, §7).

``process_threads`` (mode ``llm``) calls ``extraction_enqueue`` for each thread; the
jobs app registers the queue (``JobsConfig.ready``), which enqueues a durable
``extract_commitments`` job (history, retries with backoff, coalescing) whose handler
calls ``commitments_extract`` once per attempt. loops never imports jobs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction

from brain.models import Source
from loops.extractors.llm import llm_extract
from loops.selectors import mutes_for, newest_message_at, thread_messages, thread_page

ExtractionQueue = Callable[..., object]
_queue: dict[str, ExtractionQueue] = {}


def register_extraction_queue(queue: ExtractionQueue) -> None:
    """Register ``queue(*, source_id, thread_id)``, which schedules one extraction
    (the jobs app registers ``extract_commitments`` jobs)."""
    _queue["default"] = queue


def extraction_enqueue(*, source_id: str, thread_id: str) -> None:
    """Schedule the LLM extraction of one thread through the registered queue; with
    none registered (a deployment without the jobs app) it runs once after the
    current transaction commits."""
    queue = _queue.get("default")
    if queue is not None:
        queue(source_id=source_id, thread_id=thread_id)
        return
    transaction.on_commit(
        lambda: commitments_extract(source_id=source_id, thread_id=thread_id)
    )


def commitments_extract(*, source_id: str, thread_id: str) -> dict[str, Any]:
    """One LLM extraction attempt of one thread revision (idempotent per revision).

    Returns ``{status, reason, loops, dropped_quotes}``, or ``{status: skipped,
    reason}`` when the source or thread is gone. Raises
    ``loops.extractors.llm.RetryableExtraction`` for a transient failure (malformed
    or truncated answer, API error, no LLM configured): nothing was written.
    """
    source = Source.objects.filter(id=source_id).first()
    if source is None:
        return {"status": "skipped", "reason": "source_missing"}
    messages = thread_messages(source_id=source_id, thread_id=thread_id)
    if not messages:
        return {"status": "skipped", "reason": "thread_missing"}
    newest = newest_message_at(source_id=source_id)
    dates = [m.date for m in messages if m.date is not None]
    result = llm_extract(
        source=source,
        thread_id=thread_id,
        messages=messages,
        page=thread_page(source_id=source_id, thread_id=thread_id),
        mutes=mutes_for(source_id=source_id),
        source_newest=newest or max(dates),
    )
    return {
        "status": result.status,
        "reason": result.reason,
        "loops": result.loop_ids,
        "dropped_quotes": result.dropped_quotes,
    }
