"""Google sync: contacts → calendar → gmail (SPEC §6.1).

Each service is a ``Connector``: ``fetch_changes`` talks to Google (outside any
transaction) and yields batches; ``apply`` writes them through ``page_write`` and
the ledger. Cursors live in ``Source.cursor["google"][service]`` and are saved after
every applied batch, so a killed sync resumes where it stopped.

- Contacts: every connection → a person page ``people/<slug>`` (aliases: all
  emails and the display name). A page this connector did not write (a human's, or
  one already holding the address) is never overwritten.
- Calendar: events of the window 90 days back → 60 ahead (``singleEvents``) →
  ``meeting`` pages ``calendar/YYYY/MM/…``; attendees that resolve to person pages
  get ``attended`` relations; cancelled events soft-delete their page; a moved
  event keeps its page (found through the ledger).
- Gmail: the first sync backfills ``newer_than:90d`` newest first, resumable by
  page token, anchored on the profile ``historyId`` taken before listing; later
  syncs read ``history.list`` from the stored ``historyId``; an expired one (404)
  re-anchors and re-lists the window (bounded). A batch of threads is one
  ``pages_write`` (``connectors.mail.store.threads_store``).
  A message that cannot be parsed is held (``HeldItem``) and the rest imports.
"""

from __future__ import annotations

import hashlib
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from brain.access import local_caller
from brain.exceptions import BrainError, InvalidParams
from brain.models import Alias, Page, PageRevision, RawRecord, Source
from brain.services.pages import RawInput, page_soft_delete, page_write
from brain.services.schema import schema_relation_type
from connectors.base import (
    ChangeBatch,
    Connector,
    ConnectorError,
    PermanentError,
    ProgressFn,
    SyncReport,
)
from connectors.google.client import READONLY_SCOPES, GoogleClient
from connectors.google.schemas import (
    event_attendees,
    event_slug,
    event_version,
    gmail_link,
    parse_contact,
    render_event,
)
from connectors.mail.parsing import ParsedMail, parse_gmail_message
from connectors.mail.render import (
    display_names,
    person_slug,
    render_person,
    short_hash,
)
from connectors.mail.store import (
    ThreadWork,
    bulk_transaction,
    people_store,
    threads_store,
    to_mail_message,
)
from connectors.models import GoogleAccount, ImportedItem
from loops.message import SENT, MailMessage
from loops.pipeline import process_threads

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

ACTOR = "connector:google"
GMAIL_WINDOW_DAYS = 90
CALENDAR_PAST_DAYS = 90
CALENDAR_FUTURE_DAYS = 60
THREAD_BATCH = 25
# An expired historyId re-lists at most this many pages of 100 message ids.
RELIST_MAX_PAGES = 5


class _GoogleService(Connector):
    """Shared state of the three Google connectors."""

    def __init__(
        self,
        *,
        source: Source,
        client: GoogleClient,
        account: str,
        owners: set[str],
        report: SyncReport,
        progress: ProgressFn | None = None,
        embed: bool = False,
        now: datetime | None = None,
    ) -> None:
        self.source = source
        self.client = client
        self.account = account
        self.owners = owners
        self.report = report
        self.progress = progress
        self.embed = embed
        self.now = now or timezone.now()
        self.caller = local_caller(actor=ACTOR)

    def _hold(self, *, kind: str, external_id: str, error: ConnectorError) -> None:
        from connectors.services import held_item_record

        held_item_record(
            source=self.source,
            kind=kind,
            external_id=external_id,
            error=error,
            report=self.report,
        )

    def _ledger_item(self, external_id: str) -> ImportedItem | None:
        return (
            ImportedItem.objects.select_related("page")
            .filter(source=self.source, external_id=external_id)
            .first()
        )

    def _ledger_save(
        self,
        *,
        external_id: str,
        kind: str,
        version: str,
        page: Page | None,
        reason: str = "",
    ) -> None:
        ImportedItem.objects.update_or_create(
            source=self.source,
            external_id=external_id,
            defaults={
                "kind": kind,
                "content_hash": version,
                "page": page,
                "outcome": ImportedItem.Outcome.SKIPPED
                if reason
                else ImportedItem.Outcome.STORED,
                "reason": reason[:200],
            },
        )


