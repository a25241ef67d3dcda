"""Contacts and Calendar sync (SPEC §6.1) against ``HttpMockSequence``: real
Calendar v3 ``events.list`` recordings (CalCentral) and People API connections."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime

import pytest

from brain.access import local_caller
from brain.models import Alias, Page, Relation, Source
from brain.services.pages import page_write
from connectors.google.auth import google_account_connect
from connectors.google.client import READONLY_SCOPES
from connectors.google.sync import google_sync
from tests.connectors.google_fakes import ME, ok, sequence
from tests.connectors.helpers import CALENDAR

pytestmark = pytest.mark.django_db

# The recorded events are from 2012: the sync's "now" is set inside their window.
NOW = datetime(2012, 10, 1, tzinfo=UTC)


def _events(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((CALENDAR / name).read_text())


OSKI = {
    "resourceName": "people/c1",
    "etag": "%EgUBAj0DNxoEAQIFByIMR0xWQ0VmR0xZbXM9",
    "names": [
        {
            "metadata": {"primary": True},
            "displayName": "Oski the Bear",
            "givenName": "Oski",
        }
    ],
    "emailAddresses": [
        {"metadata": {"primary": True}, "value": "oski@example.com"},
        {"value": "Oski@Berkeley.example.edu"},
    ],
    "organizations": [{"name": "UC Berkeley", "title": "Mascot"}],
}
JANE = {
    "resourceName": "people/c2",
    "etag": "%EgUBAj0DNxoEAQIFByIMRXhhbXBsZQ==",
    "names": [{"metadata": {"primary": True}, "displayName": "Jane Doe"}],
    "emailAddresses": [{"value": "jane@example.org"}],
}


@pytest.fixture
def source() -> Source:
    return google_account_connect(
        email=ME, granted_scopes=list(READONLY_SCOPES), client=None
    ).source


def _sync(source: Source, *responses, services=("contacts", "calendar")):  # type: ignore[no-untyped-def]
    return google_sync(
        source=source,
        http=sequence(*responses),
        sleep=lambda s: None,
        now=NOW,
        services=services,
    )


def _calendar_pages(source: Source):  # type: ignore[no-untyped-def]
    return Page.objects.filter(source=source, type__name="meeting")


def test_contacts_become_person_pages_with_all_emails_and_the_name_as_aliases(
    source: Source,
) -> None:
    report = _sync(
        source, ok({"connections": [OSKI], "totalPeople": 1}), services=("contacts",)
    )
    assert report.counts["contacts"] == 1 and report.counts["people"] == 1
    page = Page.objects.get(source=source, type__name="person")
    assert page.slug == "people/oski-the-bear"
    assert page.frontmatter["google_contact_id"] == "people/c1"
    assert page.frontmatter["company"] == "UC Berkeley"
    aliases = set(Alias.objects.filter(page=page).values_list("alias", flat=True))
    assert {"oski@example.com", "oski@berkeley.example.edu", "oski the bear"} <= aliases


def test_a_contact_names_the_page_mail_made_for_its_address(source: Source) -> None:
    """Issue 25: the contact's name reaches the address-titled page of its
    address through the people resolution service; the body stays."""
    made = page_write(
        source=source,
        mode="create",
        actor=local_caller(actor="connector:gmail"),
        slug="people/jane",
        title="jane@example.org",
        body="Email: jane@example.org",
        type_name="person",
        frontmatter={"aliases": ["jane@example.org"], "emails": ["jane@example.org"]},
    ).page
    _sync(source, ok({"connections": [JANE]}), services=("contacts",))
    made.refresh_from_db()
    assert made.title == "Jane Doe"
    assert made.body == "Email: jane@example.org"
    assert "jane doe" in set(
        Alias.objects.filter(page=made).values_list("alias", flat=True)
    )


def test_a_page_written_by_a_human_is_never_overwritten_by_a_contact(
    source: Source,
) -> None:
    human = page_write(
        source=source,
        mode="create",
        actor=local_caller(actor="alice"),
        slug="people/jane-doe",
        title="Jane Doe",
        body="Jane runs procurement. Prefers calls.",
        type_name="person",
        frontmatter={"aliases": ["jane@example.org"]},
    ).page
    report = _sync(source, ok({"connections": [JANE, OSKI]}), services=("contacts",))
    human.refresh_from_db()
    assert human.body == "Jane runs procurement. Prefers calls."
    assert report.skipped["contact matches an existing page"] == 1
    # A contact page edited by a person afterwards is not overwritten either.
    oski = Page.objects.get(source=source, slug="people/oski-the-bear")
    page_write(
        source=source,
        mode="replace",
        actor=local_caller(actor="bob"),
        slug=oski.slug,
        body="Edited by Bob.",
    )
    changed = copy.deepcopy(OSKI)
    changed["etag"] = "%new"
    changed["organizations"] = [{"name": "Stanford"}]
    report = _sync(source, ok({"connections": [changed]}), services=("contacts",))
    assert report.skipped["contact page edited by a person"] == 1
    assert Page.objects.get(pk=oski.pk).body == "Edited by Bob."


def test_unchanged_contacts_are_skipped_on_the_next_sync(source: Source) -> None:
    _sync(source, ok({"connections": [OSKI]}), services=("contacts",))
    report = _sync(source, ok({"connections": [OSKI]}), services=("contacts",))
    assert report.skipped["contact unchanged"] == 1
    assert report.counts["contacts"] == 0


def test_attendee_names_reach_the_person_page_of_their_address(
    source: Source,
) -> None:
    """Issue 25: the calendar hands attendee names to the people resolution
    service: the address-titled page mail made for Oski takes his name."""
    made = page_write(
        source=source,
        mode="create",
        actor=local_caller(actor="connector:gmail"),
        slug="people/oski",
        title="oski@example.com",
        body="Email: oski@example.com",
        type_name="person",
        frontmatter={"aliases": ["oski@example.com"], "emails": ["oski@example.com"]},
    ).page
    _sync(
        source,
        ok(_events("google_events_list_10.json")),
        ok(_events("google_events_list_10_page2.json")),
        services=("calendar",),
    )
    made.refresh_from_db()
    assert made.title == "Oski the Bear"
    assert "oski the bear" in set(
        Alias.objects.filter(page=made).values_list("alias", flat=True)
    )
    assert Page.objects.filter(source=source, type__name="person").count() == 1


def test_calendar_events_become_meeting_pages_with_attended_relations(
    source: Source,
) -> None:
    """Contacts run first, so the attendee Oski resolves to his person page."""
    report = _sync(
        source,
        ok({"connections": [OSKI]}),
        ok(_events("google_events_list_10.json")),
        ok(_events("google_events_list_10_page2.json")),
    )
    assert report.counts["events"] == 14
    pages = _calendar_pages(source)
    assert pages.count() == 14
    carouse = pages.get(title="Carouse with Oski")
    assert carouse.slug.startswith("calendar/2012/12/2012-12-14-carouse-with-oski-")
    assert carouse.frontmatter["attendees"] == ["oski@example.com"]
    assert "Oski the Bear <oski@example.com> · accepted" in carouse.body
    oski = Page.objects.get(source=source, slug="people/oski-the-bear")
    relation = Relation.objects.get(to_page=carouse)
    assert (relation.from_page, relation.relation_type.name) == (oski, "attended")


def test_cancelled_events_soft_delete_and_moved_events_keep_their_page(
    source: Source,
) -> None:
    listing = _events("google_events_list_10_page2.json")
    _sync(source, ok(listing), services=("calendar",))
    moved, cancelled, _same = (copy.deepcopy(e) for e in listing["items"])
    before = {p.frontmatter["event_id"]: p for p in _calendar_pages(source)}
    moved["etag"], moved["start"] = '"moved"', {"dateTime": "2012-09-20T14:00:00-07:00"}
    cancelled["etag"], cancelled["status"] = '"cancelled"', "cancelled"
    report = _sync(
        source,
        ok({**listing, "items": [moved, cancelled, listing["items"][2]]}),
        services=("calendar",),
    )
    assert report.counts["events"] == 1
    assert report.counts["events_cancelled"] == 1
    assert report.skipped["event unchanged"] == 1
    moved_page = Page.objects.get(pk=before[moved["id"]].pk)
    assert moved_page.slug == before[moved["id"]].slug
    assert moved_page.frontmatter["start"].startswith("2012-09-20T21:00")
    assert Page.objects.get(pk=before[cancelled["id"]].pk).deleted_at is not None
