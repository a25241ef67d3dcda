"""django-ninja authentication: bearer API keys and staff sessions (SPEC §8).

Both return a ``brain.access.Caller``, which every endpoint passes to the services
as ``request.auth``.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja.security import APIKeyCookie, HttpBearer

from accounts.services import apikey_authenticate, apikey_rate_check
from brain.access import Caller, caller_for_key, local_caller


class BearerKeyAuth(HttpBearer):
    """``Authorization: Bearer gbr_…``. Untrusted keys are remote callers."""

    def authenticate(self, request: HttpRequest, token: str) -> Caller | None:
        key = apikey_authenticate(plaintext=token)
        if key is None:
            return None
        apikey_rate_check(api_key=key)
        client = request.headers.get("X-Brain-Client", "")[:200]
        return caller_for_key(key, client=client)


class StaffSessionAuth(APIKeyCookie):
    """A signed-in staff user (the admin, the browsable docs) is a trusted caller."""

    param_name = "sessionid"

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and user.is_staff:
            return local_caller(actor=f"user:{user.get_username()}")
        return None


def api_auth() -> list[Any]:
    """The authentication chain every protected operation uses."""
    return [BearerKeyAuth(), StaffSessionAuth(csrf=True)]
