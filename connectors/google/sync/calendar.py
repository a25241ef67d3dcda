"""Google Calendar → meeting pages and attended relations (SPEC §6.1)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction

from brain.models import Page, RawRecord
from brain.services.pages import RawInput, page_soft_delete, page_write
from brain.services.people import people_resolve
from brain.services.relations import relation_ensure
from connectors.base import (
    ChangeBatch,
    PermanentError,
    SyncReport,
)
from connectors.google.schemas import (
    event_attendees,
    event_slug,
    event_version,
    render_event,
)
from connectors.models import ImportedItem

if TYPE_CHECKING:
    from collections.abc import Iterator

from connectors.google.sync.base import (
    ACTOR,
    CALENDAR_FUTURE_DAYS,
    CALENDAR_PAST_DAYS,
    _GoogleService,
)

# --- calendar ------------------------------------------------------------------------


def meeting_attendee_link(*, person: Page, meeting: Page, context: str = "") -> bool:
    """``person attended meeting`` (Schema-checked); returns True when created."""
    _relation, created = relation_ensure(
        from_page=person,
        to_page=meeting,
        type_name="attended",
        source_id=meeting.source_id,
        context=context,
        provenance={"connector": "google_calendar"},
        created_by=ACTOR,
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
                    kind="calendar_event",
                    external_id=str(event.get("id")),
                    error=exc,
                    item=event,
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
            attendees = event_attendees(event)
            emails = [a["email"] for a in attendees]
            # Attendee names reach the people pages of their addresses through the
            # one resolution service (issue 25); the calendar creates no people.
            people_resolve(
                source=self.source,
                sightings={a["email"]: {a["name"]: 1} for a in attendees if a["name"]},
                create=(),
                owner_addresses=self.source.owner_addresses or (),
                actor=self.caller.actor,
                embed=self.embed,
                origin="Google Calendar",
            )
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
