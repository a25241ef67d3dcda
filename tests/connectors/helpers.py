"""Shared helpers for connector tests: test-data paths and parsing a mailbox."""

from __future__ import annotations

from pathlib import Path

from connectors.mail.parsing import ParsedMail, parse_rfc822
from connectors.mail.threading import folder_labels
from connectors.mailbox.client import iter_mailbox

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
