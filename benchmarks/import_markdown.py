"""Markdown import rate and search straight after it (issues 24, 48; SPEC §6.3,
§11), each beside its floor measured in the same run.

Generates a GBrain-style corpus (``tests/brain/gbrain_corpus.py``: people, companies,
projects, meetings linked by ``[[wiki-links]]``, fixed seed) into a temporary
folder, then in the local database (``var/``, or ``DATABASE_URL``; migrated first):

1. floor: read every file and ``COPY`` (path, text) into a temporary table;
2. ``markdown_import`` into a throwaway source with ``BRAIN_AUTO_LINK`` off;
3. the same with link resolution on (the default), timing each tenth of the files
   (files/s per tenth: a flat curve is an import whose cost does not grow with the
   database, issue 48);
4. keyword-only ``page_search`` over that source straight after the import (no
   pause, no ``VACUUM``), then again once settled (``VACUUM ANALYZE`` of the chunk
   and page tables), beside the keyword floor (the bare GIN ``@@`` + ``ts_rank``
   SQL of the keyword arm, capped like it) measured settled in the same run,

each import without embeddings; the throwaway sources are deleted at the end.
``--no-settle`` turns off the import's own end-of-import settle
(``brain.maintenance.tables_settle``) to show what it buys.

Usage:
    .venv/bin/python benchmarks/import_markdown.py [--pages 1000] [--seed 24]
        [--queries 100] [--no-settle]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")

_WORD = re.compile(r"[A-Za-z]{4,}")


def _floor(folder: Path) -> float:
    """Seconds to read every file and COPY it into a temporary table."""
    from django.db import connection, transaction

    start = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE bench_md (path text, body text) ON COMMIT DROP"
        )
        with cursor.copy("COPY bench_md (path, body) FROM STDIN") as copy:
            for path in sorted(folder.rglob("*.md")):
                copy.write_row((str(path.relative_to(folder)), path.read_text()))
    return time.perf_counter() - start


def _import(
    folder: Path, source_id: str, *, auto_link: bool, total: int
) -> tuple[float, int, list[float]]:
    """Import ``folder`` into a fresh ``source_id``; returns (seconds, relations
    stored, files/s of each tenth of the files in order)."""
    from django.conf import settings

    from brain.models import Relation, Source
    from connectors.markdown.sync import markdown_import

    Source.objects.filter(id=source_id).delete()
    settings.BRAIN_AUTO_LINK = auto_link
    marks: list[float] = []
    cuts = {max(1, round(total * k / 10)) for k in range(1, 11)}
    done = 0

    def tick(_relpath: str) -> None:
        nonlocal done
        done += 1
        if done in cuts:
            marks.append(time.perf_counter())

    start = time.perf_counter()
    report = markdown_import(
        source_id=source_id, directory=folder, embed=False, progress=tick
    )
    elapsed = time.perf_counter() - start
    if report.errors:
        raise SystemExit(f"import errors: {report.errors[:3]}")
    links = Relation.objects.filter(source_id=source_id).count()
    # files/s per tenth; the last tenth includes the import's end (links of the
    # facts file, deletions, the settle) because that is part of its cost.
    marks[-1] = start + elapsed
    bounds = sorted(cuts)
    rates, previous, last = [], start, 0
    for cut, mark in zip(bounds, marks, strict=True):
        rates.append((cut - last) / max(mark - previous, 1e-9))
        previous, last = mark, cut
    return elapsed, links, rates


def _queries(pages: list[Any], count: int, seed: int) -> list[str]:
    """Real words of the pages' sentences: a third single words, a third pairs, a
    third triples."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < count:
        words = _WORD.findall(rng.choice(pages).sentence)
        if words:
            size = 1 + len(out) % 3
            out.append(" ".join(rng.sample(words, min(size, len(words)))).lower())
    return out


def _p50_p95(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49], cuts[94]


def _time_search(source_id: str, queries: list[str]) -> list[float]:
    """Keyword-only ``page_search`` latency per query, in ms (no warm-up: the
    first searches after an import are the ones a user meets)."""
    from django.conf import settings

    from brain.access import ReadScope
    from brain.search import page_search

    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    scope = ReadScope(source_ids=(source_id,), include_private=False)
    out = []
    for query in queries:
        started = time.perf_counter()
        page_search(scope=scope, query=query, limit=10)
        out.append((time.perf_counter() - started) * 1000)
    return out


