"""Handlers of the built-in job kinds (SPEC §7): each parses params and calls one
service of another app (imported at the top: jobs sits above brain, loops and
connectors).

Every handler has the shape ``handler(job, ctx) -> JSON-safe result``. Progress
reported by a service becomes the job's progress and checkpoint (and heartbeat), and
an exception raised from the progress callback (``JobInterrupted`` when the job was
cancelled) stops the service between items.

Resuming after a killed worker: the connectors are idempotent per item (their ledger
of imported messages and files), so a re-queued import or sync simply runs again and
skips what the killed attempt committed; the checkpoint records where that attempt
was (``ctx.resume`` on the next attempt, ``resumed_from`` in the result).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

from brain.exceptions import InvalidParams
from brain.services.dream import dream_run
from brain.services.facts import facts_embed_pending
from brain.services.pages import pages_embed_backlog, pages_embed_pending
from brain.services.vectors import vectors_migrate_dimensions
from brain.services.verbs import session_cursor_purge as purge_idle_cursors
from connectors.dispatch import source_sync
from connectors.mailbox.sync import mailbox_import
from connectors.markdown.sync import markdown_import
from jobs.backup import backup_nightly
from jobs.runner import PartialResult
from jobs.services import embed_pending_enqueue
from loops.extraction import commitments_extract
from loops.extractors.llm import RetryableExtraction
from loops.pipeline import loops_sweep as loops_sweep_service
from loops.pipeline import process_threads

if TYPE_CHECKING:
    from jobs.models import Job
    from jobs.runner import JobContext

# A checkpoint write per item would cost a query per message; one per second (and
# at every change of step, and at the end) is enough to show and resume.
CHECKPOINT_EVERY_SECONDS = 1.0


def require(job: Job, name: str) -> Any:
    """Return ``job.params[name]`` or raise ``InvalidParams`` (a permanent failure)."""
    value = (job.params or {}).get(name)
    if value in (None, "", []):
        raise InvalidParams(
            f"Job kind {job.kind!r} needs the parameter {name!r}.",
            suggestion=f"Enqueue it again with params {{'{name}': ...}}.",
            detail={"kind": job.kind, "missing": name},
        )
    return value


def address_list(job: Job, name: str) -> list[str]:
    """``job.params[name]`` as a list of addresses: a JSON list of strings, or one
    string holding one address or several separated by commas (``--param
    owners=me@example.org``); ``[]`` when absent. Raises ``InvalidParams`` (a
    permanent failure) for anything else: ``list("me@x.org")`` had made the
    owners ``['.', '@', 'e', …]`` without a word."""
    value = (job.params or {}).get(name)
    if value in (None, "", []):
        return []
    if isinstance(value, str):
        value = [part for part in (p.strip() for p in value.split(",")) if part]
    if not isinstance(value, list) or not all(
        isinstance(v, str) and "@" in v for v in value
    ):
        raise InvalidParams(
            f"Job kind {job.kind!r}: the parameter {name!r} must be addresses, "
            f"not {value!r}.",
            suggestion=f'Pass {name}=me@example.org, or a JSON list: {name}=["me@example.org"].',
            detail={"kind": job.kind, "field": name},
        )
    return value


def as_result(report: Any) -> Any:
    """A service's report as JSON-safe data (``as_dict()``, dataclass, or as is)."""
    if hasattr(report, "as_dict"):
        return report.as_dict()
    if dataclasses.is_dataclass(report) and not isinstance(report, type):
        return dataclasses.asdict(report)
    return report


class ConnectorProgress:
    """A connector ``progress(step, done, total)`` callback that stores progress and
    the checkpoint ``{step, done}``: at most one write per second, plus every change
    of step and the last item; ``flush()`` writes the latest values at the end."""

    def __init__(self, ctx: JobContext) -> None:
        self.ctx = ctx
        self.at = 0.0
        self.latest: tuple[str, int, int | None] | None = None
        self.written: tuple[str, int, int | None] | None = None

    def __call__(self, step: str, done: int, total: int | None = None) -> None:
        self.ctx.check_cancelled()
        self.latest = (str(step), int(done), None if total is None else int(total))
        now = time.monotonic()
        finished = total is not None and done >= total
        same_step = self.written is not None and self.written[0] == step
        if same_step and not finished and now - self.at < CHECKPOINT_EVERY_SECONDS:
            return
        self.at = now
        self._write()

    def flush(self) -> None:
        """Store the latest values if the throttle held them back."""
        if self.latest is not None and self.latest != self.written:
            self._write()

    def _write(self) -> None:
        if self.latest is None:
            return
        step, done, total = self.latest
        self.ctx.checkpoint(
            {"step": step, "done": done}, step=done, total=total, message=step
        )
        self.written = self.latest


