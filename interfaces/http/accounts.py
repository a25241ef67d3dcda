"""HTTP endpoints of the accounts app: who am I (for checking a key's grant)."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router, Schema

from brain.exceptions import PROTOCOL_VERSION
from interfaces.http.auth import request_caller
from interfaces.operations import op_whoami

router = Router(tags=["system"])


class WhoAmIOut(Schema):
    actor: str
    trusted: bool
    remote: bool
    scopes: list[str]
    write_source: str | None
    readable_sources: list[str] | None
    protocol_version: int = PROTOCOL_VERSION


@router.get("/whoami", response=WhoAmIOut)
def whoami(request: HttpRequest) -> dict:
    """The caller behind the key: scopes, write source, readable sources (null = all)."""
    return op_whoami(request_caller(request))