def _time_floor(source_id: str, queries: list[str]) -> list[float]:
    """The keyword arm's bare SQL per query, in ms: GIN ``@@`` bounded to
    ``KEYWORD_MATCH_CAP`` rows, ranked by ``ts_rank``, top ``ARM_CANDIDATES``."""
    from django.conf import settings
    from django.db import connection

    from brain.search import ARM_CANDIDATES, KEYWORD_MATCH_CAP

    sql = (
        "SELECT m.id, ts_rank(m.tsv, q) AS r FROM (SELECT c.id, c.tsv FROM brain_chunk"
        " c, websearch_to_tsquery(%(lang)s::regconfig, %(q)s) q WHERE c.source_id ="
        " ANY(%(src)s) AND c.tsv @@ q LIMIT %(cap)s) m,"
        " websearch_to_tsquery(%(lang)s::regconfig, %(q)s) q"
        " ORDER BY r DESC LIMIT %(n)s"
    )
    out = []
    with connection.cursor() as cursor:
        for query in queries:
            started = time.perf_counter()
            cursor.execute(
                sql,
                {
                    "lang": settings.BRAIN_FTS_LANGUAGE,
                    "q": query,
                    "src": [source_id],
                    "cap": KEYWORD_MATCH_CAP,
                    "n": ARM_CANDIDATES,
                },
            )
            cursor.fetchall()
            out.append((time.perf_counter() - started) * 1000)
    return out


def _vacuum() -> None:
    """Settle by hand: ``VACUUM ANALYZE`` the tables a search reads."""
    from django.db import connection

    with connection.cursor() as cursor:
        for table in ("brain_chunk", "brain_page", "brain_alias", "brain_relation"):
            cursor.execute(f"VACUUM ANALYZE {table}")


def _search_figures(source_id: str, queries: list[str]) -> None:
    """Print keyword search straight after the import, then settled, each beside
    the settled floor."""
    after = _time_search(source_id, queries)
    _vacuum()
    _time_floor(source_id, queries[:20])  # warm the caches for the floor
    floor = _time_floor(source_id, queries)
    settled = _time_search(source_id, queries)
    f50, f95 = _p50_p95(floor)
    print(
        f"keyword floor (bare GIN SQL, settled)  p50 {f50:6.1f} ms  p95 {f95:6.1f} ms"
    )
    for label, samples in (
        ("keyword search straight after import", after),
        ("keyword search settled (VACUUM)     ", settled),
    ):
        p50, p95 = _p50_p95(samples)
        print(
            f"{label}  p50 {p50:6.1f} ms  p95 {p95:6.1f} ms  "
            f"({p95 / max(f95, 0.01):.1f}x the floor's p95)"
        )


def main() -> None:
    """Parse arguments, run the measurements, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument(
        "--no-settle",
        action="store_true",
        help="Skip the import's end-of-import settle (to see what it buys).",
    )
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    from brain.models import Source

    call_command("migrate", verbosity=0)
    if args.no_settle:
        import brain.maintenance

        brain.maintenance.SETTLE_ENABLED = False
    from tests.brain.gbrain_corpus import generate, write

    pages = generate(args.pages, args.seed)
    written = sum(len(p.links) for p in pages)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write(pages, folder)
        n = len(pages)
        floor = _floor(folder)
        plain, plain_links, _ = _import(
            folder, "bench-md-nolink", auto_link=False, total=n
        )
        linked, links, rates = _import(folder, "bench-md-link", auto_link=True, total=n)
        print(f"{n} pages, {written} links written")
        print(f"floor (read + COPY)        {n / floor:9.0f} pages/s  ({floor:.2f} s)")
        for label, elapsed, stored in (
            ("import, no link resolution", plain, plain_links),
            ("import, link resolution  ", linked, links),
        ):
            print(
                f"{label} {n / elapsed:9.0f} pages/s  ({elapsed:.2f} s, "
                f"{elapsed / floor:.0f}x the floor, {stored} relations stored)"
            )
        print(
            "files/s per tenth (link resolution): "
            + " ".join(f"{r:.0f}" for r in rates)
            + f"  (last/first {rates[-1] / max(rates[0], 1e-9):.0%})"
        )
        _search_figures("bench-md-link", _queries(pages, args.queries, args.seed))
        Source.objects.filter(id__in=["bench-md-nolink", "bench-md-link"]).delete()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
