"""Build the brain's MCP server for one surface (SPEC §4, §8; digest §11.2).

``build_server(surface=, resolve_caller=)`` returns a ``BrainMCPServer`` (an
``mcp.server.mcpserver.MCPServer``) holding exactly the tools of that surface, so a tool
outside it is unknown even when called by name. Each tool is the registry function from
``interfaces.mcp.tools`` wrapped as an async MCP tool: arguments are validated by the SDK
from the function signature, the caller comes from the transport
(``resolve_caller(ctx)``: the trusted local caller on stdio, the API key's caller over
HTTP), and the service runs in Django's thread-sensitive worker, because the ORM is
synchronous.

Every failure (unknown tool, bad arguments, any ``BrainError``, an unexpected crash)
comes back as an MCP tool error (``isError: true``) whose text content is the SPEC §4
envelope ``{error, message, suggestion, detail, protocol_version}``.
"""

from __future__ import annotations

import inspect
import json
import logging
import typing
from collections.abc import Callable
from typing import Annotated, Any

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError, close_old_connections
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from brain.access import Caller
from brain.exceptions import (
    BrainError,
    InternalError,
    InvalidParams,
    database_unavailable,
)
from brain.text import refuse_unstorable_text
from interfaces.mcp.tools import SURFACES, ToolSpec, tools_for_surface
from interfaces.page_fields import legacy_provenance

logger = logging.getLogger(__name__)

SERVER_NAME = "brain"

INSTRUCTIONS = (
    "The brain is the team's long-term memory: pages (people, companies, projects, "
    "email threads, meetings, notes), facts with provenance, and open loops (who "
    "owes whom what). Before answering about a person, company or project, call "
    "`entity` or `recall`. Before writing, search (`brain_search` or `recall`): when "
    "a result's create_safety is `exists` or `probable`, update that page "
    "(`brain_update`) instead of adding a duplicate. Every write needs provenance: "
    "say where the knowledge came from (a message, a meeting, the user). Record "
    "results back: close loops you finished, `remember` new facts, `forget` wrong "
    "ones. Tool errors are JSON {error, message, suggestion, detail}; follow the "
    "suggestion."
)

CallerResolver = Callable[[Context], Caller]


def error_result(error: BrainError) -> CallToolResult:
    """Return an MCP tool error whose text is the SPEC §4 envelope of ``error``."""
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(error.envelope()))],
        is_error=True,
    )


def brain_error_for(exc: ToolError) -> BrainError:
    """Map an SDK ``ToolError`` to the ``BrainError`` behind it.

    Argument validation failures become ``invalid_params`` listing each bad field; a
    ``BrainError`` raised by a service passes through; a database that cannot be
    reached is ``unavailable`` naming it (``database_unavailable``); anything else
    is ``internal`` (logged with its traceback, never shown to the caller).
    """
    cause = exc.__cause__
    if isinstance(cause, BrainError):
        return cause
    if isinstance(cause, OperationalError | InterfaceError):
        return database_unavailable(cause)
    if isinstance(cause, ValidationError):
        fields = [
            {
                "field": ".".join(str(p) for p in err["loc"]) or "arguments",
                "problem": err["msg"],
            }
            for err in cause.errors()
        ]
        names = ", ".join(f["field"] for f in fields) or "the arguments"
        return InvalidParams(
            f"Invalid or missing argument(s): {names}.",
            suggestion="Check argument names and types against the tool's inputSchema.",
            detail={"fields": fields},
        )
    logger.error("MCP tool failed", exc_info=cause or exc)
    return InternalError(
        "The brain hit an unexpected error; nothing was half-written.",
        suggestion="Retry; if it persists, an admin can read the server log.",
    )


