"""Schema-driven fuzzing of the HTTP API (SPEC §8: the OpenAPI document is the
contract). schemathesis generates requests from ``/api/openapi.json`` and sends them
to the WSGI application in-process, inside the test's transaction; every answer must
be a documented status with a body matching its documented schema, no 5xx other
than ``unavailable`` (no LLM configured here), and every error the SPEC §4 envelope.

Bounded for CI: a fixed number of examples per operation, derandomised (the same
requests every run), no shrinking.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from gbrain_site.wsgi import application

EXAMPLES_PER_OPERATION = 12
ENVELOPE_KEYS = {"error", "message", "suggestion", "detail", "protocol_version"}
ERROR_CODES = {
    "invalid_params",
    "provenance_required",
    "not_found",
    "scope_denied",
    "unavailable",
    "budget_unsatisfiable",
    "internal",
    "conflict",
}

schema = schemathesis.openapi.from_wsgi("/api/openapi.json", application)
# The coverage phase's boundary cases (every bound, enum and required field, and
# one unexpected method per path), without its cross product of every method.
schema.config.phases.coverage.enabled = False
seen: dict[str, int] = {"requests": 0, "errors": 0}


def not_a_server_error(ctx: Any, response: Any, case: Any) -> bool | None:
    """5xx only as ``unavailable`` (503: no LLM or embeddings configured)."""
    if response.status_code >= 500:
        assert response.status_code == 503, (
            f"{case.method} {case.formatted_path} answered {response.status_code}: "
            f"{response.text[:300]}"
        )
    return None


def error_is_the_envelope(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every 4xx/5xx body is exactly the SPEC §4 envelope."""
    seen["requests"] += 1
    if response.status_code < 400:
        return None
    seen["errors"] += 1
    body = json.loads(response.text)
    assert set(body) == ENVELOPE_KEYS, body
    assert body["error"] in ERROR_CODES and body["suggestion"], body
    assert body["protocol_version"] == 1
    return None


@pytest.fixture(scope="module", autouse=True)
def _report_counts() -> Any:
    """Print how many requests the run sent and how many answered with an error."""
    yield
    print(f"\nfuzz: {seen['requests']} requests, {seen['errors']} error answers")


@pytest.fixture
def bearer(settings, make_key, source_a):  # type: ignore[no-untyped-def]
    """A trusted read+write key (no admin: jobs and syncs would run for real) on a
    source with a page, without the embedding model; the WSGI handler keeps the
    test's connection open (as Django's test client does)."""
    from tests.brain.conftest import add_page

    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    add_page(source_a, title="Orla Fenwick", slug="people/orla-fenwick")
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield {"Authorization": f"Bearer {make_key(source_a, trusted=True).plaintext}"}
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    derandomize=True,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_api_answers_match_the_openapi_contract(case, bearer) -> None:  # type: ignore[no-untyped-def]
    case.call_and_validate(
        headers=bearer,
        checks=[
            not_a_server_error,
            error_is_the_envelope,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
