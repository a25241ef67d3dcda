"""Sentence-level precision and recall of the offline commitment extractor (SPEC §5.3)
on held-out sentences it was never tuned or trained on.

Run: .venv/bin/python benchmarks/rule_extractor.py [--errors]

Sets (the splits are those of loops/extractors/train_classifier.py; the classifier
never saw these sentences):
- Parakweet EmailIntentDataSet held out (SHA-1 ≡ 0 mod 5; ../shared/data or
  BRAIN_SHARED_DATA), Parakweet's own labels: Yes = request, proposal or dated
  commitment.
- Our Enron commitment sentences held out (tests/data/loops/commitment_sentences.tsv,
  SHA-1 mod 10 < 3): 1 = a specific promise.
- tests/data/loops/intent_heldout.tsv (hand labels: a first-person commitment or a
  request with a deadline), never used for tuning.

For each: the rules alone (``classify_sentence``), the classifier alone (probability
≥ its threshold) and rules + classifier (what ``rule_extract`` keeps), with
throughput, and the figure of the rules before the issue-14 rewrite (main at
6ac1f86, measured on the same sentences: ``BEFORE``).

Note: the rules were revised by fault kind while reading all of our Enron sentences
(held-out ones included); the classifier never saw the held-out ones. Parakweet's
held-out errors were not read.
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

from loops.extractors import classifier  # noqa: E402
from loops.extractors.rules import classify_sentence  # noqa: E402
from loops.extractors.train_classifier import (  # noqa: E402
    load_ours,
    load_parakweet,
    ours_heldout,
    parakweet_heldout,
)

DATA = ROOT / "tests" / "data" / "loops"
# Rules of main 6ac1f86 on the same held-out sentences: (precision, recall).
BEFORE = {
    "Parakweet held out": (0.616, 0.129),
    "Enron commitment sentences held out": (0.375, 1.000),
    "intent_heldout.tsv": (0.545, 0.667),
}


def figures(truth: list[int], predicted: list[bool]) -> str:
    """``precision recall (tp fp fn)`` for one prediction list."""
    tp = sum(1 for y, p in zip(truth, predicted, strict=True) if y and p)
    fp = sum(1 for y, p in zip(truth, predicted, strict=True) if not y and p)
    fn = sum(1 for y, p in zip(truth, predicted, strict=True) if y and not p)
    precision = tp / (tp + fp) if tp + fp else float("nan")
    recall = tp / (tp + fn) if tp + fn else float("nan")
    return f"P={precision:.3f} R={recall:.3f} (tp={tp} fp={fp} fn={fn})"


def evaluate(title: str, rows: list[tuple[int, str]], *, commitments_only: bool):
    """Print the three figures for one labelled set. ``commitments_only``: the
    rules count only ``commitment`` matches (our sentences label promises only)."""
    print(f"== {title}: {len(rows)} sentences, {sum(y for y, _ in rows)} positive")
    truth = [y for y, _ in rows]
    start = time.perf_counter()
    matches = [classify_sentence(s) for _, s in rows]
    rules_s = time.perf_counter() - start
    rules = [
        m is not None and (m.kind == "commitment" or not commitments_only)
        for m in matches
    ]
    start = time.perf_counter()
    scores = classifier.score([s for _, s in rows])
    model_s = time.perf_counter() - start
    before = BEFORE.get(title)
    if before:
        print(f"before (6ac1f86)    P={before[0]:.3f} R={before[1]:.3f}")
    print(f"rules alone         {figures(truth, rules)}  {len(rows) / rules_s:,.0f}/s")
    if scores is None:
        print("classifier          unavailable (no local embedding model)")
        return rules, None
    cut = classifier.threshold()
    alone = [p >= cut for p in scores]
    both = [r and p >= cut for r, p in zip(rules, scores, strict=True)]
    print(f"classifier alone    {figures(truth, alone)}  {len(rows) / model_s:,.0f}/s")
    print(f"rules + classifier  {figures(truth, both)}  (threshold {cut:.3f})")
    return rules, both


def main() -> None:
    parakweet = [(y, s) for y, s in load_parakweet() if parakweet_heldout(s)]
    rules, both = evaluate("Parakweet held out", parakweet, commitments_only=False)
    ours = [(y, s) for y, s in load_ours() if ours_heldout(s)]
    evaluate("Enron commitment sentences held out", ours, commitments_only=True)
    heldout = []
    for line in (DATA / "intent_heldout.tsv").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            label, _ident, sentence = line.split("\t", 2)
            heldout.append((int(label), sentence))
    evaluate("intent_heldout.tsv", heldout, commitments_only=False)
    if "--errors" in sys.argv:
        for (y, s), r in zip(parakweet, both or rules, strict=True):
            if bool(y) != r:
                print(("FP" if r else "FN"), s)


if __name__ == "__main__":
    main()
