"""``manage.py mcp [--surface verbs|starter|full] [--source S]``: the brain's MCP server
over stdio for a local agent harness (SPEC §4, §8).

The harness starts this command as a subprocess and speaks MCP on its stdin/stdout, so
stdout carries protocol messages only; what the command did goes to stderr. A stdio
caller is a trusted local caller: it reads private pages and facts. ``--source``
narrows it to one source, which becomes its write source too. The local embedding
model starts loading in a background thread as the server starts; until it is loaded,
tool calls never wait for it (search answers keyword-only with ``search_degraded``
saying the model is loading; written chunks wait for ``embed_pending``).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import anyio
from django.core.management.base import BaseCommand, CommandError, CommandParser

from brain.access import local_caller
from brain.embeddings import embeddings_warm_up, serving_request
from brain.models import Source
from interfaces.mcp.server import build_server
from interfaces.mcp.tools import SURFACES, tools_for_surface


class Command(BaseCommand):
    help = "Serve the brain's MCP tools over stdio (trusted local caller)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--surface",
            choices=SURFACES,
            default="starter",
            help="Tool set: verbs (the 7 memory verbs), starter (default), full.",
        )
        parser.add_argument(
            "--source",
            default=None,
            help="Read and write only this source (default: every source; writes "
            "go to 'default').",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        surface: str = options["surface"]
        source_id: str | None = options["source"]
        caller = local_caller(actor="mcp-stdio")
        if source_id:
            if not Source.objects.filter(id=source_id).exists():
                raise CommandError(
                    f"Source '{source_id}' does not exist; create it in admin → Sources"
                )
            caller = dataclasses.replace(
                caller,
                readable_source_ids=frozenset({source_id}),
                write_source_id=source_id,
            )
        server = build_server(surface=surface, resolve_caller=lambda ctx: caller)
        names = [spec.name for spec in tools_for_surface(surface)]
        # The local model loads while the harness initialises and lists tools, not
        # inside its first search (a search that comes sooner answers keyword-only).
        warming = embeddings_warm_up()
        # stdout is the protocol channel: report on stderr.
        print(
            f"brain MCP server on stdio: surface '{surface}', {len(names)} tools "
            f"({', '.join(names)}); trusted local caller, "
            f"sources: {source_id or 'all'}"
            + ("; embedding model loading in the background" if warming else ""),
            file=sys.stderr,
            flush=True,
        )
        # A tool call never waits for the model either: until it is loaded, search
        # answers keyword-only and says the model is loading (as over HTTP).
        with serving_request():
            anyio.run(server.run_stdio_async)
        print("brain MCP server: stdin closed, stopped.", file=sys.stderr, flush=True)
