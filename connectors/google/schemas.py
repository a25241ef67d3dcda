"""Shapes of Google API payloads the connector reads, and their page renderings
(SPEC §6.1): calendar events → ``meeting`` pages, contacts → person details.

Field names follow the discovery documents in ``connectors/google/discovery/``
(Event, EventDateTime, EventAttendee; Person, Name, EmailAddress, Organization).
Pure functions: no database, no network.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from brain.text import sha256_hex, slugify_title
from connectors.mail.parsing import html_to_text
from connectors.mail.render import RenderedPage, short_hash


def gmail_link(*, account: str, message_id: str) -> str:
    """Deep link to a Gmail message for ``account``."""
    return f"https://mail.google.com/mail/?authuser={account}#all/{message_id}"


def event_start(event: dict[str, Any]) -> tuple[datetime | None, bool]:
    """(start as aware UTC datetime, all-day) of an Event; all-day events start at
    00:00 UTC of their date."""
    start = event.get("start") or {}
    if start.get("dateTime"):
        return datetime.fromisoformat(
            start["dateTime"].replace("Z", "+00:00")
        ).astimezone(UTC), False
    if start.get("date"):
        day = date.fromisoformat(start["date"])
        return datetime(day.year, day.month, day.day, tzinfo=UTC), True
    return None, False


def event_version(event: dict[str, Any]) -> str:
    """Hash identifying one version of an event (etag, else updated + status)."""
    basis = event.get("etag") or f"{event.get('updated')}|{event.get('status')}"
    return sha256_hex(str(basis))


def event_slug(event: dict[str, Any]) -> str:
    """``calendar/YYYY/MM/YYYY-MM-DD-<summary-slug>-<8 hex of event id>`` (start
    date; a moved event keeps the slug it got first, looked up by the caller)."""
    start, _ = event_start(event)
    words = slugify_title(event.get("summary") or "", max_length=48) or "event"
    tail = f"{words}-{short_hash(str(event.get('id')))}"
    if start is None:
        return f"calendar/undated/{tail}"
    return f"calendar/{start:%Y/%m}/{start:%Y-%m-%d}-{tail}"


def event_attendees(event: dict[str, Any]) -> list[dict[str, str]]:
    """Attendees as ``{email, name, response}`` (lower-cased emails, resources
    dropped)."""
    out = []
    for attendee in event.get("attendees") or []:
        email = str(attendee.get("email") or "").lower()
        if not email or attendee.get("resource"):
            continue
        out.append(
            {
                "email": email,
                "name": str(attendee.get("displayName") or ""),
                "response": str(attendee.get("responseStatus") or ""),
            }
        )
    return out


def render_event(*, event: dict[str, Any], account: str, slug: str) -> RenderedPage:
    """The ``meeting`` page of an event (SPEC §6.1)."""
    start, all_day = event_start(event)
    end_raw = event.get("end") or {}
    end = end_raw.get("dateTime") or end_raw.get("date")
    title = str(event.get("summary") or "(no title)")[:500]
    attendees = event_attendees(event)
    organizer = (event.get("organizer") or {}).get("email", "")
    frontmatter: dict[str, Any] = {
        "event_id": event.get("id"),
        "account": account,
        "start": start.isoformat() if start else None,
        "end": end,
        "all_day": all_day,
        "timezone": (event.get("start") or {}).get("timeZone"),
        "recurring_event_id": event.get("recurringEventId"),
        "original_start_time": (event.get("originalStartTime") or {}).get("dateTime")
        or (event.get("originalStartTime") or {}).get("date"),
        "organizer": str(organizer).lower(),
        "attendees": [a["email"] for a in attendees],
        "location": event.get("location") or "",
        "url": event.get("htmlLink") or "",
        "status": event.get("status") or "",
    }
    lines = [f"# {title}", ""]
    when = (
        f"{start:%Y-%m-%d}"
        if all_day and start
        else (f"{start:%Y-%m-%d %H:%M} UTC" if start else "")
    )
    if when:
        lines.append(f"When: {when}" + (f" → {end}" if end else ""))
    if event.get("location"):
        lines.append(f"Where: {event['location']}")
    if event.get("hangoutLink"):
        lines.append(f"Meet: {event['hangoutLink']}")
    if event.get("htmlLink"):
        lines.append(f"[event]({event['htmlLink']})")
    if attendees:
        lines += ["", "## Attendees"]
        for a in attendees:
            who = f"{a['name']} <{a['email']}>" if a["name"] else a["email"]
            lines.append(f"- {who}" + (f" · {a['response']}" if a["response"] else ""))
    description = event.get("description") or ""
    if description:
        text = html_to_text(description) if "<" in description else description
        lines += ["", "## Description", "", text.strip()[:8000]]
    return RenderedPage(
        slug=slug,
        title=title,
        frontmatter=frontmatter,
        body="\n".join(lines) + "\n",
        summary=f"{title}" + (f" · {when}" if when else ""),
        effective_date=start.date() if start else None,
    )


@dataclass
class Contact:
    """A People API connection reduced to what a person page needs."""

    resource_name: str
    etag: str
    name: str
    emails: list[str]
    company: str
    role: str


def parse_contact(person: dict[str, Any]) -> Contact:
    """Read a People API Person (``names``, ``emailAddresses``, ``organizations``)."""
    names = person.get("names") or []
    primary = next(
        (n for n in names if (n.get("metadata") or {}).get("primary")),
        names[0] if names else {},
    )
    emails = []
    for item in person.get("emailAddresses") or []:
        value = str(item.get("value") or "").strip().lower()
        if value and value not in emails:
            emails.append(value)
    orgs = person.get("organizations") or []
    org = orgs[0] if orgs else {}
    return Contact(
        resource_name=str(person.get("resourceName") or ""),
        etag=str(person.get("etag") or ""),
        name=str(primary.get("displayName") or "").strip(),
        emails=emails,
        company=str(org.get("name") or ""),
        role=str(org.get("title") or ""),
    )
