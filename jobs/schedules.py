"""The brain's django-q2 schedules, declared in code (SPEC §7, STYLE rule 16).

``schedules_install`` upserts every ``Schedule`` row by ``name``. Each schedule calls
a thin task in ``jobs.tasks`` that queues a durable ``Job`` (coalesced, so a slow run
never stacks); the reaper tick re-queues jobs of dead workers and sends due retries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django_q.models import Schedule

from brain.models import Source
from connectors.models import SharedMailbox

if TYPE_CHECKING:
    from datetime import datetime

SYNC_PREFIX = "sync_source:"
# Source kinds that hold mail (a sync can be run by hand for each of them).
MAIL_SOURCE_KINDS = (Source.Kind.GOOGLE, Source.Kind.MAILBOX, Source.Kind.IMAP)
# Source kinds synced on a timer: live connectors only (Gmail, Calendar and
# Contacts of a Google account, Workspace delegation, IMAP). A mailbox source is a
# one-shot import of an mbox or maildir file: nothing new arrives on a schedule,
# so it gets no sync schedule (re-run ``import_mail`` when the file grows).
SCHEDULED_SYNC_KINDS = (Source.Kind.GOOGLE, Source.Kind.IMAP)
DEFAULT_SYNC_MINUTES = 10


def sync_cron(minutes: int) -> str:
    """The cron string of a sync every ``minutes`` (a divisor of 60, or 60 for
    hourly on the hour); e.g. 10 → ``*/10 * * * *``."""
    if minutes >= 60:
        return "0 * * * *"
    if minutes <= 1:
        return "* * * * *"
    return f"*/{minutes} * * * *"


@dataclass(frozen=True)
class ScheduleSpec:
    """One schedule: unique name, task path, cron string and keyword arguments."""

    name: str
    func: str
    cron: str
    kwargs: dict[str, Any]

    @property
    def link(self) -> str:
        """A crontab.guru link explaining ``cron``."""
        return "https://crontab.guru/#" + self.cron.replace(" ", "_")


@dataclass(frozen=True)
class InstalledSchedule:
    """What ``schedules_install`` did with one schedule."""

    name: str
    cron: str
    outcome: str  # created | updated | unchanged | deleted
    next_run: datetime
    link: str


def schedule_specs() -> list[ScheduleSpec]:
    """Every schedule the brain needs now: one sync schedule per live source
    (``SCHEDULED_SYNC_KINDS``: Google and IMAP; a shared mailbox at its own
    ``sync_every_minutes``). Sources imported from files (mailbox, markdown) and
    harness notes get none; ``schedules_install`` deletes one left from before."""
    specs = [
        # https://crontab.guru/#*_*_*_*_* : every minute
        ScheduleSpec("jobs_reaper", "jobs.tasks.reap_and_dispatch", "* * * * *", {}),
        # https://crontab.guru/#0_*_*_*_* : hourly, on the hour
        ScheduleSpec(
            "loops_sweep",
            "jobs.tasks.enqueue_kind",
            "0 * * * *",
            {"kind": "loops_sweep"},
        ),
        # https://crontab.guru/#30_3_*_*_* : 03:30 every night (BRAIN_TIME_ZONE)
        ScheduleSpec(
            "session_cursor_purge",
            "jobs.tasks.enqueue_kind",
            "30 3 * * *",
            {"kind": "session_cursor_purge"},
        ),
        # https://crontab.guru/#0_2_*_*_* : 02:00 every night (BRAIN_TIME_ZONE)
        ScheduleSpec(
            "dream", "jobs.tasks.enqueue_kind", "0 2 * * *", {"kind": "dream"}
        ),
        # https://crontab.guru/#0_3_*_*_* : 03:00 every night, after dream; keeps
        # BRAIN_BACKUP_KEEP archives in BRAIN_BACKUP_DIR
        ScheduleSpec(
            "backup", "jobs.tasks.enqueue_kind", "0 3 * * *", {"kind": "backup"}
        ),
    ]
    # Shared mailboxes carry their own interval (SPEC §6.1a); others every 10 min.
    every = dict(SharedMailbox.objects.values_list("source_id", "sync_every_minutes"))
    for source_id in (
        Source.objects.filter(kind__in=SCHEDULED_SYNC_KINDS)
        .order_by("id")
        .values_list("id", flat=True)
    ):
        specs.append(
            # https://crontab.guru/#*/10_*_*_*_* : every 10 minutes (the default)
            ScheduleSpec(
                f"{SYNC_PREFIX}{source_id}",
                "jobs.tasks.enqueue_kind",
                sync_cron(every.get(source_id, DEFAULT_SYNC_MINUTES)),
                {"kind": "sync_source", "source_id": source_id},
            )
        )
    return specs


def schedules_install() -> list[InstalledSchedule]:
    """Upsert every schedule by name and delete sync schedules of removed sources.

    Returns one ``InstalledSchedule`` per schedule touched; running it twice leaves
    the same rows (the second run reports ``unchanged``). ``next_run`` of a new or
    re-timed schedule is the cron's next occurrence, so installing never fires the
    nightly dream at once.
    """
    report: list[InstalledSchedule] = []
    specs = schedule_specs()
    with transaction.atomic():
        for spec in specs:
            kwargs = repr(spec.kwargs) if spec.kwargs else None
            row = Schedule.objects.select_for_update().filter(name=spec.name).first()
            wanted = {
                "func": spec.func,
                "args": None,
                "kwargs": kwargs,
                "schedule_type": Schedule.CRON,
                "cron": spec.cron,
                "repeats": -1,
            }
            if row is None:
                row = Schedule(name=spec.name, **wanted)
                row.next_run = row.calculate_next_run()
                row.save()
                outcome = "created"
            elif any(getattr(row, k) != v for k, v in wanted.items()):
                retimed = row.cron != spec.cron or row.schedule_type != Schedule.CRON
                for field, value in wanted.items():
                    setattr(row, field, value)
                if retimed:
                    row.next_run = row.calculate_next_run()
                row.save()
                outcome = "updated"
            else:
                outcome = "unchanged"
            report.append(
                InstalledSchedule(
                    spec.name, spec.cron, outcome, row.next_run, spec.link
                )
            )
        keep = {spec.name for spec in specs}
        for row in Schedule.objects.filter(name__startswith=SYNC_PREFIX).exclude(
            name__in=keep
        ):
            report.append(
                InstalledSchedule(row.name, row.cron or "", "deleted", row.next_run, "")
            )
            row.delete()
    return report
