"""What the three Google services share: the connector base, window sizes, the actor (SPEC §6.1)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.utils import timezone

from brain.access import local_caller
from brain.models import Page, PageRevision, Source
from connectors.base import (
    Connector,
    ConnectorError,
    ProgressFn,
    SyncReport,
)
from connectors.google.client import GoogleClient
from connectors.models import ImportedItem
from connectors.services import (
    held_item_record,
)

ACTOR = "connector:google"
GMAIL_WINDOW_DAYS = 90
CALENDAR_PAST_DAYS = 90
CALENDAR_FUTURE_DAYS = 60
THREAD_BATCH = 25
# An expired historyId re-lists the whole window; one run reads at most this many
# pages of 100 message ids of it (a partial run), the next run goes on (SPEC §6.1).
RELIST_PAGES_PER_RUN = 100


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

    def _hold(
        self,
        *,
        kind: str,
        external_id: str,
        error: ConnectorError,
        item: dict[str, Any] | None = None,
    ) -> None:
        """Hold an item (SPEC §6 "Every importer"), with the API's JSON for it as
        the raw bytes when there is one."""
        held_item_record(
            source=self.source,
            kind=kind,
            external_id=external_id,
            error=error,
            report=self.report,
            raw=json.dumps(item, sort_keys=True).encode() if item else None,
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
