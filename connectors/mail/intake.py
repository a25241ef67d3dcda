"""The one rule of every mail importer: each item read is stored, recognised as a
duplicate of identical content, or held with a typed reason and its raw bytes
(SPEC §6 "Every importer", §6.2). Mailbox files and IMAP call these functions.

- ``parse_entry``: bytes → ``ParsedMail``, or a ``Hold`` (reader problem, not mail,
  parser failure). Never raises for bad input.
- ``classify``: the store / duplicate decision over a run's parsed messages and the
  ledger: copies (same Message-ID and same content, or same content under another
  Message-ID) are duplicates; a message whose Message-ID is already taken by
  different content is a twin: it is re-keyed by its content hash
  (``sha256:<hex of its bytes>``) and stored, with the defect noted.
- ``Tally``: the run's accounting, ``items == stored + duplicates + held``.

Another mail importer (IMAP) feeds its raw messages through the same pipeline with
``connectors.mailbox.sync.mailbox_import(source_id=…, path=<a name>, entries=[
MailboxEntry(folder, location, data), …], kind="imap_sync")``: parsing, this rule,
threading, storage, holds (with their bytes) and the run's accounting are then the
same as for mailbox files; ``location`` should be stable (``INBOX;UID=42``).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from connectors.mail.parsing import MailParseError, ParsedMail, parse_rfc822
from connectors.mail.threading import bulk_labels, dedupe, folder_labels
from connectors.mailbox.client import MailboxEntry, unquote_from
from connectors.models import HeldItem, ImportedItem

if TYPE_CHECKING:
    from collections.abc import Iterable

    from brain.models import Source

TWIN_DEFECT = "duplicate Message-ID with different content"


@dataclass
class Hold:
    """An item that cannot be stored: the entry, a ``HeldItem.Reason`` code and a
    human sentence."""

    entry: MailboxEntry
    code: str
    message: str

    @property
    def external_id(self) -> str:
        """``sha256:<hex>`` of the bytes, or ``path:<location>`` when none were read."""
        return hold_key(self.entry)


def hold_key(entry: MailboxEntry) -> str:
    """The held item's stable id: the bytes' hash (a re-run or a moved file meets
    the same row), or the location when nothing could be read."""
    if entry.data:
        return "sha256:" + hashlib.sha256(entry.data).hexdigest()
    return f"path:{entry.location}"[:512]


def parse_entry(entry: MailboxEntry) -> ParsedMail | Hold:
    """Parse one entry and label it (folder labels, inferred bulk label). Returns
    the ``ParsedMail`` or a ``Hold``: the reader's problem, ``empty`` / ``not_mail``
    (no headers of a message), or ``parse_error`` (the parser failed: a bug or a
    limit, the bytes are kept for a retry)."""
    if entry.problem:
        return Hold(entry, entry.problem, entry.detail or entry.problem)
    data = unquote_from(entry.data) if entry.mbox else entry.data
    try:
        msg = parse_rfc822(data, folder=entry.folder)
    except MailParseError as exc:
        empty = not data.strip()
        code = HeldItem.Reason.EMPTY if empty else HeldItem.Reason.NOT_MAIL
        return Hold(entry, str(code), exc.message)
    except Exception as exc:  # noqa: BLE001 - one bad message never aborts a batch
        return Hold(entry, str(HeldItem.Reason.PARSE_ERROR), _describe(exc))
    msg.labels = sorted(
        set(folder_labels(entry.folder))
        | set(bulk_labels(raw=msg.raw, text=msg.full_text))
    )
    msg.raw_hash = hashlib.sha256(entry.data).hexdigest()
    return msg


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


@dataclass
class Classified:
    """``classify``'s answer. ``unique``: one per distinct message (stored ones
    included, for threading); ``fresh``: keys to store; ``already``: keys whose
    content is already stored; ``copies``: (copy, kept) pairs within the run;
    ``stored_threads``: ledger key → thread id of stored messages."""

    unique: list[ParsedMail]
    fresh: set[str]
    already: set[str]
    copies: list[tuple[ParsedMail, ParsedMail]]
    stored_threads: dict[str, str]


def _rekey_twin(msg: ParsedMail) -> None:
    msg.key = f"sha256:{msg.raw_hash}"
    if TWIN_DEFECT not in msg.defects:
        msg.defects.append(TWIN_DEFECT)


def classify(*, source: Source, messages: Iterable[ParsedMail]) -> Classified:
    """The store / duplicate decision for a run's parsed messages (see the module
    docstring). Reads the ledger with three queries whatever the count."""
    unique, copies = dedupe(messages, rekey=_rekey_twin)
    ledger = ImportedItem.objects.filter(source=source)
    rows = {
        key: (tid, content_hash)
        for key, tid, content_hash in ledger.filter(
            external_id__in=[m.key for m in unique]
        ).values_list("external_id", "thread_id", "content_hash")
    }
    by_hash = dict(
        ledger.filter(content_hash__in=[m.fingerprint for m in unique]).values_list(
            "content_hash", "external_id"
        )
    )
    # A Message-ID stored earlier with other content: this one is a twin.
    twins = [
        m
        for m in unique
        if m.key in rows
        and rows[m.key][1] not in (m.fingerprint, m.body_fingerprint)
        and m.fingerprint not in by_hash
        and m.raw_hash
    ]
    if twins:
        for msg in twins:
            _rekey_twin(msg)
        rows.update(
            {
                key: (tid, content_hash)
                for key, tid, content_hash in ledger.filter(
                    external_id__in=[m.key for m in twins]
                ).values_list("external_id", "thread_id", "content_hash")
            }
        )
    already = {
        m.key
        for m in unique
        if m.key in rows or by_hash.get(m.fingerprint) not in (None, m.key)
    }
    return Classified(
        unique=unique,
        fresh={m.key for m in unique if m.key not in already},
        already=already,
        copies=copies,
        stored_threads={k: v[0] for k, v in rows.items()},
    )


@dataclass
class Tally:
    """The accounting of one run: every item read is stored, a duplicate or held.
    ``lost`` is what none of the three explains (0 unless there is a bug)."""

    items: int = 0
    stored: int = 0
    duplicates: int = 0
    held: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    @property
    def lost(self) -> int:
        """Items neither stored, duplicate nor held."""
        return self.items - self.stored - self.duplicates - self.held

    def as_counts(self) -> dict[str, int]:
        """The ``SyncReport.counts`` keys of the accounting."""
        return {
            "items": self.items,
            "stored": self.stored,
            "duplicates": self.duplicates,
            "held": self.held,
        }
