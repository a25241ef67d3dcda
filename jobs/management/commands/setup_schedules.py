"""``manage.py setup_schedules``: install the django-q2 schedules (SPEC §7).

Idempotent: rows are upserted by ``name`` and sync schedules of removed sources are
deleted, so running it on every deploy leaves exactly one row per schedule. Cron
strings are read in ``BRAIN_TIME_ZONE`` (``Q_CLUSTER["time_zone"]``).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from jobs.schedules import schedules_install


class Command(BaseCommand):
    help = "Install or update the django-q2 schedules of the brain (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        for line in schedules_install():
            self.stdout.write(
                f"{line.outcome:9} {line.name:32} {line.cron:14} "
                f"next {line.next_run:%Y-%m-%d %H:%M %Z}  {line.link}"
            )
