"""Domain errors of the brain, mapped to the SPEC §4 error envelope in one place.

Services raise these; ``interfaces.http.api`` turns each into
``{error, message, suggestion, detail, protocol_version}`` with the class's HTTP
status. Every error carries a non-empty ``suggestion`` telling the caller what to do
next (SPEC §4, §11).
"""

from __future__ import annotations

import json
from typing import Any

from django.db import connections

PROTOCOL_VERSION = 1
"""The wire protocol version every response and error carries (SPEC §4)."""


def envelope(
    code: str, message: str, suggestion: str, detail: Any = None
) -> dict[str, Any]:
    """Build the SPEC §4 error envelope ``{error, message, suggestion, detail,
    protocol_version}``: the one builder, used by ``BrainError.envelope``, the HTTP
    error handlers and the MCP transport. ``detail`` is sent as a string
    (``detail_text``)."""
    return {
        "error": code,
        "message": message,
        "suggestion": suggestion,
        "detail": detail_text(detail),
        "protocol_version": PROTOCOL_VERSION,
    }


def detail_text(detail: Any) -> str:
    """The envelope's ``detail`` as the string SPEC §4 requires: text as is, data
    (field lists, allowed values, ids) as compact JSON with sorted keys, nothing as
    an empty string."""
    if detail is None:
        return ""
    if isinstance(detail, str):
        return detail
    return json.dumps(detail, sort_keys=True, separators=(",", ":"), default=str)


class BrainError(Exception):
    """Base of every error a caller can see.

    ``code`` is one of the SPEC §4 error codes; ``http_status`` the HTTP status the API
    answers with; ``detail`` is JSON-safe extra data (allowed values, ids), sent as
    a string (``detail_text``).
    """

    code = "internal"
    http_status = 500

    def __init__(
        self,
        message: str,
        *,
        suggestion: str,
        detail: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.suggestion = suggestion or "Retry later or report the problem."
        self.detail = detail

    def envelope(self) -> dict[str, Any]:
        """Return the SPEC §4 error envelope for this error."""
        return envelope(self.code, self.message, self.suggestion, self.detail)


class InvalidParams(BrainError):
    """Bad or missing input (``invalid_params``, HTTP 400)."""

    code = "invalid_params"
    http_status = 400


class AlreadyExists(InvalidParams):
    """A create hit an existing row (``invalid_params``, HTTP 409)."""

    http_status = 409


class SchemaViolation(InvalidParams):
    """A write broke the Schema (SPEC §2.2): ``detail['allowed']`` lists the values."""


class Conflict(BrainError):
    """A write's ``base_revision`` is not the page's current revision (``conflict``,
    HTTP 409, SPEC §4): someone changed the page since the caller read it.
    ``detail`` names ``current_revision`` and holds ``diff``, the unified diff from
    the base's body to the current one (``brain.services.pages.revisions``)."""

    code = "conflict"
    http_status = 409


class ProvenanceRequired(BrainError):
    """Provenance was given but blank (``provenance_required``, HTTP 400)."""

    code = "provenance_required"
    http_status = 400


class NotFound(BrainError):
    """The named page, fact, loop or job does not exist in the caller's scope."""

    code = "not_found"
    http_status = 404


class ScopeDenied(BrainError):
    """The caller may not read or write what it asked for (HTTP 403, or 401)."""

    code = "scope_denied"
    http_status = 403


class Unavailable(BrainError):
    """A needed provider (LLM, embeddings) is not configured or failed (HTTP 503)."""

    code = "unavailable"
    http_status = 503


def database_unavailable(exc: Exception, alias: str = "default") -> Unavailable:
    """The ``Unavailable`` (HTTP 503) answer to a database that cannot be reached
    or stopped answering (a Django ``OperationalError`` / ``InterfaceError``):
    its message names the database (engine, name, host and port of ``alias``,
    never the password) and the driver's first line; ``detail`` holds the same.
    The HTTP API, ``/api/health`` and the MCP transport answer with it (SPEC §4)."""
    db = connections.settings[alias]
    name = f"{db.get('NAME') or '?'} at {db.get('HOST') or 'localhost'}"
    if db.get("PORT"):
        name += f":{db['PORT']}"
    engine = str(db.get("ENGINE", "")).rsplit(".", 1)[-1] or "database"
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    return Unavailable(
        f"The database is unavailable ({engine} {name}): {reason}",
        suggestion=(
            "Retry in a minute; if it persists, an admin checks that the database "
            "server is running (`manage.py doctor`)."
        ),
        detail={
            "component": "database",
            "engine": engine,
            "database": name,
            "reason": reason,
        },
    )


class BudgetUnsatisfiable(BrainError):
    """Reserved by SPEC §4: a token budget no answer can fit."""

    code = "budget_unsatisfiable"
    http_status = 400


class InternalError(BrainError):
    """An unexpected failure; nothing was half-written (HTTP 500)."""

    code = "internal"
    http_status = 500
