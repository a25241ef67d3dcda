"""Run ``manage.py worker`` with a stop signal that lands while the cluster is still
starting (a test driver for ``test_worker_stop``; not a module of the product).

``python -m tests.jobs.start_race self|group`` runs the real command with the real
django-q2 ``Cluster``, except that ``start()`` delivers SIGTERM the moment the
sentinel process is alive: to the master alone (``self``, KillMode=mixed) or to the
whole process group (``group``, systemd's default), before ``start()`` returns.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import django


def main(mode: str) -> None:
    """Start the worker command; SIGTERM arrives during ``Cluster.start()``."""
    django.setup()
    from django.core.management import call_command
    from django_q.cluster import Cluster

    from jobs.management.commands import worker

    class SignalledWhileStarting(Cluster):
        """The real cluster; its start is interrupted by a stop signal."""

        def start(self) -> int:
            def fire() -> None:
                while not (self.sentinel and self.sentinel.is_alive()):
                    time.sleep(0.001)
                if mode == "group":
                    os.killpg(os.getpgid(0), signal.SIGTERM)
                else:
                    os.kill(os.getpid(), signal.SIGTERM)

            threading.Thread(target=fire, daemon=True).start()
            return super().start()

    worker.Cluster = SignalledWhileStarting  # type: ignore[misc]
    call_command("worker", "--stop-timeout", "1")


if __name__ == "__main__":
    main(sys.argv[1])
