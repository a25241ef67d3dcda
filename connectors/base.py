"""The connector contract (SPEC §6, STYLE rule 2).

Every connector (``connectors/<kind>/``) subclasses ``Connector``: ``fetch_changes``
yields ``ChangeBatch`` objects read from upstream since the stored cursor (network I/O,
outside any transaction); ``apply`` writes one batch through the services and counts
into the ``SyncReport`` it is given (it returns nothing). Each connector picks its
transaction: the mail connectors (Gmail, mailbox, IMAP) write a whole batch of
threads, their person pages and the loop detection in one transaction; Calendar and
Contacts write each event or contact in its own. Either way a crash never
half-writes an item. ``run`` drives both and saves the cursor after each applied
batch, so a killed sync resumes where it stopped.

Errors are typed: ``ConnectorError.permanent`` tells a job whether a retry can help.
Transient errors (HTTP 429/5xx, timeouts) are retried with backoff inside the client;
a permanent error on one item holds that item (``HeldItem``) and the rest continues.
"""

from __future__ import annotations

import abc
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

# SPEC §6: up to 6 attempts, 60 s cap, Retry-After honoured.
MAX_ATTEMPTS = 6
BACKOFF_CAP_SECONDS = 60.0
BACKOFF_BASE_SECONDS = 2.0

ProgressFn = Callable[[str, int, int | None], None]


class ConnectorError(Exception):
    """A connector failure. ``permanent`` True: retrying cannot help (the item is
    held); False: retry later (rate limit, outage). ``code`` is a stable snake_case
    name for reports; ``detail`` is JSON-safe context (never tokens)."""

    code = "connector_error"
    permanent = False

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        permanent: bool | None = None,
        detail: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if permanent is not None:
            self.permanent = permanent
        self.detail = detail or {}
        self.retry_after = retry_after


class TransientError(ConnectorError):
    """Retry later: HTTP 429, 5xx, quota, timeouts."""

    code = "transient"
    permanent = False


class PermanentError(ConnectorError):
    """Retrying cannot help: malformed item, 404, 400."""

    code = "permanent"
    permanent = True


def backoff_delay(attempt: int, retry_after: float | None = None) -> float:
    """Seconds to wait before retry ``attempt`` (1-based): ``Retry-After`` when the
    server sent one (capped at 60 s), else exponential with equal jitter,
    base = min(60, 2 × 2^attempt), wait = base/2 + random(base/2)."""
    if retry_after is not None and retry_after >= 0:
        return min(BACKOFF_CAP_SECONDS, float(retry_after))
    base = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * (2**attempt))
    return base / 2 + random.uniform(0, base / 2)  # noqa: S311 - jitter, not crypto


def call_with_retry(
    fn: Callable[[], Any],
    *,
    sleep: Callable[[float], None],
    attempts: int = MAX_ATTEMPTS,
) -> Any:
    """Call ``fn`` until it returns, retrying ``TransientError`` up to ``attempts``
    times in all with ``backoff_delay`` waits through the injectable ``sleep``.
    Re-raises the last ``TransientError``; permanent errors are raised at once."""
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except TransientError as exc:
            if attempt >= attempts:
                raise
            sleep(backoff_delay(attempt, exc.retry_after))
    raise AssertionError("unreachable")  # pragma: no cover


@dataclass
class SyncReport:
    """What a sync or import did. ``counts`` keys: messages, threads, pages, people,
    events, contacts, duplicates, held…; ``skipped`` maps reason → count; ``held``
    lists ``{external_id, kind, code, message}``; ``warnings`` are human sentences
    (e.g. a narrower Google grant with its re-connect fix); ``unfinished`` names,
    one sentence each, what the run did not cover (a Gmail re-list still going, a
    configured IMAP folder gone): the run ends ``partial`` (SPEC §6)."""

    source_id: str
    kind: str
    counts: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    held: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    thread_ids: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)
    status: str = "succeeded"
    run_id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe form (stored on ``SyncRun.counts`` and returned by the API)."""
        return {
            "source_id": self.source_id,
            "kind": self.kind,
            "status": self.status,
            "counts": dict(self.counts),
            "skipped": dict(self.skipped),
            "held": list(self.held),
            "warnings": list(self.warnings),
            "unfinished": list(self.unfinished),
        }

    def merge(self, other: SyncReport) -> None:
        """Add ``other``'s counts, skips, holds and warnings into this report."""
        self.counts.update(other.counts)
        self.skipped.update(other.skipped)
        self.held.extend(other.held)
        self.warnings.extend(other.warnings)
        self.unfinished.extend(other.unfinished)
        self.thread_ids.extend(other.thread_ids)


@dataclass
class ChangeBatch:
    """A unit of upstream changes: ``items`` to apply and the ``cursor`` to save once
    they are applied (None: keep the current cursor)."""

    stream: str
    items: list[Any]
    cursor: dict[str, Any] | None = None


class Connector(abc.ABC):
    """Abstract base of every connector (STYLE rule 2).

    Subclasses set ``kind`` and implement ``fetch_changes`` and ``apply``; ``run``
    is the shared driver. ``cursor`` is the connector's part of ``Source.cursor``.
    """

    kind: str = ""

    @abc.abstractmethod
    def fetch_changes(self, cursor: dict[str, Any]) -> Iterator[ChangeBatch]:
        """Yield batches of upstream changes since ``cursor`` (no DB writes)."""

    @abc.abstractmethod
    def apply(self, batch: ChangeBatch, report: SyncReport) -> None:
        """Write ``batch`` through the services, counting into ``report``."""

    def run(
        self,
        *,
        cursor: dict[str, Any],
        save_cursor: Callable[[dict[str, Any]], None],
        report: SyncReport,
    ) -> dict[str, Any]:
        """Fetch and apply every batch, saving the cursor after each; returns the
        final cursor. Exceptions propagate with the cursor of the last applied batch
        saved, so a re-run resumes there."""
        current = dict(cursor)
        for batch in self.fetch_changes(current):
            self.apply(batch, report)
            if batch.cursor is not None:
                current = {**current, **batch.cursor}
                save_cursor(current)
        return current
