"""Every ``/api/`` answer is JSON, every error the SPEC §4 envelope (SPEC §8).

The API's own errors are mapped in ``gbrain_site.api``; this middleware catches what
never reaches those handlers: a wrong method (ninja answers 405 in plain text), a
path Django cannot route, a CSRF refusal, or any other non-JSON error response under
``/api/``. Non-error and already-JSON answers pass through untouched.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    JsonResponse,
)

from brain.embeddings import serving_request
from brain.exceptions import envelope

API_PREFIX = "/api/"

CODES = {
    401: "scope_denied",
    403: "scope_denied",
    404: "not_found",
    429: "unavailable",
    503: "unavailable",
}


def _message(request: HttpRequest, response: HttpResponse) -> tuple[str, str]:
    status = response.status_code
    if status == 405:
        allowed = response.get("Allow", "")
        return (
            f"Method {request.method} is not allowed on {request.path}.",
            f"Use {allowed or 'another method'}; see /api/openapi.json.",
        )
    if status == 404:
        return (
            f"No API endpoint at {request.path}.",
            "See /api/openapi.json (or /api/docs) for the endpoints and their methods.",
        )
    if status in (401, 403):
        return (
            "Missing or invalid API key.",
            "Send 'Authorization: Bearer <key>'; an admin creates keys in "
            "admin → API keys.",
        )
    if status >= 500:
        return (
            "The brain hit an unexpected error; nothing was half-written.",
            "Retry; if it persists, an admin can read the server log.",
        )
    return (
        f"The request was refused ({status}).",
        "Check the request against /api/openapi.json.",
    )


def api_error_envelope(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    """Middleware: turn any non-JSON error answer under ``/api/`` into the envelope
    with the same status (and the ``Allow`` header of a 405)."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        if (
            not request.path.startswith(API_PREFIX)
            or response.status_code < 400
            or response.get("Content-Type", "").startswith("application/json")
        ):
            return response
        status = response.status_code
        default = "internal" if status >= 500 else "invalid_params"
        message, suggestion = _message(request, response)
        body = envelope(
            CODES.get(status, default),
            message,
            suggestion,
            f"HTTP {status} for {request.method} {request.path}",
        )
        wrapped = JsonResponse(body, status=status, json_dumps_params={"indent": None})
        for header in ("Allow", "WWW-Authenticate", "Retry-After"):
            if response.has_header(header):
                wrapped[header] = response[header]
        return wrapped

    return middleware


def embeddings_outside_requests(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    """Middleware: serve every Django request inside
    ``brain.embeddings.serving_request``, so no request loads the embedding model
    (a first admin save once waited 17 s for it); the process loads it in the
    background at startup (``gbrain_site.asgi``)."""

    def middleware(request: HttpRequest) -> HttpResponse:
        with serving_request():
            return get_response(request)

    return middleware


def refuse_nul_in_forms(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    """Middleware: outside ``/api/`` (the admin and console), a query-string or
    form value holding a NUL character is answered 400 with a plain sentence, not
    a 500 from the database ("A string literal cannot contain NUL"). Text cannot
    hold a NUL; ``/api/`` refuses it in its own envelope (``brain.text``)."""

    def middleware(request: HttpRequest) -> HttpResponse:
        if not request.path.startswith(API_PREFIX):
            params = [*request.GET.lists()]
            if request.method == "POST" and request.content_type in (
                "application/x-www-form-urlencoded",
                "multipart/form-data",
            ):
                params += [*request.POST.lists()]
            for name, values in params:
                if "\x00" in name or any("\x00" in v for v in values):
                    return HttpResponseBadRequest(
                        "The request holds a NUL character (\\u0000), which text "
                        "cannot hold. Remove it and try again.",
                        content_type="text/plain; charset=utf-8",
                    )
        return get_response(request)

    return middleware
