"""``doctor``: one report that says whether the brain is healthy (operations).

Each check answers one line: ``ok``, ``warn`` or ``fail``, what it saw, and the exact
command that fixes it. ``manage.py doctor`` prints the report (exit status 1 on any
``fail``), ``GET /api/health?detail=1`` returns it to admin keys, and plain
``/api/health`` turns ``degraded`` when any cheap check fails.

Checks (in order): database reachable and its version; the ``vector`` and
``pg_trgm`` extensions; migrations applied; the embedding provider loads (only when
asked: loading the local model takes seconds); embedding coverage and the age of the
oldest un-embedded chunk; a worker alive (heartbeat age) and the queue depth; the
schedules installed and their next run; each source's last successful sync, last
error, held items and staleness (SPEC §5.5: a live mail source is stale after 24 h
without a successful sync); API keys that never expire or were unused for 90 days;
free disk space of the data directory; Django's deployment checks.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core import checks as django_checks
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Count, Min, Q
from django.urls import reverse
from django.utils import timezone
from django_q.models import OrmQ, Schedule

from accounts.models import ApiKey
from brain.embeddings import REEMBED_JOB
from brain.models import Chunk, Source
from brain.services.vectors import vectors_stale_counts
from connectors.models import FOLDER_HELD_KIND, HeldItem
from jobs.models import Job
from jobs.schedules import schedule_specs
from jobs.selectors import WORKER_ALIVE_SECONDS, worker_heartbeats

OK, WARN, FAIL = "ok", "warn", "fail"

#: A live mail source with no successful sync for this long is stale (SPEC §5.5).
STALE_AFTER = timedelta(hours=24)
#: Source kinds synced on a schedule (a mailbox file is imported once, never stale).
LIVE_KINDS = {"google", "imap"}
KEY_UNUSED_AFTER = timedelta(days=90)
DISK_WARN_FREE = 0.10  # fraction of the data directory's file system
DISK_FAIL_BYTES = 500 * 1024 * 1024

MANAGE = "manage.py"


@dataclass(frozen=True)
class Check:
    """One line of the report: ``status`` ok | warn | fail, the ``name`` of the
    check, what was ``seen``, and the exact ``fix`` (a command or an admin path;
    empty when ok)."""

    name: str
    status: str
    seen: str
    fix: str = ""


def doctor_report(*, load_models: bool = False, deploy: bool = True) -> dict[str, Any]:
    """Run every check; returns ``{"status": ok|warn|fail, "checks": [Check…],
    "generated_at": ISO 8601 UTC}``. The status is the worst line.

    ``load_models`` loads the embedding provider (seconds for the local model; the
    command does it, the HTTP health detail does not). ``deploy`` runs Django's
    deployment checks. No check raises: a check that cannot run is a ``fail`` line
    saying why.
    """
    lines: list[Check] = []
    lines.extend(_database())
    if lines[0].status != FAIL:
        for check in (
            _migrations,
            _embeddings_coverage,
            _worker,
            _schedules,
            _sources,
            _keys,
        ):
            try:
                lines.extend(check())
            except Exception as exc:  # noqa: BLE001 - a broken check is a fail line
                lines.append(
                    Check(check.__name__.strip("_"), FAIL, f"check failed: {exc}")
                )
    if load_models:
        lines.append(_embedding_provider())
    lines.append(_disk())
    if deploy:
        lines.extend(_deployment())
    worst = (
        FAIL
        if any(c.status == FAIL for c in lines)
        else (WARN if any(c.status == WARN for c in lines) else OK)
    )
    return {
        "status": worst,
        "checks": [asdict(c) for c in lines],
        "generated_at": timezone.now().isoformat(),
    }


def health_degraded() -> list[str]:
    """The names of the cheap checks that fail now (empty when healthy); what plain
    ``/api/health`` uses to answer ``degraded``."""
    report = doctor_report(load_models=False, deploy=False)
    return [c["name"] for c in report["checks"] if c["status"] == FAIL]


# --- the checks -------------------------------------------------------------------


def _database() -> list[Check]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            version = cursor.fetchone()[0]
            cursor.execute("SELECT extname, extversion FROM pg_extension")
            extensions = dict(cursor.fetchall())
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return [
            Check(
                "database",
                FAIL,
                f"cannot connect: {str(exc).splitlines()[0] if str(exc) else exc}",
                "Check DATABASE_URL (or, for the embedded server, "
                f"the log in {_data_dir() / 'pgdata' / 'log'}).",
            )
        ]
    where = "embedded" if settings.BRAIN_EMBEDDED_DB else "DATABASE_URL"
    lines = [Check("database", OK, f"PostgreSQL {version} ({where})")]
    for ext in ("vector", "pg_trgm"):
        if ext in extensions:
            lines.append(Check(f"extension {ext}", OK, f"version {extensions[ext]}"))
        else:
            lines.append(
                Check(
                    f"extension {ext}",
                    FAIL,
                    "not installed",
                    f"Run `{MANAGE} migrate` as a role allowed to CREATE EXTENSION "
                    f"(or `CREATE EXTENSION {ext};` as a superuser).",
                )
            )
    return lines


def _migrations() -> list[Check]:
    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        names = ", ".join(f"{m.app_label}.{m.name}" for m, _ in plan[:5])
        return [
            Check(
                "migrations",
                FAIL,
                f"{len(plan)} unapplied: {names}{' …' if len(plan) > 5 else ''}",
                f"{MANAGE} migrate",
            )
        ]
    return [Check("migrations", OK, "all applied")]


def _embedding_provider() -> Check:
    from brain.embeddings import get_provider

    kind = settings.BRAIN_EMBEDDING_PROVIDER
    if kind == "none":
        return Check(
            "embedding provider",
            WARN,
            "none configured: search is keyword-only",
            "Set BRAIN_EMBEDDING_PROVIDER=local (offline model) or openai.",
        )
    try:
        provider = get_provider()
        assert provider is not None
        provider.embed(["doctor"])
    except Exception as exc:  # noqa: BLE001 - reported
        return Check(
            "embedding provider",
            FAIL,
            f"{kind} does not load: {exc}",
            "Reinstall with bin/bootstrap (local) or check BRAIN_OPENAI_BASE_URL.",
        )
    return Check("embedding provider", OK, f"{provider.name} loads")


def _embeddings_coverage() -> list[Check]:
    stats = Chunk.objects.aggregate(
        total=Count("id"),
        missing=Count("id", filter=Q(embedding__isnull=True)),
        oldest=Min("page__updated_at", filter=Q(embedding__isnull=True)),
    )
    total, missing = stats["total"], stats["missing"]
    if settings.BRAIN_EMBEDDING_PROVIDER == "none":
        return [
            Check("embeddings", OK, f"provider none; {total} chunk(s) keyword-only")
        ]
    vectors = vectors_stale_counts()
    stale = [_stale_vectors(vectors)] if vectors["stale"] else []
    seen = f"{vectors['embedded']} of {total} chunk(s) embedded by {vectors['model']}"
    if not missing:
        return [Check("embeddings", OK, seen), *stale]
    age = timezone.now() - stats["oldest"] if stats["oldest"] else timedelta(0)
    job = (
        Job.objects.filter(
            kind="embed_pending", status__in=[Job.Status.QUEUED, Job.Status.RUNNING]
        )
        .order_by("id")
        .first()
    )
    if job is not None:
        # The backlog is being worked on: "start the worker" would mislead.
        fix = (
            f"Job #{job.pk} (embed_pending, {job.status}) is embedding them; follow "
            "it in admin → Jobs (it needs a running worker)."
        )
    else:
        fix = (
            f"Start the worker (`{MANAGE} worker`) or run "
            f"`{MANAGE} run_job embed_pending`."
        )
    return [
        Check(
            "embeddings", WARN, f"{seen}; backlog of {missing}, oldest {_ago(age)}", fix
        ),
        *stale,
    ]


def _stale_vectors(vectors: dict[str, Any]) -> Check:
    """The ``embedding model`` line (issue 46): chunks whose vector the configured
    model cannot use make search ``search_degraded`` (keyword-only for them), so
    it fails (``/api/health`` turns degraded) until job ``reembed`` finishes."""
    stored, size = vectors["stored_dimensions"], vectors["dimensions"]
    why = (
        f"the columns hold {stored}-d vectors, {vectors['model']} makes {size}-d"
        if stored is not None and stored != size
        else f"made by another model than {vectors['model']}"
    )
    seen = (
        f"{vectors['stale']} of {vectors['total']} chunk vector(s) stale ({why}); "
        "search finds them by keywords only"
    )
    job = (
        Job.objects.filter(
            kind=REEMBED_JOB, status__in=[Job.Status.QUEUED, Job.Status.RUNNING]
        )
        .order_by("id")
        .first()
    )
    if job is not None:
        progress = job.progress or {}
        fix = (
            f"Job #{job.pk} ({REEMBED_JOB}, {job.status}) is re-embedding them "
            f"({progress.get('step', 0)} of {progress.get('total', '?')}); follow it "
            "in admin → Jobs (it needs a running worker)."
        )
    else:
        fix = f"Run `{MANAGE} run_job {REEMBED_JOB}` (or queue it for the worker)."
    return Check("embedding model", FAIL, seen, fix)


def _worker() -> list[Check]:
    beats = list(worker_heartbeats(alive_within_seconds=WORKER_ALIVE_SECONDS))
    queued = Job.objects.filter(status=Job.Status.QUEUED).count()
    running = Job.objects.filter(status=Job.Status.RUNNING).count()
    tasks = OrmQ.objects.count()
    depth = f"queue: {queued} job(s) queued, {running} running, {tasks} task(s) in the broker"
    if beats:
        age = (timezone.now() - beats[0].beat_at).total_seconds()
        return [
            Check(
                "worker",
                OK,
                f"{len(beats)} alive ({beats[0].name}, beat {age:.0f} s ago); {depth}",
            )
        ]
    return [
        Check(
            "worker",
            FAIL,
            f"no worker alive (no heartbeat in {WORKER_ALIVE_SECONDS} s); {depth}",
            f"{MANAGE} worker (or `systemctl start brain-worker`, see deploy/)",
        )
    ]


def _schedules() -> list[Check]:
    wanted = {spec.name for spec in schedule_specs()}
    rows = {s.name: s for s in Schedule.objects.filter(name__in=wanted)}
    missing = sorted(wanted - set(rows))
    if missing:
        return [
            Check(
                "schedules",
                FAIL,
                f"{len(missing)} of {len(wanted)} missing: {', '.join(missing)}",
                f"{MANAGE} setup_schedules",
            )
        ]
    soonest = min(rows.values(), key=lambda s: s.next_run or timezone.now())
    return [
        Check(
            "schedules",
            OK,
            f"{len(rows)} installed; next: {soonest.name} at {_when(soonest.next_run)}",
        )
    ]


def _sources() -> list[Check]:
    now = timezone.now()
    held = dict(
        HeldItem.objects.values_list("source_id").annotate(n=Count("id")).order_by()
    )
    lines = []
    for source in Source.objects.order_by("id"):
        n_held = held.get(source.id, 0)
        parts = [f"kind {source.kind}"]
        live = source.kind in LIVE_KINDS
        if source.last_success_at:
            parts.append(f"last success {_when(source.last_success_at)}")
        elif live:
            parts.append("never synced successfully")
        else:
            parts.append("no scheduled sync (imported or written directly)")
        if n_held:
            parts.append(f"{n_held} held item(s)")
        if source.last_error:
            parts.append(f"last error: {source.last_error.splitlines()[0][:120]}")
        status, fix = OK, ""
        if live and (
            source.last_success_at is None or now - source.last_success_at > STALE_AFTER
        ):
            status, fix = FAIL, f"{MANAGE} sync_source {source.id}"
            parts.append("stale (no successful sync for 24 h)")
        elif source.last_error or n_held:
            status = WARN
            fix = (
                f"{MANAGE} sync_source {source.id}"
                if live
                else f"See admin → Held items for {source.id}, then retry them."
            )
        lines.append(Check(f"source {source.id}", status, "; ".join(parts), fix))
        lines.extend(_missing_folders(source))
    return lines


def _missing_folders(source: Source) -> list[Check]:
    """One ``fail`` line per configured IMAP folder the server no longer lists
    (held by the last sync, issue 46), named after the folder so ``/api/health``
    names it too."""
    names = HeldItem.objects.filter(
        source=source, kind=FOLDER_HELD_KIND, released_at__isnull=True
    ).values_list("external_id", flat=True)
    return [
        Check(
            f"source {source.id} folder {name}",
            FAIL,
            f"the configured IMAP folder {name!r} is not on the server any more "
            "(renamed or deleted): nothing of it syncs",
            "Re-map it in the console: "
            + reverse("admin:console_source_folders", args=[source.id])
            + f", then `{MANAGE} sync_source {source.id}`.",
        )
        for name in names.order_by("external_id")
    ]


def _keys() -> list[Check]:
    now = timezone.now()
    live = ApiKey.objects.filter(revoked_at__isnull=True)
    expiring_field = any(f.name == "expires_at" for f in ApiKey._meta.get_fields())
    # Keyword built at run time: the field exists only once key expiry lands.
    no_expiry = live.filter(**{"expires_at__isnull": True}) if expiring_field else live
    unused = live.filter(
        Q(last_used_at__lt=now - KEY_UNUSED_AFTER)
        | Q(last_used_at__isnull=True, created_at__lt=now - KEY_UNUSED_AFTER)
    )
    problems = []
    if no_expiry.exists():
        problems.append(f"{no_expiry.count()} never expire")
    if unused.exists():
        names = ", ".join(
            f"{name} ({prefix})"
            for name, prefix in unused.values_list("name", "prefix")[:5]
        )
        problems.append(f"{unused.count()} unused for 90 days ({names})")
    total = live.count()
    if not problems:
        return [Check("api keys", OK, f"{total} active")]
    return [
        Check(
            "api keys",
            WARN,
            f"{total} active; " + "; ".join(problems),
            f"{MANAGE} apikey revoke PREFIX (shown in parentheses, or by "
            f"`{MANAGE} apikey list`) for unused keys; give new keys an expiry "
            "(admin → API keys).",
        )
    ]


def _disk() -> Check:
    path = _data_dir()
    usage = shutil.disk_usage(path)
    free = usage.free / usage.total if usage.total else 0
    seen = f"{usage.free / 2**30:.1f} GiB free of {usage.total / 2**30:.1f} GiB ({free:.0%}) at {path}"
    if usage.free < DISK_FAIL_BYTES:
        return Check("disk", FAIL, seen, f"Free space on the file system of {path}.")
    if free < DISK_WARN_FREE:
        return Check("disk", WARN, seen, f"Free space on the file system of {path}.")
    return Check("disk", OK, seen)


def _deployment() -> list[Check]:
    messages = django_checks.run_checks(
        include_deployment_checks=True, tags=["security"]
    )
    if settings.DEBUG:
        return [
            Check(
                "deployment",
                WARN,
                f"DEBUG is on (development); {len(messages)} deployment warning(s)",
                "For production set DJANGO_DEBUG=0, DJANGO_SECRET_KEY and the "
                "DJANGO_SECURE_* variables (README: Running in production), then "
                f"`{MANAGE} check --deploy`.",
            )
        ]
    if messages:
        ids = ", ".join(sorted({m.id or "?" for m in messages}))
        return [
            Check(
                "deployment",
                WARN,
                f"{len(messages)} deployment warning(s): {ids}",
                f"{MANAGE} check --deploy",
            )
        ]
    return [Check("deployment", OK, "check --deploy is clean")]


# --- helpers ---------------------------------------------------------------------


def _data_dir() -> Path:
    return Path(settings.BRAIN_DATA_DIR)


def _ago(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    if seconds < 172800:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} days ago"


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "never"
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
