"""Commitment loops on the labelled dev set (tests/data/loops_dev/commitments.jsonl):
precision and recall of ``commitment_owed_by_me`` / ``commitment_owed_to_me`` per
stratum, the offline path only (rule extractor, no LLM), SPEC §5.3.

Each corpus named in the labels is imported once into its own mailbox source
(``bc-<corpus slug>``) through the real import; ``--fresh`` re-imports it.
Commitment extraction is then re-run from scratch on every thread of the source
(rule loops and rule extraction runs of that source are deleted first), so a
changed extractor is measured without re-importing.

Run: .venv/bin/python benchmarks/commitments_quality.py [--fresh] [--verbose]
     [--corpus enron/allen-p] [--dump-candidates FILE]
Matching (tests/data/loops_dev/README.md): same type, same message, greedily by text similarity;
a loop is scored against the label holding its message, message ids read through the
import's copy ledger (copies of one message count once; labels of two copies merge). ``--dump-candidates`` writes every commitment loop the product opens in
any thread of the corpora (for labelling).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")
os.environ["LOOPS_EXTRACTION_ENABLED"] = "0"

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import transaction  # noqa: E402

from benchmarks.data import corpus_path, exported_before  # noqa: E402
from brain.models import RawRecord, Source  # noqa: E402
from connectors.mailbox.sync import mailbox_import  # noqa: E402
from connectors.models import ImportedItem  # noqa: E402
from loops.models import Detector, ExtractionRun, LoopEvent, OpenLoop  # noqa: E402
from loops.pipeline import thread_rule_extract  # noqa: E402
from loops.selectors import (  # noqa: E402
    mutes_for,
    newest_message_at,
    threads_messages,
    threads_pages,
)

settings.LOOPS_EXTRACTION_ENABLED = False
LABELS = ROOT / "tests" / "data" / "loops_dev" / "commitments.jsonl"
DATA = Path(os.environ.get("BRAIN_SHARED_DATA", ROOT.parent / "shared" / "data"))
TYPES = ("commitment_owed_by_me", "commitment_owed_to_me")
# The extractor of main 6ac1f86 on the same 173 labelled threads, all strata:
# (precision, recall, tp, fp, fn).
BEFORE = {
    "commitment_owed_by_me": (0.17, 0.60, 3, 15, 2),
    "commitment_owed_to_me": (0.00, 0.00, 0, 6, 1),
}


def source_id_for(corpus: str) -> str:
    """The benchmark's source id for a corpus path (``enron/allen-p`` →
    ``bc-enron-allen-p``)."""
    import hashlib

    slug = re.sub(r"[^a-z0-9]+", "-", corpus.lower()).strip("-")
    if len(slug) > 20:
        slug = slug[:13] + "-" + hashlib.sha1(corpus.encode()).hexdigest()[:6]
    return "bc-" + slug


def ensure_import(corpus: str, owners: list[str], *, fresh: bool) -> Source:
    """Import ``corpus`` once (or again with ``fresh``); returns the source."""
    sid = source_id_for(corpus)
    existing = Source.objects.filter(id=sid).first()
    if existing and fresh:
        existing.delete()
        existing = None
    if existing is None:
        started = time.perf_counter()
        path, until = corpus_path(corpus, DATA)
        mailbox_import(
            source_id=sid,
            path=path,
            owners=owners,
            actor="bench",
            entries=exported_before(path, until) if until else None,
        )
        print(f"imported {corpus} in {time.perf_counter() - started:.0f} s")
    return Source.objects.get(id=sid)


def rerun_extraction(source: Source) -> int:
    """Delete the source's rule-extracted loops and runs, extract every thread again.
    Returns the number of threads processed."""
    with transaction.atomic():
        rule_loops = OpenLoop.objects.filter(
            source=source, detector=Detector.RULE_EXTRACT
        )
        LoopEvent.objects.filter(loop__in=rule_loops).delete()
        rule_loops.delete()
        ExtractionRun.objects.filter(
            source=source, extractor=Detector.RULE_EXTRACT
        ).delete()
    thread_ids = sorted(
        {
            t
            for t in RawRecord.objects.filter(source=source).values_list(
                "metadata__thread_id", flat=True
            )
            if t
        }
    )
    newest = newest_message_at(source_id=source.id) or None
    mutes = mutes_for(source_id=source.id)
    for start in range(0, len(thread_ids), 200):
        chunk = thread_ids[start : start + 200]
        messages = threads_messages(source_id=source.id, thread_ids=chunk)
        pages = threads_pages(source_id=source.id, thread_ids=chunk)
        with transaction.atomic():
            for tid in chunk:
                thread_rule_extract(
                    source=source,
                    thread_id=tid,
                    messages=messages.get(tid, []),
                    page=pages.get(tid),
                    mutes=mutes,
                    source_newest=newest,
                )
    return len(thread_ids)


def product_loops(source: Source) -> list[dict]:
    """Every commitment loop of the source as ``{type, thread_id, message_id,
    text, counterparty, summary}``."""
    out = []
    for loop in OpenLoop.objects.filter(source=source, loop_type__in=TYPES):
        ev = (loop.evidence or [{}])[0]
        out.append(
            {
                "type": loop.loop_type,
                "thread_id": loop.thread_id,
                "message_id": ev.get("message_id"),
                "text": ev.get("quote") or loop.summary,
                "counterparty": loop.counterparty_email,
                "status": loop.status,
            }
        )
    return out


def thread_ids_of(source: Source) -> dict[str, str]:
    """Message-ID → thread id for the source."""
    return {
        bare(mid): tid
        for mid, tid in RawRecord.objects.filter(source=source).values_list(
            "metadata__message_id", "metadata__thread_id"
        )
    }


def bare(message_id: str | None) -> str:
    """A Message-ID without its angle brackets (labels keep them, storage may not)."""
    return (message_id or "").strip().strip("<>")


def similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, (a or "").lower(), (b or "").lower()).ratio()


def copies_of(source: Source) -> dict[str, str]:
    """Message id of each copy the import dropped → the id of the copy it kept
    (the ledger's ``copy of <key>`` rows; copies of one message count once)."""
    out = {}
    for external_id, reason in ImportedItem.objects.filter(
        source=source, kind=ImportedItem.Kind.DUPLICATE
    ).values_list("external_id", "reason"):
        if reason.startswith("copy of "):
            out[bare(external_id)] = bare(reason.removeprefix("copy of "))
    return out


def canonical(labels: list[dict], copies_by_corpus: dict) -> list[dict]:
    """Labels with message ids read through the copy ledger; two labels sharing a
    message (one conversation labelled once per copy) merge, each truth item kept
    once per (type, message, text)."""
    out: list[dict] = []
    for row in labels:
        copies = copies_by_corpus.get(row["corpus"], {})
        ids = {copies.get(bare(m), bare(m)) for m in row["message_ids"]}
        truth = [
            {
                **t,
                "message_id": copies.get(bare(t["message_id"]), bare(t["message_id"])),
            }
            for t in row["truth"]
        ]
        twin = next(
            (o for o in out if o["corpus"] == row["corpus"] and o["ids"] & ids), None
        )
        if twin is None:
            out.append({**row, "ids": ids, "truth": truth})
            continue
        twin["ids"] |= ids
        seen = {(t["type"], t["message_id"], t.get("text")) for t in twin["truth"]}
        twin["truth"] += [
            t for t in truth if (t["type"], t["message_id"], t.get("text")) not in seen
        ]
        if row["stratum"] == "opened":
            twin["stratum"] = "opened"
    return out


def score(labels: list[dict], loops_by_corpus: dict, tid_by_corpus: dict, verbose):
    """Per type and stratum: tp, fp, fn. Returns {(type, stratum): [tp, fp, fn]}.
    A loop is scored against the label holding its evidence message; only a loop
    whose message no label holds is scored by thread overlap."""
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    labelled = {(row["corpus"], m) for row in labels for m in row["ids"]}
    for row in labels:
        corpus = row["corpus"]
        tids = tid_by_corpus[corpus]
        thread_mids = row["ids"]
        thread_tids = {tids.get(m) for m in thread_mids} - {None}
        loops = [
            lp
            for lp in loops_by_corpus[corpus]
            if bare(lp["message_id"]) in thread_mids
            or (
                lp["thread_id"] in thread_tids
                and (corpus, bare(lp["message_id"])) not in labelled
            )
        ]
        for typ in TYPES:
            truth = [t for t in row["truth"] if t["type"] == typ]
            found = [lp for lp in loops if lp["type"] == typ]
            unmatched = list(truth)
            for lp in found:
                options = [
                    t
                    for t in unmatched
                    if bare(t["message_id"]) == bare(lp["message_id"])
                ]
                if options:
                    best = max(options, key=lambda t: similarity(t["text"], lp["text"]))
                    unmatched.remove(best)
                    counts[(typ, row["stratum"])][0] += 1
                else:
                    counts[(typ, row["stratum"])][1] += 1
                    if verbose:
                        print(
                            f"  FP {typ} {bare(lp['message_id'])[:30]} | {lp['text'][:150]}"
                        )
            counts[(typ, row["stratum"])][2] += len(unmatched)
            if verbose:
                for t in unmatched:
                    print(f"  FN {typ} {bare(t['message_id'])[:30]} | {t['text']}")
    return counts


def report(counts, labels) -> None:
    """Print precision / recall per type, per stratum and overall."""
    strata = sorted({r["stratum"] for r in labels})
    for s in strata:
        n = sum(1 for r in labels if r["stratum"] == s)
        print(f"stratum {s}: {n} threads")
    for typ in TYPES:
        for s in [*strata, "all"]:
            keys = [(typ, x) for x in strata] if s == "all" else [(typ, s)]
            tp = sum(counts[k][0] for k in keys)
            fp = sum(counts[k][1] for k in keys)
            fn = sum(counts[k][2] for k in keys)
            p = tp / (tp + fp) if tp + fp else float("nan")
            r = tp / (tp + fn) if tp + fn else float("nan")
            print(
                f"{typ:24} {s:7} precision={p:.2f} recall={r:.2f} "
                f"(tp={tp} fp={fp} fn={fn})"
            )
        if typ in BEFORE and len(labels) > 100:
            bp, br, btp, bfp, bfn = BEFORE[typ]
            print(
                f"{typ:24} before  precision={bp:.2f} recall={br:.2f} "
                f"(tp={btp} fp={bfp} fn={bfn}; main 6ac1f86)"
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fresh", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--corpus")
    parser.add_argument("--dump-candidates")
    parser.add_argument("--labels", default=str(LABELS))
    args = parser.parse_args()
    labels = []
    if Path(args.labels).exists():
        labels = [
            json.loads(line)
            for line in Path(args.labels).read_text().splitlines()
            if line.strip()
        ]
    corpora: dict[str, list[str]] = {}
    for row in labels:
        corpora.setdefault(row["corpus"], row["owners"])
    if args.corpus:
        corpora = {args.corpus: corpora.get(args.corpus, ["pallen@enron.com"])}
        labels = [r for r in labels if r["corpus"] == args.corpus]
    loops_by_corpus, tid_by_corpus, copies_by_corpus = {}, {}, {}
    for corpus, owners in corpora.items():
        source = ensure_import(corpus, owners, fresh=args.fresh)
        started = time.perf_counter()
        n = rerun_extraction(source)
        print(
            f"{corpus}: extracted {n} threads in {time.perf_counter() - started:.0f} s"
        )
        loops_by_corpus[corpus] = product_loops(source)
        tid_by_corpus[corpus] = thread_ids_of(source)
        copies_by_corpus[corpus] = copies_of(source)
        if args.dump_candidates:
            with Path(args.dump_candidates).open("a") as fh:
                for lp in loops_by_corpus[corpus]:
                    fh.write(json.dumps({"corpus": corpus, **lp}) + "\n")
    if labels:
        labels = canonical(labels, copies_by_corpus)
        report(score(labels, loops_by_corpus, tid_by_corpus, args.verbose), labels)


if __name__ == "__main__":
    main()
