"""Supersession and dedup quality of fact writes (SPEC §2.4, §11) on the labelled
pairs in tests/data/facts_pairs.jsonl (invented names; see tests/data/SOURCE.md).

Run: .venv/bin/python benchmarks/facts_quality.py [--errors] [--split dev|heldout]
     .venv/bin/python benchmarks/facts_quality.py --set dev [--errors] [--floor 0.95]

``--set dev`` scores the issue-45 dev pairs (tests/data/facts_dev/pairs.jsonl,
nine kinds, a train and a held-out half): accuracy per kind and overall for each
half, and exits 1 when the overall accuracy is below ``--floor`` (default 0.90).

Each pair goes through the real write service (``fact_remember``) against the
worktree's PostgreSQL, offline (no LLM; local embeddings): the old fact is
remembered, then the new one, and the status of the second write (``inserted``,
``duplicate`` or ``superseded``) is compared with the label. Every pair runs in its
own transaction that is rolled back, so the database is left as it was.

Prints, for the development part (used while tuning) and the held-out part (never
looked at while tuning) and both together: supersession precision/recall, dedup
precision/recall, per-category accuracy, and pairs/s beside the embedding floor
(the model's own time for the same texts).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")
# Offline: the LLM is never asked, whatever the environment configures.
os.environ["ANTHROPIC_API_KEY"] = ""

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import transaction  # noqa: E402

from brain.access import local_caller  # noqa: E402
from brain.embeddings import embed_texts  # noqa: E402
from brain.services.facts import fact_remember  # noqa: E402

DATA = ROOT / "tests" / "data" / "facts_pairs.jsonl"
DEV = ROOT / "tests" / "data" / "facts_dev" / "pairs.jsonl"
EXPECTED_STATUS = {
    "supersede": "superseded",
    "duplicate": "duplicate",
    "both_live": "inserted",
}


def load(path: Path = DATA) -> list[dict]:
    """The labelled pairs: dicts with id, category, expect, split, old, new."""
    return [
        json.loads(line)
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def run_pair(pair: dict) -> str:
    """Remember ``old`` then ``new`` in a rolled-back transaction; the status of the
    second write."""
    caller = local_caller(actor="benchmark")
    status = ""
    with transaction.atomic():
        for side in ("old", "new"):
            fact = pair[side]
            written = fact_remember(
                caller=caller,
                text=fact["text"],
                provenance="benchmarks/facts_quality.py",
                entity=fact.get("entity"),
                kind=fact["kind"],
            )
            status = written.status
        transaction.set_rollback(True)  # only the status is kept, not the writes
    return status


def run_dev_pair(pair: dict) -> str:
    """Remember ``first`` then ``second`` of a dev pair (SPEC §2.4) in a rolled-back
    transaction; the status of the second write."""
    caller = local_caller(actor="benchmark")
    with_entity = pair.get("with_entity", True)
    entities = (pair["subject"], pair.get("second_subject", pair["subject"]))
    status = ""
    with transaction.atomic():
        for text, entity in zip((pair["first"], pair["second"]), entities, strict=True):
            status = fact_remember(
                caller=caller,
                text=text,
                provenance="benchmarks/facts_quality.py",
                entity=entity if with_entity else None,
                kind=pair["fact_kind"],
            ).status
        transaction.set_rollback(True)
    return status


def dev_accuracy(rows: list[tuple[dict, str]]) -> tuple[float, dict[str, float]]:
    """(overall accuracy, accuracy per kind) over (pair, status) rows."""
    per: dict[str, list[bool]] = {}
    for pair, got in rows:
        per.setdefault(pair["kind"], []).append(
            EXPECTED_STATUS[pair["expected"]] == got
        )
    right = [ok for oks in per.values() for ok in oks]
    overall = sum(right) / len(right) if right else 1.0
    return overall, {k: sum(v) / len(v) for k, v in sorted(per.items())}


def dev_main(args: argparse.Namespace) -> int:
    """Score the dev pairs per half and per kind; 1 when below ``args.floor``."""
    pairs = load(DEV)
    print(f"embedding provider: {settings.BRAIN_EMBEDDING_PROVIDER}; LLM: off")
    embed_texts([pairs[0]["first"]])  # load the model outside the timings
    start = time.perf_counter()
    rows = [(p, run_dev_pair(p)) for p in pairs]
    elapsed = time.perf_counter() - start
    for split in ("train", "heldout", None):
        part = [r for r in rows if split is None or r[0]["split"] == split]
        overall, per = dev_accuracy(part)
        right = sum(1 for p, got in part if EXPECTED_STATUS[p["expected"]] == got)
        print(f"== {split or 'all'}: {right}/{len(part)} = {overall:.3f}")
        for kind, acc in per.items():
            print(f"  {kind:<22} {acc:.3f}")
    if args.errors:
        for p, got in rows:
            if EXPECTED_STATUS[p["expected"]] != got:
                print(
                    f"  {p['id']} [{p['split']}] want {p['expected']} got {got}: "
                    f"{p['first']!r} -> {p['second']!r}"
                )
    overall, _ = dev_accuracy(rows)
    print(f"throughput={len(rows) / elapsed:,.1f} pairs/s; floor={args.floor:.2f}")
    return 0 if overall >= args.floor else 1


def figures(rows: list[tuple[dict, str]]) -> dict[str, float]:
    """Precision and recall of ``superseded`` and ``duplicate`` over (pair, got)."""
    out: dict[str, float] = {}
    for label in ("superseded", "duplicate"):
        tp = sum(1 for p, got in rows if p["expect"] == label and got == label)
        fp = sum(1 for p, got in rows if p["expect"] != label and got == label)
        fn = sum(1 for p, got in rows if p["expect"] == label and got != label)
        out[f"{label}_p"] = tp / (tp + fp) if tp + fp else 1.0
        out[f"{label}_r"] = tp / (tp + fn) if tp + fn else 1.0
        out[f"{label}_n"] = tp + fn
        out[f"{label}_fp"] = fp
    return out


def report(title: str, rows: list[tuple[dict, str]], *, errors: bool) -> None:
    """Print the figures of one part of the set."""
    f = figures(rows)
    print(f"== {title}: {len(rows)} pairs")
    print(
        f"supersession precision={f['superseded_p']:.3f} "
        f"recall={f['superseded_r']:.3f} "
        f"(positives={f['superseded_n']}, false={f['superseded_fp']})"
    )
    print(
        f"dedup        precision={f['duplicate_p']:.3f} "
        f"recall={f['duplicate_r']:.3f} "
        f"(positives={f['duplicate_n']}, false={f['duplicate_fp']})"
    )
    per = Counter(p["category"] for p, _ in rows)
    right = Counter(p["category"] for p, got in rows if got == p["expect"])
    print(
        "per category: "
        + ", ".join(f"{c} {right[c]}/{n}" for c, n in sorted(per.items()))
    )
    if errors:
        for p, got in rows:
            if got != p["expect"]:
                print(
                    f"  {p['id']} [{p['category']}] want {p['expect']} got {got}: "
                    f"{p['old']['text']!r} -> {p['new']['text']!r}"
                )


def main() -> None:
    """Run every pair through the service and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--errors", action="store_true", help="list wrong pairs")
    parser.add_argument("--split", choices=("dev", "heldout"), default=None)
    parser.add_argument("--set", choices=("pairs", "dev"), default="pairs")
    # The dev set's floor: the accuracy measured when the meaning stage landed
    # (148/162 = 0.914; before it, 84/162 = 0.519).
    parser.add_argument("--floor", type=float, default=0.90)
    args = parser.parse_args()
    if args.set == "dev":
        raise SystemExit(dev_main(args))
    pairs = load()
    if args.split:
        pairs = [p for p in pairs if p["split"] == args.split]
    print(f"embedding provider: {settings.BRAIN_EMBEDDING_PROVIDER}; LLM: off")
    texts = [p[s]["text"] for p in pairs for s in ("old", "new")]
    embed_texts(texts[:2])  # load the model outside the timings
    start = time.perf_counter()
    embed_texts(texts)
    floor = time.perf_counter() - start
    start = time.perf_counter()
    rows = [(p, run_pair(p)) for p in pairs]
    elapsed = time.perf_counter() - start
    for split, title in (("dev", "dev (used for tuning)"), ("heldout", "held out")):
        part = [r for r in rows if r[0]["split"] == split]
        if part:
            report(title, part, errors=args.errors)
    report("all", rows, errors=False)
    print(
        f"throughput={len(rows) / elapsed:,.1f} pairs/s "
        f"(floor: embedding the same {len(texts)} texts alone "
        f"{len(rows) / floor:,.1f} pairs/s; ratio {floor / elapsed:.2f})"
    )


if __name__ == "__main__":
    main()
