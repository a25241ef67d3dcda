"""Google API client for the connector (SPEC §6.1): Gmail v1, Calendar v3, People v1.

The real google-api-python-client runs, built from the discovery documents shipped
in ``connectors/google/discovery/`` with ``build_from_document`` (no discovery
request ever goes over the network). The HTTP object is injected: production passes
an ``AuthorizedHttp`` holding the account's access token; tests pass
``googleapiclient.http.HttpMockSequence``.

Every call goes through ``GoogleClient.execute``: HTTP 429, 5xx and quota 403s are
``TransientError`` (retried with backoff up to 6 attempts, 60 s cap, ``Retry-After``
honoured, through an injectable ``sleep``); 400/404 and other 4xx are
``PermanentError``; 401 is a permanent ``auth_failed`` with a re-connect fix.
Tokens never appear in errors or logs.
"""

from __future__ import annotations

import json
import time
from email.utils import parsedate_to_datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from google.auth.exceptions import RefreshError
from google.auth.exceptions import TransportError as GoogleAuthTransportError
from googleapiclient.discovery import build_from_document
from googleapiclient.errors import HttpError

from connectors.base import (
    MAX_ATTEMPTS,
    PermanentError,
    TransientError,
    call_with_retry,
)

if TYPE_CHECKING:
    from collections.abc import Callable

DISCOVERY_DIR = Path(__file__).resolve().parent / "discovery"
# SPEC §6.1: the only scopes the brain asks for (plus openid/email).
READONLY_SCOPES = (
    "https://www.googleapis.com/auth/gmail.readonly",
    "https://www.googleapis.com/auth/calendar.readonly",
    "https://www.googleapis.com/auth/contacts.readonly",
)
_RATE_REASONS = {
    "rateLimitExceeded",
    "userRateLimitExceeded",
    "quotaExceeded",
    "backendError",
}


@cache
def discovery_document(name: str) -> str:
    """The packaged discovery document ``gmail.v1``, ``calendar.v3`` or ``people.v1``."""
    return (DISCOVERY_DIR / f"{name}.json").read_text(encoding="utf-8")


def _retry_after(error: HttpError) -> float | None:
    value = (getattr(error, "resp", None) or {}).get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())


def _reason(error: HttpError) -> str:
    try:
        data = json.loads(error.content.decode("utf-8", errors="replace"))
        errors = data.get("error", {}).get("errors") or []
        if errors:
            return str(errors[0].get("reason") or "")
        return str(data.get("error", {}).get("status") or "")
    except (ValueError, AttributeError):
        return ""


def classify_http_error(
    error: HttpError, *, what: str
) -> TransientError | PermanentError:
    """Map an ``HttpError`` to a typed connector error (see module docstring)."""
    status = int(getattr(error.resp, "status", 0) or 0)
    reason = _reason(error)
    detail = {"status": status, "reason": reason, "what": what}
    if status == 429 or status >= 500 or (status == 403 and reason in _RATE_REASONS):
        return TransientError(
            f"Google returned {status} for {what}; retrying later.",
            code="rate_limited" if status in (403, 429) else "upstream_unavailable",
            detail=detail,
            retry_after=_retry_after(error),
        )
    if status == 401:
        return PermanentError(
            f"Google refused the credentials for {what}.",
            code="auth_failed",
            detail={
                **detail,
                "fix": "Re-connect the Google account (admin → Google accounts).",
            },
        )
    if status == 404:
        return PermanentError(
            f"{what} not found (404).", code="not_found", detail=detail
        )
    if status == 403 and reason == "accessNotConfigured":
        return PermanentError(
            f"The Google API for {what} is not enabled for this OAuth client.",
            code="api_not_enabled",
            detail=detail,
        )
    return PermanentError(
        f"Google returned {status} for {what}.", code="upstream_error", detail=detail
    )


