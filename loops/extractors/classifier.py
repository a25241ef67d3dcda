"""The commitment classifier behind the rule extractor (SPEC §5.3: "a small trained
classifier over the local embeddings may back it").

A logistic regression over the 384-dimension all-MiniLM-L6-v2 sentence embeddings
(the brain's local embedding model, ``brain.embeddings.LocalProvider``), trained by
``loops/extractors/train_classifier.py`` on the Parakweet email-intent sentences and
our own labelled Enron sentences. It answers one question for a sentence the rules
already shaped as a first-person future or a request: is this a real, specific
promise or request (not a plan, an offer, a marketing line, boilerplate)?

The weights ship as ``data/commitment_classifier.npz`` (numpy arrays, no pickle):
``coef`` (384 floats), ``intercept``, ``threshold`` and the training ``meta`` (JSON).
When the embedding model cannot load, ``score`` returns None and the rules stand
alone.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

from brain.embeddings import EmbeddingUnavailable, LocalProvider

logger = logging.getLogger(__name__)

WEIGHTS = Path(__file__).resolve().parent / "data" / "commitment_classifier.npz"
MODEL_NAME = "all-MiniLM-L6-v2"
# Scores are remembered per sentence text (mailbox copies repeat sentences; one
# model call costs about a second on a busy CPU).
SCORE_CACHE = 10_000
_lock = threading.Lock()
_state: dict[str, Any] = {}


@lru_cache(maxsize=1)
def weights() -> dict[str, Any]:
    """The shipped weights: ``{coef: list[float], intercept: float, threshold:
    float, meta: dict}``. Raises ``FileNotFoundError`` when the file is missing."""
    import numpy as np

    with np.load(WEIGHTS, allow_pickle=False) as data:
        return {
            "coef": data["coef"].astype(float).tolist(),
            "intercept": float(data["intercept"]),
            "threshold": float(data["threshold"]),
            "meta": json.loads(str(data["meta"])),
        }


def threshold() -> float:
    """Probability at or above which a sentence counts as a real commitment."""
    return weights()["threshold"]


def _provider() -> LocalProvider:
    with _lock:
        if "provider" not in _state:
            _state["provider"] = LocalProvider(MODEL_NAME)
        return _state["provider"]


def embed(sentences: list[str]) -> list[list[float]] | None:
    """Unit-length MiniLM vectors for ``sentences``, or None when the local model is
    unavailable (logged once per process)."""
    if _state.get("unavailable"):
        return None
    try:
        return _provider().embed(sentences)
    except EmbeddingUnavailable:
        _state["unavailable"] = True
        logger.warning("commitment classifier off: local embedding model unavailable")
        return None


def probability(vector: list[float]) -> float:
    """P(real commitment or request) for one embedding vector."""
    w = weights()
    z = w["intercept"] + sum(a * b for a, b in zip(w["coef"], vector, strict=True))
    return 1.0 / (1.0 + math.exp(-z))


def score(sentences: list[str]) -> list[float] | None:
    """Probabilities (0..1) for ``sentences`` in order, or None when the classifier
    cannot run (no embedding model or no weights file). Each distinct sentence is
    embedded once per process (cache of ``SCORE_CACHE`` sentences)."""
    if not sentences:
        return []
    try:
        weights()
    except (FileNotFoundError, KeyError, ValueError):
        logger.warning("commitment classifier off: no weights at %s", WEIGHTS)
        return None
    cache: dict[str, float] = _state.setdefault("scores", {})
    todo = list(dict.fromkeys(s for s in sentences if s not in cache))
    if todo:
        vectors = embed(todo)
        if vectors is None:
            return None
        if len(cache) > SCORE_CACHE:
            cache.clear()
        cache.update(zip(todo, map(probability, vectors), strict=True))
    return [cache[s] for s in sentences]