class BrainMCPServer(MCPServer):
    """``MCPServer`` for one surface, answering every failure with the envelope."""

    def __init__(self, *, surface: str) -> None:
        super().__init__(
            name=SERVER_NAME,
            title="Brain (team memory)",
            instructions=INSTRUCTIONS,
            version="1",
            log_level="WARNING",
        )
        self.surface = surface

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: Context | None = None,
    ) -> Any:
        """Run tool ``name``; unknown tools and failures return the envelope."""
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            allowed = sorted(tool.parameters.get("properties", {}))
            unknown = sorted(set(arguments) - set(allowed))
            if unknown:
                # A misspelt argument would otherwise be dropped silently.
                return error_result(
                    InvalidParams(
                        f"Unknown argument(s) for {name}: {', '.join(unknown)}.",
                        suggestion=f"Use only: {', '.join(allowed) or 'no arguments'}.",
                        detail={
                            "fields": [
                                {"field": f, "problem": "unknown argument"}
                                for f in unknown
                            ],
                            "allowed": allowed,
                        },
                    )
                )
        else:
            return error_result(
                InvalidParams(
                    f"Unknown tool '{name}' on the '{self.surface}' surface.",
                    suggestion=(
                        "Call tools/list for the tools this server offers; other "
                        "surfaces (verbs, starter, full) offer more."
                    ),
                    detail={
                        "reason": "unknown_tool",
                        "tool": name,
                        "surface": self.surface,
                        "available": sorted(
                            t.name for t in self._tool_manager.list_tools()
                        ),
                    },
                )
            )
        try:
            refuse_unstorable_text(arguments, where="arguments")
        except InvalidParams as exc:
            return error_result(exc)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            return error_result(brain_error_for(exc))


def _run_service(spec: ToolSpec, caller: Caller, kwargs: dict[str, Any]) -> Any:
    """Run one registry function in the ORM thread, closing stale connections around
    it the way Django does around a request."""
    close_old_connections()
    try:
        if spec.arguments is not None:
            return spec.fn(caller, spec.arguments.model_validate(kwargs))
        return spec.fn(caller, **kwargs)
    finally:
        close_old_connections()


def _model_parameters(model: type[BaseModel]) -> list[inspect.Parameter]:
    """One keyword parameter per field of ``model`` (name, type, constraints,
    description, default), so the tool's input schema is the model's fields: MCP
    ``brain_add`` takes exactly HTTP ``POST /api/pages``' fields (issue 47). A
    ``provenance`` field also takes MCP's legacy string (``legacy_provenance``)."""
    params = []
    for name, field in model.model_fields.items():
        extra = [legacy_provenance] if name == "provenance" else []
        metadata = (*extra, *field.metadata, Field(description=field.description))
        annotation: Any = Annotated.__class_getitem__(  # type: ignore[attr-defined]
            (field.annotation, *metadata)
        )
        default = (
            inspect.Parameter.empty
            if field.is_required()
            else field.get_default(call_default_factory=True)
        )
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=annotation,
                default=default,
            )
        )
    return params


def _mcp_tool(spec: ToolSpec, resolve_caller: CallerResolver) -> Callable[..., Any]:
    """Wrap ``spec.fn(caller, **arguments)`` as an async MCP tool function whose
    signature is the registry function's minus ``caller``, plus the SDK ``Context``."""
    if spec.arguments is not None:
        params = _model_parameters(spec.arguments)
        hints = {p.name: p.annotation for p in params}
    else:
        hints = typing.get_type_hints(spec.fn, include_extras=True)
        params = list(inspect.signature(spec.fn).parameters.values())[1:]
    run = sync_to_async(_run_service, thread_sensitive=True)

    async def tool(ctx: Context, **kwargs: Any) -> dict[str, Any]:
        return await run(spec, resolve_caller(ctx), kwargs)

    tool.__name__ = spec.name
    tool.__doc__ = spec.description
    tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                "ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context
            ),
            *(
                p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints[p.name])
                for p in params
            ),
        ],
        return_annotation=dict[str, Any],
    )
    tool.__annotations__ = {
        "ctx": Context,
        **{p.name: hints[p.name] for p in params},
        "return": dict[str, Any],
    }
    return tool


def build_server(*, surface: str, resolve_caller: CallerResolver) -> BrainMCPServer:
    """Build the MCP server for ``surface`` (``verbs`` | ``starter`` | ``full``).

    ``resolve_caller(ctx)`` returns the ``Caller`` of the request being served.
    Raises ``ValueError`` for an unknown surface.
    """
    if surface not in SURFACES:
        raise ValueError(f"Unknown MCP surface {surface!r}; choose one of {SURFACES}")
    server = BrainMCPServer(surface=surface)
    for spec in tools_for_surface(surface):
        server.add_tool(
            _mcp_tool(spec, resolve_caller),
            name=spec.name,
            title=spec.title,
            description=spec.description,
            annotations=ToolAnnotations(
                read_only_hint=spec.read_only,
                destructive_hint=False,
                idempotent_hint=spec.read_only,
                open_world_hint=False,
            ),
            structured_output=True,
        )
    return server