class GoogleClient:
    """Gmail, Calendar and People calls for one account.

    ``http``: an httplib2-compatible object (``AuthorizedHttp`` or
    ``HttpMockSequence``). ``sleep``: called with seconds between retries.
    """

    def __init__(
        self, *, http: Any, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.http = http
        self.sleep = sleep
        self._services: dict[str, Any] = {}

    def _service(self, name: str) -> Any:
        if name not in self._services:
            self._services[name] = build_from_document(
                discovery_document(name), http=self.http
            )
        return self._services[name]

    @property
    def gmail(self) -> Any:
        """The Gmail v1 resource."""
        return self._service("gmail.v1")

    @property
    def calendar(self) -> Any:
        """The Calendar v3 resource."""
        return self._service("calendar.v3")

    @property
    def people(self) -> Any:
        """The People v1 resource."""
        return self._service("people.v1")

    def execute(self, make_request: Callable[[], Any], *, what: str) -> dict[str, Any]:
        """Execute a request (built fresh per attempt) with typed errors and retries.
        Returns the JSON response as a dict."""

        def attempt() -> dict[str, Any]:
            try:
                return make_request().execute(num_retries=0)
            except HttpError as exc:
                raise classify_http_error(exc, what=what) from None
            except RefreshError as exc:
                # The token exchange was refused (a revoked grant, or domain-wide
                # delegation not granted for these scopes); the reason has no secret.
                raise PermanentError(
                    f"Google refused the access token for {what}: {str(exc)[:200]}",
                    code="auth_failed",
                    detail={
                        "what": what,
                        "fix": "Re-connect the account, or (shared mailbox) grant the "
                        "service account's client ID the read-only scopes in the "
                        "Workspace console.",
                    },
                ) from None
            except GoogleAuthTransportError as exc:
                raise TransientError(
                    f"Network error while refreshing the token for {what}: "
                    f"{type(exc).__name__}",
                    code="network_error",
                    detail={"what": what},
                ) from None
            except (TimeoutError, ConnectionError, OSError) as exc:
                raise TransientError(
                    f"Network error for {what}: {type(exc).__name__}",
                    code="network_error",
                    detail={"what": what},
                ) from None

        return call_with_retry(attempt, sleep=self.sleep, attempts=MAX_ATTEMPTS)

    # --- Gmail ------------------------------------------------------------------------

    def gmail_profile(self) -> dict[str, Any]:
        """``users.getProfile``: ``{emailAddress, historyId, messagesTotal, …}``."""
        return self.execute(
            lambda: self.gmail.users().getProfile(userId="me"), what="gmail profile"
        )

    def gmail_send_as(self) -> list[str]:
        """Send-as addresses of the account (``users.settings.sendAs.list``),
        lower-cased."""
        data = self.execute(
            lambda: self.gmail.users().settings().sendAs().list(userId="me"),
            what="gmail send-as aliases",
        )
        return sorted(
            {
                str(s["sendAsEmail"]).lower()
                for s in data.get("sendAs", [])
                if s.get("sendAsEmail")
            }
        )

    def gmail_list_messages(
        self, *, query: str, page_token: str | None
    ) -> dict[str, Any]:
        """``users.messages.list`` (newest first): ``{messages: [{id, threadId}],
        nextPageToken}``."""
        return self.execute(
            lambda: (
                self.gmail.users()
                .messages()
                .list(userId="me", q=query, pageToken=page_token, maxResults=100)
            ),
            what="gmail message list",
        )

    def gmail_thread(self, thread_id: str) -> dict[str, Any]:
        """``users.threads.get`` with ``format=full``."""
        return self.execute(
            lambda: (
                self.gmail.users()
                .threads()
                .get(userId="me", id=thread_id, format="full")
            ),
            what=f"gmail thread {thread_id}",
        )

    def gmail_history(
        self, *, start_history_id: str, page_token: str | None
    ) -> dict[str, Any]:
        """``users.history.list`` from ``start_history_id`` (404 when it expired)."""
        return self.execute(
            lambda: (
                self.gmail.users()
                .history()
                .list(
                    userId="me",
                    startHistoryId=start_history_id,
                    pageToken=page_token,
                    maxResults=500,
                )
            ),
            what="gmail history",
        )

    # --- Calendar and People ------------------------------------------------------------

    def calendar_events(
        self,
        *,
        time_min: str,
        time_max: str,
        page_token: str | None,
        calendar_id: str = "primary",
    ) -> dict[str, Any]:
        """``events.list`` with ``singleEvents=true`` and cancelled events shown."""
        return self.execute(
            lambda: self.calendar.events().list(
                calendarId=calendar_id,
                timeMin=time_min,
                timeMax=time_max,
                singleEvents=True,
                showDeleted=True,
                maxResults=250,
                pageToken=page_token,
            ),
            what="calendar events",
        )

    def people_connections(self, *, page_token: str | None) -> dict[str, Any]:
        """``people.connections.list`` of ``people/me`` with names, emails and
        organizations, 200 per page."""
        return self.execute(
            lambda: (
                self.people.people()
                .connections()
                .list(
                    resourceName="people/me",
                    personFields="names,emailAddresses,organizations",
                    pageSize=200,
                    pageToken=page_token,
                )
            ),
            what="contacts",
        )
