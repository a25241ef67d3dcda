"""``manage.py run_job KIND [--param k=v]... [--idempotency-key K]``: run any job kind
in the foreground (SPEC §7 "every job is also runnable from the command line", so a
host cron works too).

The job is a normal durable ``Job`` row (visible in the admin), claimed and run in
this process with a progress bar fed from the job's progress. With an idempotency key
a job that already ran is not run again.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from brain.cli import progress_stream
from brain.exceptions import BrainError
from jobs.models import Job
from jobs.runner import execute_job
from jobs.services import job_enqueue, worker_name


def parse_param(raw: str) -> tuple[str, Any]:
    """``k=v`` → (k, v) with v parsed as JSON when it is JSON (numbers, lists,
    true/false), else kept as text."""
    if "=" not in raw:
        raise CommandError(f"--param {raw!r}: expected key=value")
    key, _, value = raw.partition("=")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


class Command(BaseCommand):
    help = "Run one job of any kind in the foreground and print what it did."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("kind", help="sync_source, dream, embed_pending, ...")
        parser.add_argument(
            "--param",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="A job parameter (repeatable); values are JSON when they parse.",
        )
        parser.add_argument("--idempotency-key", default=None)
        parser.add_argument("--max-attempts", type=int, default=None)
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        params = dict(parse_param(p) for p in options["param"])
        try:
            job, created = job_enqueue(
                kind=options["kind"],
                params=params,
                idempotency_key=options["idempotency_key"],
                max_attempts=options["max_attempts"],
                created_by="cli",
                dispatch=False,
            )
        except BrainError as exc:
            raise CommandError(f"{exc.message} {exc.suggestion}") from exc
        if not created and job.status != Job.Status.QUEUED:
            self.stdout.write(
                f"Job #{job.pk} ({job.kind}) with key {job.idempotency_key!r} is "
                f"already {job.status}; nothing to do."
            )
            return
        self.stdout.write(
            f"Running job #{job.pk} {job.kind} {json.dumps(job.params)}"
            + ("" if created else " (queued earlier with the same key)")
        )
        # One bar per stage ("parse", "threads"…), opened by the stage's first
        # report: a bar made up front printed an empty "0step" line, and one bar
        # for every stage carried the first stage's clock and rate into the next.
        bars: dict[str, tqdm[Any]] = {}

        def on_progress(step: int, total: int | None, message: str) -> None:
            stage = message or job.kind
            bar = bars.get(stage)
            if bar is None:
                for earlier in bars.values():
                    earlier.close()
                # Opened on its first report: what was done before counts as
                # its start, not as progress made in no time (a rate of
                # millions of steps a second).
                bar = bars[stage] = tqdm(
                    total=total,
                    initial=step,
                    unit="step",
                    desc=stage,
                    disable=options["no_progress"],
                    file=progress_stream(self.stderr),
                )
            if total is not None and bar.total != total:
                bar.total = total
            bar.n = step
            bar.refresh()

        try:
            done = execute_job(
                job_id=job.pk, worker=f"cli:{worker_name()}", on_progress=on_progress
            )
        finally:
            for bar in bars.values():
                bar.close()
        if done is None:
            raise CommandError(
                f"Job #{job.pk} could not be claimed (another worker took it, or its "
                "retry backoff is not over)."
            )
        self.stdout.write(
            f"Job #{done.pk} {done.status} after {done.attempts} attempt(s)."
        )
        if done.status in (Job.Status.SUCCEEDED, Job.Status.PARTIAL):
            self.stdout.write(json.dumps(done.result, indent=2, default=str))
            if done.error:
                self.stdout.write(f"Partial: {done.error}")
            return
        if done.status == Job.Status.QUEUED:
            self.stdout.write(
                f"It will be retried after {done.run_after:%Y-%m-%d %H:%M:%S} UTC by a "
                "worker (manage.py worker)."
            )
        raise CommandError(done.error.splitlines()[0] if done.error else done.status)
