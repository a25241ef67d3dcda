"""Benchmark: do people resolve to one page? (issue 25; SPEC §6.2, §4 ``entity``).

Imports a real mailbox (default: the shared Enron allen-p maildir) into its own
source with ``mailbox_import``, runs dream's ``duplicates`` phase, then scores the
result against a hand-labelled gold (``tests/data/people_dev/allen-p.jsonl``: one
person a line, every address and header name form judged to be theirs).

Every gold string (address or name form, as the headers wrote it) is looked up with
``entity_resolve``; the page it lands on is its predicted cluster (a miss is a
cluster of its own). Printed:

- B-cubed precision and recall over the gold strings, people split over more than
  one page (or unresolved) and people wrongly merged with someone else;
- merge-proposal precision (proposals whose two pages belong to one gold person, of
  those whose pages both map to gold people) and recall (links needed to join each
  gold person's pages that the proposals provide).

Each figure is printed beside a floor measured in the same run: B-cubed for "one
page per address, names never resolve", and proposal figures for the old rule
(entity titles with pg_trgm similarity ≥ 0.75), with the ratio.

Usage::

    .venv/bin/python benchmarks/people_quality.py [--maildir PATH] [--gold FILE]
        [--owner ADDRESS ...] [--keep]

The data lives in the development database (``var/`` or ``DATABASE_URL``), in the
source ``bench-people`` (dropped first, and afterwards unless ``--keep``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")
os.environ.setdefault("BRAIN_EMBEDDING_PROVIDER", "none")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from benchmarks.data import ROOT, shared_data  # noqa: E402
from brain.access import ReadScope  # noqa: E402
from brain.models import Alias, MergeProposal, Source  # noqa: E402
from brain.services.dream import Budget, phase_duplicates  # noqa: E402
from brain.services.entities import entity_resolve  # noqa: E402
from connectors.mailbox.sync import mailbox_import  # noqa: E402

SOURCE_ID = "bench-people"
GOLD = ROOT / "tests" / "data" / "people_dev" / "allen-p.jsonl"
OWNERS = ("pallen@enron.com", "phillip.allen@enron.com", "k..allen@enron.com")
TARGETS = {"precision": 0.98, "recall": 0.9, "proposal_precision": 0.95}


def load_gold(path: Path) -> list[dict[str, Any]]:
    """The gold people: ``{person, addresses[], names[], note}`` per line."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def bcubed(
    gold: dict[str, int], predicted: dict[str, Any]
) -> tuple[float, float, int, int]:
    """B-cubed (precision, recall) of ``predicted`` (item -> cluster) against
    ``gold`` (item -> person index), plus the number of people split over several
    clusters and the number of people sharing a cluster with someone else."""
    by_pred: dict[Any, list[str]] = defaultdict(list)
    by_gold: dict[int, list[str]] = defaultdict(list)
    for item, person in gold.items():
        by_pred[predicted[item]].append(item)
        by_gold[person].append(item)
    precision = recall = 0.0
    for item, person in gold.items():
        cluster = by_pred[predicted[item]]
        same = sum(1 for other in cluster if gold[other] == person)
        precision += same / len(cluster)
        recall += same / len(by_gold[person])
    split = sum(
        1 for items in by_gold.values() if len({predicted[i] for i in items}) > 1
    )
    merged = sum(
        1
        for items in by_gold.values()
        if any(
            gold[other] != gold[items[0]]
            for i in items
            for other in by_pred[predicted[i]]
        )
    )
    n = len(gold)
    return precision / n, recall / n, split, merged


def proposal_scores(
    pairs: list[tuple[int, int]],
    page_people: dict[int, set[int]],
    people_pages: dict[int, set[int]],
) -> tuple[float, float, int, int, int]:
    """(precision, recall, right, wrong, unjudged) of merge ``pairs`` (page ids)."""
    right = wrong = unjudged = 0
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for a, b in pairs:
        pa, pb = page_people.get(a, set()), page_people.get(b, set())
        if not pa or not pb:
            unjudged += 1
            continue
        if len(pa) == 1 and pa == pb:
            right += 1
            parent[find(a)] = find(b)
        elif not (pa & pb):
            wrong += 1
        else:
            unjudged += 1
    needed = achieved = 0
    for pages in people_pages.values():
        if len(pages) < 2:
            continue
        needed += len(pages) - 1
        achieved += len(pages) - len({find(p) for p in pages})
    precision = right / (right + wrong) if right + wrong else 1.0
    recall = achieved / needed if needed else 1.0
    return precision, recall, right, wrong, unjudged


