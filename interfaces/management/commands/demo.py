"""``manage.py demo``: the README's main job on the embedded default (SPEC §0, §7).

1. migrate the embedded PostgreSQL; 2. make a local admin user; 3. import a real
mailbox as a durable ``import_mail`` job (the bundled Enron sample unless PATH is
given), which detects open loops and extracts commitments (the LLM with a key, the
offline rules otherwise), and offer to federate the mailbox so agents (MCP stdio,
recall, entity) find its people without naming the source; 4. sweep loops; 5. print
who is waiting on whom; 6. install the schedules, say how much embedding is left and
how long it takes here, start a job worker and serve the admin, the API and MCP at a
printed address with printed credentials.

Every step is idempotent: running the demo again imports nothing twice.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import User
from brain.embeddings import embedding_backlog
from brain.models import Source
from brain.services.sources import source_set_federated
from brain.text import slugify_title
from jobs.models import Job
from jobs.schedules import SCHEDULED_SYNC_KINDS
from jobs.selectors import WORKER_ALIVE_SECONDS, worker_heartbeats
from jobs.services import embed_pending_enqueue

ADMIN_USERNAME = "admin"
SAMPLE = Path("demo") / "enron-allen-p"
SAMPLE_OWNER = "pallen@enron.com"
SAMPLE_SOURCE = "enron-allen-p"


class Command(BaseCommand):
    help = "Run the brain end to end on real mail, print the waiting view, serve the admin."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "path", nargs="?", help="A mailbox to import (mbox, maildir, .eml folder)."
        )
        parser.add_argument(
            "--owner", action="append", default=[], help="Owner address (repeatable)."
        )
        parser.add_argument("--source", default=None, help="Source id for the mailbox.")
        parser.add_argument(
            "--top", type=int, default=10, help="Waiting groups to show."
        )
        parser.add_argument(
            "--no-serve", action="store_true", help="Stop after the pipeline."
        )
        parser.add_argument("--addr", default="127.0.0.1:8000", help="Where to serve.")
        parser.add_argument(
            "--federate",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="Let unqualified searches (MCP, recall, entity) read the mailbox "
            "(default: ask on a terminal, yes otherwise).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        started = time.monotonic()
        path, owners, source_id = self._mailbox(options)

        self._heading("1/5 Database")
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write(
            "   embedded PostgreSQL ready, migrations applied (pgvector, pg_trgm)"
        )
        self._refuse_other_source(source_id, Path(path), derived=not options["source"])
        password = self._ensure_admin()

        self._heading(
            f"2/5 Import {path} into source {source_id!r} (owner {', '.join(owners)})"
        )
        extractor = "LLM (Anthropic)" if settings.ANTHROPIC_API_KEY else "offline rules"
        self.stdout.write(
            f"   open loops: deterministic detector; commitments: {extractor}"
        )
        call_command(
            "run_job",
            "import_mail",
            param=[
                f"source_id={source_id}",
                f"path={path}",
                f"owners={json.dumps(owners)}",
            ],
            idempotency_key=f"demo:import_mail:{source_id}:{path}",
            stdout=_Summary(self.stdout),
        )

        self._federate(source_id, federate=options["federate"])

        self._heading("3/5 Loops sweep (grace re-checks, staleness)")
        call_command("loops_sweep", source=[source_id])

        self._heading("4/5 Who is waiting on whom")
        call_command("waiting", top=options["top"], source=[source_id], stale_ok=True)

        self._heading("5/5 Schedules")
        call_command("setup_schedules", verbosity=0)
        self.stdout.write(self._schedules_summary(source_id))
        self.stdout.write(f"   pipeline took {time.monotonic() - started:.1f} s")
        self._embedding_report(source_id, serving=not options["no_serve"])
        if options["no_serve"]:
            self.stdout.write(
                f"   admin login for later (bin/demo serves it): user "
                f"{ADMIN_USERNAME!r}  password {password!r}"
            )
            return
        self._serve(options["addr"], password, source_id)

    def _federate(self, source_id: str, *, federate: bool | None) -> None:
        """Offer to federate the imported mailbox (SPEC §4, §8) and say what it means."""
        source = Source.objects.filter(id=source_id).first()
        if source is None:
            return
        if source.federated:
            self.stdout.write(f"   source {source_id!r} is federated already")
            return
        if federate is None:
            federate = True
            if sys.stdin.isatty():
                answer = input(
                    f"   Let agents (MCP, recall, entity) search {source_id!r} without "
                    "naming it? [Y/n] "
                )
                federate = answer.strip().lower() not in {"n", "no"}
        if federate:
            source_set_federated(sources=[source], federated=True, actor="demo")
            self.stdout.write(
                f"   federated source '{source_id}': recall, entity, search and push "
                "find its people without naming it (undo: admin → Sources, or run "
                "the demo with --no-federate)"
            )
        else:
            self.stdout.write(
                f"   source '{source_id}' left unfederated: agents pass "
                f"source='{source_id}' to read it (answers say so in a hint); "
                "federate it in admin → Sources"
            )

    def _embedding_report(self, source_id: str, *, serving: bool) -> None:
        """Closing lines: how much of the mailbox still lacks embeddings (search
        is degraded until it is done) and how long it takes here; queues one
        ``embed_pending`` job for the mailbox unless a live one covers it
        (``embed_pending_enqueue``), which the worker the demo starts runs in the
        background (its progress shows in admin → Jobs), and says the job's real
        status: running, queued for a live worker, or waiting for one."""
        backlog = embedding_backlog(source_ids=[source_id])
        pending, total = backlog["pending"], backlog["total"]
        if backlog["provider"] == "none":
            self.stdout.write(
                "   embeddings: provider none, search is keyword-only "
                "(set BRAIN_EMBEDDING_PROVIDER=local for hybrid search)"
            )
            return
        if not pending:
            self.stdout.write(f"   embeddings: all {total} chunks embedded")
            return
        job, _ = embed_pending_enqueue(
            source_ids=[source_id], created_by="demo", dispatch=serving
        )
        alive = worker_heartbeats(alive_within_seconds=WORKER_ALIVE_SECONDS).exists()
        if job.status == Job.Status.RUNNING:
            how = (
                f"job #{job.pk} is running on worker {job.worker or 'unknown'} "
                "(progress in admin → Jobs)"
            )
        elif serving:
            how = (
                f"the worker started below embeds them in the background (job "
                f"#{job.pk}, progress in admin → Jobs)"
            )
        elif alive:
            how = (
                f"job #{job.pk} is queued; the running worker starts it within a "
                "minute (progress in admin → Jobs)"
            )
        else:
            how = (
                f"job #{job.pk} is queued: start `manage.py worker` to embed them in "
                "the background"
            )
        estimate = ""
        if backlog["seconds"] is not None:
            estimate = (
                f"; about {_duration(float(backlog['seconds']))} on this machine "
                f"({backlog['chunks_per_second']} chunks/s measured)"
            )
        self.stdout.write(
            f"   embeddings: {pending} of {total} chunks pending, so search answers "
            f"say search_degraded until they are done; {how}{estimate}"
        )

    def _mailbox(self, options: dict[str, Any]) -> tuple[str, list[str], str]:
        """Resolve PATH, owners and source id; the bundled sample needs no flags."""
        if options["path"]:
            path = Path(options["path"]).expanduser().resolve()
            if not path.exists():
                raise CommandError(
                    f"{path} does not exist. Give an mbox, maildir or .eml folder."
                )
            if not options["owner"]:
                raise CommandError(
                    "Say whose mailbox it is: --owner you@example.com (repeatable)."
                )
            source_id = options["source"] or (
                slugify_title(path.stem)[:32].strip("-") or "mailbox"
            )
            return str(path), options["owner"], source_id
        sample = settings.BASE_DIR / SAMPLE
        return (
            str(sample),
            options["owner"] or [SAMPLE_OWNER],
            options["source"] or SAMPLE_SOURCE,
        )

    def _refuse_other_source(
        self, source_id: str, path: Path, *, derived: bool
    ) -> None:
        """Raise ``CommandError`` when ``source_id`` names a source that is not a
        mailbox (a folder named ``default`` derives the harness-notes source's
        id, and importing mail into it failed with a traceback), naming the
        exact ``--source`` to pass instead (the first free ``<id>-mail``)."""
        existing = Source.objects.filter(id=source_id).first()
        if existing is None or existing.kind == Source.Kind.MAILBOX:
            return
        taken = set(Source.objects.values_list("id", flat=True))
        base = source_id[:27].strip("-")
        suggestion = next(
            f"{base}-mail{n or ''}"
            for n in range(100)
            if f"{base}-mail{n or ''}" not in taken
        )
        why = (
            f"the folder name {path.name!r} gives the source id {source_id!r}"
            if derived
            else f"--source {source_id}"
        )
        raise CommandError(
            f"Not importing: {why}, which is the {existing.get_kind_display().lower()} "
            f"source {source_id!r}, not a mailbox. Pass --source {suggestion} "
            f"(bin/demo {path} --owner ... --source {suggestion})."
        )

    def _schedules_summary(self, source_id: str) -> str:
        """The line under the schedule table: a source synced on a schedule (Google,
        IMAP) says so; a mailbox file gets none (the table above shows no sync row
        for it), so the line must not promise a sync every 10 minutes."""
        source = Source.objects.filter(id=source_id).first()
        if source is not None and source.kind in SCHEDULED_SYNC_KINDS:
            sync = f"'{source_id}' syncs on its schedule"
        else:
            sync = (
                f"'{source_id}' is read from files, so no sync is scheduled "
                "(re-run the import when they grow)"
            )
        return f"   {sync}; loops sweep hourly, dream nightly at 02:00"

    def _serve(self, addr: str, password: str, source_id: str) -> None:
        """Start a django-q2 worker and serve the ASGI site (admin, API, MCP) until
        Ctrl-C; prints how to make a harness key that writes (closes loops) in the
        imported mailbox ``source_id``."""
        host, _, port = addr.rpartition(":")
        manage = str(settings.BASE_DIR / "manage.py")
        # Its own process group, so stopping the demo stops the cluster's children too.
        worker = subprocess.Popen(
            [sys.executable, manage, "worker"],
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.stdout.write(self.style.SUCCESS("\nServing (Ctrl-C stops):"))
        self.stdout.write(
            f"   admin:   http://{addr}/admin/   user {ADMIN_USERNAME!r}  password {password!r}"
        )
        self.stdout.write(f"   waiting: http://{addr}/admin/loops/openloop/waiting/")
        self.stdout.write(
            f"   API:     http://{addr}/api/docs   (OpenAPI /api/openapi.json)"
        )
        self.stdout.write(
            f"   MCP:     http://{addr}/mcp        (bearer key from admin → API keys)"
        )
        self.stdout.write(
            "   harness key (reads the mailbox, closes and mutes its loops):\n"
            "      .venv/bin/python manage.py apikey create --name harness "
            f"--scopes read,write --write-source {source_id} "
            f"--readable {source_id},default --trusted"
        )
        self.stdout.write(
            f"   worker:  pid {worker.pid} (django-q2; jobs in admin → Jobs)"
        )
        # uvicorn re-raises the SIGTERM it caught once it has shut down; turning it
        # into SystemExit lets the worker group be stopped below, as on Ctrl-C.
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
        try:
            self._run_server(host or "127.0.0.1", int(port or 8000))
        finally:
            _stop_group(worker)

    def _run_server(self, host: str, port: int) -> None:
        call_command("collectstatic", interactive=False, verbosity=0)
        try:
            import uvicorn
        except ImportError:  # pragma: no cover - uvicorn is a declared dependency
            call_command("runserver", f"{host}:{port}", use_reloader=False)
            return
        uvicorn.run(
            "gbrain_site.asgi:application", host=host, port=port, log_level="warning"
        )

    def _ensure_admin(self) -> str:
        """Create the local admin once; its password is kept in the data directory's
        ``admin-password`` (``BRAIN_DATA_DIR``, default ``var/``), so two data
        directories never overwrite each other's password."""
        path = Path(settings.BRAIN_DATA_DIR) / "admin-password"
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and User.objects.filter(username=ADMIN_USERNAME).exists():
            return path.read_text().strip()
        password = secrets.token_urlsafe(12)
        user, _ = User.objects.get_or_create(
            username=ADMIN_USERNAME, defaults={"email": "admin@localhost"}
        )
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        path.write_text(password + "\n")
        path.chmod(0o600)
        return password

    def _heading(self, text: str) -> None:
        self.stdout.write(self.style.MIGRATE_HEADING(f"\n{text}"))


def _duration(seconds: float) -> str:
    """``42 s``, ``3 min`` or ``1.5 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the worker's process group (django-q2 shuts down gracefully and its
    exit releases the embedded database), then SIGKILL whatever is left after 20 s."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


class _Summary:
    """Pass ``run_job``'s output through, shortening its JSON result to the counts."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self._buffer = ""

    def write(self, text: str, *args: Any, **kwargs: Any) -> None:
        self._buffer += text
        if text.strip().startswith("{"):
            try:
                result = json.loads(text)
            except ValueError:
                self._out.write(text)
                return
            # Connector results keep their numbers under "counts".
            flat = {**result, **(result.get("counts") or {})}
            counts = {k: v for k, v in flat.items() if isinstance(v, int | float)}
            self._out.write("   " + ", ".join(f"{k}: {v}" for k, v in counts.items()))
            return
        self._out.write("   " + text.strip())

    def flush(self) -> None:
        return None