def _with_resume(ctx: JobContext, result: Any) -> Any:
    if ctx.resume and isinstance(result, dict):
        return {**result, "resumed_from": ctx.resume}
    return result


def sync_source(job: Job, ctx: JobContext) -> Any:
    """Sync one source (``params.source_id``) through its connector (SPEC §6): a
    Google account (or Workspace shared mailbox) from its cursor, an IMAP shared
    mailbox from its UIDVALIDITY + UID cursor, a mailbox source by re-importing its
    path. A sync that left work for the next run (``report.unfinished``: a Gmail
    re-list still going, a configured IMAP folder gone) ends the job ``partial``
    naming it (SPEC §6, §7)."""
    source_id = require(job, "source_id")
    sync = source_sync
    progress = ConnectorProgress(ctx)
    report = sync(source_id=source_id, progress=progress, actor=f"job:{job.pk}")
    progress.flush()
    result = _with_resume(ctx, as_result(report))
    if report.unfinished:
        return PartialResult(result, "; ".join(report.unfinished)[:2000])
    return result


def import_mail(job: Job, ctx: JobContext) -> Any:
    """Import a mailbox file or folder (``params.source_id``, ``params.path``,
    optional ``params.owners``: the addresses that count as "me")."""
    source_id, path = require(job, "source_id"), require(job, "path")
    run = mailbox_import
    progress = ConnectorProgress(ctx)
    report = run(
        source_id=source_id,
        path=path,
        owners=address_list(job, "owners"),
        progress=progress,
        actor=f"job:{job.pk}",
    )
    progress.flush()
    return _with_resume(ctx, as_result(report))


def import_markdown(job: Job, ctx: JobContext) -> Any:
    """Import a markdown folder (``params.source_id``, ``params.path``, optional
    ``params.embed``, default true)."""
    source_id, path = require(job, "source_id"), require(job, "path")
    run = markdown_import
    files = 0
    progress = ConnectorProgress(ctx)

    def on_file(relpath: str) -> None:
        nonlocal files
        files += 1
        progress("files", files, None)

    report = run(
        source_id=source_id,
        directory=Path(path),
        embed=bool((job.params or {}).get("embed", True)),
        progress=on_file,
    )
    progress.flush()
    return as_result(report)


def extract_loops(job: Job, ctx: JobContext) -> Any:
    """Loop detection and commitment extraction for threads of a source
    (``params.source_id``, ``params.thread_ids``; SPEC §5.2, §5.3)."""
    source_id, thread_ids = require(job, "source_id"), require(job, "thread_ids")
    if isinstance(thread_ids, str):
        thread_ids = [thread_ids]
    run = process_threads
    ctx.progress(0, len(thread_ids), "threads")
    report = run(source_id=source_id, thread_ids=list(thread_ids))
    ctx.progress(len(thread_ids), len(thread_ids), "threads")
    return as_result(report)


def extract_commitments(job: Job, ctx: JobContext) -> Any:
    """LLM commitment extraction of one thread after detection (``params.source_id``,
    ``params.thread_id``; SPEC §5.3). A transient failure (malformed or truncated
    answer, API error) is retried by the job system with backoff; with no LLM
    configured the job ends with ``{status: failed, reason: llm_unavailable}``."""
    source_id, thread_id = require(job, "source_id"), require(job, "thread_id")
    try:
        outcome = commitments_extract(source_id=source_id, thread_id=thread_id)
    except RetryableExtraction as exc:
        if exc.reason == "llm_unavailable":
            return {"status": "failed", "reason": exc.reason, "retryable": True}
        raise
    return {**outcome, "attempts": job.attempts}


def loops_sweep(job: Job, ctx: JobContext) -> Any:
    """Grace re-checks and staleness for every source, or ``params.source_ids``."""
    run = loops_sweep_service
    return as_result(run(source_ids=(job.params or {}).get("source_ids") or None))


def embed_pending(job: Job, ctx: JobContext) -> Any:
    """Embed chunks that are missing or stale (``params.limit`` and
    ``params.source_ids`` optional). Result: ``{embedded, seconds,
    chunks_per_second, model_chunks_per_second, share_of_model_rate}``: the job's
    rate beside the model's own rate on the same batches (time inside the model
    only), and their ratio (SPEC §11: within 80 %)."""
    run = pages_embed_pending
    limit = (job.params or {}).get("limit")
    source_ids = (job.params or {}).get("source_ids") or None
    done = 0

    def batch_done(count: int) -> None:
        nonlocal done
        done += int(count)
        ctx.progress(done, limit, "chunks embedded")

    timing: dict[str, float] = {}
    embedded = run(
        limit=limit, progress=batch_done, source_ids=source_ids, timing=timing
    )
    result: dict[str, Any] = {"embedded": embedded}
    if embedded and timing.get("seconds") and timing.get("model_seconds"):
        rate = embedded / timing["seconds"]
        model_rate = embedded / timing["model_seconds"]
        result.update(
            seconds=round(timing["seconds"], 2),
            chunks_per_second=round(rate, 1),
            model_chunks_per_second=round(model_rate, 1),
            share_of_model_rate=round(rate / model_rate, 3),
        )
    return result


