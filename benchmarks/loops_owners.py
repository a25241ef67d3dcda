"""The many-owner open-loop dev set (issue 43, ``tests/data/loops_dev/owners/``):
its mailboxes, their candidates and the feature rows the learned decision is
trained and judged on (SPEC §5.1b).

Each mailbox is named by a draw record (``owners/draws/NAME.json``: corpus, owners,
seed, populations, the drawn threads and their strata) and labelled in
``owners/NAME.jsonl`` (one thread per line, as ``tests/data/loops_dev/README.md``).
``mailbox_rows`` imports the corpus with the learned decision off (the rules
alone propose), scores every open candidate against the labels and computes its
features: what ``benchmarks/loops_train.py`` fits and ``loops_quality.py`` judges
leave-one-mailbox-out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from benchmarks.loops_quality import (
    LABELS,
    Label,
    canonical_labels,
    copy_map,
    evaluate,
    import_corpus,
    norm_id,
    source_messages,
)
from brain.models import Source
from loops.decisions import loop_probabilities, source_index
from loops.features import LOOP_TYPES
from loops.models import CLOSED_BY_MODEL, LoopStatus, OpenLoop
from loops.selectors import open_candidates, reference_time

OWNERS = LABELS / "owners"


@dataclass
class OwnerSet:
    """One labelled mailbox of the dev set."""

    name: str
    corpus: str
    owners: list[str]
    labels: list[Label]
    draw: dict[str, Any]


@dataclass
class MailboxRows:
    """One mailbox's candidates with their verdicts (True real, False not, None
    outside the labelled threads) and features."""

    owner_set: OwnerSet
    source_id: str
    loops: list[OpenLoop]
    labels: list[Label]
    thread_ids: dict[str, set[str]]
    verdicts: dict[int, bool | None]
    features: dict[int, dict[str, float]] = field(default_factory=dict)


def owner_sets(only: str | None = None) -> list[OwnerSet]:
    """Every labelled mailbox (a draw record with a labels file), by name."""
    out = []
    for draw_path in sorted((OWNERS / "draws").glob("*.json")):
        name = draw_path.stem
        labels_path = OWNERS / f"{name}.jsonl"
        if (only and name != only) or not labels_path.exists():
            continue
        draw = json.loads(draw_path.read_text())
        strata = {t["thread"]: t["strata"] for t in draw["threads"]}
        labels = []
        for line in labels_path.read_text().splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            thread = norm_id(row["thread"])
            labels.append(
                Label(
                    corpus=draw["corpus"],
                    owners=list(draw["import_owners"]),
                    thread=thread,
                    message_ids={norm_id(m) for m in row["message_ids"]} | {thread},
                    stratum="none" if strata.get(thread) == ["none"] else "opened",
                    types=LOOP_TYPES,
                    truth=[
                        {**t, "message_id": norm_id(t.get("message_id"))}
                        for t in row.get("truth", [])
                    ],
                    rejected=row.get("rejected", []),
                )
            )
        out.append(
            OwnerSet(name, draw["corpus"], list(draw["import_owners"]), labels, draw)
        )
    return out


def candidates(owner_set: OwnerSet, *, reuse: bool) -> str:
    """Import the mailbox with the learned decision off (SPEC §5.1b: the rules
    alone propose); with ``reuse`` and a stored source, only reopen what an
    earlier run's decision closed. Returns the source id."""
    existing = Source.objects.filter(id=_source_id(owner_set)).first()
    if reuse and existing is not None:
        OpenLoop.objects.filter(
            source=existing,
            status=LoopStatus.DROPPED,
            closed_by__startswith=CLOSED_BY_MODEL,
        ).update(status=LoopStatus.OPEN, closed_at=None, closed_by="", confidence=1.0)
        return existing.id
    before = settings.LOOPS_DECISIONS_ENABLED
    settings.LOOPS_DECISIONS_ENABLED = False
    try:
        sid, _ = import_corpus(owner_set.corpus, owner_set.owners, reuse=False)
    finally:
        settings.LOOPS_DECISIONS_ENABLED = before
    return sid


def _source_id(owner_set: OwnerSet) -> str:
    from benchmarks.loops_quality import source_id_for

    return source_id_for(owner_set.corpus, owner_set.owners)


def mailbox_rows(owner_set: OwnerSet, *, reuse: bool) -> MailboxRows:
    """The mailbox's candidates, verdicts and features at its reference time."""
    sid = candidates(owner_set, reuse=reuse)
    messages = source_messages(sid)
    thread_ids = {
        tid: {norm_id(m.message_id) for m in msgs} for tid, msgs in messages.items()
    }
    thread_of = {mid: tid for tid, mids in thread_ids.items() for mid in mids}
    labels = canonical_labels(owner_set.labels, copy_map(sid), thread_of)
    loops = open_candidates(source_id=sid)
    _, verdicts = evaluate(labels, loops, thread_ids)
    source = Source.objects.get(id=sid)
    index = source_index(source=source, now=reference_time(source=source))
    from loops.decisions import DecisionModel

    blank = DecisionModel(
        names=(), mean=(), scale=(), coef=(), intercept=0.0, threshold=0.5, meta={}
    )
    scored = loop_probabilities(loops, index, blank)
    return MailboxRows(
        owner_set=owner_set,
        source_id=sid,
        loops=loops,
        labels=labels,
        thread_ids=thread_ids,
        verdicts=verdicts,
        features={pk: features for pk, (_, features) in scored.items()},
    )


