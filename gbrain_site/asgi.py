"""ASGI entry point: the Django site plus the MCP streamable HTTP transport.

``/mcp`` (and ``/mcp/<surface>``) goes to the MCP server (``interfaces.mcp.http``); every
other path goes to Django. Static files (the admin's CSS and JS) are served by
``ASGIStaticFilesHandler`` so ``uvicorn gbrain_site.asgi:application`` shows a working
admin without a separate web server; a production deployment may still put a CDN or
reverse proxy in front of ``STATIC_URL``.

The lifespan's shutdown releases this process's handle on the embedded PostgreSQL
(``gbrain_site.embedded_db.release``): uvicorn and gunicorn own SIGTERM, finish their
graceful shutdown and then re-raise the signal, so ``atexit`` would never run.
"""

import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")
django_application = get_asgi_application()

# Imported after Django is set up: the MCP tools import models.
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from brain.embeddings import embeddings_warm_up, serving_request  # noqa: E402
from interfaces.mcp.http import with_mcp  # noqa: E402


def releasing_embedded_db(app: Any) -> Any:
    """Wrap an ASGI app so every request runs inside
    ``brain.embeddings.serving_request`` (no request loads the embedding model, MCP
    over HTTP included), the lifespan's startup starts loading the model in the
    background (once per process), and its ``shutdown.complete`` first releases the
    embedded database handle (a no-op with ``DATABASE_URL`` set, or with
    ``BRAIN_EMBEDDED_RELEASE_ON_SHUTDOWN = False``: the test settings, whose process
    runs many lifespans and goes on using the database)."""
    from django.conf import settings

    from gbrain_site import embedded_db

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            with serving_request():
                await app(scope, receive, send)
            return

        async def receive_then_warm_up() -> Any:
            message = await receive()
            if message.get("type") == "lifespan.startup":
                embeddings_warm_up()
            return message

        async def send_then_release(message: dict[str, Any]) -> None:
            if message.get("type") == "lifespan.shutdown.complete" and getattr(
                settings, "BRAIN_EMBEDDED_RELEASE_ON_SHUTDOWN", True
            ):
                embedded_db.release()
            await send(message)

        await app(scope, receive_then_warm_up, send_then_release)

    return wrapped


application = releasing_embedded_db(
    with_mcp(ASGIStaticFilesHandler(django_application))
)
