"""SPEC §8: an API key's optional per-minute rate limit."""

from __future__ import annotations

import threading

import pytest
from django.core.cache import cache
from django.db import connection

from accounts.models import ApiKey
from accounts.services import RateLimited, apikey_rate_check


@pytest.mark.django_db
def test_a_key_over_its_rate_limit_gets_the_error_envelope(
    make_key, source_a, api_client
) -> None:  # type: ignore[no-untyped-def]
    issued = make_key(source_a)
    ApiKey.objects.filter(pk=issued.api_key.pk).update(rate_limit_per_minute=2)
    client = api_client(issued.plaintext)
    assert [client.get("/api/whoami").status_code for _ in range(2)] == [200, 200]
    response = client.get("/api/whoami")
    assert response.status_code == 429
    body = response.json()
    assert body["error"] == "unavailable" and "2 requests per minute" in body["message"]
    assert body["suggestion"]


@pytest.mark.django_db
def test_keys_without_a_limit_are_unlimited(make_key, source_a, api_client) -> None:  # type: ignore[no-untyped-def]
    client = api_client(make_key(source_a).plaintext)
    assert {client.get("/api/whoami").status_code for _ in range(5)} == {200}


@pytest.mark.django_db
def test_the_rate_limit_is_shared_by_every_worker_process(make_key, source_a) -> None:  # type: ignore[no-untyped-def]
    """Issue 46: the budget was counted per process (local-memory cache), so the
    two-worker web unit allowed twice the limit. A process's in-memory state is
    cleared between calls, as if each request went to another worker."""
    key = make_key(source_a).api_key
    ApiKey.objects.filter(pk=key.pk).update(rate_limit_per_minute=2)
    key.refresh_from_db()
    now = 1_800_000_000.0
    for _worker in range(2):
        cache.clear()
        apikey_rate_check(api_key=key, now=now)
    cache.clear()
    with pytest.raises(RateLimited):
        apikey_rate_check(api_key=key, now=now)
    apikey_rate_check(api_key=key, now=now + 60)  # the next minute starts afresh


def test_two_connections_share_one_budget(  # type: ignore[no-untyped-def]
    restore_migrated_rows, transactional_db, make_key, source_a
) -> None:
    """Two threads, each with its own database connection, spend one budget of 4
    (committed rows: a transactional test, not marked ``django_db`` so that the
    migrated rows ``restore_migrated_rows`` puts back after its flush stay)."""
    key = make_key(source_a).api_key
    ApiKey.objects.filter(pk=key.pk).update(rate_limit_per_minute=4)
    key.refresh_from_db()
    outcomes: list[bool] = []

    def worker() -> None:
        try:
            for _ in range(3):
                try:
                    apikey_rate_check(api_key=key, now=1_800_000_000.0)
                    outcomes.append(True)
                except RateLimited:
                    outcomes.append(False)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == [False, False, True, True, True, True]
