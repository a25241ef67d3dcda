"""The Google sync entry point: contacts → calendar → gmail, resumable (SPEC §6.1)."""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from brain.exceptions import InvalidParams
from brain.models import Source
from connectors.base import (
    ConnectorError,
    ProgressFn,
    SyncReport,
)
from connectors.google.auth import authorized_http
from connectors.google.client import READONLY_SCOPES, GoogleClient
from connectors.models import GoogleAccount
from connectors.services import (
    import_settle,
    source_cursor_save,
    sync_run_finish,
    sync_run_start,
)

if TYPE_CHECKING:
    from collections.abc import Callable

from connectors.google.sync.base import (
    GMAIL_WINDOW_DAYS,
    RELIST_PAGES_PER_RUN,
    _GoogleService,
)
from connectors.google.sync.calendar import CalendarConnector
from connectors.google.sync.contacts import ContactsConnector
from connectors.google.sync.gmail import GmailConnector

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
    (status ``succeeded_with_holds``); a Gmail failure marks the run failed and re-raises the
    ``ConnectorError`` (``permanent`` tells a job whether to retry), with the cursor
    of the last applied batch saved. Raises ``InvalidParams`` when the source has no
    connected account and no ``http`` is given.
    """
    account = (
        GoogleAccount.objects.filter(source=source)
        .select_related("social_auth")
        .first()
    )
    if http is None:
        if account is None:
            raise InvalidParams(
                f"Source {source.id!r} has no connected Google account.",
                suggestion="Connect it: sign in at /login/google-oauth2/ with the mailbox account.",
                detail={"source": source.id},
            )
        http = authorized_http(account)
    email = account.email if account else (source.owner_addresses or [""])[0]
    client = GoogleClient(http=http, sleep=sleep)
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
            source_cursor_save(source=source, key="google", value=dict(cursor_all))

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
            config = source.config or {}
            extra["window_days"] = int(
                config.get("gmail_window_days", GMAIL_WINDOW_DAYS)
            )
            extra["relist_pages"] = int(
                config.get("gmail_relist_pages_per_run", RELIST_PAGES_PER_RUN)
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
    import_settle()  # issue 48: the first search after a sync at settled speed
    return report
