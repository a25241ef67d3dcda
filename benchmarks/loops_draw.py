"""Draw the threads of one mailbox to label for the many-owner open-loop dev set
(issue 43, ``tests/data/loops_dev/README.md``), and write them out blind.

The draw, fixed before anyone labels (LOOPS_LABELLING.md "Scoring"):

- every loop of the product's ``waiting`` top 10 (all loops of each group), the
  rules' candidates ranked by the shipped decision model's confidence (none is
  closed: the population is every candidate);
- a seeded random draw (``random.Random(seed)``) of ``--draw`` other open loops,
  topped up so each loop type holds at least ``--per-type`` where the mailbox has
  that many;
- ``--none`` owner-involved threads (the owner wrote in them, or is in To/Cc of a
  message) in the 90-day loop window where the product opened nothing, drawn with
  the same generator (for recall).

Writes ``OUT/draw.json`` (seed, populations, every drawn thread with its stratum:
the record, not for the labeller) and ``OUT/threads.txt`` (the blind dump: the
drawn threads in a seeded shuffled order, each message's headers, folder and newest
text, no loop, no stratum), and prints the counts. The product that draws is the
one checked out; the labels are written from the mail, not from it.

Run: ``.venv/bin/python benchmarks/loops_draw.py --corpus enron/sager-e
--owners elizabeth.sager@enron.com --seed 43 --out /tmp/draws/sager-e``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")
os.environ.setdefault("LOOPS_EXTRACTION_ENABLED", "false")
# The rules propose the population; the shipped model only ranks it (below).
os.environ.setdefault("LOOPS_DECISIONS_ENABLED", "false")

import django  # noqa: E402

django.setup()

from benchmarks.loops_quality import import_corpus, norm_id, source_messages  # noqa: E402
from brain.access import local_caller  # noqa: E402
from brain.models import RawRecord, Source  # noqa: E402
from loops.decisions import (  # noqa: E402
    MODEL_FILE,
    loop_probabilities,
    shipped_model,
    source_index,
)
from loops.definitions import collapse, is_mine, reply_text  # noqa: E402
from loops.models import LoopStatus, OpenLoop  # noqa: E402
from loops.selectors import open_candidates, reference_time  # noqa: E402
from loops.services import loops_apply_decisions  # noqa: E402
from loops.waiting import waiting_report  # noqa: E402

TYPES = (
    "unanswered_inbound",
    "unanswered_outbound",
    "commitment_owed_by_me",
    "commitment_owed_to_me",
)


def top10_loops(sid: str) -> list[OpenLoop]:
    """Every open loop of the source's ``waiting`` top-10 groups (a group holds all
    open loops to its counterparty address, not only the five it shows)."""
    report = waiting_report(caller=local_caller(actor="loops_draw"), sources=[sid])
    shown = {v["id"] for g in report["groups"][:10] for v in g["loops"]}
    emails = {
        (g.get("counterparty_email") or g["counterparty"]).lower()
        for g in report["groups"][:10]
    }
    return [
        lp
        for lp in OpenLoop.objects.filter(source_id=sid, status=LoopStatus.OPEN)
        if lp.pk in shown or (lp.counterparty_email or "").lower() in emails
    ]


def rank_candidates(source: Source, now: datetime) -> str:
    """Give every open candidate the shipped model's probability as its
    ``confidence`` (closing none), so ``waiting`` ranks as the product would.
    Returns the model file's SHA-256 prefix ('' without a model)."""
    model = shipped_model()
    if model is None:
        return ""
    loops = open_candidates(source_id=source.id)
    scored = loop_probabilities(loops, source_index(source=source, now=now), model)
    loops_apply_decisions(
        loops=loops,
        probabilities={pk: p for pk, (p, _) in scored.items()},
        threshold=0.0,
        now=now,
    )
    return hashlib.sha256(MODEL_FILE.read_bytes()).hexdigest()[:12]


def draw_loops(
    rng: random.Random, population: list[OpenLoop], n: int, per_type: int
) -> list[OpenLoop]:
    """``n`` loops drawn from ``population`` (sorted by pk first, so the draw is
    reproducible), then each type topped up to ``per_type`` from its own rest."""
    pool = sorted(population, key=lambda lp: lp.pk)
    drawn = rng.sample(pool, min(n, len(pool)))
    for loop_type in TYPES:
        have = sum(1 for lp in drawn if lp.loop_type == loop_type)
        rest = [lp for lp in pool if lp.loop_type == loop_type and lp not in drawn]
        drawn += rng.sample(rest, max(0, min(per_type - have, len(rest))))
    return drawn


