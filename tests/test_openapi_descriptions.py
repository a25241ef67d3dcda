"""Every field of the HTTP API says what it is (issue 47, SPEC §4: one contract on
every transport; MCP's tool arguments all carry descriptions, the OpenAPI document
carried almost none)."""

from __future__ import annotations

from typing import Any

from django.test import Client


def _undescribed(document: dict[str, Any]) -> list[str]:
    """``Schema.property`` and ``METHOD path parameter`` names without a non-empty
    description."""
    missing = [
        f"{name}.{prop}"
        for name, schema in document["components"]["schemas"].items()
        for prop, spec in schema.get("properties", {}).items()
        if not (spec.get("description") or "").strip()
    ]
    missing += [
        f"{method.upper()} {path} {param['name']}"
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        for param in operation.get("parameters", [])
        if not (param.get("description") or "").strip()
    ]
    return missing


def test_every_openapi_field_has_a_description(db: None) -> None:  # noqa: ARG001
    response = Client().get("/api/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["components"]["schemas"], "the document lists its schemas"
    assert _undescribed(document) == []