def reembed(job: Job, ctx: JobContext) -> Any:
    """The managed re-embed after an embedding model change (SPEC §3, issue 46).

    First ``vectors_migrate_dimensions`` when the configured model has another
    dimension than the vector columns (drops every stored vector, alters the
    columns, rebuilds the HNSW indexes); then every chunk whose vector is missing or
    from another model is embedded in batches (``pages_embed_pending``: claimed
    with SKIP LOCKED, so a resumed or second job takes the rest), progress ``done
    of total`` chunks; then facts left without a vector. Resumable: each step
    picks only what is still to do. Result: ``{migrated_to, embedded, facts,
    left}``; ``left`` chunks still stale when the provider failed midway (the job
    then fails and retries).
    """
    migrated = vectors_migrate_dimensions()
    total = pages_embed_backlog()
    done = 0
    ctx.progress(0, total, "chunks re-embedded")

    def batch_done(count: int) -> None:
        nonlocal done
        done += int(count)
        ctx.progress(done, total, "chunks re-embedded")

    embedded = pages_embed_pending(progress=batch_done)
    facts = 0
    while (count := facts_embed_pending(limit=FACTS_BATCH)) > 0:
        facts += count
        if count < FACTS_BATCH:
            break
    left = pages_embed_backlog()
    if left:
        raise RuntimeError(
            f"{left} chunk(s) still wait for the embedding provider; the job retries"
        )
    return {"migrated_to": migrated, "embedded": embedded, "facts": facts, "left": 0}


FACTS_BATCH = 1000


def session_cursor_purge(job: Job, ctx: JobContext) -> Any:
    """Delete ``delta`` session cursors idle for more than 7 days (SPEC §4);
    ``{purged: n}``."""
    return {"purged": purge_idle_cursors()}


def backup(job: Job, ctx: JobContext) -> Any:
    """The nightly backup (``jobs.backup.backup_nightly``): an archive in
    ``params.directory`` (default ``BRAIN_BACKUP_DIR``), keeping the newest
    ``params.keep`` (default ``BRAIN_BACKUP_KEEP``, 7)."""
    directory = Path(job.params.get("directory") or settings.BRAIN_BACKUP_DIR)
    keep = int(job.params.get("keep") or settings.BRAIN_BACKUP_KEEP)
    return backup_nightly(directory=directory, keep=keep)


class DreamFailed(RuntimeError):
    """Every phase of a dream run failed (the job retries, then fails)."""


def dream(job: Job, ctx: JobContext) -> Any:
    """Nightly maintenance (SPEC §10); the JSON report is the job's result.

    The embeddings phase hands its chunks to an ``embed_pending`` job (queued
    unless one is already queued or running), so the model's work runs beside dream
    instead of inside its lock. A report whose status is ``partial`` (a phase failed
    or warned) ends the job ``partial`` naming those phases; ``failed`` (every phase
    that ran failed) fails the job.
    """
    run = dream_run
    params = job.params or {}

    def phase_done(step: int, total: int, name: str) -> None:
        ctx.progress(step, total, name)

    def embed_later(pending: int) -> str:
        queued, created = embed_pending_enqueue(
            parent_id=job.pk, created_by=f"job:{job.pk}"
        )
        return f"the embed_pending job #{queued.pk}" + (
            "" if created else f" (already {queued.get_status_display().lower()})"
        )

    report = run(
        phases=params.get("phases"),
        budget_usd=params.get("budget_usd"),
        max_items=params.get("max_items"),
        progress=phase_done,
        embed_later=embed_later,
    )
    unfinished = [
        f"{p['phase']} {p['status']}"
        for p in report.get("phases", [])
        if p.get("status") in ("warn", "fail")
    ]
    if report.get("status") == "failed":
        raise DreamFailed(
            "every dream phase that ran failed: "
            + "; ".join(f"{p['phase']}: {p.get('error', '')}" for p in report["phases"])
        )
    if report.get("status") == "partial":
        return PartialResult(report, "dream partial: " + ", ".join(unfinished))
    return report
