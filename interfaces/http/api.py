"""The one NinjaAPI (SPEC §4): a router per app, errors mapped in one place.

Every error leaves as the SPEC §4 envelope ``{error, message, suggestion, detail,
protocol_version}``; handlers never build error JSON themselves.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Literal

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DataError, InterfaceError, OperationalError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from ninja import Field, NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser

from brain.access import Caller
from brain.exceptions import (
    PROTOCOL_VERSION,
    BrainError,
    ScopeDenied,
    database_unavailable,
    envelope,
)
from brain.text import refuse_unstorable_text
from connectors.selectors import imports_health
from interfaces.callers import caller_for_bearer, caller_for_user
from interfaces.doctor import doctor_report, health_degraded
from interfaces.http.auth import api_auth
from interfaces.http.docs import document_operations
from interfaces.http.field_docs import document_fields

logger = logging.getLogger(__name__)


class BodyNotAnObject(ValueError):
    """A JSON request body that is not an object (a string, number, list, null)."""


class ObjectBodyParser(Parser):
    """JSON bodies must be objects: every operation's body schema is an object, and
    a bare string or list must not be read attribute by attribute into defaults."""

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        data = json.loads(request.body)
        if not isinstance(data, dict):
            raise BodyNotAnObject(
                f"The request body must be a JSON object, not {_json_kind(data)}."
            )
        refuse_unstorable_text(data)
        return data


def _json_kind(value: Any) -> str:
    """What a parsed JSON value is, in JSON's words (not Python's list/NoneType)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array"


# Every error status an operation may answer, each with the envelope (SPEC §8).
ERROR_STATUSES = {
    "400": "Invalid or missing parameters (invalid_params, provenance_required).",
    "401": "Missing, unknown, revoked or expired API key (scope_denied).",
    "403": "The key lacks the scope or the source (scope_denied).",
    "404": "Nothing readable by this key under that name (not_found).",
    "405": "Method not allowed on this path (invalid_params).",
    "409": (
        "Already exists (invalid_params): update it instead; or the page changed "
        "since base_revision (conflict)."
    ),
    "413": "Request body too large (invalid_params).",
    "429": "Over the key's per-minute rate limit (unavailable).",
    "500": "Unexpected error; nothing was half-written (internal).",
    "503": (
        "A provider (LLM, embeddings) is not configured or failed, or the database "
        "cannot be reached (unavailable, naming it)."
    ),
}


class ErrorOut(Schema):
    """The SPEC §4 error envelope: every /api error answer has exactly this shape."""

    error: Literal[
        "invalid_params",
        "provenance_required",
        "not_found",
        "scope_denied",
        "unavailable",
        "budget_unsatisfiable",
        "internal",
        "conflict",
    ]
    message: str
    suggestion: str = Field(..., min_length=1)
    detail: Any = None
    protocol_version: Literal[1]


class ContractAPI(NinjaAPI):
    """The NinjaAPI whose OpenAPI document lists every error status of every
    operation with the envelope schema (``ErrorOut``), so fuzzing can hold the server
    to it (SPEC §8)."""

    def get_openapi_schema(self, **kwargs: Any) -> Any:
        document = super().get_openapi_schema(**kwargs)
        components = document.setdefault("components", {}).setdefault("schemas", {})
        components["ErrorOut"] = ErrorOut.model_json_schema(
            ref_template="#/components/schemas/{model}"
        )
        error_ref = {"$ref": "#/components/schemas/ErrorOut"}
        for operations in document.get("paths", {}).values():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                for status, description in ERROR_STATUSES.items():
                    responses.setdefault(
                        status,
                        {
                            "description": description,
                            "content": {"application/json": {"schema": error_ref}},
                        },
                    )
        return document_operations(document_fields(document))


api = ContractAPI(
    parser=ObjectBodyParser(),
    title="Brain API",
    version="1",
    description=(
        "Memory verbs, page tools, open loops and jobs of the brain. "
        "Authenticate with `Authorization: Bearer <key>` (admin → API keys)."
    ),
    urls_namespace="api",
    auth=api_auth(),
    # The schema and docs are public: harness authors read them before holding a key.
)


@api.exception_handler(BrainError)
def on_brain_error(request: HttpRequest, exc: BrainError) -> HttpResponse:
    return api.create_response(request, exc.envelope(), status=exc.http_status)


@api.exception_handler(OperationalError)
@api.exception_handler(InterfaceError)
def on_database_down(request: HttpRequest, exc: Exception) -> HttpResponse:
    """A database that cannot be reached (or dropped the connection): 503
    ``unavailable`` naming it, on every route and on ``/api/health``."""
    return on_brain_error(request, database_unavailable(exc))


