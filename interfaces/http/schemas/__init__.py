"""Request and response schemas of the HTTP API, one module per router."""

from __future__ import annotations

from ninja import Schema
from pydantic import ConfigDict


class RequestIn(Schema):
    """Base of every top-level request body: an unknown key is refused (400
    ``invalid_params``, the field named with problem "unknown argument"), as MCP's
    ``call_tool`` refuses an unknown argument (SPEC §4: one contract on every
    transport), so a misspelt optional (``budget_token``) is never dropped silently.
    Nested objects (turns, relations) keep pydantic's default and ignore extra keys."""

    model_config = ConfigDict(extra="forbid")
