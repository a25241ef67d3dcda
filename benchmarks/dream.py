"""Dream on the demo mailbox (SPEC §11: < 30 s on 2 cores), per phase, with floors.

Imports the mailbox ``bin/demo`` bundles (``demo/enron-allen-p``, owner
``pallen@enron.com``) into a throwaway ``mailbox`` source of the local database
(``var/``, or ``DATABASE_URL``) with the real pipeline, runs ``dream_run`` once and
prints each phase's seconds beside its floor, measured in the same run on the same
rows: the bare SQL that reads every row the phase has to look at (one statement per
table), so a phase's ratio to its floor says how much it costs beyond reading its
input. Dream runs as the nightly schedule runs it: a ``dream`` job (run here), whose
embeddings phase hands pending chunks to an ``embed_pending`` job; the benchmark
prints how long that job needs at the model's own batch rate, then cancels it. The
source is deleted at the end unless ``--keep``.

Usage:
    .venv/bin/python benchmarks/dream.py [--path MAILDIR --owner ADDR] [--keep]
        [--phases link_repair,duplicates,...] [--profile]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")

DEMO = ROOT / "demo" / "enron-allen-p"
DEMO_OWNER = "pallen@enron.com"
TARGET_S = 30.0

# The rows each phase reads, as bare SQL (the floor): one scan per input table.
FLOORS: dict[str, list[str]] = {
    "link_repair": [
        "SELECT count(*) FROM brain_relation r JOIN brain_page a ON a.id = r.from_page_id"
        " JOIN brain_page b ON b.id = r.to_page_id"
        " WHERE a.deleted_at IS NOT NULL OR b.deleted_at IS NOT NULL",
        "SELECT sum(length(body)) FROM brain_page"
        " WHERE deleted_at IS NULL AND body LIKE '%%[[%%'",
    ],
    "duplicates": [
        "SELECT count(*) FROM brain_alias WHERE kind = 'email'",
        "SELECT count(*) FROM brain_page p JOIN brain_pagetype t ON t.id = p.type_id"
        " WHERE p.deleted_at IS NULL AND t.primitive = 'entity'",
    ],
    "facts": ["SELECT count(*) FROM brain_fact WHERE expired_at IS NULL"],
    "loops": ["SELECT count(*) FROM loops_openloop"],
    "embeddings": [],
    "orphans": [
        "SELECT count(*) FROM brain_page WHERE deleted_at IS NULL",
        "SELECT count(DISTINCT to_page_id) FROM brain_relation",
    ],
    "purge": ["SELECT count(*) FROM brain_page WHERE deleted_at IS NOT NULL"],
    "llm": [],
}


def _floor(phase: str) -> float:
    from django.db import connection

    start = time.perf_counter()
    with connection.cursor() as cursor:
        for sql in FLOORS.get(phase, []):
            cursor.execute(sql)
            cursor.fetchall()
    return time.perf_counter() - start


def _import(source_id: str, path: Path, owner: str) -> tuple[float, dict[str, int]]:
    from connectors.mailbox.sync import mailbox_import

    start = time.perf_counter()
    report = mailbox_import(source_id=source_id, path=path, owners=[owner])
    return time.perf_counter() - start, dict(report.counts)


def _run_dream(phases: list[str] | None, *, profile: bool) -> Any:
    """Run dream the way the nightly schedule does: a ``dream`` job, run here."""
    from jobs.runner import execute_job
    from jobs.services import job_enqueue

    job, _ = job_enqueue(
        kind="dream",
        params={"phases": phases} if phases else {},
        created_by="benchmark",
        dispatch=False,
    )
    if not profile:
        return execute_job(job_id=job.pk, worker="benchmark")
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    done = profiler.runcall(execute_job, job_id=job.pk, worker="benchmark")
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, default=DEMO)
    parser.add_argument("--owner", default=DEMO_OWNER)
    parser.add_argument("--keep", action="store_true", help="keep the source")
    parser.add_argument("--phases", default="", help="comma-separated subset")
    parser.add_argument("--profile", action="store_true", help="cProfile the run")
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from brain.models import Chunk, Source

    call_command("migrate", verbosity=0, interactive=False)
    source_id = f"bench-dream-{time.strftime('%H%M%S')}"
    try:
        import_s, counts = _import(source_id, args.path, args.owner)
        print(
            f"imported {args.path.name}: {counts.get('messages', 0)} messages, "
            f"{counts.get('threads', 0)} threads, {counts.get('people', 0)} people "
            f"in {import_s:.1f} s (not part of dream)"
        )
        pending = Chunk.objects.filter(embedding__isnull=True).count()
        print(
            f"database: {Chunk.objects.count()} chunks ({pending} without an "
            f"embedding); embedding provider {settings.BRAIN_EMBEDDING_PROVIDER!r}"
        )
        phases = [p for p in args.phases.split(",") if p] or None
        job = _run_dream(phases, profile=args.profile)
        report = job.result
        print(
            f"\n{'phase':<12} {'status':<8} {'seconds':>8} {'floor s':>8} "
            f"{'ratio':>7}  summary"
        )
        floors = {entry["phase"]: _floor(entry["phase"]) for entry in report["phases"]}
        for entry in report["phases"]:
            name = entry["phase"]
            seconds = entry["duration_ms"] / 1000
            floor = floors[name]
            ratio = f"{seconds / floor:7.1f}" if floor > 0.0005 else "      -"
            print(
                f"{name:<12} {entry['status']:<8} {seconds:8.2f} {floor:8.3f} "
                f"{ratio}  {entry.get('summary', '')[:100]}"
            )
        total = report["duration_ms"] / 1000
        floor_total = sum(floors.values())
        verdict = "meets" if total < TARGET_S else "misses"
        print(
            f"\ndream total: {total:.2f} s (floor {floor_total:.3f} s, ratio "
            f"{total / max(floor_total, 0.001):.0f}); report {report['status']!r}, "
            f"job {job.status!r}{': ' + job.error if job.error else ''}; "
            f"target < {TARGET_S:.0f} s on the demo mailbox (SPEC §11): {verdict}"
        )
        _embedding_handoff(report)
    finally:
        if not args.keep:
            Source.objects.filter(id=source_id).delete()


def _embedding_handoff(report: dict[str, Any]) -> None:
    """Say what the embeddings phase handed to ``embed_pending`` and how long that
    job takes beside dream at the model's own batch rate (64 pending texts, timed)."""
    from brain.embeddings import embed_texts
    from brain.models import Chunk
    from jobs.models import Job
    from jobs.services import job_cancel

    entry = next((p for p in report["phases"] if p["phase"] == "embeddings"), None)
    pending = (entry or {}).get("counts", {}).get("chunks_pending", 0)
    if not pending:
        return
    texts = list(
        Chunk.objects.filter(embedding__isnull=True).values_list("text", flat=True)[:64]
    )
    embed_texts(texts[:1])  # load the model: not part of the rate
    start = time.perf_counter()
    embed_texts(texts)
    rate = len(texts) / (time.perf_counter() - start)
    print(
        f"embeddings: {pending} chunks handed to the embed_pending job, which runs "
        f"beside dream at the model's batch rate ({rate:.1f} chunks/s here: about "
        f"{pending / rate:.0f} s)"
    )
    for job in Job.objects.filter(kind="embed_pending", created_by__startswith="job:"):
        if job.status == Job.Status.QUEUED:
            job_cancel(job_id=job.pk, actor="benchmark")


if __name__ == "__main__":
    main()