def training_table(
    mailboxes: list[MailboxRows], *, leave_out: str | None = None
) -> tuple[list[dict[str, float]], list[int], list[str]]:
    """``(rows, labels, groups)`` of every labelled candidate, ordered by mailbox
    name then loop id (a fixed order: the fit is reproducible), leaving out the
    mailbox ``leave_out``."""
    rows: list[dict[str, float]] = []
    labels: list[int] = []
    groups: list[str] = []
    for box in sorted(mailboxes, key=lambda b: b.owner_set.name):
        if leave_out is not None and _group(box.owner_set.name) == _group(leave_out):
            continue
        for loop in sorted(box.loops, key=loop_key):
            verdict = box.verdicts.get(loop.pk)
            if verdict is None:
                continue
            rows.append(box.features[loop.pk])
            labels.append(int(verdict))
            groups.append(_group(box.owner_set.name))
    return rows, labels, groups


def loop_key(loop: OpenLoop) -> tuple[str, str, str]:
    """A candidate's order independent of database ids: thread, type, evidence."""
    evidence = ",".join(norm_id(e.get("message_id")) for e in loop.evidence or [])
    return (loop.thread_id, loop.loop_type, evidence)


def _group(name: str) -> str:
    """The owner a mailbox belongs to (two cuts of one mailbox are one owner)."""
    return name.split("@", 1)[0]


def lomo(*, reuse: bool, only: str | None, verbose: bool) -> None:
    """Leave-one-owner-out (issue 43): for each mailbox, fit on every other
    owner's labelled candidates, decide that mailbox's candidates, and print
    precision and recall per loop type beside the rules-only floor (every
    candidate kept), then its ``waiting`` top 10 with a verdict per group; then
    the pooled figures."""
    from benchmarks.loops_quality import Tally, waiting_verdicts
    from loops.decisions import DecisionModel, decide, fit
    from loops.services import loops_apply_decisions

    boxes = [mailbox_rows(o, reuse=reuse) for o in owner_sets()]
    pooled: dict[str, Tally] = {t: Tally() for t in LOOP_TYPES}
    floor: dict[str, Tally] = {t: Tally() for t in LOOP_TYPES}
    tops: dict[str, list[str]] = {}
    before: dict[str, tuple[int, int]] = {}
    for box in boxes:
        name = box.owner_set.name
        if only and name != only:
            continue
        rows, labels, groups = training_table(boxes, leave_out=name)
        model: DecisionModel = fit(rows, labels, groups)
        kinds = {lp.pk: lp.loop_type for lp in box.loops}
        probs = {pk: decide(model, kinds[pk], f) for pk, f in box.features.items()}
        kept = [lp for lp in box.loops if model.keeps(probs[lp.pk])]
        learned, _ = evaluate(box.labels, kept, box.thread_ids)
        rules, _ = evaluate(box.labels, box.loops, box.thread_ids)
        print(
            f"\n{name}: {len(box.loops)} candidates, {len(kept)} kept "
            f"(threshold {model.threshold:.2f}, trained on {len(rows)} rows)"
        )
        for loop_type in LOOP_TYPES:
            t, f = learned[(loop_type, "all")], rules[(loop_type, "all")]
            pooled[loop_type].add(t)
            floor[loop_type].add(f)
            if t.product or t.truth or f.product:
                print(
                    f"  {loop_type:22} learned {t.line()}\n  {'':22} rules   {f.line()}"
                )
            if verbose:
                for line in t.fps:
                    print(f"      FP   {line}")
                for line in t.misses:
                    print(f"      MISS {line}")
        before[name] = drawn_top10(box)
        source = Source.objects.get(id=box.source_id)
        loops_apply_decisions(
            loops=box.loops,
            probabilities=probs,
            threshold=model.threshold,
            now=reference_time(source=source),
        )
        _, verdicts = evaluate(box.labels, box.loops, box.thread_ids)
        tops[name] = waiting_verdicts(box.source_id, verdicts)
    print("\nPooled, leave-one-owner-out (learned | rules-only floor)")
    for loop_type in LOOP_TYPES:
        print(
            f"  {loop_type:22} {pooled[loop_type].line()}  |  {floor[loop_type].line()}"
        )
    for name, lines in tops.items():
        print(f"\nwaiting top 10 on {name} (learned decision, leave-one-owner-out):")
        for line in lines or ["  (no groups)"]:
            print(line)
        defensible = sum(1 for ln in lines if ln.split()[1] in ("yes", "yes?"))
        was, of = before.get(name, (0, 0))
        print(
            f"  defensible (yes): {defensible} of {len(lines)}; at the draw (the "
            f"ranking then): {was} of {of}"
        )


def drawn_top10(box: MailboxRows) -> tuple[int, int]:
    """``(defensible groups, groups)`` of the ``waiting`` top 10 the draw saw (its
    ``top10`` threads): a group (counterparty) is defensible when one of its loops
    there is real and none is wrong (LOOPS_LABELLING.md)."""
    wanted = {
        t["thread"] for t in box.owner_set.draw["threads"] if "top10" in t["strata"]
    }
    marks: dict[str, list[bool | None]] = {}
    for loop in box.loops:
        if box.thread_ids.get(loop.thread_id, set()) & wanted:
            email = (loop.counterparty_email or "").lower()
            marks.setdefault(email, []).append(box.verdicts.get(loop.pk))
    good = sum(1 for m in marks.values() if True in m and False not in m)
    return good, len(marks)
