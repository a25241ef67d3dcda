"""Test-only job kinds, registered through ``settings.BRAIN_JOB_HANDLERS``.

They are importable by worker subprocesses too (``tests.jobs.worker_settings``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.db import transaction

from brain.models import RawRecord
from brain.text import sha256_hex
from jobs.exceptions import PermanentJobError


def import_items(job: Any, ctx: Any) -> dict[str, Any]:
    """Import ``params.items`` numbered items as RawRecords of ``params.source_id``.

    Each item commits together with the checkpoint naming the next item, so a
    resumed attempt starts after the last committed item. Items are inserted with a
    plain INSERT: a second import of an item hits the (source, external_id) unique
    constraint and fails the job, which is how the tests see a duplicate.
    After item ``params.hold_after`` the handler waits, heartbeating, while the file
    ``params.hold_file`` exists (so a test can kill the worker at a known point).
    """
    total = int(job.params["items"])
    start = int(ctx.resume.get("next", 0))
    hold_after = job.params.get("hold_after")
    hold_file = job.params.get("hold_file")
    for i in range(start, total):
        with transaction.atomic():
            RawRecord.objects.create(
                source_id=job.params.get("source_id", "default"),
                external_id=f"item-{i}",
                kind=RawRecord.Kind.AGENT_INPUT,
                content=f"item {i} (attempt {ctx.attempt})",
                content_hash=sha256_hex(f"item {i}"),
            )
            ctx.checkpoint({"next": i + 1}, step=i + 1, total=total, message="items")
        if hold_file and i + 1 == hold_after:
            while Path(hold_file).exists():
                ctx.heartbeat()
                time.sleep(0.05)
    return {"imported": total - start, "resumed_from": start, "attempt": ctx.attempt}


def flaky(job: Any, ctx: Any) -> dict[str, Any]:
    """Fail with a transient error on the first ``params.fail_times`` attempts."""
    if ctx.attempt <= int(job.params.get("fail_times", 1)):
        raise ConnectionError(f"transient failure on attempt {ctx.attempt}")
    return {"attempt": ctx.attempt}


def broken(job: Any, ctx: Any) -> None:
    """Always fail with a permanent error."""
    raise PermanentJobError("the mailbox file is not a mailbox")


def import_mail_holding(job: Any, ctx: Any) -> Any:
    """The real mailbox import (as the ``import_mail`` kind runs it, in batches of
    ``params.batch_threads`` threads) with a pause: once the batch that brings the
    written threads to ``params.hold_after`` is written (not yet committed) it writes ``params.reached_file`` and waits, heartbeating,
    while ``params.hold_file`` exists. The pause is inside the connector's batch
    transaction, so a worker killed there loses that uncommitted batch."""
    from connectors.mailbox.sync import mailbox_import
    from jobs.handlers import ConnectorProgress, as_result

    params = job.params
    progress = ConnectorProgress(ctx)
    hold, reached = Path(params["hold_file"]), Path(params["reached_file"])

    def on_progress(step: str, done: int, total: int | None = None) -> None:
        progress(step, done, total)
        if step == "threads" and done == params["hold_after"] and hold.exists():
            reached.write_text(str(done))
            while hold.exists():
                ctx.heartbeat()
                time.sleep(0.05)

    report = mailbox_import(
        source_id=params["source_id"],
        path=params["path"],
        owners=[],
        progress=on_progress,
        actor=f"job:{job.pk}",
        batch_threads=params["batch_threads"],
    )
    progress.flush()
    return as_result(report)


def two_stages(job: Any, ctx: Any) -> dict[str, Any]:
    """Report progress through two stages, ``first`` (2 steps) then ``second`` (1
    step), as a connector reports "parse" then "threads"."""
    for done in (0, 1, 2):
        ctx.progress(done, 2, "first")
    ctx.progress(1, 1, "second")
    return {"stages": 2}
