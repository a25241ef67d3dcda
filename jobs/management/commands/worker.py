"""``manage.py worker``: start the django-q2 cluster that runs jobs and schedules
(a thin wrapper around ``qcluster`` that says what it starts)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run the job worker (django-q2 qcluster) in the foreground."

    def handle(self, *args: Any, **options: Any) -> None:
        conf = settings.Q_CLUSTER
        broker = "Redis" if conf.get("redis") else f"ORM ({conf.get('orm')})"
        self.stdout.write(
            f"Starting django-q2 cluster {conf.get('name')!r}: "
            f"{conf.get('workers')} worker(s), broker {broker}, "
            f"task timeout {conf.get('timeout')} s. Stop with Ctrl-C."
        )
        self.stdout.write("Schedules: manage.py setup_schedules installs them.")
        call_command("qcluster")
