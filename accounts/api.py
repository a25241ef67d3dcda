"""HTTP endpoints of the accounts app: who am I (for checking a key's grant)."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router, Schema

router = Router(tags=["system"])


class WhoAmIOut(Schema):
    actor: str
    trusted: bool
    remote: bool
    scopes: list[str]
    write_source: str | None
    readable_sources: list[str] | None
    protocol_version: int = 1


@router.get("/whoami", response=WhoAmIOut)
def whoami(request: HttpRequest) -> dict:
    """The caller behind the key: scopes, write source, readable sources (null = all)."""
    caller = request.auth
    return {
        "actor": caller.actor,
        "trusted": caller.trusted,
        "remote": caller.remote,
        "scopes": sorted(caller.scopes),
        "write_source": caller.write_source_id,
        "readable_sources": (
            sorted(caller.readable_source_ids)
            if caller.readable_source_ids is not None
            else None
        ),
        "protocol_version": 1,
    }
