"""The meaning stage of fact dedup and supersession (SPEC §2.4, revised turn 3).

Structure and rules (``brain.services.fact_slots``) decide first. Where they leave
a new fact and a live fact of the same subject and kind undecided, this stage
compares what the two sentences say about the subject, with the local embedding
model (``brain.embeddings``):

- a **leaving** event ("stepped down as", "left", "resigned", "retired as", "no
  longer", "quit", "stood down") close in meaning to a live role fact retires it;
- a **change of value**: both sentences carry a value (a number, an amount, a
  date) and the values differ, and the sentences with the values masked are close
  (less close is enough when the new one says it changed: "now", "raised",
  "pushed", "postponed") → the old one is superseded ("the plan is $30 a month" / "the plan now runs $34
  per month");
- a **switch** ("moved to", "switched to", "now uses") close in meaning to a live
  preference replaces it;
- a **paraphrase** (very close, the same values, neither side leaving) is a
  duplicate.

The predicate compared is the sentence without the subject's name ("Orla Finch's
phone plan is $30 a month" → "phone plan is $30 a month"). The cosine thresholds
are chosen on the training half of the dev pairs by
``benchmarks/facts_meaning_fit.py`` and shipped in ``brain/data/fact_meaning.json``
(versioned; the held-out half is only reported). Without an embedding model the
stage does nothing (the rules alone decide, as before).
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from brain.embeddings import embed_texts, get_provider

THRESHOLDS_FILE = Path(__file__).resolve().parent.parent / "data" / "fact_meaning.json"

DUPLICATE = "duplicate"
SUPERSEDE = "supersede"

# An event that ends a role or membership (evidence, never enough alone: the
# sentence must also be close in meaning to the live fact it retires).
LEAVE = re.compile(
    r"\b(?:stepped down|steps down|stood down|stands down|left(?![\s-]hand)|"
    r"resigned|resigns|retired|retires|quit|quits|no longer|gave up|given up|"
    r"handed over|not \w+ any ?more)\b",
    re.I,
)
# A preference replaced by another one.
SWITCH = re.compile(
    r"\b(?:moved|switched|switches|changed|changes|converted|now|these days|"
    r"nowadays|instead|went over)\b",
    re.I,
)
# Words that say a value changed (evidence for a change of value, never enough
# alone: the sentences must also be close with their values masked).
CHANGE = re.compile(
    r"\b(?:now|these days|nowadays|since|went up|gone up|goes up|rose|raised|"
    r"increased|dropped|fell|cut|bumped|revised|pushed|moved|postponed|delayed|"
    r"rescheduled|slipped|extended|extension|renewed|changed|instead|adjourned|"
    r"after|this year|this month|this week|as of|from now on)\b",
    re.I,
)
_MONTHS = (
    r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
)
_DAYS = r"monday|tuesday|wednesday|thursday|friday|saturday|sunday"
# A value token: a number with its currency, unit or ordinal, a month or a weekday.
VALUE = re.compile(
    rf"[$£€]?\d[\d,.:]*(?:k|m|st|nd|rd|th|am|pm|%)?\b|\b(?:{_MONTHS}|{_DAYS})\b",
    re.I,
)
_WS = re.compile(r"\s+")
# An identifier names a thing, not a value of it ("invoice INV-3301", "Milestone 2",
# "Shipment DF-5561"): two facts with different identifiers are about two things.
IDENTIFIER = re.compile(
    rf"\b[A-Za-z]+[-_/]?\d[\w-]*|\b(?!(?i:{_DAYS})\b)(?!(?i:{_MONTHS})\b)"
    r"[A-Z][a-z]+\s+#?\d+\b"
)
_PAST = re.compile(r"\b(?:used to|formerly|previously|in the past|any ?more)\b", re.I)
# "Alice's sister works at Acme" is about the sister, not about Alice.
RELATIVE = re.compile(
    r"(?:'s|’s|\b(?:his|her|their))\s+(?:sister|brother|daughter|son|child|"
    r"children|kids?|wife|husband|partner|spouse|mother|father|mum|mom|dad|parents?|"
    r"friend|colleague|boss|manager|assistant|team|family|niece|nephew|cousin|"
    r"aunt|uncle|grand\w+)\b",
    re.I,
)
_NEGATION = re.compile(r"\b(?:not|never|no)\b|n't\b", re.I)


@dataclass(frozen=True)
class Thresholds:
    """Cosine thresholds of the meaning stage (0..1) and the file's version."""

    version: str
    duplicate: float
    value_change: float
    value_change_cue: float
    leave: float
    switch: float


@lru_cache(maxsize=1)
def thresholds() -> Thresholds:
    """The shipped thresholds (``brain/data/fact_meaning.json``); read once."""
    data = json.loads(THRESHOLDS_FILE.read_text(encoding="utf-8"))
    return Thresholds(
        version=str(data["version"]),
        duplicate=float(data["duplicate"]),
        value_change=float(data["value_change"]),
        value_change_cue=float(data["value_change_cue"]),
        leave=float(data["leave"]),
        switch=float(data["switch"]),
    )


