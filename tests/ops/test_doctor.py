"""``manage.py doctor`` and ``/api/health`` tell the truth (operations issue): each
check prints ok / warn / fail with a fix, and the command exits non-zero on a fail."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from typing import TYPE_CHECKING

import pytest
from django.core.management import call_command
from django.utils import timezone

from brain.models import Chunk
from connectors.models import HeldItem
from interfaces.doctor import doctor_report
from jobs.models import Job
from jobs.services import worker_beat
from tests.factories import PageFactory, SourceFactory, one_message_mbox

if TYPE_CHECKING:
    from collections.abc import Callable

    from django.test import Client

    from accounts.services import IssuedKey
    from brain.models import Source

pytestmark = pytest.mark.django_db


def run_doctor(*args: str) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("doctor", "--no-models", *args, stdout=out)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


def line(report: dict, name: str) -> dict:  # type: ignore[type-arg]
    return next(c for c in report["checks"] if c["name"] == name)


@pytest.fixture
def healthy() -> None:
    """A live worker and the schedules installed: the two fails of a fresh brain."""
    call_command("setup_schedules", stdout=StringIO())
    worker_beat(name="host:1")


def test_doctor_prints_every_check_with_a_status(healthy: None) -> None:
    code, out = run_doctor()
    for name in (
        "database",
        "extension vector",
        "extension pg_trgm",
        "migrations",
        "embeddings",
        "worker",
        "schedules",
        "source default",
        "api keys",
        "disk",
        "deployment",
    ):
        assert name in out, f"{name} missing from:\n{out}"
    assert code == 0, out


def test_doctor_fails_when_no_worker_is_alive() -> None:
    call_command("setup_schedules", stdout=StringIO())
    Job.objects.create(kind="embed_pending")
    code, out = run_doctor()
    assert code == 1
    assert "FAIL  worker" in out
    assert "1 job(s) queued" in out
    assert "fix: manage.py worker" in out


def test_doctor_counts_a_worker_whose_heartbeat_is_old_as_dead(healthy: None) -> None:
    from jobs.models import WorkerHeartbeat

    WorkerHeartbeat.objects.update(beat_at=timezone.now() - timedelta(minutes=5))
    assert line(doctor_report(deploy=False), "worker")["status"] == "fail"


def test_doctor_fails_when_a_live_source_is_stale(healthy: None) -> None:
    SourceFactory(
        id="work-mail",
        kind="google",
        last_success_at=timezone.now() - timedelta(days=2),
    )
    code, out = run_doctor()
    assert code == 1
    assert "FAIL  source work-mail" in out
    assert "stale" in out
    assert "fix: manage.py sync_source work-mail" in out


def test_doctor_never_calls_an_imported_mailbox_stale(healthy: None) -> None:
    SourceFactory(id="archive", kind="mailbox", last_success_at=None)
    report = doctor_report(deploy=False)
    assert line(report, "source archive")["status"] == "ok"


def test_doctor_warns_about_held_items_with_where_to_look(healthy: None) -> None:
    source = SourceFactory(id="archive", kind="mailbox")
    HeldItem.objects.create(
        source=source, external_id="m1", kind="message", error_code="parse"
    )
    check = line(doctor_report(deploy=False), "source archive")
    assert check["status"] == "warn"
    assert "1 held item(s)" in check["seen"]
    assert "Held items" in check["fix"]


def test_doctor_fails_on_missing_schedules_with_the_fix() -> None:
    worker_beat(name="host:1")
    check = line(doctor_report(deploy=False), "schedules")
    assert check["status"] == "fail"
    assert check["fix"] == "manage.py setup_schedules"


def test_doctor_requires_no_sync_schedule_for_a_mailbox_imported_from_a_file(
    healthy: None, tmp_path, client: Client
) -> None:  # type: ignore[no-untyped-def]
    """``import_mail FILE --source S`` after the schedules were installed: S is a
    one-shot import with nothing to sync on a timer, so the schedules check stays
    ok and /api/health is not degraded."""
    mbox = one_message_mbox(tmp_path)
    call_command("import_mail", str(mbox), "--source", "archive", stdout=StringIO())
    check = line(doctor_report(deploy=False), "schedules")
    assert check["status"] == "ok", check
    assert "sync_source:archive" not in check["seen"]
    assert client.get("/api/health").json()["status"] == "ok"


def test_doctor_reports_embedding_coverage_and_the_backlog(
    healthy: None, settings
) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "local"
    page = PageFactory()
    Chunk.objects.create(
        page=page,
        source=page.source,
        visibility="world",
        ordinal=0,
        text="t",
        content_hash="h",
    )
    check = line(doctor_report(deploy=False), "embeddings")
    assert check["status"] == "warn"
    assert "0 of 1 chunk(s) embedded" in check["seen"]
    assert "embed_pending" in check["fix"] and "Start the worker" in check["fix"]
    # Regression (newcomer): with the embedding job already queued or running, the fix said
    # "Start the worker" beside a worker line reporting it alive and busy.
    job = Job.objects.create(
        kind="embed_pending", status=Job.Status.QUEUED, created_by="test"
    )
    check = line(doctor_report(deploy=False), "embeddings")
    assert check["status"] == "warn" and "Start the worker" not in check["fix"]
    assert f"Job #{job.pk} (embed_pending, queued)" in check["fix"]


def test_doctor_warns_about_keys_unused_for_90_days(
    healthy: None, make_key: Callable[..., IssuedKey], default_source: Source
) -> None:
    issued = make_key(default_source, name="old harness")
    type(issued.api_key).objects.filter(pk=issued.api_key.pk).update(
        created_at=timezone.now() - timedelta(days=200)
    )
    check = line(doctor_report(deploy=False), "api keys")
    assert check["status"] == "warn"
    assert "old harness" in check["seen"]


def test_doctor_key_fix_matches_the_revoke_command_which_takes_a_prefix(
    healthy: None, make_key: Callable[..., IssuedKey], default_source: Source
) -> None:
    """The fix says ``apikey revoke PREFIX`` and the line shows each unused key's
    prefix; revoking by what the line shows works."""
    issued = make_key(default_source, name="old harness")
    key = issued.api_key
    type(key).objects.filter(pk=key.pk).update(
        created_at=timezone.now() - timedelta(days=200)
    )
    check = line(doctor_report(deploy=False), "api keys")
    assert "apikey revoke PREFIX" in check["fix"] and "NAME" not in check["fix"]
    assert f"old harness ({key.prefix})" in check["seen"]
    out = StringIO()
    call_command("apikey", "revoke", key.prefix, stdout=out)
    assert "Revoked key 'old harness'" in out.getvalue()


def test_doctor_json_is_the_same_report(healthy: None) -> None:
    out = StringIO()
    call_command("doctor", "--no-models", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["status"] in {"ok", "warn"}
    assert {c["status"] for c in report["checks"]} <= {"ok", "warn"}


def test_health_turns_degraded_when_a_doctor_check_fails(
    client: Client,
) -> None:
    body = client.get("/api/health").json()
    assert body["status"] == "degraded"
    assert "worker" in body["failing"]
    assert "checks" not in body or body["checks"] is None


def test_health_is_ok_when_nothing_fails(healthy: None, client: Client) -> None:
    body = client.get("/api/health").json()
    assert body["status"] == "ok", body
    assert body["failing"] == []


def test_health_detail_needs_an_admin_key(
    healthy: None,
    make_key: Callable[..., IssuedKey],
    api_client: Callable[[str | None], Client],
    default_source: Source,
) -> None:
    reader = make_key(default_source, scopes=("read",))
    admin = make_key(default_source, scopes=("admin",), name="ops")
    denied = api_client(reader.plaintext).get("/api/health?detail=1")
    assert denied.status_code == 403
    assert denied.json()["error"] == "scope_denied"
    assert api_client(None).get("/api/health?detail=1").status_code == 403

    body = api_client(admin.plaintext).get("/api/health?detail=1").json()
    names = [c["name"] for c in body["checks"]]
    assert "worker" in names and "deployment" in names
