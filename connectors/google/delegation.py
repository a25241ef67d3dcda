"""Google Workspace domain-wide delegation for shared mailboxes (SPEC §6.1 shared
mailboxes): a service account impersonates the shared address, with the three
read-only scopes only, and the Gmail, Calendar and Contacts syncs run unchanged on the
``AuthorizedHttp`` built here.

The service-account key comes from the JSON file named by
``BRAIN_GOOGLE_SERVICE_ACCOUNT_FILE`` or, when unset, from the newest key uploaded in
the admin (``WorkspaceServiceAccount``, stored encrypted). google-auth signs the
JWT-bearer assertion (``sub`` = the shared address) and exchanges it at the key's
``token_uri`` for an access token, refreshing it when it expires; the key and the
tokens never reach logs or errors.

What an admin grants in the Workspace console (Security → Access and data control →
API controls → Manage domain-wide delegation → Add new): the service account's
client ID and exactly ``DELEGATION_SCOPES``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httplib2
from django.conf import settings
from google.oauth2 import service_account
from google_auth_httplib2 import AuthorizedHttp

from connectors.base import PermanentError
from connectors.google.client import READONLY_SCOPES
from connectors.models import WorkspaceServiceAccount
from connectors.secrets import secret_decrypt

# The scopes a Workspace admin authorises for the service account, comma-separated
# as the console's "OAuth scopes" field wants them (SPEC §6.1: read-only only).
DELEGATION_SCOPES = ",".join(READONLY_SCOPES)


class DelegationNotConfigured(PermanentError):
    """No service-account key: neither the key file setting nor an uploaded key."""

    code = "delegation_not_configured"


def service_account_info() -> dict[str, Any]:
    """The service-account key as a dict: from the file named by
    ``settings.BRAIN_GOOGLE_SERVICE_ACCOUNT_FILE`` when set, else the newest
    uploaded key. Raises ``DelegationNotConfigured`` when there is none or the file
    cannot be read (the message names the file, never its content)."""
    path = settings.BRAIN_GOOGLE_SERVICE_ACCOUNT_FILE
    if path:
        try:
            return json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DelegationNotConfigured(
                f"The service-account key file {path} cannot be read ({type(exc).__name__}).",
                detail={
                    "fix": "Point BRAIN_GOOGLE_SERVICE_ACCOUNT_FILE at the JSON key."
                },
            ) from None
    row = WorkspaceServiceAccount.objects.first()
    if row is None:
        raise DelegationNotConfigured(
            "No Google Workspace service-account key is configured.",
            detail={
                "fix": "Upload the JSON key in admin → Workspace service accounts, "
                "or set BRAIN_GOOGLE_SERVICE_ACCOUNT_FILE."
            },
        )
    return json.loads(secret_decrypt(row.key_encrypted, what="service-account key"))


def delegated_credentials(
    subject: str, *, info: dict[str, Any] | None = None
) -> service_account.Credentials:
    """Service-account credentials impersonating ``subject`` (the shared address)
    with ``READONLY_SCOPES`` only (``Credentials.with_subject``). ``info`` defaults
    to ``service_account_info()``. Raises ``DelegationNotConfigured`` for a key
    google-auth cannot load."""
    key = info if info is not None else service_account_info()
    try:
        base = service_account.Credentials.from_service_account_info(
            key, scopes=list(READONLY_SCOPES)
        )
    except (ValueError, KeyError) as exc:
        raise DelegationNotConfigured(
            f"The service-account key is not usable ({type(exc).__name__}).",
            detail={"fix": "Upload a JSON key of type service_account."},
        ) from None
    return base.with_subject(subject)


def delegated_http(
    subject: str,
    *,
    info: dict[str, Any] | None = None,
    http: Any = None,
    timeout: float = 60.0,
) -> AuthorizedHttp:
    """An ``AuthorizedHttp`` acting as ``subject`` through domain-wide delegation.
    ``http`` is the transport for both the token exchange and the API calls (tests
    pass a fake; default ``httplib2.Http`` with ``timeout`` seconds). A refused
    exchange (delegation not granted, wrong scopes) surfaces on the first API call
    as google-auth's ``RefreshError``, which the Google client reports as
    ``auth_failed``."""
    return AuthorizedHttp(
        delegated_credentials(subject, info=info),
        http=http if http is not None else httplib2.Http(timeout=timeout),
    )