def predicate(text: str, subject_words: frozenset[str]) -> str:
    """``text`` without the subject's name words and their possessive ("Orla
    Finch's plan is $30" with {orla, finch} → "plan is $30")."""
    words = []
    for word in text.split():
        bare = re.sub(r"(?:'s|’s|')$", "", word.strip(",.;:!?")).lower()
        if bare in subject_words:
            continue
        words.append(word)
    return _WS.sub(" ", " ".join(words)).strip() or text


def identifiers_of(text: str) -> tuple[str, ...]:
    """The identifiers of ``text`` ("inv-3301", "milestone 2"), lower-case, sorted."""
    return tuple(sorted(m.group(0).lower() for m in IDENTIFIER.finditer(text)))


def values_of(text: str) -> tuple[str, ...]:
    """The value tokens of ``text`` outside identifiers (numbers, amounts, months,
    weekdays), lower-case and without thousands separators, sorted."""
    bare = IDENTIFIER.sub(" ", text)
    return tuple(
        sorted(m.group(0).lower().replace(",", "") for m in VALUE.finditer(bare))
    )


def masked(text: str) -> str:
    """``text`` with each value token replaced by ``X`` (the frame of the value)."""
    return VALUE.sub("X", text)


@dataclass(frozen=True)
class Pair:
    """What the meaning stage knows of (live fact, new fact): the cosine of their
    predicates, of their masked predicates, their value tokens and cues."""

    cosine: float
    frame_cosine: float
    old_values: tuple[str, ...]
    new_values: tuple[str, ...]
    new_leaves: bool
    old_leaves: bool
    new_switches: bool
    old_switches: bool
    new_changes: bool
    negation_differs: bool
    relative_differs: bool = False
    identifiers_differ: bool = False


def decide(pair: Pair, *, kind: str, limits: Thresholds | None = None) -> str | None:
    """``"supersede"``, ``"duplicate"`` or None for a live fact and a new one of the
    same subject and kind that the rules left undecided (SPEC §2.4, turn 3)."""
    t = limits or thresholds()
    if pair.relative_differs or pair.identifiers_differ:
        return None  # a relative, or another identifier: another subject.
    if pair.old_leaves:
        return None  # a leaving event is history: nothing replaces it.
    if pair.new_leaves:
        return SUPERSEDE if pair.cosine >= t.leave else None
    if pair.old_values and pair.new_values and pair.old_values != pair.new_values:
        floor = t.value_change_cue if pair.new_changes else t.value_change
        return SUPERSEDE if pair.frame_cosine >= floor else None
    if pair.new_switches and not pair.old_switches and kind == "preference":
        if pair.cosine >= t.switch:
            return SUPERSEDE
    if pair.negation_differs or pair.old_values != pair.new_values:
        return None
    return DUPLICATE if pair.cosine >= t.duplicate else None


_CACHE: OrderedDict[tuple[str, str], list[float]] = OrderedDict()
CACHE_MAX = 4096


def _embed_cached(texts: list[str]) -> list[list[float]] | None:
    """Vectors of ``texts`` from the configured model, the live facts' predicates
    kept in a per-process LRU of 4,096 (a subject's facts are compared again at
    every write); None when the model is unavailable."""
    provider = get_provider()
    if provider is None:
        return None
    missing = list(dict.fromkeys(t for t in texts if (provider.name, t) not in _CACHE))
    if missing:
        vectors, _ = embed_texts(missing)
        if not vectors:
            return None
        for text, vector in zip(missing, vectors, strict=True):
            _CACHE[(provider.name, text)] = vector
    out = []
    for text in texts:
        _CACHE.move_to_end((provider.name, text))
        out.append(_CACHE[(provider.name, text)])
    while len(_CACHE) > CACHE_MAX:
        _CACHE.popitem(last=False)
    return out


def _polarity(text: str) -> tuple[bool, bool]:
    """(negated, past) of a sentence."""
    return bool(_NEGATION.search(text)), bool(_PAST.search(text))


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    denom = float(np.linalg.norm(a) * np.linalg.norm(b)) or 1.0
    return float(a @ b) / denom


def pairs_for(
    new_text: str, old_texts: list[str], subject_words: frozenset[str]
) -> list[Pair] | None:
    """One ``Pair`` per live text against ``new_text``, embedding the predicates in
    one batch; None when the embedding model is unavailable."""
    texts = [new_text, *old_texts]
    preds = [predicate(t, subject_words) for t in texts]
    vectors = _embed_cached(preds + [masked(p) for p in preds])
    if vectors is None:
        return None
    arr = np.asarray(vectors, dtype=np.float32)
    n = len(texts)
    new_pred, new_frame = arr[0], arr[n]
    out = []
    for i, old in enumerate(old_texts, start=1):
        out.append(
            Pair(
                cosine=_cosine(arr[i], new_pred),
                frame_cosine=_cosine(arr[n + i], new_frame),
                old_values=values_of(preds[i]),
                new_values=values_of(preds[0]),
                new_leaves=bool(LEAVE.search(new_text)),
                old_leaves=bool(LEAVE.search(old)),
                new_switches=bool(SWITCH.search(new_text)),
                old_switches=bool(SWITCH.search(old)),
                new_changes=bool(CHANGE.search(new_text)),
                negation_differs=_polarity(old) != _polarity(new_text),
                identifiers_differ=identifiers_of(preds[i]) != identifiers_of(preds[0]),
                relative_differs=bool(RELATIVE.search(old))
                != bool(RELATIVE.search(new_text)),
            )
        )
    return out
