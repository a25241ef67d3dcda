"""The learned decision over open-loop candidates (SPEC §5.1b): is this loop one a
careful assistant would list at the reference time?

The detectors and extractors propose (SPEC §5.2, §5.3: a rule stays a hard gate
only where it states a fact: the owner answered, the sender is a list); this model
decides, over the explicit features of ``loops.features``: the relationship, the
text, the time since and what followed. A candidate below the model's threshold
closes (``closed_by`` ``model``: expired or not expected); every candidate keeps
its probability as the loop's ``confidence``, which ``waiting`` ranks by.

The model is a logistic regression over standardised features, trained by
``benchmarks/loops_train.py`` on the many-owner dev set
(``tests/data/loops_dev/owners/``), its threshold the best F1 of a leave-one-owner-out inside
the training mailboxes, shipped as ``loops/data/decisions.json`` (names,
means, scales, weights, threshold and the training summary, floats rounded to 6
places so a retrain reproduces the file byte for byte). It is read once per
process and never fetched.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

from loops.extractors import classifier
from loops.features import MailboxIndex, ask_sentence, loop_features, vector
from loops.selectors import open_candidates
from loops.services import loops_apply_decisions

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from brain.models import Source
    from loops.models import OpenLoop

logger = logging.getLogger(__name__)

MODEL_FILE = Path(__file__).resolve().parent / "data" / "decisions.json"
REGULARISATION = 0.3
"""Inverse L2 strength ``C`` of the logistic regression (one value for every
mailbox, chosen on the pooled leave-one-owner-out figure)."""
MODEL_FEATURES: tuple[str, ...] = (
    "type_unanswered_inbound",
    "type_unanswered_outbound",
    "type_commitment_owed_by_me",
    "type_commitment_owed_to_me",
    "days_since",
    "recent_7d",
    "later_owner_to_them",
    "later_them_topic",
    "recipients",
    "moment_cue",
    "names_owner",
    "request_cue",
    "they_are_owner_side",
)
"""The features the model reads (a subset of ``loops.features.FEATURES``), chosen
forward on the pooled leave-one-owner-out AUC of the dev set (593 labelled
candidates, 129 real; ``benchmarks/loops_train.py``): from the loop type, the
time since and the owner's side (0.67), a feature was kept only when it raised
the pooled figure (0.78 with these; every feature together: 0.73)."""


@dataclass(frozen=True)
class DecisionModel:
    """A shipped or freshly fitted model: ``names`` (feature order), ``mean`` and
    ``scale`` (standardisation), ``coef`` and ``intercept`` (logistic regression),
    ``threshold`` (probability at or above which a loop is kept) and ``meta``."""

    names: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    threshold: float
    meta: dict[str, Any]

    def probability(self, features: dict[str, float]) -> float:
        """P(real loop) for one loop's named features (0..1)."""
        z = self.intercept
        for name, m, s, w in zip(
            self.names, self.mean, self.scale, self.coef, strict=True
        ):
            z += w * (float(features.get(name, 0.0)) - m) / s
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def keeps(self, probability: float) -> bool:
        """Whether a loop of this probability stays open."""
        return probability >= self.threshold

    def as_json(self) -> str:
        """The file form: sorted keys, floats rounded to 6 places, one trailing
        newline (byte-identical for identical inputs)."""
        data = {
            "names": list(self.names),
            "mean": [round(v, 6) for v in self.mean],
            "scale": [round(v, 6) for v in self.scale],
            "coef": [round(v, 6) for v in self.coef],
            "intercept": round(self.intercept, 6),
            "threshold": round(self.threshold, 6),
            "meta": self.meta,
        }
        return json.dumps(data, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> DecisionModel:
        """Read the file form. Raises ``ValueError`` (or ``KeyError``) on a
        malformed file."""
        data = json.loads(text)
        names = tuple(data["names"])
        if not (
            len(names) == len(data["mean"]) == len(data["scale"]) == len(data["coef"])
        ):
            raise ValueError("decision model: arrays of different lengths")
        return cls(
            names=names,
            mean=tuple(map(float, data["mean"])),
            scale=tuple(map(float, data["scale"])),
            coef=tuple(map(float, data["coef"])),
            intercept=float(data["intercept"]),
            threshold=float(data["threshold"]),
            meta=dict(data.get("meta", {})),
        )


@lru_cache(maxsize=1)
def shipped_model() -> DecisionModel | None:
    """The shipped model, read once per process; None (logged) when the file is
    missing or malformed, and then no candidate is closed by a model."""
    try:
        return DecisionModel.from_json(MODEL_FILE.read_text())
    except (OSError, ValueError, KeyError) as exc:
        logger.warning("loops: no decision model (%s): candidates stand", exc)
        return None


def fit(
    rows: Sequence[dict[str, float]],
    labels: Sequence[int],
    groups: Sequence[str],
    *,
    meta: dict[str, Any] | None = None,
) -> DecisionModel:
    """Fit the model on feature ``rows`` with 0/1 ``labels``; ``groups`` names each
    row's mailbox, for the threshold's inner leave-one-mailbox-out. Deterministic
    (lbfgs, no randomness); coefficients are rounded as stored, so the returned
    model predicts exactly as its file does."""
    raw = _fit_weights(rows, labels)
    oof = _out_of_fold(rows, labels, groups)
    threshold = choose_threshold(oof, labels)
    info = {
        **(meta or {}),
        "rows": len(rows),
        "positives": int(sum(labels)),
        "mailboxes": sorted(set(groups)),
        "regularisation": REGULARISATION,
        "threshold_rule": "best F1 of inner leave-one-owner-out",
    }
    return DecisionModel.from_json(
        DecisionModel(threshold=threshold, meta=info, **raw).as_json()
    )


def table_line(
    *, mailbox: str, key: Sequence[str], label: int, features: dict[str, float]
) -> str:
    """One row of the training table (JSON Lines): the mailbox, the candidate's
    key (thread, type, evidence), its 0/1 label and its features rounded to 6
    places."""
    return (
        json.dumps(
            {
                "mailbox": mailbox,
                "key": list(key),
                "label": label,
                "features": {k: round(v, 6) for k, v in sorted(features.items())},
            },
            sort_keys=True,
        )
        + "\n"
    )


def fit_table(text: str) -> DecisionModel:
    """Fit the model on a training table (``table_line`` rows, in file order);
    the owner of a mailbox ``name@cut`` is ``name`` (two cuts of one mailbox are
    one owner for the inner leave-one-owner-out)."""
    rows, labels, groups = [], [], []
    for line in text.splitlines():
        if line.strip():
            row = json.loads(line)
            rows.append({k: float(v) for k, v in row["features"].items()})
            labels.append(int(row["label"]))
            groups.append(str(row["mailbox"]).split("@", 1)[0])
    return fit(rows, labels, groups)


def _fit_weights(
    rows: Sequence[dict[str, float]], labels: Sequence[int]
) -> dict[str, Any]:
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    x = np.array([vector(r, MODEL_FEATURES) for r in rows], dtype=float)
    y = np.array(labels, dtype=int)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    if len(set(y.tolist())) < 2:
        coef, intercept = np.zeros(x.shape[1]), (8.0 if y.all() else -8.0)
    else:
        lr = LogisticRegression(C=REGULARISATION, max_iter=2000)
        lr.fit((x - mean) / scale, y)
        coef, intercept = lr.coef_[0], float(lr.intercept_[0])
    return {
        "names": MODEL_FEATURES,
        "mean": tuple(float(v) for v in mean),
        "scale": tuple(float(v) for v in scale),
        "coef": tuple(float(v) for v in coef),
        "intercept": float(intercept),
    }


def _out_of_fold(
    rows: Sequence[dict[str, float]], labels: Sequence[int], groups: Sequence[str]
) -> list[float]:
    """Each row's probability from a model fitted on the other mailboxes."""
    out = [0.0] * len(rows)
    for held in sorted(set(groups)):
        train = [i for i, g in enumerate(groups) if g != held]
        if not train:
            continue
        model = DecisionModel(
            threshold=0.5,
            meta={},
            **_fit_weights([rows[i] for i in train], [labels[i] for i in train]),
        )
        for i, g in enumerate(groups):
            if g == held:
                out[i] = model.probability(rows[i])
    return out


def choose_threshold(scores: Sequence[float], labels: Sequence[int]) -> float:
    """The score of best F1 over ``scores`` (out-of-fold probabilities) and their
    0/1 ``labels``; 0.5 when there are no positives. F1, not a precision-weighted
    F0.5: on the dev set the kept loops' precision hardly moves with the threshold
    (leave-one-owner-out 0.41 at F0.5, 0.40 at F1) while recall doubles (0.31 to
    0.65)."""
    pairs = sorted(zip(scores, labels, strict=True), key=lambda p: -p[0])
    positives = sum(labels)
    if not positives:
        return 0.5
    best, best_f, kept_pos = 0.5, -1.0, 0
    for n, (score, label) in enumerate(pairs, 1):
        kept_pos += label
        f = 2 * kept_pos / (n + positives)
        if f > best_f:
            best, best_f = score, f
    return best


def decide(model: DecisionModel, loop_type: str, features: dict[str, float]) -> float:
    """The probability the decision keeps a loop by (0..1): the model's, or 0 where
    a hard gate states a fact: the counterparty writes as the owner (an assistant
    or office alias in the owner's sent mail, SPEC §5.1b), or a reply is owed to
    a stranger's one-way mail (no exchange ever, outside the owner's domains:
    it asks nothing the owner owes, LOOPS_LABELLING.md)."""
    if features.get("they_are_owner_side") or (
        features.get("stranger") and loop_type == "unanswered_inbound"
    ):
        return 0.0
    return model.probability(features)


def loop_probabilities(
    loops: Sequence[OpenLoop], index: MailboxIndex, model: DecisionModel
) -> dict[int, tuple[float, dict[str, float]]]:
    """``{loop pk: (probability, features)}`` for stored ``loops`` at ``index.now``
    (``loops_scored``)."""
    return {
        loop.pk: scored
        for loop, scored in zip(loops, loops_scored(loops, index, model), strict=True)
    }


def loops_scored(
    loops: Sequence[OpenLoop], index: MailboxIndex, model: DecisionModel
) -> list[tuple[float, dict[str, float]]]:
    """``(probability, features)`` of each of ``loops`` (stored or not), in order,
    at ``index.now``. The embedding classifier runs only when ``model`` reads
    ``ask_score`` (or reads nothing: the benchmark's feature pass); ``decide``
    gives each probability."""
    scores: list[float] | None = None
    if loops and (not model.names or "ask_score" in model.names):
        scores = classifier.score([ask_sentence(lp) for lp in loops])
    out = []
    for n, loop in enumerate(loops):
        features = loop_features(loop, index, scores[n] if scores else None)
        out.append((decide(model, loop.loop_type, features), features))
    return out


def replay_decide(
    *, source: Source, now: datetime, loops: Sequence[OpenLoop]
) -> list[tuple[float, bool]] | None:
    """The decision at ``now`` for the loops a ``waiting --as-of`` replay holds
    (SPEC §5.1b, §5.5): unsaved detector loops and stored extracted ones, judged
    as an import at ``now`` would judge them. ``(probability, kept)`` per loop,
    in order; None when the decision is off (``LOOPS_DECISIONS_ENABLED``) or no
    model is shipped. Writes nothing."""
    model = shipped_model()
    if not settings.LOOPS_DECISIONS_ENABLED or model is None:
        return None
    if not loops:
        return []
    index = source_index(source=source, now=now)
    return [(p, model.keeps(p)) for p, _ in loops_scored(loops, index, model)]


def source_index(*, source: Source, now: datetime) -> MailboxIndex:
    """The source's ``MailboxIndex`` at ``now`` (one read of its mail)."""
    return MailboxIndex.load(source=source, now=now)


def loops_decide(
    *, source: Source, now: datetime, model: DecisionModel | None = None
) -> dict[str, int]:
    """The decision pass over a source's open candidates (SPEC §5.1b), run once per
    import (``finish``) and by the hourly sweep: each open loop a detector or
    extractor opened gets the model's probability as its ``confidence``; one below
    the threshold closes (``dropped``, ``closed_by`` ``model``, with a
    ``LoopEvent``). Manual loops and loops a person reopened are left alone.
    ``model`` defaults to the shipped one; with none, nothing changes. Returns
    ``{scored, closed}``."""
    model = model or shipped_model()
    if model is None:
        return {"scored": 0, "closed": 0}
    loops = open_candidates(source_id=source.id)
    if not loops:
        return {"scored": 0, "closed": 0}
    scored = loop_probabilities(loops, source_index(source=source, now=now), model)
    return loops_apply_decisions(
        loops=loops,
        probabilities={pk: p for pk, (p, _) in scored.items()},
        threshold=model.threshold,
        now=now,
    )
