"""Handlers of the built-in job kinds (SPEC §7): each parses params and calls one
service of another app, imported lazily by dotted path.

Every handler has the shape ``handler(job, ctx) -> JSON-safe result``. Progress
reported by a service becomes the job's progress (and heartbeat); resumable
services get the job's checkpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.utils.module_loading import import_string

from brain.exceptions import InvalidParams
from jobs.exceptions import PermanentJobError

if TYPE_CHECKING:
    from collections.abc import Callable

    from jobs.models import Job
    from jobs.runner import JobContext


def service(path: str) -> Callable[..., Any]:
    """Import the service at ``path``; a missing one fails the job permanently."""
    try:
        return import_string(path)  # type: ignore[no-any-return]
    except ImportError as exc:
        raise PermanentJobError(
            f"The service {path} is not installed in this deployment."
        ) from exc


def require(job: Job, name: str) -> Any:
    """Return ``job.params[name]`` or raise ``InvalidParams`` (a permanent failure)."""
    value = (job.params or {}).get(name)
    if value in (None, ""):
        raise InvalidParams(
            f"Job kind {job.kind!r} needs the parameter {name!r}.",
            suggestion=f"Enqueue it again with params {{'{name}': ...}}.",
            detail={"kind": job.kind, "missing": name},
        )
    return value


def progress_of(ctx: JobContext) -> Callable[..., None]:
    """A ``progress(step, total=None, message="")`` callback for services."""

    def report(step: int, total: int | None = None, message: str = "") -> None:
        ctx.progress(int(step), None if total is None else int(total), str(message))

    return report


def sync_source(job: Job, ctx: JobContext) -> Any:
    """Sync one source (``params.source_id``) through its connector (SPEC §6)."""
    source_id = require(job, "source_id")
    sync = service("connectors.services.source_sync")
    return sync(source_id=source_id, progress=progress_of(ctx))


def import_mail(job: Job, ctx: JobContext) -> Any:
    """Import a mailbox file or folder (``params.source_id``, ``params.path``)."""
    source_id, path = require(job, "source_id"), require(job, "path")
    run = service("connectors.services.mailbox_import")
    return run(source_id=source_id, path=path, progress=progress_of(ctx))


def import_markdown(job: Job, ctx: JobContext) -> Any:
    """Import a markdown folder (``params.source_id``, ``params.path``)."""
    source_id, path = require(job, "source_id"), require(job, "path")
    run = service("connectors.services.markdown_import")
    return run(source_id=source_id, path=path, progress=progress_of(ctx))


def extract_loops(job: Job, ctx: JobContext) -> Any:
    """Run loop detection and commitment extraction for threads of a source
    (``params.source_id``, ``params.thread_ids``)."""
    source_id, thread_ids = require(job, "source_id"), require(job, "thread_ids")
    run = service("loops.pipeline.process_threads")
    if isinstance(thread_ids, str):
        thread_ids = [thread_ids]
    ctx.progress(0, len(thread_ids), "threads")
    run(source_id=source_id, thread_ids=list(thread_ids))
    ctx.progress(len(thread_ids), len(thread_ids), "threads")
    return {"threads": len(thread_ids)}


def loops_sweep(job: Job, ctx: JobContext) -> Any:
    """Loop staleness and grace re-checks (SPEC §5)."""
    run = service("loops.services.loops_sweep")
    return run()


def embed_pending(job: Job, ctx: JobContext) -> Any:
    """Embed chunks that are missing or stale (``params.limit`` optional)."""
    run = service("brain.services.pages.pages_embed_pending")
    limit = (job.params or {}).get("limit")
    done = 0

    def batch_done(count: int) -> None:
        nonlocal done
        done += int(count)
        ctx.progress(done, limit, "chunks embedded")

    embedded = run(limit=limit, progress=batch_done)
    return {"embedded": embedded}


def dream(job: Job, ctx: JobContext) -> Any:
    """Nightly maintenance (SPEC §10); the JSON report is the job's result."""
    run = service("brain.services.dream.dream_run")
    params = job.params or {}
    return run(
        phases=params.get("phases"),
        budget_usd=params.get("budget_usd"),
        progress=progress_of(ctx),
    )