# Where ninja says a parameter came from (the first element of a pydantic ``loc``), and
# the view arguments that hold a whole body or query schema (the second element).
_LOCATIONS = frozenset({"body", "query", "path", "header", "cookie", "form", "file"})
_HOLDERS = frozenset({"payload", "params", "filters"})


def _field_name(loc: tuple[object, ...] | list[object]) -> str:
    """The caller's name for the field a pydantic error ``loc`` points at:
    ``("query", "query")`` → ``query``, ``("body", "payload", "relations", 0, "to")``
    → ``relations.0.to``; an empty string for the body as a whole."""
    parts = [str(p) for p in loc]
    if parts and parts[0] in _LOCATIONS:
        parts = parts[1:]
    if len(parts) > 1 and parts[0] in _HOLDERS:
        parts = parts[1:]
    return ".".join(parts)


@api.exception_handler(ValidationError)
def on_validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    """Pydantic's refusals as the SPEC §4 envelope (400 ``invalid_params``), each field
    named as the caller spelt it; an unknown body key (``RequestIn``) is "unknown
    argument", worded as MCP's ``call_tool`` words it."""
    fields = []
    for err in exc.errors:
        unknown = err.get("type") == "extra_forbidden"
        fields.append(
            {
                "field": _field_name(err.get("loc", ())),
                "problem": "unknown argument" if unknown else err.get("msg", "invalid"),
            }
        )
    unknown_names = [f["field"] for f in fields if f["problem"] == "unknown argument"]
    if unknown_names and len(unknown_names) == len(fields):
        message = f"Unknown argument(s): {', '.join(unknown_names)}."
        suggestion = (
            "Remove them or fix their spelling: the names this endpoint takes are in "
            "/api/openapi.json."
        )
    else:
        names = ", ".join(f["field"] or "body" for f in fields) or "the request"
        message = f"Invalid or missing parameter(s): {names}."
        suggestion = "Check the parameter names and types against /api/openapi.json."
    return api.create_response(
        request,
        envelope("invalid_params", message, suggestion, {"fields": fields}),
        status=400,
    )


@api.exception_handler(AuthenticationError)
def on_auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return api.create_response(
        request,
        envelope(
            "scope_denied",
            "Missing or invalid API key.",
            "Send 'Authorization: Bearer <key>'; an admin creates keys in admin → API keys.",
        ),
        status=401,
    )


@api.exception_handler(HttpError)
def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    code = {404: "not_found", 403: "scope_denied", 401: "scope_denied"}.get(
        exc.status_code, "invalid_params" if exc.status_code < 500 else "internal"
    )
    cause = exc.__cause__
    if isinstance(cause, BrainError):  # the body parser's own refusal
        return on_brain_error(request, cause)
    if isinstance(cause, json.JSONDecodeError):
        message = f"The request body is not valid JSON: {cause.msg}."
    elif isinstance(cause, BodyNotAnObject):
        message = str(cause)
    else:
        message = str(exc)
    return api.create_response(
        request,
        envelope(
            code,
            message,
            "Send a JSON object body; check the request against /api/openapi.json.",
            {"fields": [{"field": "body", "problem": message}]}
            if cause is not None
            else None,
        ),
        status=exc.status_code,
    )


@api.exception_handler(DataError)
def on_data_error(request: HttpRequest, exc: DataError) -> HttpResponse:
    # PostgreSQL refuses some text outright (a NUL byte, an out-of-range number);
    # the transaction is rolled back, so nothing was written.
    return api.create_response(
        request,
        envelope(
            "invalid_params",
            f"The database refused a value: {str(exc).splitlines()[0]}",
            "Remove NUL (\\u0000) characters and out-of-range numbers from the input.",
        ),
        status=400,
    )


@api.exception_handler(RequestDataTooBig)
def on_too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    return api.create_response(
        request,
        envelope(
            "invalid_params",
            "The request body is too large.",
            f"Send at most {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes; split large "
            "pages into several updates (mode 'append').",
        ),
        status=413,
    )


@api.exception_handler(Exception)
def on_unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    logger.exception("Unhandled API error", exc_info=exc)
    return api.create_response(
        request,
        envelope(
            "internal",
            "The brain hit an unexpected error; nothing was half-written.",
            "Retry; if it persists, an admin can read the server log.",
        ),
        status=500,
    )


class HealthCheckOut(Schema):
    name: str
    status: str = Field(description="ok | warn | fail")
    seen: str
    fix: str = Field("", description="The exact command or admin path that fixes it.")


class ImportsHealthOut(Schema):
    status: str = Field(description="ok | held | failed")
    sources_failed: int
    sources_with_holds: int
    running: int
    held: int


