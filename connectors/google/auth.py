"""Connecting a Google account (SPEC §6.1).

The OAuth grant runs through social-auth-app-django's ``GoogleOAuth2`` backend
(settings ask for the three read-only scopes plus openid/email, offline access).
Tokens stay in ``UserSocialAuth.extra_data`` on the server and never reach logs;
``GoogleAccount`` records the address and the scopes actually granted.

``connect_google_source`` is a social-auth pipeline step (added after the default
steps in ``SOCIAL_AUTH_PIPELINE``); it calls ``google_account_connect``, which creates
or updates the ``google`` Source with the account address and its Gmail send-as
aliases as owner addresses.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from django.db import transaction

from brain.exceptions import InvalidParams
from brain.models import Source
from brain.services.sources import source_ensure
from connectors.base import ConnectorError, PermanentError, TransientError
from connectors.google.client import READONLY_SCOPES, GoogleClient
from connectors.google.delegation import delegated_http
from connectors.models import GoogleAccount, SharedMailbox

logger = logging.getLogger(__name__)


def google_source_id(email: str) -> str:
    """Suggested source id for an account: ``gmail-<local part>`` reduced to the
    source-id alphabet, at most 32 characters (SPEC §2.1)."""
    local = email.split("@", 1)[0].lower()
    local = re.sub(r"[^a-z0-9]+", "-", local).strip("-") or "account"
    return f"gmail-{local}"[:32].rstrip("-")


def granted_scopes_from(
    response: dict[str, Any] | None, extra_data: dict[str, Any] | None
) -> list[str]:
    """The scopes Google granted, from the token response (``scope``, space
    separated) or the stored extra data."""
    for holder in (response or {}, extra_data or {}):
        value = holder.get("scope") or holder.get("granted_scopes")
        if isinstance(value, str) and value.strip():
            return sorted(set(value.split()))
        if isinstance(value, list) and value:
            return sorted({str(v) for v in value})
    return []


def google_account_connect(
    *,
    email: str,
    granted_scopes: list[str],
    client: GoogleClient | None,
    social: Any = None,
    user: Any = None,
    source_id: str | None = None,
) -> GoogleAccount:
    """Create or update the ``google`` Source and its ``GoogleAccount`` for
    ``email`` (idempotent). Owner addresses = the account plus its send-as aliases
    (read with ``client``; on failure the account address alone, with a log line).
    Scopes missing from ``granted_scopes`` are recorded in ``missing_scopes`` so the
    sync reports them with a re-connect fix.
    """
    email = email.strip().lower()
    existing = (
        GoogleAccount.objects.filter(email=email).select_related("source").first()
    )
    sid = existing.source_id if existing else (source_id or google_source_id(email))
    aliases: list[str] = []
    if client is not None:
        try:
            aliases = client.gmail_send_as()
        except ConnectorError as exc:
            logger.warning("send-as aliases of %s unavailable: %s", email, exc.code)
    missing = [s for s in READONLY_SCOPES if granted_scopes and s not in granted_scopes]
    with transaction.atomic():
        source = source_ensure(
            source_id=sid,
            kind=Source.Kind.GOOGLE,
            name=email,
            owner_addresses=[email, *aliases],
        )
        account, _ = GoogleAccount.objects.update_or_create(
            email=email,
            defaults={
                "source": source,
                "social_auth": social,
                "user": user,
                "granted_scopes": sorted(granted_scopes),
                "missing_scopes": missing,
                "send_as": aliases,
            },
        )
    return account


def authorized_http(account: GoogleAccount) -> Any:
    """An ``AuthorizedHttp`` for the account's current access token. social-auth
    refreshes an expired token with the stored refresh token (and saves it). A
    Workspace shared mailbox (no person signed in) impersonates its address through
    domain-wide delegation instead (``delegated_http``, SPEC §6.1)."""
    import httplib2
    from google.oauth2.credentials import Credentials
    from google_auth_httplib2 import AuthorizedHttp
    from social_django.utils import load_strategy

    if (
        account.social_auth is None
        and SharedMailbox.objects.filter(
            source_id=account.source_id, provider=SharedMailbox.Provider.WORKSPACE
        ).exists()
    ):
        return delegated_http(account.email)
    if account.social_auth is None:
        raise InvalidParams(
            f"Google account {account.email} has no stored grant.",
            suggestion="Re-connect it: sign in at /login/google-oauth2/.",
            detail={"account": account.email},
        )
    import requests

    try:
        token = account.social_auth.get_access_token(load_strategy())
    except (requests.ConnectionError, requests.Timeout) as exc:
        raise TransientError(
            f"Google was unreachable while refreshing the token of {account.email}.",
            code="network_error",
            detail={"account": account.email, "error": type(exc).__name__},
        ) from None
    except Exception as exc:  # the refresh was refused (revoked or expired grant)
        raise PermanentError(
            f"Could not refresh the Google token of {account.email}.",
            code="auth_failed",
            detail={
                "account": account.email,
                "error": type(exc).__name__,
                "fix": "Re-connect the account: sign in at /login/google-oauth2/.",
            },
        ) from None
    return AuthorizedHttp(Credentials(token=token), http=httplib2.Http(timeout=60))


def connect_google_source(
    backend: Any,
    user: Any = None,
    response: dict[str, Any] | None = None,
    *args: Any,
    **kwargs: Any,
) -> None:
    """social-auth pipeline step: after a Google sign-in that granted mailbox
    scopes, connect the account as a ``google`` Source. Sign-ins without any
    mailbox scope (staff login only) connect nothing."""
    if getattr(backend, "name", "") != "google-oauth2":
        return
    social = kwargs.get("social")
    extra = getattr(social, "extra_data", None) or {}
    scopes = granted_scopes_from(response, extra)
    if scopes and not any(s in scopes for s in READONLY_SCOPES):
        return
    email = (response or {}).get("email") or getattr(social, "uid", "") or ""
    if not email:
        return
    if social is not None and scopes and extra.get("granted_scopes") != scopes:
        social.extra_data = {**extra, "granted_scopes": scopes}
        social.save(update_fields=["extra_data"])
    token = (response or {}).get("access_token") or extra.get("access_token")
    client = None
    if token:
        import httplib2
        from google.oauth2.credentials import Credentials
        from google_auth_httplib2 import AuthorizedHttp

        client = GoogleClient(
            http=AuthorizedHttp(
                Credentials(token=token), http=httplib2.Http(timeout=60)
            )
        )
    google_account_connect(
        email=email, granted_scopes=scopes, client=client, social=social, user=user
    )