def _written_by_connector(page: Page) -> bool:
    """True when the latest revision of ``page`` was written by a connector (so a
    contact may update it); a human edit since makes it theirs."""
    actor = (
        PageRevision.objects.filter(page=page)
        .order_by("-created_at", "-id")
        .values_list("actor", flat=True)
        .first()
    )
    return bool(actor and actor.startswith("connector:"))


# --- contacts ----------------------------------------------------------------------


class ContactsConnector(_GoogleService):
    """People API connections → person pages (SPEC §6.1)."""

    kind = "google_contacts"

    def fetch_changes(self, cursor: dict[str, Any]) -> Iterator[ChangeBatch]:
        """Every connection page; the cursor records the last full listing."""
        page_token: str | None = None
        while True:
            data = self.client.people_connections(page_token=page_token)
            yield ChangeBatch("contacts", list(data.get("connections") or []))
            page_token = data.get("nextPageToken")
            if not page_token:
                break
        yield ChangeBatch("contacts", [], cursor={"listed_at": self.now.isoformat()})

    def apply(self, batch: ChangeBatch, report: SyncReport) -> None:
        """Create or update the person page of each changed contact."""
        for person in batch.items:
            self._store(person, report)

    def _store(self, person: dict[str, Any], report: SyncReport) -> None:
        contact = parse_contact(person)
        if not contact.resource_name or not (contact.emails or contact.name):
            report.skipped["contact without name or email"] += 1
            return
        external_id = f"contact:{contact.resource_name}"
        version = hashlib.sha256(
            (contact.etag or repr(sorted(person.items()))).encode()
        ).hexdigest()
        item = self._ledger_item(external_id)
        if item is not None and item.content_hash == version:
            report.skipped["contact unchanged"] += 1
            return
        page = (
            item.page
            if item is not None and item.page and not item.page.is_deleted
            else None
        )
        if page is not None and not _written_by_connector(page):
            self._ledger_save(
                external_id=external_id,
                kind=ImportedItem.Kind.CONTACT,
                version=version,
                page=page,
                reason="page edited by a person",
            )
            report.skipped["contact page edited by a person"] += 1
            return
        if page is None:
            taken = (
                Alias.objects.filter(source=self.source, alias__in=contact.emails)
                .values_list("page__slug", flat=True)
                .first()
            )
            if taken:
                # The address already names a page (a human's or mail's): leave it.
                self._ledger_save(
                    external_id=external_id,
                    kind=ImportedItem.Kind.CONTACT,
                    version=version,
                    page=None,
                    reason=f"address already on {taken}",
                )
                report.skipped["contact matches an existing page"] += 1
                return
            slug = person_slug(
                name=contact.name, addr=contact.emails[0] if contact.emails else ""
            )
            if Page.objects.filter(source=self.source, slug=slug).exists():
                slug = f"{slug}-{short_hash(contact.resource_name)}"
        else:
            slug = page.slug
        title, body, frontmatter = render_person(
            addr=contact.emails[0] if contact.emails else "",
            name=contact.name,
            aliases=[*contact.emails, contact.name],
            origin="Google Contacts",
            extra={
                "google_contact_id": contact.resource_name,
                "company": contact.company,
                "role": contact.role,
            },
        )
        with transaction.atomic():
            result = page_write(
                source=self.source,
                mode="upsert",
                actor=self.caller,
                slug=slug,
                title=title,
                body=body,
                type_name="person",
                frontmatter=frontmatter,
                raws=[
                    RawInput(
                        external_id=f"{external_id}@{version[:16]}",
                        kind=RawRecord.Kind.CONTACT,
                        payload=person,
                        metadata={
                            "resource_name": contact.resource_name,
                            "emails": contact.emails,
                        },
                    )
                ],
                provenance={
                    "connector": "google_contacts",
                    "contact": contact.resource_name,
                },
                embed=self.embed,
            )
            self._ledger_save(
                external_id=external_id,
                kind=ImportedItem.Kind.CONTACT,
                version=version,
                page=result.page,
            )
        report.counts["contacts"] += 1
        if result.created:
            report.counts["people"] += 1


