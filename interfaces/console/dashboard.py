"""What the console home shows (SPEC §0, §7): sources with their last sync, state,
next run and held items; jobs running, failed and queued; whether a worker is alive;
the doctor's cheap checks (embedding coverage among them); the open-loop count."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone
from django_q.models import Schedule

from brain.models import Source
from connectors.models import FOLDER_HELD_KIND, HeldItem
from interfaces.doctor import doctor_report
from jobs.models import Job
from jobs.schedules import MAIL_SOURCE_KINDS, SYNC_PREFIX
from jobs.selectors import job_outcome, worker_alive
from loops.models import LoopStatus, OpenLoop

RECENT_FAILURES = timedelta(days=7)


def dashboard_context() -> dict[str, Any]:
    """The home's context: ``{open_loops, snoozed_loops, sources[], running[], failed[], queued,
    worker_alive, queued_without_worker, checks[]}``. Sources carry ``held`` (items
    not released), ``missing_folders`` (configured IMAP folders the server no
    longer lists, to re-map) and ``next_run`` (their sync schedule, None when unscheduled);
    checks are ``doctor_report`` lines without the model load or deploy checks."""
    held = dict(
        HeldItem.objects.filter(released_at__isnull=True)
        .values("source_id")
        .annotate(n=Count("id"))
        .values_list("source_id", "n")
    )
    next_runs = dict(
        Schedule.objects.filter(name__startswith=SYNC_PREFIX).values_list(
            "name", "next_run"
        )
    )
    missing: dict[str, list[str]] = {}
    for source_id, name in (
        HeldItem.objects.filter(kind=FOLDER_HELD_KIND, released_at__isnull=True)
        .order_by("external_id")
        .values_list("source_id", "external_id")
    ):
        missing.setdefault(source_id, []).append(name)
    sources = []
    for source in Source.objects.order_by("id"):
        sources.append(
            {
                "source": source,
                "syncable": source.kind in MAIL_SOURCE_KINDS
                or source.kind == Source.Kind.MARKDOWN,
                "held": held.get(source.id, 0),
                "next_run": next_runs.get(f"{SYNC_PREFIX}{source.id}"),
                "state": "error" if source.last_error else "ok",
                "missing_folders": missing.get(source.id, []),
            }
        )
    running = list(Job.objects.filter(status=Job.Status.RUNNING).order_by("-id")[:10])
    failed = [
        {"job": job, "outcome": job_outcome(job)}
        for job in Job.objects.filter(
            Q(status__in=[Job.Status.FAILED, Job.Status.DEAD, Job.Status.PARTIAL])
            | Q(status=Job.Status.SUCCEEDED, result__status__in=["partial", "failed"]),
            updated_at__gte=timezone.now() - RECENT_FAILURES,
        ).order_by("-id")[:10]
    ]
    queued = Job.objects.filter(status=Job.Status.QUEUED).count()
    alive = worker_alive()
    report = doctor_report(load_models=False, deploy=False)
    now = timezone.now()
    open_loops = OpenLoop.objects.filter(status=LoopStatus.OPEN)
    return {
        # As Waiting counts them: a snoozed loop stays open but is out of the
        # list until its date (SPEC §5.5), so it is counted apart.
        "open_loops": open_loops.exclude(snoozed_until__gt=now).count(),
        "snoozed_loops": open_loops.filter(snoozed_until__gt=now).count(),
        "sources": sources,
        "running": running,
        "failed": failed,
        "queued": queued,
        "worker_alive": alive,
        "queued_without_worker": bool(queued) and not alive,
        "checks": report["checks"],
    }
