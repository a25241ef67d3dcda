"""The MCP streamable HTTP transport at ``/mcp`` with bearer API keys (SPEC §4, §8).

``with_mcp(django_app)`` wraps the site's ASGI application: requests under ``/mcp``
go to the MCP SDK's streamable HTTP session manager, everything else to Django.

- ``/mcp`` serves the ``full`` surface; ``/mcp/verbs``, ``/mcp/starter`` and
  ``/mcp/full`` serve one surface each.
- Every request carries ``Authorization: Bearer <key>``; a missing, unknown or revoked
  key is refused with HTTP 401 and the SPEC §4 envelope, before any MCP processing.
  The key's caller (``interfaces.callers.caller_for_bearer``, rate limit included) is attached to the request, so
  every tool call applies the key's sources, scopes and visibility: an untrusted key is
  a remote caller and never sees private data.
- The session managers run **stateless with JSON responses**: each POST is answered on
  its own, nothing is kept between requests, and the key is checked on every request.
  Any number of worker processes can serve ``/mcp`` behind a load balancer. (Stateless
  also means no server-initiated requests, which no brain tool needs.)
- The ``Host`` header is checked against ``ALLOWED_HOSTS`` like any Django request.

The managers need a running task group: they start on the ASGI ``lifespan`` startup
event (uvicorn, hypercorn) or, for servers that do not send lifespan events, on the
first MCP request.
"""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections
from django.http.request import split_domain_port, validate_host
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    TransportSecuritySettings,
)

from accounts.services import RateLimited
from brain.access import Caller
from brain.exceptions import (
    BrainError,
    InvalidParams,
    NotFound,
    ScopeDenied,
    database_unavailable,
)
from interfaces.callers import caller_for_bearer
from interfaces.mcp.server import build_server
from interfaces.mcp.tools import SURFACES

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"
DEFAULT_SURFACE = "full"
CALLER_SCOPE_KEY = "brain.caller"

ASGIApp = Any


def caller_from_context(ctx: Context) -> Caller:
    """Return the ``Caller`` the auth layer attached to this HTTP request.

    Raises ``ScopeDenied`` when the request did not pass through ``McpHttpApp``
    (defence in depth: the transport never serves an unauthenticated request).
    """
    request = ctx.request_context.request
    caller = request.scope.get(CALLER_SCOPE_KEY) if request is not None else None
    if caller is None:
        raise ScopeDenied(
            "This MCP request carries no API key.",
            suggestion="Send 'Authorization: Bearer <key>'; admin → API keys.",
        )
    return caller


def _authenticate(token: str, client: str) -> Caller | BrainError | None:
    """Resolve a bearer token to a Caller (ORM thread) with the same rate limit as
    HTTP (``interfaces.callers.caller_for_bearer``); None for a bad key, the
    ``RateLimited`` error over the key's limit, ``Unavailable`` naming the database
    when it cannot be reached (``brain.exceptions.database_unavailable``)."""
    close_old_connections()
    try:
        return caller_for_bearer(token, client=client)
    except RateLimited as exc:
        return exc
    except (OperationalError, InterfaceError) as exc:
        # The key cannot be checked: 503 naming the database, not a plain 500.
        return database_unavailable(exc)
    finally:
        close_old_connections()


def _too_large(size: str) -> dict[str, Any]:
    """The SPEC §4 envelope for a body over the MCP SDK's limit (HTTP 413)."""
    return InvalidParams(
        f"The request body is {size}; the limit is "
        f"{DEFAULT_MAX_REQUEST_BODY_SIZE} bytes.",
        suggestion="Send a smaller message: split large pages into several calls.",
        detail={"limit_bytes": DEFAULT_MAX_REQUEST_BODY_SIZE},
    ).envelope()


async def _buffered_body(receive: Any) -> Any | None:
    """Read a request body sent without a length, up to the SDK's limit
    (``DEFAULT_MAX_REQUEST_BODY_SIZE``, 4 MiB), and return an ASGI ``receive`` that
    replays it as one message; None when the body is larger (nothing is handed on).
    A disconnect while reading is replayed as it came."""
    body = bytearray()
    replay: list[dict[str, Any]] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            replay.append(message)
            break
        body.extend(message.get("body", b""))
        if len(body) > DEFAULT_MAX_REQUEST_BODY_SIZE:
            return None
        if not message.get("more_body", False):
            break
    replay.insert(0, {"type": "http.request", "body": bytes(body), "more_body": False})

    async def replaying() -> dict[str, Any]:
        return replay.pop(0) if replay else await receive()

    return replaying


async def _send_json(
    send: Any,
    status: int,
    body: dict[str, Any],
    *,
    www_authenticate: str = "",
    allow: str = "",
) -> None:
    """Answer with a JSON body (the SPEC §4 envelope) without entering MCP;
    ``www_authenticate`` and ``allow`` add those headers when given."""
    raw = json.dumps(body).encode()
    extra = [
        (name, value.encode())
        for name, value in ((b"www-authenticate", www_authenticate), (b"allow", allow))
        if value
    ]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(raw)).encode()),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": raw})


def _surface_for(path: str) -> str | None:
    """``/mcp`` → the default surface, ``/mcp/<surface>`` → that one, else None."""
    rest = path[len(MCP_PATH) :].strip("/")
    if not rest:
        return DEFAULT_SURFACE
    return rest if rest in SURFACES else None


def is_mcp_path(path: str) -> bool:
    """True for ``/mcp`` and anything below it."""
    return path == MCP_PATH or path.startswith(MCP_PATH + "/")


