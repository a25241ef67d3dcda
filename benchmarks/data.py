"""Where benchmarks read the shared real data: ``../shared/data`` next to the
repository root, or the folder named by ``BRAIN_SHARED_DATA``."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from email.parser import BytesHeaderParser
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from connectors.mailbox.client import MailboxEntry

ROOT = Path(__file__).resolve().parent.parent


def shared_data() -> Path:
    """The shared data folder (``$BRAIN_SHARED_DATA`` or ``<repo>/../shared/data``)."""
    override = os.environ.get("BRAIN_SHARED_DATA")
    return Path(override) if override else ROOT.parent / "shared" / "data"


def corpus_path(corpus: str, data: Path) -> tuple[Path, str]:
    """A labelled corpus name → (its path under ``data``, its cut or ''). The name is
    a path under the shared data, optionally ``PATH@YYYY-MM-DD``: the mailbox as
    an export taken on that day holds it (``exported_before``)."""
    name, _, until = corpus.partition("@")
    return data / name, until


def exported_before(path: Path, until: str) -> list[MailboxEntry]:
    """The entries of the mailbox at ``path`` (mbox, maildir or folder, read by the
    importer's own ``iter_mailbox``) that an export taken on ``until``
    (``YYYY-MM-DD``, 00:00 UTC) holds: every message dated before it; an undated
    or unparsable one is kept, as an export would keep it. For corpora whose bulk
    ends months before a few stray late messages, which would otherwise set the
    reference time (SPEC §5.2) and leave the mail outside the loop window."""
    from connectors.mailbox.client import iter_mailbox

    cut = datetime.fromisoformat(until).replace(tzinfo=UTC)
    parser = BytesHeaderParser()
    kept = []
    for entry in iter_mailbox(path):
        if not entry.problem:
            try:
                sent = parsedate_to_datetime(str(parser.parsebytes(entry.data)["Date"]))
            except (TypeError, ValueError, IndexError):
                sent = None
            if sent is not None:
                if sent.tzinfo is None:
                    sent = sent.replace(tzinfo=UTC)
                if sent >= cut:
                    continue
        kept.append(entry)
    return kept
