"""ASGI entry point: the Django site plus the MCP streamable HTTP transport.

``/mcp`` (and ``/mcp/<surface>``) goes to the MCP server (``interfaces.mcp.http``); every
other path goes to Django. Static files (the admin's CSS and JS) are served by
``ASGIStaticFilesHandler`` so ``uvicorn gbrain_site.asgi:application`` shows a working
admin without a separate web server; a production deployment may still put a CDN or
reverse proxy in front of ``STATIC_URL``.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")
django_application = get_asgi_application()

# Imported after Django is set up: the MCP tools import models.
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from interfaces.mcp.http import with_mcp  # noqa: E402

application = with_mcp(ASGIStaticFilesHandler(django_application))
