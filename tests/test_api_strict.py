"""The OpenAPI document states what the server enforces (SPEC §8; issue 46).

Walks ``/api/openapi.json``: every integer query, path or top-level body field
states a maximum, and a value one past it answers 400 ``invalid_params`` naming the
field (never a 500 such as "bigint out of range"); a boolean body field refuses
``"yes"`` and an integer body field refuses ``false`` (strict types), each with 400
``invalid_params`` naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture
def client(make_key, source_a, api_client) -> Client:  # type: ignore[no-untyped-def]
    key = make_key(source_a, trusted=True, scopes=("read", "write", "admin"))
    return api_client(key.plaintext)


def resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with a top-level ``$ref`` followed."""
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = spec["components"]["schemas"][name]
    return schema


def scalar_type(spec: dict[str, Any], schema: dict[str, Any]) -> tuple[str, Any]:
    """(type, schema of that type) of a field, looking through ``anyOf`` with null."""
    schema = resolve(spec, schema)
    for option in schema.get("anyOf", []):
        option = resolve(spec, option)
        if option.get("type") not in (None, "null"):
            return option["type"], option
    return schema.get("type", ""), schema


def operations(spec: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in spec["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def fill_path(path: str, params: list[dict[str, Any]], **override: Any) -> str:
    """``path`` with every path parameter filled (1 for integers, ``team-a`` else)."""
    for param in params:
        if param["in"] != "path":
            continue
        kind = param.get("schema", {}).get("type")
        value = override.get(param["name"], 1 if kind == "integer" else "team-a")
        path = path.replace("{" + param["name"] + "}", str(value))
    return path


def send(client: Client, method: str, url: str, body: Any = None) -> Any:
    if body is None:
        return getattr(client, method)(url)
    return getattr(client, method)(
        url, data=json.dumps(body), content_type="application/json"
    )


def refused(response: Any, field: str) -> str | None:
    """None when ``response`` is 400 ``invalid_params`` naming ``field``; else why."""
    if response.status_code != 400:
        return f"answered {response.status_code}: {response.content[:200]!r}"
    body = response.json()
    detail = body.get("detail")
    if isinstance(detail, str):
        detail = json.loads(detail)
    fields = detail.get("fields", []) if isinstance(detail, dict) else []
    named = [f if isinstance(f, str) else f.get("field") for f in fields]
    if body.get("error") != "invalid_params" or field not in named:
        return f"answered {body.get('error')} naming {named}: {body.get('message')}"
    return None


def body_fields(spec: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
    content = (op.get("requestBody") or {}).get("content", {})
    schema = content.get("application/json", {}).get("schema")
    if schema is None:
        return {}
    return dict(resolve(spec, schema).get("properties", {}))


def test_every_integer_states_a_maximum_the_server_enforces(client) -> None:  # type: ignore[no-untyped-def]
    spec = client.get("/api/openapi.json").json()
    problems: list[str] = []
    checked = 0
    for path, method, op in operations(spec):
        params = op.get("parameters", [])
        cases = [
            (p["name"], p["in"], p.get("schema", {}))
            for p in params
            if p["in"] in ("query", "path")
        ] + [(name, "body", s) for name, s in body_fields(spec, op).items()]
        for name, where, schema in cases:
            kind, typed = scalar_type(spec, schema)
            if kind != "integer":
                continue
            label = f"{method.upper()} {path} {where} {name}"
            if "maximum" not in typed:
                problems.append(f"{label}: states no maximum")
                continue
            over = typed["maximum"] + 1
            if where == "path":
                url, body = fill_path(path, params, **{name: over}), None
            elif where == "query":
                url, body = fill_path(path, params) + f"?{name}={over}", None
            else:
                url, body = fill_path(path, params), {name: over}
            checked += 1
            why = refused(send(client, method, url, body), name)
            if why:
                problems.append(f"{label}={over}: {why}")
    assert not problems, "\n".join(problems)
    assert checked > 10


@pytest.mark.parametrize(
    ("method", "url", "body", "field"),
    [
        ("get", "/api/search?query=", None, "query"),
        ("post", "/api/synthesize", {"question": ""}, "question"),
    ],
)
def test_required_text_states_the_minimum_length_the_server_enforces(
    client, method, url, body, field
) -> None:  # type: ignore[no-untyped-def]
    """The server refuses an empty query or question: the document says so
    (``minLength: 1``) and the refusal names the field."""
    spec = client.get("/api/openapi.json").json()
    path = url.split("?")[0]
    op = spec["paths"][path][method]
    if body is None:
        schema = next(p["schema"] for p in op["parameters"] if p["name"] == field)
    else:
        schema = body_fields(spec, op)[field]
    assert scalar_type(spec, schema)[1].get("minLength") == 1
    why = refused(send(client, method, url, body), field)
    assert why is None, why


def test_booleans_and_integers_in_bodies_are_strict(client) -> None:  # type: ignore[no-untyped-def]
    spec = client.get("/api/openapi.json").json()
    problems: list[str] = []
    checked = 0
    for path, method, op in operations(spec):
        url = fill_path(path, op.get("parameters", []))
        for name, schema in body_fields(spec, op).items():
            kind, _typed = scalar_type(spec, schema)
            bad = {"boolean": "yes", "integer": False}.get(kind)
            if bad is None:
                continue
            checked += 1
            why = refused(send(client, method, url, {name: bad}), name)
            if why:
                problems.append(f"{method.upper()} {path} {name}={bad!r}: {why}")
    assert not problems, "\n".join(problems)
    assert checked > 3