def write_dump(path: Path, threads: list[tuple[str, list]], owners: set[str]) -> None:
    """The blind dump: each thread's messages with date, sender (``ME`` for the
    owner's side), recipients, folder, subject, id and newest text."""
    folder_of = {}
    with path.open("w") as out:
        for n, (_tid, msgs) in enumerate(threads, 1):
            out.write(f"\n=== THREAD {n}: {msgs[0].message_id}  ({len(msgs)} msgs)\n")
            for m in msgs:
                if m.raw_record_id not in folder_of:
                    folder_of[m.raw_record_id] = (
                        RawRecord.objects.filter(pk=m.raw_record_id)
                        .values_list("metadata__folder", flat=True)
                        .first()
                    )
                who = "ME" if is_mine(m, owners) else m.from_addr
                date = f"{m.date:%Y-%m-%d %H:%M %z}" if m.date else "no date"
                out.write(
                    f"--- {date} | from {who} ({m.from_addr}) | to {', '.join(m.to)}"
                    f" | cc {', '.join(m.cc)} | folder {folder_of[m.raw_record_id]}\n"
                    f"    subject: {m.subject}\n    id: {m.message_id}\n"
                )
                out.write("    " + collapse(reply_text(m.body))[:3000] + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--owners", required=True, help="comma-separated addresses")
    parser.add_argument("--seed", type=int, default=43)
    parser.add_argument("--draw", type=int, default=30)
    parser.add_argument("--per-type", type=int, default=5)
    parser.add_argument("--none", type=int, default=15)
    parser.add_argument("--out", required=True)
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()
    owners = [o.strip().lower() for o in args.owners.split(",") if o.strip()]
    sid, seconds = import_corpus(args.corpus, owners, reuse=args.reuse)
    print(f"{args.corpus}: imported/detected in {seconds:.1f} s (source {sid})")
    source = Source.objects.get(id=sid)
    owner_set = {a.lower() for a in source.owner_addresses} | set(owners)
    now = reference_time(source=source)
    rng = random.Random(args.seed)
    ranked = rank_candidates(source, now)
    top = top10_loops(sid)
    rest = [
        lp
        for lp in OpenLoop.objects.filter(source_id=sid, status=LoopStatus.OPEN)
        if lp not in top
    ]
    drawn = draw_loops(rng, rest, args.draw, args.per_type)
    threads = source_messages(sid)
    with_loops = {lp.thread_id for lp in OpenLoop.objects.filter(source_id=sid)}
    quiet = sorted(
        tid
        for tid, msgs in threads.items()
        if tid not in with_loops
        and max((m.date for m in msgs if m.date), default=now - timedelta(days=999))
        >= now - timedelta(days=90)
        and any(is_mine(m, owner_set) or owner_set & {*m.to, *m.cc} for m in msgs)
    )
    none = rng.sample(quiet, min(args.none, len(quiet)))
    strata: dict[str, set[str]] = defaultdict(set)
    for lp in top:
        strata[lp.thread_id].add("top10")
    for lp in drawn:
        strata[lp.thread_id].add("drawn")
    for tid in none:
        strata[tid].add("none")
    order = sorted(strata)
    rng.shuffle(order)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_dump(out / "threads.txt", [(t, threads[t]) for t in order], owner_set)
    open_loops = OpenLoop.objects.filter(source_id=sid, status=LoopStatus.OPEN)
    record = {
        "corpus": args.corpus,
        "import_owners": owners,
        "known_owners": sorted(owner_set),
        "reference_time": now.isoformat(),
        "seed": args.seed,
        "ranked_by": ranked,
        "population": {
            "open_loops": open_loops.count(),
            "by_type": {t: open_loops.filter(loop_type=t).count() for t in TYPES},
            "top10_loops": len(top),
            "quiet_owner_threads": len(quiet),
        },
        "drawn_loops": len(drawn),
        "threads": [
            {
                "thread": norm_id(threads[t][0].message_id),
                "strata": sorted(strata[t]),
                "message_ids": [norm_id(m.message_id) for m in threads[t]],
            }
            for t in order
        ],
    }
    (out / "draw.json").write_text(json.dumps(record, indent=1) + "\n")
    print(
        f"reference time {now:%Y-%m-%d}; open loops {record['population']}; "
        f"threads to label {len(order)} (top-10 loops {len(top)}, drawn "
        f"{len(drawn)}, quiet {len(none)}) → {out}"
    )


if __name__ == "__main__":
    main()