class McpHttpApp:
    """ASGI application serving the MCP surfaces under ``/mcp`` (see module doc)."""

    def __init__(self) -> None:
        self.servers = {
            surface: build_server(surface=surface, resolve_caller=caller_from_context)
            for surface in SURFACES
        }
        self.managers: dict[str, StreamableHTTPSessionManager] = {}
        self._stack: AsyncExitStack | None = None
        self._ready: asyncio.Future[None] | None = None
        self._lazy_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start a fresh session manager per surface (idempotent while running; a
        manager runs once, so a restart after ``stop`` builds new ones)."""
        if self._stack is not None:
            return
        # Hosts are checked against ALLOWED_HOSTS in __call__, like any Django request.
        no_sdk_host_check = TransportSecuritySettings(
            enable_dns_rebinding_protection=False
        )
        stack = AsyncExitStack()
        for surface, server in self.servers.items():
            # Builds the SDK's manager; its Starlette wrapper is not used: requests
            # are handed to the manager directly, after authentication.
            server.streamable_http_app(
                stateless_http=True,
                json_response=True,
                transport_security=no_sdk_host_check,
            )
            self.managers[surface] = server.session_manager
            await stack.enter_async_context(server.session_manager.run())
        self._stack = stack

    async def stop(self) -> None:
        """Stop the session managers (lifespan shutdown)."""
        if self._stack is not None:
            stack, self._stack = self._stack, None
            await stack.aclose()

    async def _ensure_started(self) -> None:
        """Start the managers on the first request when no lifespan event came.

        The managers' task groups must outlive the request, so they run in a
        background task of the server's event loop; a failed start is raised to
        every waiting request and retried by the next one.
        """
        if self._stack is not None:
            return
        if self._ready is None:
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[None] = loop.create_future()
            self._ready = ready

            async def keep_running() -> None:
                try:
                    await self.start()
                except Exception as exc:  # noqa: BLE001 - handed to the waiters
                    self._ready = None
                    ready.set_exception(exc)
                    return
                ready.set_result(None)
                await asyncio.Event().wait()  # lives as long as the event loop

            self._lazy_task = loop.create_task(keep_running())
        await asyncio.shield(self._ready)

    async def lifespan(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """ASGI lifespan: start the managers at startup, stop them at shutdown."""
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.start()
                except Exception as exc:  # noqa: BLE001 - reported to the server
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = {
            k.decode("latin-1").lower(): v.decode("latin-1")
            for k, v in scope["headers"]
        }
        domain, _port = split_domain_port(headers.get("host", ""))
        if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
            error: BrainError = InvalidParams(
                "Host not allowed.", suggestion="Add the host to DJANGO_ALLOWED_HOSTS."
            )
            await _send_json(send, 400, error.envelope())
            return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > DEFAULT_MAX_REQUEST_BODY_SIZE:
            # The SDK would refuse it too, but in plain text.
            await _send_json(send, 413, _too_large(f"{int(declared)} bytes"))
            return
        if not declared and scope.get("method") == "POST":
            # A body without a length (chunked) is read here, within the limit, so
            # that an oversized one gets the envelope, not the SDK's plain 413.
            receive = await _buffered_body(receive)
            if receive is None:
                await _send_json(send, 413, _too_large("more bytes"))
                return
        surface = _surface_for(scope["path"])
        if surface is None:
            error = NotFound(
                f"No MCP surface at {scope['path']}.",
                suggestion=f"Use /mcp or /mcp/<surface> for a surface in {SURFACES}",
            )
            await _send_json(send, 404, error.envelope())
            return
        auth = headers.get("authorization", "")
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
        caller = None
        if token:
            client = headers.get("x-brain-client", "")[:200] or "mcp"
            authenticate = sync_to_async(_authenticate, thread_sensitive=True)
            caller = await authenticate(token, client)
        if isinstance(caller, BrainError):
            await _send_json(send, caller.http_status, caller.envelope())
            return
        if caller is None:
            error = ScopeDenied(
                "Missing or invalid API key.",
                suggestion=(
                    "Send 'Authorization: Bearer <key>'; an admin creates keys in "
                    "admin → API keys."
                ),
            )
            await _send_json(
                send, 401, error.envelope(), www_authenticate='Bearer realm="brain"'
            )
            return
        if scope.get("method") == "GET":
            # Stateless JSON: no server-initiated stream to open. The SDK would
            # answer with an event stream that never sends anything and holds the
            # connection; the MCP transport allows 405 instead.
            error = InvalidParams(
                "GET opens no event stream here: this MCP endpoint is stateless JSON.",
                suggestion="POST JSON-RPC requests (initialize, tools/list, "
                "tools/call) to this URL.",
            )
            await _send_json(send, 405, error.envelope(), allow="POST")
            return
        await self._ensure_started()
        await self.managers[surface].handle_request(
            {**scope, CALLER_SCOPE_KEY: caller}, receive, send
        )


def with_mcp(django_app: ASGIApp) -> ASGIApp:
    """Return an ASGI app routing ``/mcp`` to the MCP transport and the rest to
    ``django_app``; ASGI lifespan events start and stop the MCP session managers."""
    mcp_app = McpHttpApp()

    async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await mcp_app.lifespan(scope, receive, send)
        elif scope["type"] == "http" and is_mcp_path(scope["path"]):
            await mcp_app(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    application.mcp_app = mcp_app  # type: ignore[attr-defined]
    return application
