"""SPEC §8: an API key's optional per-minute rate limit."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from accounts.models import ApiKey

pytestmark = pytest.mark.django_db


def test_a_key_over_its_rate_limit_gets_the_error_envelope(
    make_key, source_a, api_client
) -> None:  # type: ignore[no-untyped-def]
    cache.clear()
    issued = make_key(source_a)
    ApiKey.objects.filter(pk=issued.api_key.pk).update(rate_limit_per_minute=2)
    client = api_client(issued.plaintext)
    assert [client.get("/api/whoami").status_code for _ in range(2)] == [200, 200]
    response = client.get("/api/whoami")
    assert response.status_code == 429
    body = response.json()
    assert body["error"] == "unavailable" and "2 requests per minute" in body["message"]
    assert body["suggestion"]


def test_keys_without_a_limit_are_unlimited(make_key, source_a, api_client) -> None:  # type: ignore[no-untyped-def]
    client = api_client(make_key(source_a).plaintext)
    assert {client.get("/api/whoami").status_code for _ in range(5)} == {200}
