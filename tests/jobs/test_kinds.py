"""The built-in job kinds wired to other apps' services (SPEC §7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from brain.access import local_caller
from brain.models import Chunk, Page, RawRecord, Source
from brain.services.pages import page_write
from jobs.models import Job
from jobs.runner import execute_job
from jobs.services import job_enqueue

pytestmark = pytest.mark.django_db


def test_embed_pending_job_embeds_stale_chunks_and_twice_is_a_noop(
    settings,
    default_source: Source,  # type: ignore[no-untyped-def]
) -> None:
    settings.BRAIN_EMBEDDING_PROVIDER = "local"
    for slug, body in [("notes/a", "Alpha."), ("notes/b", "Beta.")]:
        page_write(
            source=default_source,
            mode="upsert",
            slug=slug,
            title=slug,
            body=body,
            actor=local_caller(),
            embed=False,
        )
    assert Chunk.objects.filter(embedding__isnull=True).count() == 2

    job, _ = job_enqueue(
        kind="embed_pending", idempotency_key="embed-1", dispatch=False
    )
    done = execute_job(job_id=job.pk)
    assert done is not None and done.status == Job.Status.SUCCEEDED, done.error
    assert done.result["embedded"] == 2
    assert done.result["model_chunks_per_second"] >= done.result["chunks_per_second"]
    assert 0 < done.result["share_of_model_rate"] <= 1
    assert done.progress["step"] == 2
    assert Chunk.objects.filter(embedding__isnull=True).count() == 0

    again, created = job_enqueue(kind="embed_pending", idempotency_key="embed-1")
    assert (again.pk, created) == (job.pk, False)
    rerun, _ = job_enqueue(kind="embed_pending", dispatch=False)
    assert execute_job(job_id=rerun.pk).result == {"embedded": 0}


def test_a_kind_missing_its_params_fails_permanently_naming_the_param() -> None:
    job, _ = job_enqueue(kind="sync_source", dispatch=False)
    done = execute_job(job_id=job.pk)
    assert done is not None and done.status == Job.Status.FAILED
    assert "needs the parameter 'source_id'" in done.error


def test_import_markdown_job_imports_a_folder_and_twice_is_a_noop(
    settings,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    (tmp_path / "a.md").write_text("---\ntitle: A\n---\nAlpha.\n")
    (tmp_path / "b.md").write_text("---\ntitle: B\n---\nBeta.\n")
    params = {"source_id": "notes", "path": str(tmp_path)}
    job, _ = job_enqueue(kind="import_markdown", params=params, dispatch=False)
    done = execute_job(job_id=job.pk)
    assert done is not None and done.status == Job.Status.SUCCEEDED, done.error
    assert (done.result["created"], done.result["errors"]) == (2, [])
    assert done.progress["step"] == 2 and done.progress["message"] == "files"
    assert Page.objects.filter(source_id="notes").count() == 2

    again, _ = job_enqueue(kind="import_markdown", params=params, dispatch=False)
    rerun = execute_job(job_id=again.pk)
    assert rerun is not None
    assert (rerun.result["created"], rerun.result["unchanged"]) == (0, 2)
    assert Page.objects.filter(source_id="notes").count() == 2


ENRON = Path(__file__).resolve().parent.parent / "data" / "enron" / "allen-p"


def test_import_mail_then_sync_source_on_real_mail_and_twice_is_a_noop() -> None:
    params = {"source_id": "enron", "path": str(ENRON), "owners": ["pallen@enron.com"]}
    job, _ = job_enqueue(
        kind="import_mail", params=params, idempotency_key="enron-1", dispatch=False
    )
    done = execute_job(job_id=job.pk)
    assert done is not None and done.status == Job.Status.SUCCEEDED, done.error
    assert done.result["counts"]["messages"] == 28
    assert done.result["counts"]["threads"] == 9
    assert done.progress["message"] == "threads" and done.progress["step"] == 9
    assert done.checkpoint == {"step": "threads", "done": 9}
    # A first attempt resumed from nothing (a regression: it reported its own
    # latest checkpoint as ``resumed_from``).
    assert "resumed_from" not in done.result
    again, created = job_enqueue(
        kind="import_mail", params=params, idempotency_key="enron-1"
    )
    assert (again.pk, created) == (job.pk, False)

    # The source remembers its path: a sync re-reads it and stores nothing new.
    sync, _ = job_enqueue(
        kind="sync_source", params={"source_id": "enron"}, dispatch=False
    )
    synced = execute_job(job_id=sync.pk)
    assert synced is not None and synced.status == Job.Status.SUCCEEDED, synced.error
    assert synced.result["counts"].get("messages", 0) == 0
    assert RawRecord.objects.filter(source_id="enron", kind="rfc822").count() == 28


def test_extract_loops_and_loops_sweep_jobs_on_real_mail_twice_are_noops() -> None:
    from loops.models import OpenLoop

    params = {"source_id": "enron", "path": str(ENRON), "owners": ["pallen@enron.com"]}
    imported = execute_job(
        job_id=job_enqueue(kind="import_mail", params=params, dispatch=False)[0].pk
    )
    assert imported is not None and imported.status == Job.Status.SUCCEEDED
    threads = list(
        Page.objects.filter(source_id="enron", type__name="email").values_list(
            "frontmatter__thread_id", flat=True
        )
    )
    extract = {"source_id": "enron", "thread_ids": threads}
    job, _ = job_enqueue(kind="extract_loops", params=extract, dispatch=False)
    done = execute_job(job_id=job.pk)
    assert done is not None and done.status == Job.Status.SUCCEEDED, done.error
    assert done.result["threads"] == len(threads) == 9
    assert done.result["failed"] == 0
    assert done.progress == {"step": 9, "total": 9, "message": "threads"}
    loops = set(OpenLoop.objects.values_list("id", "status", "dedup_key"))
    assert loops, "the Enron sample has open loops"

    rerun, _ = job_enqueue(kind="extract_loops", params=extract, dispatch=False)
    assert execute_job(job_id=rerun.pk).status == Job.Status.SUCCEEDED
    assert set(OpenLoop.objects.values_list("id", "status", "dedup_key")) == loops

    sweep, _ = job_enqueue(kind="loops_sweep", dispatch=False)
    swept = execute_job(job_id=sweep.pk)
    assert swept is not None and swept.status == Job.Status.SUCCEEDED, swept.error
    assert swept.result["failed"] == 0 and swept.result["sources"] >= 1


def test_an_import_markdown_job_with_a_bad_file_succeeds_with_the_file_held(
    settings,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """Regression: a file with ``effective_date: 2026-02-30`` failed the job, which
    was retried as if the error were transient. Now the file is held and the job
    succeeds once (a retry could not help)."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    (tmp_path / "a.md").write_text("---\ntitle: A\n---\nAlpha.\n")
    (tmp_path / "b.md").write_text("---\neffective_date: 2026-02-30\n---\nBeta.\n")
    params = {"source_id": "notes", "path": str(tmp_path)}
    job, _ = job_enqueue(kind="import_markdown", params=params, dispatch=False)
    done = execute_job(job_id=job.pk)
    assert done is not None and done.status == Job.Status.SUCCEEDED, done.error
    assert done.attempts == 1
    assert (done.result["created"], done.result["held"]) == (1, 1)
    assert done.result["status"] == "succeeded_with_holds"
