"""Jobs API for admin-scope keys (SPEC §4, §7)."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from jobs.models import Job
from jobs.services import job_enqueue

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("test_kinds")]


@pytest.fixture
def admin_client(api_client, make_key, default_source):  # type: ignore[no-untyped-def]
    issued = make_key(default_source, scopes=("read", "write", "admin"), trusted=True)
    return api_client(issued.plaintext)


def test_enqueue_twice_with_one_idempotency_key_returns_the_first_job(
    admin_client,
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    body = {"kind": "test_items", "params": {"items": 2}, "idempotency_key": "api-1"}
    with django_capture_on_commit_callbacks(execute=True):
        first = admin_client.post("/api/jobs", body, content_type="application/json")
    assert first.status_code == 201
    job_id = first.json()["job"]["id"]
    second = admin_client.post("/api/jobs", body, content_type="application/json")
    assert second.status_code == 200
    assert second.json()["created"] is False
    assert second.json()["job"]["id"] == job_id
    assert second.json()["job"]["status"] == "succeeded"
    assert Job.objects.count() == 1


def test_list_get_cancel_and_retry(admin_client) -> None:  # type: ignore[no-untyped-def]
    # A key sees the jobs on its write source (issue 46): these name it.
    job_enqueue(
        kind="test_items", params={"items": 1, "source_id": "default"}, dispatch=False
    )
    admin_client.get("/api/whoami")  # the key's first use stamps last_used_at
    with CaptureQueriesContext(connection) as one_job:
        admin_client.get(reverse("api:list_jobs"), {"status": "queued"})
    for n in range(1, 3):
        job_enqueue(
            kind="test_items",
            params={"items": n + 1, "source_id": "default"},
            dispatch=False,
        )
    with CaptureQueriesContext(connection) as three_jobs:
        listed = admin_client.get(reverse("api:list_jobs"), {"status": "queued"})
    assert len(three_jobs) == len(one_job), "no query per listed job"
    assert listed.status_code == 200
    assert listed.json()["count"] == 3
    job_id = listed.json()["items"][0]["id"]

    got = admin_client.get(f"/api/jobs/{job_id}")
    assert got.json()["params"] == {"items": 3, "source_id": "default"}
    cancelled = admin_client.post(f"/api/jobs/{job_id}/cancel")
    assert cancelled.json()["status"] == "cancelled"
    again = admin_client.post(f"/api/jobs/{job_id}/cancel")
    assert again.status_code == 400
    assert again.json()["error"] == "invalid_params"
    retried = admin_client.post(f"/api/jobs/{job_id}/retry")
    assert retried.json()["status"] == "queued"


def test_jobs_api_needs_the_admin_scope_and_names_missing_jobs(
    api_client,
    make_key,
    default_source,
    admin_client,  # type: ignore[no-untyped-def]
) -> None:
    plain = api_client(make_key(default_source).plaintext)
    denied = plain.get("/api/jobs")
    assert denied.status_code == 403
    assert denied.json()["error"] == "scope_denied"
    missing = admin_client.get("/api/jobs/424242")
    assert missing.status_code == 404
    assert missing.json()["message"] == "Job 424242 does not exist."
    bad = admin_client.post(
        "/api/jobs", {"kind": "nope"}, content_type="application/json"
    )
    assert bad.status_code == 400
    assert "sync_source" in json.loads(bad.json()["detail"])["allowed"]
