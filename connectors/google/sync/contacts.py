"""Google Contacts → person pages (SPEC §6.1)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from django.db import transaction

from brain.models import Alias, Page, RawRecord
from brain.services.pages import RawInput, page_write
from brain.services.people import people_resolve, person_slug, render_person
from connectors.base import (
    ChangeBatch,
    SyncReport,
)
from connectors.google.schemas import (
    parse_contact,
)
from connectors.mail.render import short_hash
from connectors.models import ImportedItem

if TYPE_CHECKING:
    from collections.abc import Iterator

from connectors.google.sync.base import _GoogleService, _written_by_connector

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
                # The address already names a page (a human's or mail's): its body
                # is left alone; the contact's name reaches it as an alias (and as
                # its title when it is titled by an address) through the one
                # resolution service (issue 25).
                people_resolve(
                    source=self.source,
                    sightings={e: {contact.name: 1} for e in contact.emails},
                    create=(),
                    owner_addresses=self.source.owner_addresses or (),
                    actor=self.caller.actor,
                    embed=False,
                    origin="Google Contacts",
                )
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
