"""Gmail → thread pages, raw records and loop detection (SPEC §6.1)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from brain.exceptions import BrainError
from brain.models import RawRecord
from connectors.base import (
    ChangeBatch,
    ConnectorError,
    PermanentError,
    SyncReport,
)
from connectors.google.schemas import (
    gmail_link,
)
from connectors.mail.parsing import ParsedMail, parse_gmail_message
from connectors.mail.render import (
    display_names,
)
from connectors.mail.store import (
    ThreadWork,
    bulk_transaction,
    people_store,
    threads_store,
    to_mail_message,
)
from connectors.models import ImportedItem
from connectors.services import (
    held_item_release,
)
from loops.definitions import is_mine
from loops.message import MailMessage
from loops.pipeline import process_threads
from loops.services_senders import sender_profiles_refresh

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Iterator, Sequence

from connectors.google.sync.base import (
    ACTOR,
    GMAIL_WINDOW_DAYS,
    RELIST_PAGES_PER_RUN,
    THREAD_BATCH,
    _GoogleService,
)

# --- gmail -------------------------------------------------------------------------------


def _gmail_version(parsed: ParsedMail) -> str:
    """Ledger hash of a Gmail message: its id and labels (a label change re-renders)."""
    basis = parsed.gmail_id + "|" + ",".join(sorted(parsed.labels))
    return hashlib.sha256(basis.encode()).hexdigest()


class GmailConnector(_GoogleService):
    """Gmail threads → raw records + email pages (SPEC §6.1)."""

    kind = "google_gmail"

    def __init__(
        self,
        *,
        window_days: int = GMAIL_WINDOW_DAYS,
        relist_pages: int = RELIST_PAGES_PER_RUN,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.window_days = window_days
        self.relist_pages = max(1, relist_pages)
        self.query = f"newer_than:{window_days}d"
        # The re-list in progress (its cursor state), for the progress callback.
        self._relisting: dict[str, Any] | None = None

    # fetch --------------------------------------------------------------------------

    def fetch_changes(self, cursor: dict[str, Any]) -> Iterator[ChangeBatch]:
        """Backfill until done, then history deltas; a re-list of the window
        after an expired history goes on first until it is done."""
        if cursor.get("relist"):
            yield from self._relist(cursor["relist"])
        elif cursor.get("backfill_done") and cursor.get("history_id"):
            yield from self._incremental(cursor)
        else:
            yield from self._backfill(cursor)

    def _threads(self, thread_ids: list[str]) -> Iterator[ChangeBatch]:
        for start in range(0, len(thread_ids), THREAD_BATCH):
            threads = []
            for thread_id in thread_ids[start : start + THREAD_BATCH]:
                try:
                    threads.append(self.client.gmail_thread(thread_id))
                except PermanentError as exc:
                    if exc.code == "not_found":
                        self.report.skipped["thread deleted upstream"] += 1
                    else:
                        self._hold(
                            kind="gmail_thread", external_id=thread_id, error=exc
                        )
            yield ChangeBatch("gmail", threads)

    def _list_page(self, page_token: str | None) -> tuple[list[str], str | None]:
        data = self.client.gmail_list_messages(query=self.query, page_token=page_token)
        return self._thread_ids(data)

    @staticmethod
    def _thread_ids(data: dict[str, Any]) -> tuple[list[str], str | None]:
        """The thread ids of a ``messages.list`` page, in order, and its next
        page token."""
        ordered: list[str] = []
        for message in data.get("messages") or []:
            thread_id = str(message.get("threadId") or message.get("id"))
            if thread_id not in ordered:
                ordered.append(thread_id)
        return ordered, data.get("nextPageToken")

    def _backfill(self, cursor: dict[str, Any]) -> Iterator[ChangeBatch]:
        anchor = cursor.get("anchor_history_id") or str(
            self.client.gmail_profile()["historyId"]
        )
        page_token = cursor.get("backfill_page_token")
        seen: set[str] = set()
        while True:
            thread_ids, next_token = self._list_page(page_token)
            fresh = [t for t in thread_ids if t not in seen]
            seen.update(fresh)
            yield from self._threads(fresh)
            page_token = next_token
            # Saved only after the page's threads are applied: a crash re-reads it.
            yield ChangeBatch(
                "gmail",
                [],
                cursor={
                    "anchor_history_id": anchor,
                    "backfill_page_token": page_token,
                    "backfill_done": False,
                    "window_days": self.window_days,
                },
            )
            if not page_token:
                break
        yield ChangeBatch(
            "gmail",
            [],
            cursor={
                "history_id": anchor,
                "backfill_done": True,
                "backfill_page_token": None,
                "anchor_history_id": None,
            },
        )

    def _incremental(self, cursor: dict[str, Any]) -> Iterator[ChangeBatch]:
        start = str(cursor["history_id"])
        newest = start
        thread_ids: list[str] = []
        page_token: str | None = None
        try:
            while True:
                data = self.client.gmail_history(
                    start_history_id=start, page_token=page_token
                )
                for record in data.get("history") or []:
                    touched = list(record.get("messages") or [])
                    for key in ("messagesAdded", "labelsAdded", "labelsRemoved"):
                        touched += [
                            row.get("message") or {} for row in record.get(key) or []
                        ]
                    for message in touched:
                        thread_id = message.get("threadId")
                        if thread_id and thread_id not in thread_ids:
                            thread_ids.append(str(thread_id))
                newest = str(data.get("historyId") or newest)
                page_token = data.get("nextPageToken")
                if not page_token:
                    break
        except PermanentError as exc:
            if exc.code != "not_found":
                raise
            yield from self._relist_start(expired=start)
            return
        yield from self._threads(thread_ids)
        yield ChangeBatch("gmail", [], cursor={"history_id": newest})

    def _relist_start(self, *, expired: str) -> Iterator[ChangeBatch]:
        """History too old (404): anchor at the mailbox's current historyId and
        start a full re-list of the window, saved in the cursor before any page is
        read (``relist``); the history cursor stays where it was."""
        anchor = str(self.client.gmail_profile()["historyId"])
        self.report.warnings.append(
            f"Gmail history {expired} expired; re-listing the whole "
            f"{self.window_days}-day window, then continuing from {anchor}."
        )
        self.report.counts["history_expired"] += 1
        state = {
            "anchor": anchor,
            "expired": expired,
            "page_token": None,
            "pages": 0,
            "listed": 0,
            "estimate": None,
        }
        yield ChangeBatch("gmail", [], cursor={"relist": state})
        yield from self._relist(state)

    def _relist(self, state: dict[str, Any]) -> Iterator[ChangeBatch]:
        """Re-list the whole window (SPEC §6.1 "Syncs finish or say so"), page by
        page from ``state["page_token"]``, at most ``relist_pages`` pages per run.
        After each page's threads are applied the cursor saves the next page token
        and the counts (``pages``, ``listed`` message ids, Gmail's ``estimate``), so
        a killed or cut-off run resumes at that page. The history cursor moves to
        ``state["anchor"]`` only after the last page; a run that stops before it
        names the re-list in ``report.unfinished`` (the run is ``partial``)."""
        state = dict(state)
        self._relisting = state
        seen: set[str] = set()
        for _page in range(self.relist_pages):
            data = self.client.gmail_list_messages(
                query=self.query, page_token=state["page_token"]
            )
            thread_ids, next_token = self._thread_ids(data)
            state["listed"] += len(data.get("messages") or [])
            if state["estimate"] is None:
                state["estimate"] = data.get("resultSizeEstimate")
            fresh = [t for t in thread_ids if t not in seen]
            seen.update(fresh)
            yield from self._threads(fresh)
            state.update(pages=state["pages"] + 1, page_token=next_token)
            if not next_token:
                self._relisting = None
                self.report.counts["relist_pages"] += state["pages"]
                yield ChangeBatch(
                    "gmail", [], cursor={"history_id": state["anchor"], "relist": None}
                )
                return
            yield ChangeBatch("gmail", [], cursor={"relist": dict(state)})
        self.report.counts["relist_pages"] += state["pages"]
        self.report.unfinished.append(
            f"Gmail re-list after expired history {state['expired']}: "
            f"{state['listed']} of about {state['estimate'] or '?'} messages listed "
            f"({state['pages']} pages); the next sync continues from page "
            f"{state['pages'] + 1}."
        )

    # apply --------------------------------------------------------------------------

    def apply(self, batch: ChangeBatch, report: SyncReport) -> None:
        """Write each changed thread; person pages; loop detection."""
        if not batch.items:
            return
        stored: dict[str, list[MailMessage]] = {}
        parsed: list[ParsedMail] = []
        with bulk_transaction():
            works: list[ThreadWork] = []
            for thread in batch.items:
                work = self._work(thread, report)
                if work is not None:
                    parsed.extend(work.parsed.values())
                    works.append(work)
            outcome = threads_store(
                source=self.source,
                works=works,
                account=self.account,
                kind=RawRecord.Kind.GMAIL_MESSAGE,
                actor=ACTOR,
                embed=self.embed,
                report=report,
            )
            for work in works:
                result = outcome.get(work.thread_id)
                if isinstance(result, BrainError):
                    # Nothing of this thread was stored; the batch goes on.
                    self._hold(
                        kind="gmail_thread",
                        external_id=work.thread_id,
                        error=PermanentError(result.message, code=result.code),
                    )
                elif result is not None:
                    stored[work.thread_id] = work.messages
                    self._release(work)
            self._show_progress(report)
            people_store(
                source=self.source,
                threads=stored,
                owner_addresses=self.owners,
                actor=ACTOR,
                embed=self.embed,
                report=report,
                names=display_names(parsed),
            )
            # In the batch's transaction: no stored thread without its detection.
            if stored:
                # Who its senders are, and when we were last in touch, changed
                # with this mail: their profiles are read by detection (SPEC
                # §5.1a; a mailbox import refreshes the whole source up front).
                sender_profiles_refresh(
                    source=self.source,
                    addresses=_correspondents(stored.values(), self.owners),
                )
                process_threads(source_id=self.source.id, thread_ids=list(stored))

    def _show_progress(self, report: SyncReport) -> None:
        """Progress for the Job row: threads stored, or during a re-list the
        message ids listed of Gmail's estimate for the window."""
        if not self.progress:
            return
        state = self._relisting
        if state is None:
            self.progress("gmail", report.counts["threads"], None)
            return
        estimate = state.get("estimate")
        total = max(int(estimate), state["listed"]) if estimate else None
        self.progress("gmail re-list (history expired)", state["listed"], total)

    def _work(self, thread: dict[str, Any], report: SyncReport) -> ThreadWork | None:
        thread_id = str(thread.get("id") or "")
        parsed: list[ParsedMail] = []
        for message in thread.get("messages") or []:
            try:
                item = parse_gmail_message(message)
            except ConnectorError as exc:
                self._hold(
                    kind="gmail_message",
                    external_id=str(message.get("id")),
                    error=exc,
                    item=message,
                )
                continue
            item.fingerprint = _gmail_version(item)
            parsed.append(item)
        if not parsed:
            return None
        ledger = dict(
            ImportedItem.objects.filter(
                source=self.source, external_id__in=[p.key for p in parsed]
            ).values_list("external_id", "content_hash")
        )
        changed = {p.key for p in parsed if ledger.get(p.key) != p.fingerprint}
        if not changed:
            report.skipped["thread unchanged"] += 1
            return None
        parsed.sort(key=lambda p: (p.date or timezone.now(), p.key))
        entries = [
            (
                p.key,
                to_mail_message(
                    p,
                    thread_id=thread_id,
                    is_mine=is_mine(p, self.owners),
                    link=gmail_link(account=self.account, message_id=p.gmail_id),
                ),
            )
            for p in parsed
        ]
        return ThreadWork(
            thread_id=thread_id,
            entries=entries,
            parsed={p.key: p for p in parsed},
            new_keys=changed,
        )

    def _release(self, work: ThreadWork) -> None:
        held_item_release(
            source=self.source,
            kinds=["gmail_message", "gmail_thread"],
            external_ids=[*work.new_keys, work.thread_id],
        )


def _correspondents(
    threads: Iterable[Sequence[MailMessage]], owners: Collection[str]
) -> set[str]:
    """The addresses, other than ``owners``, that wrote a message of ``threads``
    or received one of mine: the sender profiles a batch of new mail changes."""
    mine = {a.lower() for a in owners}
    out: set[str] = set()
    for messages in threads:
        for m in messages:
            if is_mine(m, mine):
                out |= {a.lower() for a in (*m.to, *m.cc) if a}
            elif m.from_addr:
                out.add(m.from_addr.lower())
    return out - mine
