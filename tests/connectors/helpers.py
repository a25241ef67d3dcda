"""Shared helpers for connector tests: test-data paths, parsing a mailbox and an
import stopped mid-way."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from connectors.mail.parsing import ParsedMail, parse_rfc822
from connectors.mail.threading import folder_labels
from connectors.mailbox.client import iter_mailbox
from connectors.mailbox.sync import mailbox_import

DATA = Path(__file__).resolve().parent.parent / "data"
ENRON = DATA / "enron" / "allen-p"
SPAMASSASSIN = DATA / "spamassassin" / "easy-ham-1-slice.mbox"
CPYTHON = DATA / "mime" / "cpython"
TALON = DATA / "mime" / "talon"
GMAIL = DATA / "gmail_api"
CALENDAR = DATA / "google_calendar"


def parse_mailbox(path: Path) -> list[ParsedMail]:
    """Parse every message under ``path`` with folder labels set (as the import does)."""
    found = []
    for entry in iter_mailbox(path):
        msg = parse_rfc822(entry.data, folder=entry.folder)
        msg.labels = folder_labels(entry.folder)
        found.append(msg)
    return found


class Killed(Exception):
    """Stands for the worker being killed in the middle of an import."""


def die_in_second_batch(step: str, done: int, total: int | None) -> None:
    """An import ``progress`` callback that stops the import (``Killed``) once the
    second batch of four threads is written, before that batch commits."""
    if step == "threads" and done == 8:
        raise Killed


def stopped_import(progress: Callable[[str, int, int | None], None]) -> None:
    """Import the SpamAssassin slice into source ``sa`` in batches of four threads
    and expect ``progress`` to stop it by raising ``Killed``."""
    with pytest.raises(Killed):
        mailbox_import(
            source_id="sa",
            path=SPAMASSASSIN,
            owners=[],
            progress=progress,
            batch_threads=4,
        )