# --- calendar ------------------------------------------------------------------------


def meeting_attendee_link(*, person: Page, meeting: Page, context: str = "") -> bool:
    """``person attended meeting`` (Schema-checked); returns True when created."""
    from brain.models import Relation

    relation_type = schema_relation_type(
        name="attended", from_type=person.type, to_type=meeting.type
    )
    _relation, created = Relation.objects.get_or_create(
        from_page=person,
        to_page=meeting,
        relation_type=relation_type,
        defaults={
            "source": meeting.source,
            "context": context[:200],
            "provenance": {"connector": "google_calendar"},
            "created_by": ACTOR,
        },
    )
    return created


class CalendarConnector(_GoogleService):
    """Calendar events of the moving window → meeting pages (SPEC §6.1)."""

    kind = "google_calendar"

    def fetch_changes(self, cursor: dict[str, Any]) -> Iterator[ChangeBatch]:
        """Every event of the window (re-listed each sync; unchanged ones are no-ops
        through the ledger)."""
        time_min = (self.now - timedelta(days=CALENDAR_PAST_DAYS)).isoformat()
        time_max = (self.now + timedelta(days=CALENDAR_FUTURE_DAYS)).isoformat()
        page_token: str | None = None
        while True:
            data = self.client.calendar_events(
                time_min=time_min, time_max=time_max, page_token=page_token
            )
            yield ChangeBatch("calendar", list(data.get("items") or []))
            page_token = data.get("nextPageToken")
            if not page_token:
                break
        yield ChangeBatch(
            "calendar",
            [],
            cursor={"window": [time_min, time_max], "listed_at": self.now.isoformat()},
        )

    def apply(self, batch: ChangeBatch, report: SyncReport) -> None:
        """Write, move or cancel each changed event's page."""
        for event in batch.items:
            try:
                self._store(event, report)
            except PermanentError as exc:
                self._hold(
                    kind="calendar_event", external_id=str(event.get("id")), error=exc
                )

    def _store(self, event: dict[str, Any], report: SyncReport) -> None:
        event_id = str(event.get("id") or "")
        if not event_id:
            report.skipped["event without id"] += 1
            return
        external_id = f"event:{event_id}"
        version = event_version(event)
        item = self._ledger_item(external_id)
        if item is not None and item.content_hash == version:
            report.skipped["event unchanged"] += 1
            return
        page = item.page if item is not None else None
        if event.get("status") == "cancelled":
            with transaction.atomic():
                if page is not None and page_soft_delete(
                    page=page, actor=self.caller, reason="event cancelled"
                ):
                    report.counts["events_cancelled"] += 1
                self._ledger_save(
                    external_id=external_id,
                    kind=ImportedItem.Kind.EVENT,
                    version=version,
                    page=page,
                    reason="cancelled",
                )
            return
        slug = page.slug if page is not None else event_slug(event)
        rendered = render_event(event=event, account=self.account, slug=slug)
        with transaction.atomic():
            result = page_write(
                source=self.source,
                mode="upsert",
                actor=self.caller,
                slug=rendered.slug,
                title=rendered.title,
                body=rendered.body,
                type_name="meeting",
                summary=rendered.summary,
                frontmatter=rendered.frontmatter,
                effective_date=rendered.effective_date,
                raws=[
                    RawInput(
                        external_id=f"{external_id}@{version[:16]}",
                        kind=RawRecord.Kind.CALENDAR_EVENT,
                        payload=event,
                        metadata={
                            "event_id": event_id,
                            "start": rendered.frontmatter["start"],
                        },
                    )
                ],
                provenance={"connector": "google_calendar", "event_id": event_id},
                embed=self.embed,
            )
            emails = [a["email"] for a in event_attendees(event)]
            people = (
                Page.objects.select_related("type")
                .filter(
                    source=self.source,
                    aliases__alias__in=emails,
                    type__name="person",
                    deleted_at__isnull=True,
                )
                .distinct()
            )
            for person in people:
                if meeting_attendee_link(
                    person=person, meeting=result.page, context=rendered.title
                ):
                    report.counts["attended"] += 1
            self._ledger_save(
                external_id=external_id,
                kind=ImportedItem.Kind.EVENT,
                version=version,
                page=result.page,
            )
        report.counts["events"] += 1


