"""Caller resolution shared by every transport (SPEC §8): an API key or a staff
session becomes a ``brain.access.Caller``.

HTTP (``interfaces.http.auth``) and MCP over HTTP (``interfaces.mcp.http``) both call
``caller_for_bearer``, so both count requests against the key's per-minute rate limit
(``accounts.services.apikey_rate_check``) the same way.
"""

from __future__ import annotations

from typing import Any

from accounts.models import ApiKey
from accounts.services import apikey_authenticate, apikey_rate_check
from brain.access import Caller, local_caller


def caller_for_key(key: ApiKey, *, client: str = "") -> Caller:
    """Build the Caller for an authenticated API key (``client`` defaults to the
    key's name)."""
    readable = frozenset(key.readable_sources.values_list("id", flat=True))
    return Caller(
        actor=f"key:{key.prefix}",
        client=client or key.name,
        trusted=key.trusted,
        scopes=frozenset(key.scopes),
        write_source_id=key.write_source_id,
        readable_source_ids=readable,
        api_key_id=key.pk,
    )


def caller_for_bearer(token: str, *, client: str = "") -> Caller | None:
    """Resolve a bearer token to a Caller; None for an unknown, revoked or expired
    key. Counts the request against the key's rate limit: raises
    ``brain.exceptions.RateLimited`` (HTTP 429) over it."""
    key = apikey_authenticate(plaintext=token)
    if key is None:
        return None
    apikey_rate_check(api_key=key)
    return caller_for_key(key, client=client)


def caller_for_user(user: Any) -> Caller | None:
    """A signed-in staff user is a trusted local caller; anyone else is None."""
    if user is not None and user.is_authenticated and user.is_staff:
        return local_caller(actor=f"user:{user.get_username()}")
    return None