class HealthOut(Schema):
    status: str = Field(
        description="ok, or degraded when a doctor check fails (the names are in "
        "`failing`); the full report comes with `detail=1` for admin keys."
    )
    database: str
    failing: list[str] = Field(default_factory=list)
    imports: ImportsHealthOut | None = Field(
        None,
        description="Importers (SPEC §6): sources whose last import failed, sources "
        "whose last run held items, open held items (counts only).",
    )
    checks: list[HealthCheckOut] | None = Field(
        None, description="Only with detail=1: every doctor line."
    )
    protocol_version: int = PROTOCOL_VERSION


@api.get("/health", auth=None, response=HealthOut, tags=["system"], exclude_none=True)
def health(request: HttpRequest, *, detail: bool = False) -> dict[str, Any]:
    """Health without a key: the database answers and no cheap doctor check fails
    (``degraded`` names the failing ones: a stale source, no live worker, unapplied
    migrations…, ``imports`` when the last import of a source failed; ``imports``
    counts them and the open held items, SPEC §6; left out while migrations are
    unapplied). ``detail=1`` returns the whole ``manage.py doctor`` report and needs
    an admin key (or a staff session)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    out: dict[str, Any] = {"database": connection.vendor}
    if detail:
        caller = _optional_caller(request)
        if caller is None or not caller.can("admin"):
            raise ScopeDenied(
                "The detailed health report needs an admin key.",
                suggestion="Send 'Authorization: Bearer <admin key>', or run "
                "`manage.py doctor` on the server.",
            )
        report = doctor_report(load_models=False, deploy=True)
        out["checks"] = report["checks"]
        out["failing"] = [c["name"] for c in report["checks"] if c["status"] == "fail"]
    else:
        out["failing"] = health_degraded()
    if "migrations" not in out["failing"]:  # the import tables exist
        out["imports"] = imports_health()
        if out["imports"]["status"] == "failed" and "imports" not in out["failing"]:
            out["failing"].append("imports")
    out["status"] = "degraded" if out["failing"] else "ok"
    return out


def _optional_caller(request: HttpRequest) -> Caller | None:
    """The caller of a request on a route without required auth: a bearer key (rate
    limited like every call), else a staff session, else None. A bearer key that is
    unknown, revoked or expired raises ``AuthenticationError``: the same 401 as
    every other route (SPEC §8; issue 46: it answered 403 here)."""
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer "):
        caller = caller_for_bearer(header[7:].strip(), client="health")
        if caller is None:
            raise AuthenticationError
        return caller
    return caller_for_user(getattr(request, "user", None))


@csrf_exempt
def unknown_endpoint(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Any /api/ path no operation matches: a JSON envelope, never an HTML page."""
    return JsonResponse(
        envelope(
            "not_found",
            f"No API endpoint at /api/{rest}.",
            "See /api/openapi.json (or /api/docs) for the endpoints and their methods.",
        ),
        status=404,
    )


def refuse_unknown_query_params(
    run: Callable[..., HttpResponse],
) -> Callable[..., HttpResponse]:
    """Wrap an operation's ``run`` so a query parameter it does not take is refused
    (400 ``invalid_params``, each named with problem "unknown argument", and the
    names it does take in the suggestion) before anything runs: ninja drops unknown
    query keys silently, so ``?limt=5`` would answer with the default limit. The
    same contract as an unknown body key (``RequestIn``) and MCP's ``call_tool``
    (SPEC §4: one contract on every transport)."""
    operation = run.__self__  # type: ignore[attr-defined]
    known = sorted(
        {
            name
            for model in operation.signature.models
            if model.__ninja_param_source__ == "query"
            for name in getattr(model, "__ninja_flatten_map__", {})
        }
    )

    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        unknown = sorted(set(request.GET) - set(known))
        if not unknown:
            return run(request, *args, **kwargs)
        takes = (
            f"this endpoint's query parameters are {', '.join(known)}"
            if known
            else "this endpoint takes no query parameters"
        )
        return api.create_response(
            request,
            envelope(
                "invalid_params",
                f"Unknown argument(s): {', '.join(unknown)}.",
                f"Remove them or fix their spelling: {takes}.",
                {
                    "fields": [
                        {"field": name, "problem": "unknown argument"}
                        for name in unknown
                    ]
                },
            ),
            status=400,
        )

    return checked


api.add_decorator(refuse_unknown_query_params, mode="view")
api.add_router("/", "interfaces.http.accounts.router")
api.add_router("/", "interfaces.http.pages.router")
api.add_router("/", "interfaces.http.verbs.router")
api.add_router("/", "interfaces.http.push.router")
api.add_router("/", "interfaces.http.loops.router")
api.add_router("/", "interfaces.http.connectors.router")
api.add_router("/", "interfaces.http.jobs.router")
api.add_router("/", "interfaces.http.ask.router")
