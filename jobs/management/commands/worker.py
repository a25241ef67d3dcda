"""``manage.py worker``: run the django-q2 cluster that executes jobs and schedules,
and stop it cleanly under a process manager (SPEC §7, operations).

The cluster (a master — this process —, its sentinel, the pusher, the monitor and the
workers) stays in this process's group, so a SIGKILL of the group takes all of it
down, like a lost machine. What this command changes is the master's stop:

- django-q2's own handler stops the cluster by setting a multiprocessing event; when
  the whole process group got SIGTERM (systemd's and Docker's stop), the sentinel and
  the workers are already dead and that call blocks forever on a condition they held.
  Here the stop runs in a helper thread, and the master waits for it at most
  ``--stop-timeout`` seconds (default 8, so a stop stays under 10 s). This handler
  replaces django-q2's before the cluster starts, so a signal that lands while it
  is still starting is handled the same way.
- On SIGTERM or SIGINT to the master alone, the cluster finishes the task in hand and
  exits (about 3 s when idle).
- Whatever is still alive at the deadline is killed, and the jobs that this cluster's
  processes were running go back to the queue from their checkpoint at once
  (``job_reap_stalled``), instead of waiting for the stall timeout. Workers killed
  by a group SIGTERM are re-queued the same way. A stop on purpose is not a failed
  attempt: the interrupted attempts are given back (issue 46).
- While the cluster runs, the master beats a ``WorkerHeartbeat`` row every
  ``BRAIN_WORKER_BEAT_SECONDS`` (15 s), so ``manage.py doctor`` and ``/api/health``
  can tell whether a worker is alive; a clean stop removes the row.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from typing import Any

import psutil
from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import DatabaseError, connections
from django_q.cluster import Cluster

from jobs.services import (
    job_reap_stalled,
    running_job_workers,
    running_job_workers_gone,
    worker_beat,
    worker_gone,
    worker_name,
    worker_name_of,
)

logger = logging.getLogger(__name__)

REAP_ATTEMPTS = 5
REAP_PAUSE_SECONDS = 0.2


class Command(BaseCommand):
    help = "Run the job worker (django-q2 cluster) in the foreground."

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
        code = self._run(Cluster(), stop_timeout=options["stop_timeout"])
        self.stdout.flush()
        if code:
            raise SystemExit(code)

    def _run(self, cluster: Cluster, *, stop_timeout: float) -> int:
        """Start the cluster and beat while it runs; on the first stop signal stop
        it from a helper thread and kill what is left after ``stop_timeout``
        seconds. Returns the exit code (0 after a clean stop).

        The stop handler replaces django-q2's (installed by ``Cluster()``) before
        ``Cluster.start()``: a signal that arrives while the cluster is still
        starting (its workers may already hold a task) is only recorded, and acted
        on once ``start()`` returns or fails because a group SIGTERM killed the
        sentinel. django-q2's own handler would block for good on a held task, or
        leave the task's job ``running``."""
        deadline: list[float] = []
        members: set[int] = set()
        stopping = threading.Event()

        def stop(signum: int, frame: Any) -> None:
            if deadline:
                return
            deadline.append(time.monotonic() + stop_timeout)
            self.stderr.write(
                f"Stopping the cluster (signal {signal.Signals(signum).name}); "
                f"it has {stop_timeout:g} s to finish the task in hand."
            )

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        me = worker_name()
        every = float(getattr(settings, "BRAIN_WORKER_BEAT_SECONDS", 15))
        next_beat = 0.0
        try:
            try:
                cluster.start()
            except RuntimeError:
                # The sentinel died while starting: a group SIGTERM, or a crash.
                if not deadline:
                    raise
            while cluster.sentinel.is_alive():
                members |= _descendants()
                if deadline and not stopping.is_set():
                    stopping.set()
                    threading.Thread(target=cluster.stop, daemon=True).start()
                if not deadline and time.monotonic() >= next_beat:
                    _beat(me)
                    next_beat = time.monotonic() + every
                if deadline and time.monotonic() > deadline[0]:
                    self._kill(members, stopped=True)
                    return 1
                time.sleep(0.1)
            if not deadline:
                self.stderr.write("The cluster's sentinel died; stopping.")
            members |= _descendants()
            if _alive(members):
                # The sentinel is gone but some of its processes are not (a worker
                # still holding a task): they get what is left of the stop time.
                _wait(members, until=deadline[0] if deadline else time.monotonic())
            if _alive(members):
                self._kill(members, stopped=bool(deadline))
                return 1
            self._requeue(members, killed=False, stopped=bool(deadline))
            self.stdout.write("The cluster stopped.")
            return 0 if deadline else 1
        finally:
            with contextlib.suppress(Exception):  # the database may be gone too
                worker_gone(name=me)

    def _kill(self, members: set[int], *, stopped: bool) -> None:
        """Kill every process of the cluster still alive, then re-queue its jobs
        (``stopped``: on a stop signal, see ``_requeue``)."""
        alive = []
        for pid in members | _descendants():
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                proc.kill()
                alive.append(proc)
        psutil.wait_procs(alive, timeout=5)
        self._requeue(members, killed=True, stopped=stopped)

    def _requeue(self, members: set[int], *, killed: bool, stopped: bool) -> None:
        """Re-queue the jobs still marked running by a process of this cluster (a
        worker killed by a group SIGTERM, or by the deadline), and those of any
        process on this host that no longer exists. ``stopped``: the cluster was
        stopped on purpose (SIGTERM or SIGINT: a deploy, a restart), so the
        interrupted attempts are not counted as failed (``job_reap_stalled``)."""
        try:
            workers = {worker_name_of(pid) for pid in members}
            requeued = []
            # A row whose killed worker's last heartbeat is still committing is
            # locked for a moment (the reap skips locked rows): look again briefly.
            for _attempt in range(REAP_ATTEMPTS):
                gone = workers | set(running_job_workers_gone())
                requeued += job_reap_stalled(
                    stale_after_seconds=0, workers=sorted(gone), stopped=stopped
                )
                if not running_job_workers(sorted(gone)):
                    break
                time.sleep(REAP_PAUSE_SECONDS)
        except DatabaseError:
            logger.warning("could not re-queue the cluster's jobs", exc_info=True)
            return
        if killed:
            self.stderr.write(
                "The cluster did not stop in time and was killed; "
                f"re-queued job(s): {requeued or 'none'}."
            )
        elif requeued:
            self.stderr.write(f"Re-queued the job(s) its workers left: {requeued}.")


def _descendants() -> set[int]:
    """Pids of every process below this one (the sentinel, pusher, monitor and
    workers)."""
    with contextlib.suppress(psutil.Error):
        return {p.pid for p in psutil.Process().children(recursive=True)}
    return set()


def _alive(pids: set[int]) -> list[psutil.Process]:
    """The processes of ``pids`` still running (zombies count as gone)."""
    alive = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
    return alive


def _wait(pids: set[int], *, until: float) -> None:
    """Poll until none of ``pids`` runs or ``until`` (``time.monotonic()``) passes."""
    while _alive(pids) and time.monotonic() < until:
        time.sleep(0.1)


def _beat(name: str) -> None:
    """Beat; a database hiccup must not stop the worker (it retries next time)."""
    try:
        worker_beat(name=name)
    except DatabaseError:
        logger.warning("worker heartbeat failed; retrying at the next beat")
        connections.close_all()
