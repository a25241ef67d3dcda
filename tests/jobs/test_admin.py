"""The jobs admin: a failing job shows its error and attempts, and retry works from
the admin (SPEC §7 "admins see, cancel and retry jobs in the admin, with progress")."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from accounts.models import User
from jobs.models import Job
from jobs.runner import execute_job
from jobs.services import job_enqueue

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("test_kinds")]


@pytest.fixture
def staff_client() -> Client:
    user = User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def test_a_failing_job_shows_its_error_and_attempts_and_retry_works_from_the_admin(
    staff_client: Client,
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    job, _ = job_enqueue(
        kind="test_flaky", params={"fail_times": 1}, max_attempts=1, dispatch=False
    )
    execute_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.DEAD

    changelist = staff_client.get(reverse("admin:jobs_job_changelist"))
    assert changelist.status_code == 200
    html = changelist.content.decode()
    assert "ConnectionError: transient failure on attempt 1" in html
    assert "1/1" in html  # attempts column

    detail = staff_client.get(reverse("admin:jobs_job_change", args=[job.pk]))
    assert "transient failure on attempt 1" in detail.content.decode()

    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            reverse("admin:jobs_job_changelist"),
            {"action": "retry_jobs", "_selected_action": [job.pk]},
            follow=True,
        )
    assert "Queued again 1 job(s)" in response.content.decode()
    job.refresh_from_db()
    assert (job.status, job.attempts) == (Job.Status.SUCCEEDED, 2)
    assert job.result == {"attempt": 2}
    assert [h["outcome"] for h in job.history] == [
        "dead",
        "retried by admin:root",
        "succeeded",
    ]


def test_cancel_from_the_admin_and_filters_by_kind_and_status(
    staff_client: Client,
) -> None:
    queued, _ = job_enqueue(kind="test_items", params={"items": 1}, dispatch=False)
    done, _ = job_enqueue(kind="test_items", params={"items": 2}, dispatch=False)
    execute_job(job_id=done.pk)
    url = reverse("admin:jobs_job_changelist")
    response = staff_client.post(
        url,
        {"action": "cancel_jobs", "_selected_action": [queued.pk, done.pk]},
        follow=True,
    )
    body = response.content.decode()
    assert "Cancelled 1 job(s)" in body
    assert f"#{done.pk}: Job {done.pk} is succeeded" in body
    queued.refresh_from_db()
    assert queued.status == Job.Status.CANCELLED

    filtered = staff_client.get(
        url, {"status__exact": "succeeded", "kind": "test_items"}
    )
    assert filtered.status_code == 200
    assert list(filtered.context["cl"].queryset) == [done]
    assert "2/2 (100%)" in filtered.content.decode()  # progress column


def test_jobs_cannot_be_added_or_edited_by_hand(staff_client: Client) -> None:
    assert staff_client.get(reverse("admin:jobs_job_add")).status_code == 403
    job, _ = job_enqueue(kind="test_items", params={"items": 1}, dispatch=False)
    page = staff_client.get(reverse("admin:jobs_job_change", args=[job.pk]))
    assert 'name="status"' not in page.content.decode()
