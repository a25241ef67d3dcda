"""Train the commitment classifier (``loops.extractors.classifier``) and write its
weights to ``loops/extractors/data/commitment_classifier.npz``.

Run: .venv/bin/python -m loops.extractors.train_classifier [--dry-run]

The classifier scores sentences the rules already shaped (a first-person future),
so it is trained on sentences with a first-person future only (``FUTURE_RE``).
Training data (never the held-out parts, which ``benchmarks/rule_extractor.py``
evaluates):
- Parakweet EmailIntentDataSet (``../shared/data/parakweet_email_intent``, Apache-2.0;
  ``BRAIN_SHARED_DATA`` overrides the folder): "Yes" = a request, proposal or dated
  commitment. Held out: every sentence whose SHA-1 is 0 mod 5. Parakweet labels an
  undated commitment "No" by its own rule; such sentences (a first-person promise by
  our rules and no date) carry no usable label for us and are left out.
- Our Enron sentences (``tests/data/loops/commitment_sentences.tsv``): 1 = a
  specific promise. Held out: SHA-1 mod 10 < 3. Weighted ×3: they are the target.

Model: scikit-learn logistic regression (balanced classes, C=1) over the unit-length
all-MiniLM-L6-v2 embeddings. Threshold: a veto, the highest probability that still
keeps 95% of the real promises among our training sentences the rules shape as
commitments, on 5-fold cross-validated predictions (the rules already reach a
precision of about 0.9 there; the classifier removes what it is sure is none).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OURS = ROOT / "tests" / "data" / "loops" / "commitment_sentences.tsv"
OURS_WEIGHT = 3.0
MIN_RECALL = 0.95


def shared_data() -> Path:
    """The shared real-data folder (``BRAIN_SHARED_DATA`` or ``../shared/data``)."""
    return Path(os.environ.get("BRAIN_SHARED_DATA", ROOT.parent / "shared" / "data"))


def _bucket(sentence: str, mod: int) -> int:
    return int(hashlib.sha1(sentence.encode("utf-8")).hexdigest()[:8], 16) % mod


def parakweet_heldout(sentence: str) -> bool:
    """True for the Parakweet sentences kept out of training (SHA-1 ≡ 0 mod 5)."""
    return _bucket(sentence, 5) == 0


def ours_heldout(sentence: str) -> bool:
    """True for our Enron sentences kept out of training (SHA-1 mod 10 < 3)."""
    return _bucket(sentence, 10) < 3


def load_parakweet() -> list[tuple[int, str]]:
    """``(label, sentence)`` rows of the Parakweet file (1 = Yes)."""
    path = shared_data() / "parakweet_email_intent" / "Ask0729-fixed.txt"
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if "\t" not in line:
            continue
        label, sentence = line.split("\t", 1)
        if sentence.strip():
            rows.append((int(label.strip() == "Yes"), sentence.strip()))
    return rows


def load_ours() -> list[tuple[int, str]]:
    """``(label, sentence)`` rows of our labelled Enron sentences."""
    rows = []
    for line in OURS.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        label, _ident, sentence = line.split("\t", 2)
        rows.append((int(label), sentence))
    return rows


def training_rows() -> tuple[list[str], list[int], list[float], list[bool]]:
    """Sentences, labels, sample weights and "ours and shaped as a commitment"
    flags of the training split."""
    from loops.extractors.rules import FUTURE_RE, classify_sentence

    texts, labels, weights, target = [], [], [], []
    for label, sentence in load_parakweet():
        if parakweet_heldout(sentence) or not FUTURE_RE.search(sentence):
            continue
        match = classify_sentence(sentence)
        if (
            label == 0
            and match is not None
            and match.kind == "commitment"
            and not match.deadline
        ):
            continue  # Parakweet's "No" for an undated promise: not our label
        texts.append(sentence)
        labels.append(label)
        weights.append(1.0)
        target.append(False)
    for label, sentence in load_ours():
        if ours_heldout(sentence):
            continue
        match = classify_sentence(sentence)
        texts.append(sentence)
        labels.append(label)
        weights.append(OURS_WEIGHT)
        target.append(match is not None and match.kind == "commitment")
    return texts, labels, weights, target


def veto_threshold(probabilities, labels, min_recall: float = MIN_RECALL) -> float:
    """The highest probability cut that keeps at least ``min_recall`` of the real
    promises: the classifier vetoes only what it is sure is no promise (the rules
    already shape the candidates; precision comes from both)."""
    positives = sorted(p for p, y in zip(probabilities, labels, strict=True) if y)
    if not positives:
        return 0.5
    keep = max(1, math.ceil(min_recall * len(positives)))
    return round(positives[len(positives) - keep] - 1e-3, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="train, do not write")
    args = parser.parse_args()
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    from loops.extractors import classifier

    texts, labels, weights, target = training_rows()
    print(f"training sentences: {len(texts)} (positives {sum(labels)})")
    vectors = classifier.embed(texts)
    if vectors is None:
        sys.exit("the local embedding model is not available")
    x, y, w = np.array(vectors), np.array(labels), np.array(weights)
    model = LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000)
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=13)
    cv = cross_val_predict(
        model, x, y, cv=folds, method="predict_proba", params={"sample_weight": w}
    )[:, 1]
    mask = np.array(target)
    cut = veto_threshold(cv[mask].tolist(), y[mask].tolist())
    print(
        f"threshold (recall >= {MIN_RECALL} on {int(mask.sum())} of our "
        f"commitment-shaped, cross-validated): {cut:.3f}"
    )
    model.fit(x, y, sample_weight=w)
    meta = {
        "model": classifier.MODEL_NAME,
        "training_sentences": len(texts),
        "positives": int(sum(labels)),
        "ours_weight": OURS_WEIGHT,
        "C": 1.0,
        "threshold_rule": f"veto: cross-validated recall >= {MIN_RECALL}",
        "script": "loops/extractors/train_classifier.py",
    }
    if args.dry_run:
        return
    classifier.WEIGHTS.parent.mkdir(parents=True, exist_ok=True)
    np.savez(
        classifier.WEIGHTS,
        coef=model.coef_[0].astype(np.float32),
        intercept=np.array(model.intercept_[0]),
        threshold=np.array(cut),
        meta=np.array(json.dumps(meta)),
    )
    print(f"wrote {classifier.WEIGHTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