# --- gmail -------------------------------------------------------------------------------


def _gmail_version(parsed: ParsedMail) -> str:
    """Ledger hash of a Gmail message: its id and labels (a label change re-renders)."""
    basis = parsed.gmail_id + "|" + ",".join(sorted(parsed.labels))
    return hashlib.sha256(basis.encode()).hexdigest()


class GmailConnector(_GoogleService):
    """Gmail threads → raw records + email pages (SPEC §6.1)."""

    kind = "google_gmail"

    def __init__(self, *, window_days: int = GMAIL_WINDOW_DAYS, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.window_days = window_days
        self.query = f"newer_than:{window_days}d"

    # fetch --------------------------------------------------------------------------

    def fetch_changes(self, cursor: dict[str, Any]) -> Iterator[ChangeBatch]:
        """Backfill until done, then history deltas (see module docstring)."""
        if cursor.get("backfill_done") and cursor.get("history_id"):
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
            yield from self._relist(expired=start)
            return
        yield from self._threads(thread_ids)
        yield ChangeBatch("gmail", [], cursor={"history_id": newest})

    def _relist(self, *, expired: str) -> Iterator[ChangeBatch]:
        """History too old (404): re-anchor, then re-list at most
        ``RELIST_MAX_PAGES`` pages of the window; unchanged threads are no-ops."""
        anchor = str(self.client.gmail_profile()["historyId"])
        self.report.warnings.append(
            f"Gmail history {expired} expired; re-listed the last {self.window_days} days "
            f"(at most {RELIST_MAX_PAGES * 100} messages) and continued from {anchor}."
        )
        self.report.counts["history_expired"] += 1
        page_token: str | None = None
        seen: set[str] = set()
        for _page in range(RELIST_MAX_PAGES):
            thread_ids, page_token = self._list_page(page_token)
            fresh = [t for t in thread_ids if t not in seen]
            seen.update(fresh)
            yield from self._threads(fresh)
            if not page_token:
                break
        yield ChangeBatch("gmail", [], cursor={"history_id": anchor})

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
            if self.progress:
                self.progress("gmail", report.counts["threads"], None)
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
                process_threads(source_id=self.source.id, thread_ids=list(stored))

    def _work(self, thread: dict[str, Any], report: SyncReport) -> ThreadWork | None:
        thread_id = str(thread.get("id") or "")
        parsed: list[ParsedMail] = []
        for message in thread.get("messages") or []:
            try:
                item = parse_gmail_message(message)
            except ConnectorError as exc:
                self._hold(
                    kind="gmail_message", external_id=str(message.get("id")), error=exc
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
                    is_mine=SENT in p.labels or p.from_addr in self.owners,
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
        from connectors.models import HeldItem

        HeldItem.objects.filter(
            source=self.source,
            kind__in=["gmail_message", "gmail_thread"],
            external_id__in=[*work.new_keys, work.thread_id],
            released_at__isnull=True,
        ).update(released_at=timezone.now())


# --- the sync entry point -----------------------------------------------------------------

SERVICES: tuple[tuple[str, type[_GoogleService], str], ...] = (
    ("contacts", ContactsConnector, READONLY_SCOPES[2]),
    ("calendar", CalendarConnector, READONLY_SCOPES[1]),
    ("gmail", GmailConnector, READONLY_SCOPES[0]),
)


def google_sync(
    *,
    source: Source,
    progress: ProgressFn | None = None,
    actor: str = "cli",
    http: Any = None,
    sleep: Callable[[float], None] = time.sleep,
    now: datetime | None = None,
    services: tuple[str, ...] = ("contacts", "calendar", "gmail"),
) -> SyncReport:
    """Sync a ``google`` source: contacts → calendar → gmail (SPEC §6.1).

    ``http`` overrides the account's authorised HTTP (tests pass
    ``HttpMockSequence``). Contacts or calendar failures are reported as warnings
    (status ``partial``); a Gmail failure marks the run failed and re-raises the
    ``ConnectorError`` (``permanent`` tells a job whether to retry), with the cursor
    of the last applied batch saved. Raises ``InvalidParams`` when the source has no
    connected account and no ``http`` is given.
    """
    from connectors.google.auth import authorized_http
    from connectors.services import sync_run_finish, sync_run_start

    account = (
        GoogleAccount.objects.filter(source=source)
        .select_related("social_auth")
        .first()
    )
    if account is None and http is None:
        raise InvalidParams(
            f"Source {source.id!r} has no connected Google account.",
            suggestion="Connect it: sign in at /login/google-oauth2/ with the mailbox account.",
            detail={"source": source.id},
        )
    email = account.email if account else (source.owner_addresses or [""])[0]
    client = GoogleClient(
        http=http if http is not None else authorized_http(account), sleep=sleep
    )  # type: ignore[arg-type]
    report = SyncReport(source_id=source.id, kind="google")
    granted = (
        set(account.granted_scopes)
        if account and account.granted_scopes
        else set(READONLY_SCOPES)
    )
    if account and account.missing_scopes:
        report.warnings.append(
            "Google granted fewer permissions than the brain needs (missing: "
            + ", ".join(s.rsplit("/", 1)[-1] for s in account.missing_scopes)
            + "). Fix: re-connect the account at /login/google-oauth2/ and allow every "
            "read-only permission."
        )
    run = sync_run_start(source=source, kind="sync_source", actor=actor)
    report.run_id = run.pk
    cursor_all = dict((source.cursor or {}).get("google", {}))
    owners = set(source.owner_addresses) | ({email} if email else set())

    def save(name: str) -> Callable[[dict[str, Any]], None]:
        def _save(cursor: dict[str, Any]) -> None:
            cursor_all[name] = cursor
            merged = {**(source.cursor or {}), "google": dict(cursor_all)}
            source.cursor = merged
            Source.objects.filter(pk=source.pk).update(cursor=merged)

        return _save

    for name, cls, scope in SERVICES:
        if name not in services:
            continue
        if scope not in granted:
            report.skipped[f"{name}: scope not granted"] += 1
            continue
        extra: dict[str, Any] = {}
        if name == "gmail":
            # Source.config may widen or narrow the backfill window (days).
            extra["window_days"] = int(
                (source.config or {}).get("gmail_window_days", GMAIL_WINDOW_DAYS)
            )
        connector = cls(
            **extra,
            source=source,
            client=client,
            account=email,
            owners=owners,
            report=report,
            progress=progress,
            now=now,
        )
        try:
            connector.run(
                cursor=dict(cursor_all.get(name, {})),
                save_cursor=save(name),
                report=report,
            )
        except ConnectorError as exc:
            if name != "gmail":
                report.warnings.append(
                    f"{name} sync failed ({exc.code}): {exc.message}"
                )
                report.held.append(
                    {
                        "kind": name,
                        "external_id": "",
                        "code": exc.code,
                        "message": exc.message,
                    }
                )
                continue
            sync_run_finish(run=run, report=report, error=f"{exc.code}: {exc.message}")
            raise
        except BaseException as exc:
            sync_run_finish(
                run=run, report=report, error=f"{type(exc).__name__}: {exc}"
            )
            raise
    sync_run_finish(run=run, report=report)
    return report
