"""Markdown import rate with and without wiki-link resolution (issue 24; SPEC §6.3,
§11), beside the bare COPY floor on the same files.

Generates a GBrain-style corpus (``tests/brain/gbrain_corpus.py``: people, companies,
projects, meetings linked by ``[[wiki-links]]``, fixed seed) into a temporary
folder, then in the local database (``var/``, or ``DATABASE_URL``; migrated first):

1. floor: read every file and ``COPY`` (path, text) into a temporary table;
2. ``markdown_import`` into a throwaway source with ``BRAIN_AUTO_LINK`` off;
3. the same with link resolution on (the default),

each without embeddings, printing pages/s, the ratio to the floor and the relations
stored; the throwaway sources are deleted at the end.

Usage:
    .venv/bin/python benchmarks/import_markdown.py [--pages 1000] [--seed 24]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")


def _floor(folder: Path) -> float:
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


def _import(folder: Path, source_id: str, *, auto_link: bool) -> tuple[float, int]:
    from django.conf import settings

    from brain.models import Relation, Source
    from connectors.markdown.sync import markdown_import

    Source.objects.filter(id=source_id).delete()
    settings.BRAIN_AUTO_LINK = auto_link
    start = time.perf_counter()
    report = markdown_import(source_id=source_id, directory=folder, embed=False)
    elapsed = time.perf_counter() - start
    if report.errors:
        raise SystemExit(f"import errors: {report.errors[:3]}")
    links = Relation.objects.filter(source_id=source_id).count()
    return elapsed, links


def main() -> None:
    """Parse arguments, run the three measurements, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=24)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    from brain.models import Source

    call_command("migrate", verbosity=0)
    from tests.brain.gbrain_corpus import generate, write

    pages = generate(args.pages, args.seed)
    written = sum(len(p.links) for p in pages)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write(pages, folder)
        n = len(pages)
        floor = _floor(folder)
        plain, plain_links = _import(folder, "bench-md-nolink", auto_link=False)
        linked, links = _import(folder, "bench-md-link", auto_link=True)
        Source.objects.filter(id__in=["bench-md-nolink", "bench-md-link"]).delete()
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


if __name__ == "__main__":
    main()
