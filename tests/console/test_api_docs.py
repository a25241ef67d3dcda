"""/api/docs works offline and documents every operation (issue 19): Swagger UI is
served from the installed django-ninja package, every parameter is described, and
every JSON request body carries an example the server accepts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

from brain.models import Source

pytestmark = pytest.mark.django_db


def test_docs_load_swagger_ui_from_the_package_not_a_cdn() -> None:
    html = Client().get("/api/docs").content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in html
    assert "cdn" not in html.lower()
    for name in ("swagger-ui-bundle.js", "swagger-ui.css", "swagger-ui-init.js"):
        assert finders.find(f"ninja/{name}"), name


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    document = Client().get("/api/openapi.json").json()
    return [
        (method, path, op)
        for path, ops in document["paths"].items()
        for method, op in ops.items()
    ]


def test_every_operation_and_parameter_is_described() -> None:
    for method, path, op in _operations():
        assert op.get("description") or op.get("summary"), (method, path)
        for parameter in op.get("parameters", []):
            assert parameter.get("description"), (method, path, parameter["name"])


def test_every_request_example_is_accepted(
    default_source: Source,
    make_key: Callable[..., Any],
    api_client: Callable[[str | None], Client],
) -> None:
    """Posting each example draws no invalid_params (404 for the example ids, or 503
    for providers not configured here, are fine: the request itself is valid)."""
    client = api_client(make_key(default_source, trusted=True).plaintext)
    checked = 0
    for method, path, op in _operations():
        media = op.get("requestBody", {}).get("content", {}).get("application/json")
        if media is None:
            continue
        assert "example" in media, (method, path)
        url = path.replace("{slug}", "notes/offsite-plan")
        response = client.post(url, media["example"], content_type="application/json")
        assert response.status_code != 400 and response.status_code != 422, (
            path,
            response.json(),
        )
        checked += 1
    assert checked >= 10
