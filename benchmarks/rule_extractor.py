"""Precision and recall of the offline rule extractor (SPEC §5.3) on the hand-labelled
intent sentences in tests/data/loops/intent_eval.tsv (see its SOURCE.txt).

Run: .venv/bin/python benchmarks/rule_extractor.py [--errors]
Prints precision, recall, F1, counts, and sentences/s of ``classify_sentence`` for
the development set and for the held-out set.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")

import django  # noqa: E402

django.setup()

from loops.extractors.rules import classify_sentence  # noqa: E402

DATA = ROOT / "tests" / "data" / "loops"
SETS = (
    ("dev (used for tuning)", "intent_eval.tsv"),
    ("held out", "intent_heldout.tsv"),
)


def main() -> None:
    for title, name in SETS:
        print(f"== {title}: {name}")
        evaluate(DATA / name)


def evaluate(path: Path) -> None:
    """Print the figures for one labelled TSV file."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        label, ident, sentence = line.split("\t", 2)
        rows.append((int(label), ident, sentence))
    start = time.perf_counter()
    predictions = [classify_sentence(s) is not None for _, _, s in rows]
    elapsed = time.perf_counter() - start
    tp = sum(1 for (y, _, _), p in zip(rows, predictions, strict=True) if y and p)
    fp = sum(1 for (y, _, _), p in zip(rows, predictions, strict=True) if not y and p)
    fn = sum(1 for (y, _, _), p in zip(rows, predictions, strict=True) if y and not p)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    print(f"sentences={len(rows)} positives={tp + fn} predicted={tp + fp}")
    print(f"tp={tp} fp={fp} fn={fn}")
    print(f"precision={precision:.3f} recall={recall:.3f} f1={f1:.3f}")
    print(f"throughput={len(rows) / elapsed:,.0f} sentences/s")
    if "--errors" in sys.argv:
        for (y, ident, s), p in zip(rows, predictions, strict=True):
            if y != p:
                print(("FP" if p else "FN"), ident, s)


if __name__ == "__main__":
    main()