def similar_title_pairs(source_id: str) -> list[tuple[int, int]]:
    """The old proposal rule (the floor): entity pages of one type whose titles
    have pg_trgm similarity ≥ 0.75."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('pg_trgm.similarity_threshold', '0.75', false)"
        )
        cursor.execute(
            """
            SELECT a.id, b.id FROM brain_page a
            JOIN brain_page b ON b.source_id = a.source_id AND b.type_id = a.type_id
             AND b.id > a.id AND a.title %% b.title
            JOIN brain_pagetype t ON t.id = a.type_id
            WHERE a.source_id = %s AND t.name = 'person'
              AND a.deleted_at IS NULL AND b.deleted_at IS NULL
            """,
            [source_id],
        )
        return [(a, b) for a, b in cursor.fetchall()]


def line(label: str, value: float, floor: float, target: float | None = None) -> str:
    """One figure with its floor, the ratio and the target when there is one."""
    ratio = f"{value / floor:.2f}x" if floor else "n/a"
    goal = (
        f"  target {target:.2f} {'OK' if value >= target else 'MISS'}" if target else ""
    )
    return f"  {label:<28} {value:6.3f}   floor {floor:6.3f}   ratio {ratio}{goal}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--maildir", default=str(shared_data() / "enron" / "allen-p"))
    parser.add_argument("--gold", default=str(GOLD))
    parser.add_argument("--owner", action="append", default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--reuse", action="store_true", help="score a kept import again (no import)"
    )
    args = parser.parse_args()
    gold_people = load_gold(Path(args.gold))
    started = time.monotonic()
    counts: dict[str, int] = {}
    if not (args.reuse and Source.objects.filter(id=SOURCE_ID).exists()):
        Source.objects.filter(id=SOURCE_ID).delete()
        report = mailbox_import(
            source_id=SOURCE_ID,
            path=args.maildir,
            owners=list(args.owner or OWNERS),
            actor="bench:people_quality",
        )
        counts = dict(report.counts)
    imported = time.monotonic() - started
    phase_duplicates(Budget(usd=0.0, max_items=100_000), timezone.now())
    scope = ReadScope(source_ids=(SOURCE_ID,), include_private=True)

    gold: dict[str, int] = {}
    for index, person in enumerate(gold_people):
        for item in [*person["addresses"], *person["names"]]:
            gold[item] = index
    predicted: dict[str, Any] = {}
    floor_pred: dict[str, Any] = {}
    for item in gold:
        page = entity_resolve(scope=scope, name=item).page
        predicted[item] = page.pk if page is not None else ("miss", item)
        floor_pred[item] = (
            ("addr", item) if "@" in item and " " not in item else ("miss", item)
        )
    precision, recall, split, merged = bcubed(gold, predicted)
    f_precision, f_recall, f_split, f_merged = bcubed(gold, floor_pred)

    page_people: dict[int, set[int]] = defaultdict(set)
    people_pages: dict[int, set[int]] = defaultdict(set)
    address_person = {a: i for i, p in enumerate(gold_people) for a in p["addresses"]}
    for alias, page_id in Alias.objects.filter(
        source_id=SOURCE_ID,
        kind=Alias.Kind.EMAIL,
        page__deleted_at__isnull=True,
        page__type__name="person",
    ).values_list("alias", "page_id"):
        if alias in address_person:
            page_people[page_id].add(address_person[alias])
            people_pages[address_person[alias]].add(page_id)
    proposals = list(
        MergeProposal.objects.filter(source_id=SOURCE_ID).values_list(
            "keep_page_id", "merge_page_id"
        )
    )
    p_prec, p_rec, right, wrong, unjudged = proposal_scores(
        proposals, page_people, people_pages
    )
    f_prec, f_rec, f_right, f_wrong, _ = proposal_scores(
        similar_title_pairs(SOURCE_ID), page_people, people_pages
    )
    people_with_pages = sum(1 for pages in people_pages.values() if pages)
    print(f"people_quality: {args.maildir}")
    print(
        f"  imported {counts.get('messages', 0)} messages, "
        f"{counts.get('people', 0)} person pages in {imported:.1f} s; "
        f"gold: {len(gold_people)} people, {len(gold)} strings "
        f"({people_with_pages} people with a page)"
    )
    print(line("B-cubed precision", precision, f_precision, TARGETS["precision"]))
    print(line("B-cubed recall", recall, f_recall, TARGETS["recall"]))
    print(f"  people split                 {split:6d}   floor {f_split:6d}")
    print(f"  people wrongly merged        {merged:6d}   floor {f_merged:6d}")
    print(
        line("proposal precision", p_prec, f_prec, TARGETS["proposal_precision"])
        + f"   ({right} right, {wrong} wrong, {unjudged} unjudged; floor {f_right}/{f_wrong})"
    )
    print(line("proposal recall", p_rec, f_rec))
    missed = [
        (gold_people[gold[item]]["person"], item)
        for item in gold
        if isinstance(predicted[item], tuple)
    ]
    if missed:
        print(f"  unresolved strings: {len(missed)}, e.g. {missed[:5]}")
    if not args.keep:
        Source.objects.filter(id=SOURCE_ID).delete()


if __name__ == "__main__":
    main()
