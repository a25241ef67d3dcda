"""Benchmark: entity(), context_pack and delta at the SPEC §11 scale.

Seeds a synthetic brain into its own source (``bench-entity``) with COPY:
200,000 pages, 1,000,000 relations, 300,000 aliases and 400,000 facts at
``--scale 1`` (``--scale 0.1`` for a tenth), then times the verbs through the same
service functions the API calls and prints p50/p95/p99 in milliseconds. Beside
entity() it prints its floor, measured right after each call on the same card: the
single-row lookups the card needs (the resolve probes, then the first row of each
section: aliases, timeline, facts, edges out and in), and the ratio of the two;
then entity() split into names that resolve (a card) and misses (near-miss
suggestions from the title-word lexicon, each statement bounded by
``SUGGESTION_TIMEOUT_MS``), with how many misses got suggestions.

Targets (SPEC §11): entity() p99 ≤ 25 ms; context_pack and delta p95 ≤ 100 ms.

Usage::

    .venv/bin/python benchmarks/entity.py --scale 0.1
    .venv/bin/python benchmarks/entity.py --scale 1 --reseed

The data lives in the development database (``var/`` or ``DATABASE_URL``); an
existing seed of the same scale is reused unless ``--reseed``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")
os.environ.setdefault("BRAIN_EMBEDDING_PROVIDER", "none")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402
from tqdm import tqdm  # noqa: E402

from brain.access import local_caller  # noqa: E402
from brain.models import Page, PageType, RelationType, Source  # noqa: E402
from brain.services.pages import title_words_add  # noqa: E402
from brain.services.verbs import (  # noqa: E402
    verb_context_pack,
    verb_delta,
    verb_entity,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

SOURCE_ID = "bench-entity"
FULL = {"pages": 200_000, "relations": 1_000_000, "aliases": 300_000, "facts": 400_000}
FIRST = (
    "Ada Alan Grace Linus Barbara Ken Dennis Margaret Edsger Donald Frances "
    "John Radia Tim Vint Bjarne Guido Anders James Yukihiro Sophie Hedy"
).split()
LAST = (
    "Lovelace Turing Hopper Torvalds Liskov Thompson Ritchie Hamilton Dijkstra "
    "Knuth Allen Backus Perlman Lee Cerf Stroustrup Rossum Hejlsberg Gosling "
    "Matsumoto Wilson Lamarr"
).split()
WORDS = (
    "acme beta delta orbit quartz ember lumen cobalt vertex nimbus atlas "
    "harbor summit pioneer cedar falcon"
).split()


def _copy(table: str, columns: list[str], rows: Iterable[tuple], total: int) -> None:
    """COPY ``rows`` into ``table`` (text format; None is NULL)."""
    sql = f"COPY {table} ({', '.join(columns)}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for row in tqdm(rows, total=total, desc=table, unit="row", leave=False):
            copy.write_row(row)


def seed(scale: float, rng: random.Random) -> dict[str, int]:
    """Create the bench source and bulk-load pages, aliases, relations, facts and
    timeline entries. Returns the row counts."""
    counts = {k: max(10, int(v * scale)) for k, v in FULL.items()}
    Source.objects.filter(id=SOURCE_ID).delete()
    Source.objects.create(
        id=SOURCE_ID, name="Entity benchmark", federated=False, config={"scale": scale}
    )
    types = {t.name: t.pk for t in PageType.objects.all()}
    rel_types = {t.name: t.pk for t in RelationType.objects.all()}
    now = timezone.now()
    n = counts["pages"]
    kinds = ["person"] * 6 + ["company"] * 2 + ["note"] * 2
    prefix = {"person": "people", "company": "companies", "note": "notes"}

    def page_rows():  # type: ignore[no-untyped-def]
        for i in range(n):
            kind = kinds[i % len(kinds)]
            if kind == "person":
                title = f"{rng.choice(FIRST)} {rng.choice(LAST)} {i}"
            elif kind == "company":
                title = f"{rng.choice(WORDS).title()} {rng.choice(WORDS).title()} {i}"
            else:
                title = f"Note {i} on {rng.choice(WORDS)}"
            slug = f"{prefix[kind]}/{title.lower().replace(' ', '-')}"
            when = now - timedelta(minutes=rng.randint(0, 60 * 24 * 365))
            yield (
                when,
                when,
                SOURCE_ID,
                slug,
                types[kind],
                title,
                "{}",
                f"{title} works on {rng.choice(WORDS)} projects.",
                f"{title}, synthetic",
                "{}",
                "private" if i % 50 == 0 else "world",
                "",
                "",
            )

    with transaction.atomic():
        _copy(
            "brain_page",
            [
                "created_at",
                "updated_at",
                "source_id",
                "slug",
                "type_id",
                "title",
                "frontmatter",
                "body",
                "summary",
                "tags",
                "visibility",
                "content_hash",
                "indexed_hash",
            ],
            page_rows(),
            n,
        )
        ids = list(
            Page.objects.filter(source_id=SOURCE_ID)
            .order_by("pk")
            .values_list("pk", "title")
        )
        page_ids = [pk for pk, _ in ids]
        # The COPY bypassed the page write path, which keeps the title lexicon.
        title_words_add(source_id=SOURCE_ID, titles=[title for _, title in ids])

        def alias_rows():  # type: ignore[no-untyped-def]
            made = 0
            for pk, title in ids:
                if made >= counts["aliases"]:
                    return
                words = title.lower().split()
                yield (
                    SOURCE_ID,
                    pk,
                    f"{words[0]}.{words[1]}{words[-1]}@example.org",
                    "email",
                    now,
                )
                made += 1
                if made < counts["aliases"]:
                    yield (SOURCE_ID, pk, f"{words[0]} {words[-1]}", "name", now)
                    made += 1

        _copy(
            "brain_alias",
            ["source_id", "page_id", "alias", "kind", "created_at"],
            alias_rows(),
            counts["aliases"],
        )

        rel_names = [
            "works_at",
            "related_to",
            "mentions",
            "advises",
            "member_of",
            "mentions",
            "related_to",
        ]
        seen: set[tuple[int, int, int]] = set()

        def relation_rows():  # type: ignore[no-untyped-def]
            # Preferential attachment: a few hub pages collect many backlinks.
            hubs = page_ids[: max(10, len(page_ids) // 100)]
            while len(seen) < counts["relations"]:
                a = rng.choice(page_ids)
                b = rng.choice(hubs) if rng.random() < 0.3 else rng.choice(page_ids)
                t = rel_types[rng.choice(rel_names)]
                if a == b or (a, b, t) in seen:
                    continue
                seen.add((a, b, t))
                yield (now, now, SOURCE_ID, a, b, t, "", "{}", "bench")

        _copy(
            "brain_relation",
            [
                "created_at",
                "updated_at",
                "source_id",
                "from_page_id",
                "to_page_id",
                "relation_type_id",
                "context",
                "provenance",
                "created_by",
            ],
            relation_rows(),
            counts["relations"],
        )

        fact_kinds = ["fact", "event", "preference", "commitment", "belief"]

        def fact_rows():  # type: ignore[no-untyped-def]
            for i in range(counts["facts"]):
                pk = rng.choice(page_ids)
                when = now - timedelta(minutes=rng.randint(0, 60 * 24 * 365))
                expired = when + timedelta(days=1) if i % 10 == 0 else None
                yield (
                    when,
                    when,
                    SOURCE_ID,
                    pk,
                    f"Synthetic fact {i} about {rng.choice(WORDS)}",
                    rng.choice(fact_kinds),
                    "private" if i % 7 == 0 else "world",
                    "benchmark seed",
                    "{}",
                    1.0,
                    when,
                    None,
                    expired,
                    "",
                    "bench",
                    "",
                    "",
                    "",
                    "",
                )

        _copy(
            "brain_fact",
            [
                "created_at",
                "updated_at",
                "source_id",
                "entity_id",
                "text",
                "kind",
                "visibility",
                "provenance",
                "evidence",
                "confidence",
                "valid_from",
                "valid_until",
                "expired_at",
                "expired_reason",
                "created_by",
                "embedding_model",
                # Not derived yet (brain.services.fact_slots reads the text later).
                "subject",
                "slot",
                "value",
            ],
            fact_rows(),
            counts["facts"],
        )

        def timeline_rows():  # type: ignore[no-untyped-def]
            for i, pk in enumerate(page_ids[::4]):
                day = (now - timedelta(days=rng.randint(0, 200))).date()
                yield (pk, day, f"Timeline {i}", f"h{i}", "bench", now)

        _copy(
            "brain_timelineentry",
            ["page_id", "date", "summary", "summary_hash", "source_ref", "created_at"],
            timeline_rows(),
            len(page_ids[::4]),
        )
    with connection.cursor() as cursor:
        for table in (
            "brain_page",
            "brain_alias",
            "brain_relation",
            "brain_fact",
            "brain_timelineentry",
        ):
            cursor.execute(f"ANALYZE {table}")
    return counts


def _timed(fn: Callable[[], object], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


# The card's floor: one indexed single-row probe per thing the card reads (the
# resolve arms, then the first row of each card section), as separate statements.
FLOOR_SQL = (
    "SELECT page_id FROM brain_alias WHERE source_id = %(source)s AND alias = %(alias)s"
    " LIMIT 1",
    "SELECT id FROM brain_page WHERE source_id = %(source)s AND slug = %(slug)s",
    "SELECT id FROM brain_page WHERE lower(title) = %(lower)s LIMIT 1",
    "SELECT alias FROM brain_alias WHERE page_id = %(page)s LIMIT 1",
    "SELECT summary FROM brain_timelineentry WHERE page_id = %(page)s LIMIT 1",
    "SELECT text FROM brain_fact WHERE entity_id = %(page)s LIMIT 1",
    "SELECT to_page_id FROM brain_relation WHERE from_page_id = %(page)s LIMIT 1",
    "SELECT from_page_id FROM brain_relation WHERE to_page_id = %(page)s LIMIT 1",
)


def _floor_ms(name: str, body: dict) -> float:
    """Milliseconds of the single-row lookups the card of ``name`` needs."""
    from brain.text import normalize_alias

    slug = (body.get("card") or {}).get("entity", {}).get("slug") or name
    params = {
        "source": SOURCE_ID,
        "alias": normalize_alias(name),
        "slug": slug,
        "lower": name.lower(),
        "page": 0,
    }
    start = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(FLOOR_SQL[1], params)
        row = cursor.fetchone()
        params["page"] = row[0] if row else 0
        for sql in FLOOR_SQL[:1] + FLOOR_SQL[2:]:
            cursor.execute(sql, params)
            cursor.fetchall()
    return (time.perf_counter() - start) * 1000


def report(name: str, values: list[float], target: str) -> None:
    print(
        f"{name:<15} n={len(values):<5} p50={_pct(values, 50):7.2f} ms  "
        f"p95={_pct(values, 95):7.2f} ms  p99={_pct(values, 99):7.2f} ms  "
        f"mean={statistics.fmean(values):7.2f} ms   target {target}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=1000, help="entity() calls")
    parser.add_argument("--reseed", action="store_true")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    call_command("migrate", verbosity=0)
    existing = Source.objects.filter(id=SOURCE_ID).first()
    if args.reseed or existing is None or existing.config.get("scale") != args.scale:
        started = time.perf_counter()
        counts = seed(args.scale, rng)
        print(f"seeded {counts} in {time.perf_counter() - started:.1f} s")
    else:
        print(f"reusing the seed of scale {args.scale} in source '{SOURCE_ID}'")
    counts = {
        "pages": Page.objects.filter(source_id=SOURCE_ID).count(),
    }
    print(f"pages in source: {counts['pages']}")

    caller = local_caller()
    sample = list(
        Page.objects.filter(source_id=SOURCE_ID, visibility="world")
        .order_by("?")
        .values_list("slug", "title")[:2000]
    )
    names: list[str] = []
    for i in range(args.runs):
        slug, title = sample[i % len(sample)]
        words = title.split()
        choice = i % 10
        if choice < 4:
            names.append(title)  # exact title
        elif choice < 6:
            names.append(slug)  # exact slug
        elif choice < 8 and len(words) == 3:
            names.append(f"{words[0]} {words[-1]}")  # alias
        elif choice < 9:
            names.append(slug.split("/", 1)[1])  # slug suffix
        else:
            names.append(f"{title}x zq")  # miss: near-miss suggestions
    for name in names[:50]:  # warm caches and the connection
        verb_entity(caller=caller, name=name, source=SOURCE_ID)
    # Each call is followed by its floor: the single-row lookups the card needs,
    # timed on the same page right after it (same caches, same machine load).
    ent: list[float] = []
    floor: list[float] = []
    by_outcome: dict[bool, list[float]] = {True: [], False: []}
    suggested = 0
    for name in names:
        start = time.perf_counter()
        body = verb_entity(caller=caller, name=name, source=SOURCE_ID)
        ent.append((time.perf_counter() - start) * 1000)
        by_outcome[body["found"]].append(ent[-1])
        suggested += not body["found"] and bool(body["suggestions"])
        floor.append(_floor_ms(name, body))
    hits = sum(
        verb_entity(caller=caller, name=n, source=SOURCE_ID)["found"]
        for n in names[:200]
    )
    report("entity()", ent, "p99 ≤ 25 ms")
    report("floor", floor, "(single-row lookups of the same card)")
    print(
        f"               ratio p50 {_pct(ent, 50) / _pct(floor, 50):.1f}x, "
        f"p99 {_pct(ent, 99) / _pct(floor, 99):.1f}x; "
        f"found {hits}/200 of the sampled names (10% are misses)"
    )
    report("  found", by_outcome[True] or [0.0], "(a card)")
    report("  not found", by_outcome[False] or [0.0], "(near-miss suggestions)")
    print(
        f"               {suggested}/{len(by_outcome[False])} misses got near-miss "
        "suggestions (a statement gives up after SUGGESTION_TIMEOUT_MS)"
    )

    packs = [",".join(t for _, t in rng.sample(sample, 3)) for _ in range(200)]
    itp = iter(packs)
    pack = _timed(
        lambda: verb_context_pack(caller=caller, entities=next(itp), source=SOURCE_ID),
        len(packs),
    )
    report("context_pack", pack, "p95 ≤ 100 ms")

    now = timezone.now()
    sinces = [
        (now - timedelta(days=rng.randint(0, 365))).isoformat() for _ in range(200)
    ]
    its = iter(sinces)
    dl = _timed(
        lambda: verb_delta(caller=caller, since=next(its), source=SOURCE_ID),
        len(sinces),
    )
    report("delta(since)", dl, "p95 ≤ 100 ms")
    sessions = iter(range(200))
    ds = _timed(
        lambda: verb_delta(
            caller=caller, session_id=f"bench-{next(sessions) % 20}", source=SOURCE_ID
        ),
        200,
    )
    report("delta(session)", ds, "p95 ≤ 100 ms")


if __name__ == "__main__":
    main()
