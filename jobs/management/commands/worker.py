"""``manage.py worker``: run the django-q2 cluster that executes jobs and schedules,
and stop it cleanly under a process manager (SPEC §7, operations).

The cluster (``qcluster``: a master, its sentinel, the pusher, the monitor and the
workers) runs as a child in its own process group. This command only supervises it:

- SIGTERM or SIGINT to this command, or to its whole process group (systemd's
  default stop), reaches the cluster's master alone. A process-group SIGTERM that hits
  the sentinel and the workers at once leaves the django-q2 master blocked forever on
  a condition variable the dead children held; forwarding avoids that.
- The master finishes the task in hand and exits (about 3 s when idle). If the cluster
  is still alive after ``--stop-timeout`` seconds (default 8, so the whole stop stays
  under 10 s), its process group is killed and the jobs those processes were running
  go back to the queue from their checkpoint at once (``job_reap_stalled``), instead
  of waiting for the stall timeout.
- While the cluster runs, the supervisor beats a ``WorkerHeartbeat`` row every
  ``BRAIN_WORKER_BEAT_SECONDS`` (15 s), so ``manage.py doctor`` and ``/api/health``
  can tell whether a worker is alive; a clean stop removes the row.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import DatabaseError, connections

from jobs.services import (
    job_reap_stalled,
    worker_beat,
    worker_gone,
    worker_name,
    worker_name_of,
)

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Run the job worker (django-q2 qcluster) in the foreground."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--stop-timeout",
            type=float,
            default=8.0,
            help="Seconds the cluster gets to finish its task in hand on SIGTERM "
            "before it is killed and its jobs re-queued (default 8).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        conf = settings.Q_CLUSTER
        broker = "Redis" if conf.get("redis") else f"ORM ({conf.get('orm')})"
        self.stdout.write(
            f"Starting django-q2 cluster {conf.get('name')!r}: "
            f"{conf.get('workers')} worker(s), broker {broker}, "
            f"task timeout {conf.get('timeout')} s. Stop with Ctrl-C or SIGTERM."
        )
        self.stdout.write("Schedules: manage.py setup_schedules installs them.")
        self.stdout.flush()
        cluster = subprocess.Popen(  # noqa: S603 - our own manage.py
            [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "qcluster"],
            start_new_session=True,
        )
        code = self._supervise(cluster, stop_timeout=options["stop_timeout"])
        if code:
            sys.exit(code)

    def _supervise(
        self, cluster: subprocess.Popen[bytes], *, stop_timeout: float
    ) -> int:
        """Wait for the cluster; forward the first stop signal to its master only,
        kill its group after ``stop_timeout`` seconds. Returns the exit code."""
        deadline: list[float] = []

        def stop(signum: int, frame: Any) -> None:
            if not deadline:
                deadline.append(time.monotonic() + stop_timeout)
                self.stderr.write(
                    f"Stopping the cluster (signal {signal.Signals(signum).name}); "
                    f"it has {stop_timeout:g} s to finish the task in hand."
                )
                _signal(cluster.pid, signal.SIGTERM)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        me = worker_name()
        every = float(getattr(settings, "BRAIN_WORKER_BEAT_SECONDS", 15))
        next_beat = 0.0
        try:
            while True:
                if not deadline and time.monotonic() >= next_beat:
                    _beat(me)
                    next_beat = time.monotonic() + every
                try:
                    code = cluster.wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    if deadline and time.monotonic() > deadline[0]:
                        self._kill(cluster)
                        return 1
                    continue
                if deadline:
                    self.stdout.write("The cluster stopped.")
                    return 0
                return code
        finally:
            with contextlib.suppress(Exception):  # the database may be gone too
                worker_gone(name=me)

    def _kill(self, cluster: subprocess.Popen[bytes]) -> None:
        """Kill the cluster's whole process group and re-queue its running jobs."""
        try:
            members = [cluster.pid] + [
                p.pid for p in psutil.Process(cluster.pid).children(recursive=True)
            ]
        except psutil.Error:
            members = [cluster.pid]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(cluster.pid, signal.SIGKILL)
        cluster.wait()
        requeued = job_reap_stalled(
            stale_after_seconds=0, workers=[worker_name_of(pid) for pid in members]
        )
        self.stderr.write(
            f"The cluster did not stop in time and was killed; "
            f"re-queued job(s): {requeued or 'none'}."
        )


def _beat(name: str) -> None:
    """Beat; a database hiccup must not stop the supervisor (it retries next time)."""
    try:
        worker_beat(name=name)
    except DatabaseError:
        logger.warning("worker heartbeat failed; retrying at the next beat")
        connections.close_all()


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
