"""django-ninja authentication: bearer API keys and staff sessions (SPEC §8).

Both return a ``brain.access.Caller`` (through ``interfaces.callers``), which ninja
keeps as ``request.auth``; handlers read it with ``request_caller`` and pass it to the
operations and services.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja.security import APIKeyCookie, HttpBearer

from brain.access import Caller
from brain.exceptions import ScopeDenied
from interfaces.callers import caller_for_bearer, caller_for_user


class BearerKeyAuth(HttpBearer):
    """``Authorization: Bearer gbr_…``. Untrusted keys are remote callers."""

    def authenticate(self, request: HttpRequest, token: str) -> Caller | None:
        client = request.headers.get("X-Brain-Client", "")[:200]
        return caller_for_bearer(token, client=client)


class StaffSessionAuth(APIKeyCookie):
    """A signed-in staff user (the admin, the browsable docs) is a trusted caller."""

    param_name = "sessionid"

    def _get_key(self, request: HttpRequest) -> str | None:
        """No session cookie, or a bearer key sent: not a session request, so no
        CSRF check either (bearer requests are CSRF-exempt, SPEC §8); a failed
        bearer key then answers 401, never "CSRF check Failed"."""
        if request.headers.get("Authorization"):
            return None
        if not request.COOKIES.get(self.param_name):
            return None
        return super()._get_key(request)

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        return caller_for_user(getattr(request, "user", None))


def api_auth() -> list[Any]:
    """The authentication chain every protected operation uses."""
    return [BearerKeyAuth(), StaffSessionAuth(csrf=True)]


def request_caller(request: HttpRequest) -> Caller:
    """The ``Caller`` the authentication chain attached to ``request`` (ninja's
    ``request.auth``). Raises ``ScopeDenied`` for a request that did not pass it
    (an operation declared without ``auth``)."""
    caller = getattr(request, "auth", None)
    if not isinstance(caller, Caller):
        raise ScopeDenied(
            "This request carries no API key.",
            suggestion="Send 'Authorization: Bearer <key>'; admin → API keys.",
        )
    return caller
