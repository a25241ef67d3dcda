"""Choose the cosine thresholds of the fact meaning stage (SPEC §2.4, turn 3) on the
TRAINING half of tests/data/facts_dev/pairs.jsonl (plus the ``dev`` split of the
older labelled pairs, tests/data/facts_pairs.jsonl) and write them to
brain/data/fact_meaning.json; report accuracy per kind on the held-out halves.

Run: .venv/bin/python benchmarks/facts_meaning_fit.py [--write] [--show]

No database: each pair is read with the offline slot reader and compared with the
rules (``slot_decision``) exactly as the write path does for a subject with one
live fact; pairs the rules leave undecided go to ``fact_meaning.decide``. Each
threshold is searched on a fixed grid (0.30 .. 0.99 by 0.01), one after another
in a fixed order (two sweeps), keeping the middle of the first run of equally good
values (the widest margin), so the output is the same bit for bit on every run
with the same model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")

import django  # noqa: E402

django.setup()

from brain.services import fact_meaning  # noqa: E402
from brain.services.fact_meaning import Thresholds  # noqa: E402
from brain.services.fact_slots import fact_slot_offline, slot_decision  # noqa: E402
from brain.services.facts import meaning_subject_words  # noqa: E402

DEV = ROOT / "tests" / "data" / "facts_dev" / "pairs.jsonl"
LEGACY = ROOT / "tests" / "data" / "facts_pairs.jsonl"
WANT = {"supersede": "supersede", "duplicate": "duplicate", "both_live": None}
GRID = [round(0.30 + i / 100, 2) for i in range(70)]
ORDER = ("leave", "value_change", "value_change_cue", "switch", "duplicate")
VERSION = "1"


def from_dev(pair: dict) -> dict:
    """A dev pair as (first, second, their entities and kinds, wanted decision)."""
    with_entity = pair.get("with_entity", True)
    subject = pair["subject"] if with_entity else None
    second = pair.get("second_subject", pair["subject"]) if with_entity else None
    return {
        **pair,
        "entities": (subject, second),
        "kinds": (pair["fact_kind"], pair["fact_kind"]),
        "want": WANT[pair["expected"]],
    }


def from_legacy(pair: dict) -> dict:
    """A pair of tests/data/facts_pairs.jsonl in the same shape (its ``dev`` split
    is training data here, its ``heldout`` split held out)."""
    return {
        "id": pair["id"],
        "kind": "legacy:" + pair["category"],
        "split": "train" if pair["split"] == "dev" else "heldout",
        "first": pair["old"]["text"],
        "second": pair["new"]["text"],
        "entities": (pair["old"].get("entity"), pair["new"].get("entity")),
        "kinds": (pair["old"]["kind"], pair["new"]["kind"]),
        "want": {"superseded": "supersede", "duplicate": "duplicate"}.get(
            pair["expect"]
        ),
    }


def prepare(pair: dict) -> dict:
    """The rules' verdict and the meaning stage's ``Pair`` for one pair, as the
    write path sees it with one live fact of the subject."""
    (e1, e2), (k1, k2) = pair["entities"], pair["kinds"]
    if e1 != e2 and e1 is not None and e2 is not None:
        return {"rule": None, "meaning": None, "decided": True}  # two pages
    old = fact_slot_offline(pair["first"], entity=e1)
    new = fact_slot_offline(pair["second"], entity=e2)
    rule = slot_decision(old=old, new=new, old_kind=k1, new_kind=k2)
    if rule is not None or not new.subject or k1 != k2 or e1 != e2:
        return {"rule": rule, "meaning": None, "decided": True}
    if e1 is None and old.subject != new.subject:
        return {"rule": rule, "meaning": None, "decided": True}
    words = meaning_subject_words(e1, new.subject)
    found = fact_meaning.pairs_for(pair["second"], [pair["first"]], words)
    return {"rule": None, "meaning": found[0] if found else None}


def outcome(prep: dict, kind: str, limits: Thresholds) -> str | None:
    """The decision of the write path for a prepared pair under ``limits``."""
    if prep.get("decided") or prep["meaning"] is None:
        return prep["rule"]
    return fact_meaning.decide(prep["meaning"], kind=kind, limits=limits)


def accuracy(rows: list[tuple[dict, dict]], limits: Thresholds) -> float:
    """Share of (pair, prepared) rows decided as labelled."""
    right = sum(outcome(prep, p["kinds"][1], limits) == p["want"] for p, prep in rows)
    return right / len(rows)


def fit(rows: list[tuple[dict, dict]]) -> Thresholds:
    """Coordinate search over ``GRID`` in ``ORDER``, two sweeps, ties to the
    middle of the best run."""
    limits = Thresholds(VERSION, 0.9, 0.9, 0.9, 0.9, 0.9)
    for _ in range(2):
        for name in ORDER:
            scores = [accuracy(rows, replace(limits, **{name: v})) for v in GRID]
            top = max(scores)
            # the middle of the first run of best values (the widest margin)
            first = scores.index(top)
            last = first
            while last + 1 < len(GRID) and scores[last + 1] == top:
                last += 1
            middle = round((GRID[first] + GRID[last]) / 2, 3)
            limits = replace(limits, **{name: middle})
    return limits


def main() -> None:
    """Fit on the train half, print both halves per kind, optionally write."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--show", action="store_true")
    args = parser.parse_args()
    pairs = [from_dev(json.loads(x)) for x in DEV.read_text().splitlines() if x]
    pairs += [from_legacy(json.loads(x)) for x in LEGACY.read_text().splitlines() if x]
    rows = [(p, prepare(p)) for p in pairs]
    train = [r for r in rows if r[0]["split"] == "train"]
    held = [r for r in rows if r[0]["split"] == "heldout"]
    limits = fit(train)
    print(json.dumps(asdict(limits)))
    for name, part in (("train", train), ("heldout", held)):
        print(f"{name}: {accuracy(part, limits):.3f}")
        kinds = sorted({p["kind"] for p, _ in part})
        for kind in kinds:
            sub = [r for r in part if r[0]["kind"] == kind]
            print(f"  {kind:<22} {accuracy(sub, limits):.3f}")
    if args.show:
        for p, prep in rows:
            m = prep["meaning"]
            got = outcome(prep, p["kinds"][1], limits)
            mark = "" if got == p["want"] else "  WRONG"
            feats = (
                f"cos={m.cosine:.2f} frame={m.frame_cosine:.2f} "
                f"v={m.old_values}/{m.new_values} L={m.new_leaves} S={m.new_switches}"
                if m
                else f"rule={prep['rule']}"
            )
            print(f"{p['id']:<26} {p['split']:<7} {feats}{mark}")
    if args.write:
        out = {
            **asdict(limits),
            "fitted_on": "tests/data/facts_dev/pairs.jsonl train half + "
            "tests/data/facts_pairs.jsonl dev split",
        }
        fact_meaning.THRESHOLDS_FILE.write_text(
            json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8"
        )


if __name__ == "__main__":
    main()
