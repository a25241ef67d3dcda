"""Open-loop quality on real mail nobody here wrote (SPEC §5, §11 "truth on unseen
input"): precision and recall per loop type against the labelled dev set, per
stratum and overall, and the verdict of every ``waiting`` top-10 group.

Labels: ``tests/data/loops_dev/replies.jsonl`` (unanswered_inbound/outbound) and
``tests/data/loops_dev/commitments.jsonl`` (commitment_owed_by_me/to_me); the format
is one labelled thread per line (see ``tests/data/loops_dev/README.md``). Each corpus
named by a label is imported whole from ``../shared/data`` (``BRAIN_SHARED_DATA``
overrides) into a fresh mailbox source per owner set its labels name (one corpus
read by two owners is two mailboxes), detection and
extraction run offline (no LLM), and the open loops at the corpus's reference time
are compared with the labels.

Each figure is printed beside a floor measured in the same run on the same labels
(``floor_loops``: the turn rule alone, every "I will" a commitment) with the ratio.

Run (from any worktree): ``.venv/bin/python benchmarks/loops_quality.py``
  ``--only TYPE``     one loop type
  ``--corpus C``      one corpus (path under the shared data, e.g. enron/allen-p;
                      ``PATH@YYYY-MM-DD``: only the messages dated before that day,
                      as an export taken then, ``benchmarks.data.exported_before``)
  ``--verbose``       every false positive and miss with its reason
  ``--dump N``        labelling help: print up to N owner-involved, unlabelled threads
                      (messages' newest text and the product's loops)
  ``--blind``         with ``--dump``: hide the product's loops, order threads by
                      their first message's date (not loops first) and show only
                      threads in which an owner wrote a message (blind labelling
                      of my asks)
  ``--reuse``         skip the import when the source already exists (detection
                      is re-run on the stored mail)
  ``--assume-answers-visible``  score as if every source held the other side's
                      mail: the sent-only rule (``loops.selectors.mail_coverage``)
                      off, to see what it holds back
  ``--no-list-asks``  my own help requests to a mailing list open nothing
                      (``settings.LOOPS_LIST_ASKS`` off; on by default)

Besides the figures per type and stratum, each type is broken down per corpus
family (``family``: enron/allen-p, its sent folder alone, SpamAssassin, others),
so a rule that only helps one mailbox shows.

Matching (tests/data/loops_dev/README.md): a product loop is scored against the labelled thread
holding its evidence message (else every labelled thread its thread overlaps) and
matches a truth item of the same type there; commitments also need the same message
and direction, several per message matched greedily by text similarity. Message ids
are read through the import's copy ledger (copies of one message count once). Precision = matched product loops / product loops in labelled threads;
recall = matched truth items / truth items.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")
os.environ.setdefault("LOOPS_EXTRACTION_ENABLED", "false")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from benchmarks.data import corpus_path, exported_before  # noqa: E402
from brain.access import local_caller  # noqa: E402
from brain.models import RawRecord, Source  # noqa: E402
from connectors.mailbox.sync import mailbox_import  # noqa: E402
from connectors.models import ImportedItem  # noqa: E402
from loops.definitions import collapse, is_mine, reply_text  # noqa: E402
from loops.message import MailMessage  # noqa: E402
from loops.models import GraceHold, LoopStatus, OpenLoop  # noqa: E402
from loops.pipeline import process_threads  # noqa: E402
from loops.waiting import waiting_report  # noqa: E402

LABELS = ROOT / "tests" / "data" / "loops_dev"
FILES = {
    "replies.jsonl": ("unanswered_inbound", "unanswered_outbound"),
    "commitments.jsonl": ("commitment_owed_by_me", "commitment_owed_to_me"),
}
TYPES = [t for types in FILES.values() for t in types]
STRATA = ("opened", "none")


def shared_data() -> Path:
    """``../shared/data`` relative to the repository root, or ``BRAIN_SHARED_DATA``;
    the main checkout's sibling when run from a worktree elsewhere."""
    env = os.environ.get("BRAIN_SHARED_DATA")
    if env:
        return Path(env)
    for base in (ROOT.parent, Path("/work")):
        if (base / "shared" / "data").is_dir():
            return base / "shared" / "data"
    raise SystemExit("shared data not found: set BRAIN_SHARED_DATA")


@dataclass
class Label:
    """One labelled thread of one file (its types only)."""

    corpus: str
    owners: list[str]
    thread: str
    message_ids: set[str]
    stratum: str
    types: tuple[str, ...]
    truth: list[dict[str, Any]]
    rejected: list[dict[str, Any]]


def norm_id(message_id: str | None) -> str:
    """A Message-ID without its angle brackets and surrounding space (labels carry
    ``<…>``, stored ids may not)."""
    return (message_id or "").strip().strip("<>").strip()


def load_labels() -> list[Label]:
    """Every labelled thread of both files (a missing file is no labels)."""
    out = []
    for name, types in FILES.items():
        path = LABELS / name
        if not path.exists():
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SystemExit(f"{path}:{n}: not JSON: {exc}") from exc
            out.append(
                Label(
                    corpus=row["corpus"],
                    owners=[o.lower() for o in row["owners"]],
                    thread=row["thread"],
                    message_ids={norm_id(m) for m in row["message_ids"]}
                    | {norm_id(row["thread"])},
                    stratum=row.get("stratum", "none"),
                    types=types,
                    truth=[
                        {**t, "message_id": norm_id(t.get("message_id"))}
                        for t in row.get("truth", [])
                        if t["type"] in types
                    ],
                    rejected=row.get("rejected", []),
                )
            )
    return out


FAMILIES = ("enron/allen-p", "enron/allen-p/sent_items", "spamassassin", "others")


def family(corpus: str) -> str:
    """The corpus family a labelled corpus belongs to (one of ``FAMILIES``): the
    allen-p mailbox, its sent folder alone, any SpamAssassin file, or others."""
    path = corpus.split("@", 1)[0]
    if path.startswith("spamassassin"):
        return "spamassassin"
    return path if path in FAMILIES else "others"


def source_id_for(corpus: str, owners: list[str]) -> str:
    """``lq-`` + the corpus path made slug-like plus a short hash of the corpus and
    its owners (one benchmark source per mailbox: one corpus read by two owners
    is two mailboxes; source ids are at most 32 characters)."""
    import hashlib

    slug = "".join(c if c.isalnum() else "-" for c in corpus.lower()).strip("-")
    key = corpus + "|" + ",".join(sorted(owners))
    digest = hashlib.sha256(key.encode()).hexdigest()[:6]
    return f"lq-{slug[:20].strip('-')}-{digest}"


def import_corpus(corpus: str, owners: list[str], *, reuse: bool) -> tuple[str, float]:
    """Import ``corpus`` owned by ``owners`` into a fresh source (or re-run
    detection on a stored one with ``reuse``). Returns (source id, seconds)."""
    sid = source_id_for(corpus, owners)
    started = time.perf_counter()
    existing = Source.objects.filter(id=sid).first()
    if existing and reuse:
        OpenLoop.objects.filter(source=existing).delete()
        GraceHold.objects.filter(source=existing).delete()
        from loops.models import ExtractionRun

        ExtractionRun.objects.filter(source=existing).delete()
        threads = set(
            RawRecord.objects.filter(source=existing).values_list(
                "metadata__thread_id", flat=True
            )
        )
        process_threads(source_id=sid, thread_ids=sorted(t for t in threads if t))
        return sid, time.perf_counter() - started
    if existing:
        existing.delete()
    path, until = corpus_path(corpus, shared_data())
    if not path.exists():
        raise SystemExit(f"corpus not found: {path}")
    mailbox_import(
        source_id=sid,
        path=path,
        owners=owners,
        actor="loops_quality",
        entries=exported_before(path, until) if until else None,
    )
    return sid, time.perf_counter() - started


def copy_map(sid: str) -> dict[str, str]:
    """Message id of each dropped copy → the id of the copy the import kept (the
    ledger's ``copy of <key>`` rows). Copies of one message count once (issue 14),
    so a label naming the dropped copy means the kept one."""
    out: dict[str, str] = {}
    for external_id, reason in ImportedItem.objects.filter(
        source_id=sid, kind=ImportedItem.Kind.DUPLICATE
    ).values_list("external_id", "reason"):
        if reason.startswith("copy of "):
            out[norm_id(external_id)] = norm_id(reason.removeprefix("copy of "))
    return out


def canonical_labels(
    labels: list[Label], copies: dict[str, str], thread_of: dict[str, str]
) -> list[Label]:
    """``labels`` with every message id read through ``copies``. Two labels of one
    file merge when they share a message (one conversation labelled once per
    copy) or, for the thread loop types, when the product put their messages in
    one thread (``thread_of``: message id → product thread id; one conversation
    labelled in pieces, which holds one loop per type). A merged label keeps a
    truth item once per (type, message, counterparty), for thread types once per
    (type, counterparty)."""

    def canon(mid: str) -> str:
        return copies.get(mid, mid)

    def key(t: dict[str, Any]) -> tuple[str, ...]:
        if t["type"].startswith("commitment"):
            return (t["type"], t["message_id"], t.get("counterparty") or "")
        return (t["type"], t.get("counterparty") or "")

    out: list[Label] = []
    threads: dict[int, set[str]] = {}
    for lab in labels:
        ids = {canon(m) for m in lab.message_ids}
        tids = (
            set()
            if any(t.startswith("commitment") for t in lab.types)
            else {thread_of[m] for m in ids if m in thread_of}
        )
        truth = [{**t, "message_id": canon(t["message_id"])} for t in lab.truth]
        twin = next(
            (
                o
                for o in out
                if o.types == lab.types
                and (o.message_ids & ids or threads[id(o)] & tids)
            ),
            None,
        )
        if twin is None:
            merged = Label(
                corpus=lab.corpus,
                owners=lab.owners,
                thread=canon(norm_id(lab.thread)),
                message_ids=ids,
                stratum=lab.stratum,
                types=lab.types,
                truth=[],
                rejected=list(lab.rejected),
            )
            out.append(merged)
            threads[id(merged)] = set(tids)
            twin = merged
        else:
            twin.message_ids |= ids
            threads[id(twin)] |= tids
            twin.rejected += lab.rejected
            if lab.stratum == "opened":
                twin.stratum = "opened"
        seen = {key(t) for t in twin.truth}
        for t in truth:
            if key(t) not in seen:
                seen.add(key(t))
                twin.truth.append(t)
    return out


def source_messages(sid: str) -> dict[str, list[MailMessage]]:
    """Every stored message of the source by thread id, oldest first."""
    threads: dict[str, list[MailMessage]] = defaultdict(list)
    for pk, metadata in RawRecord.objects.filter(source_id=sid).values_list(
        "id", "metadata"
    ):
        if metadata.get("message_id"):
            m = MailMessage.from_metadata(metadata, raw_record_id=pk)
            threads[m.thread_id].append(m)
    for msgs in threads.values():
        msgs.sort(key=lambda m: (m.date is None, m.date, m.message_id))
    return threads


@dataclass
class FloorLoop:
    """A loop of the naive floor detector, shaped like the ``OpenLoop`` fields
    ``evaluate`` reads."""

    pk: int
    loop_type: str
    thread_id: str
    evidence: list[dict[str, Any]]
    counterparty_email: str
    summary: str


_FLOOR_PROMISE = re.compile(r"[^.!?\n]*\b(?:i|we)(?:'ll| will| shall)\b[^.!?\n]*", re.I)


def floor_loops(
    threads: dict[str, list[MailMessage]], owners: list[str]
) -> list[FloorLoop]:
    """The floor every figure is printed beside: SPEC §5.2's turn rule alone, no
    reply expectation, senders or rules. Per thread whose last message is not
    mine and names me in To: ``unanswered_inbound``; whose last message is mine
    and has a "?": ``unanswered_outbound``; every "I/we will …" sentence of the
    newest text: a commitment (mine → owed_by_me, theirs to me → owed_to_me)."""
    out: list[FloorLoop] = []
    owner_set = set(owners)

    def add(loop_type: str, tid: str, m: MailMessage, who: str, text: str) -> None:
        out.append(
            FloorLoop(
                pk=-(len(out) + 1),
                loop_type=loop_type,
                thread_id=tid,
                evidence=[{"message_id": m.message_id}],
                counterparty_email=who,
                summary=f"floor: {text}",
            )
        )

    for tid, msgs in threads.items():
        dated = [m for m in msgs if m.date]
        if not dated:
            continue
        last = dated[-1]
        if is_mine(last, owner_set):
            if "?" in reply_text(last.body):
                add("unanswered_outbound", tid, last, (last.to or [""])[0], "")
        elif owner_set & {a.lower() for a in last.to}:
            add("unanswered_inbound", tid, last, last.from_addr or "", "")
        for m in dated:
            mine = is_mine(m, owner_set)
            if not mine and not owner_set & {a.lower() for a in m.to}:
                continue
            for match in _FLOOR_PROMISE.finditer(reply_text(m.body)):
                add(
                    "commitment_owed_by_me" if mine else "commitment_owed_to_me",
                    tid,
                    m,
                    ((m.to or [""])[0] if mine else m.from_addr) or "",
                    collapse(match.group(0)),
                )
    return out


def loop_text(loop: OpenLoop | FloorLoop) -> str:
    """The words a commitment loop promises (its summary after the colon)."""
    return loop.summary.split(":", 1)[-1].strip().strip('"')


def similarity(a: str, b: str) -> float:
    """Text similarity of two promises, 0..1 (lower-cased, whitespace collapsed)."""
    return difflib.SequenceMatcher(
        None, collapse(a).lower(), collapse(b).lower()
    ).ratio()


@dataclass
class Tally:
    """Counts for one loop type (and stratum)."""

    product: int = 0
    matched: int = 0
    truth: int = 0
    found: int = 0
    fps: list[str] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float:
        """Matched product loops / product loops (nan without loops)."""
        return self.matched / self.product if self.product else float("nan")

    @property
    def recall(self) -> float:
        """Truth items found / truth items (nan without truth)."""
        return self.found / self.truth if self.truth else float("nan")

    def add(self, other: Tally) -> None:
        """Add ``other``'s counts and lines to this tally."""
        self.product += other.product
        self.matched += other.matched
        self.truth += other.truth
        self.found += other.found
        self.fps += other.fps
        self.misses += other.misses

    def line(self) -> str:
        """``precision P (m/n)  recall R (f/t)``."""
        p, r = self.precision, self.recall
        return (
            f"precision {p:5.2f} ({self.matched}/{self.product})  "
            f"recall {r:5.2f} ({self.found}/{self.truth})"
        )


def ratio(value: float, floor: float) -> str:
    """``value / floor`` as ``x1.23`` ('-' when either is unknown or zero)."""
    if value != value or floor != floor or not floor:
        return "-"
    return f"x{value / floor:.2f}"


def evaluate(
    labels: list[Label],
    loops: list[OpenLoop] | list[FloorLoop],
    thread_ids: dict[str, set[str]],
) -> tuple[dict[tuple[str, str], Tally], dict[int, bool | None]]:
    """Score ``loops`` against ``labels``. ``thread_ids`` maps a product thread id to
    its message ids. Returns tallies keyed (type, stratum or "all") and, per loop id,
    True (real), False (not real) or None (not in a labelled thread)."""
    tallies: dict[tuple[str, str], Tally] = defaultdict(Tally)
    verdicts: dict[int, bool | None] = {}
    by_msg: dict[str, list[Label]] = defaultdict(list)
    for lab in labels:
        for mid in lab.message_ids:
            by_msg[mid].append(lab)
    loops_by_label: dict[int, list[OpenLoop | FloorLoop]] = defaultdict(list)
    for loop in loops:
        # A loop is scored once, against the labelled thread holding its evidence;
        # only without one, against every labelled thread its product thread
        # overlaps (the product may join conversations labelled apart).
        hits: dict[int, Label] = {}
        for ids in (
            {norm_id(e.get("message_id")) for e in loop.evidence},
            set(thread_ids.get(loop.thread_id, ())),
        ):
            hits = {
                id(lab): lab
                for mid in ids
                for lab in by_msg.get(mid, ())
                if loop.loop_type in lab.types
            }
            if hits:
                break
        if not hits:
            verdicts[loop.pk] = None
        for lab in hits.values():
            loops_by_label[id(lab)].append(loop)
    for lab in labels:
        product = loops_by_label.get(id(lab), [])
        for loop_type in lab.types:
            mine = [lp for lp in product if lp.loop_type == loop_type]
            truth = [t for t in lab.truth if t["type"] == loop_type]
            pairs = match(loop_type, mine, truth)
            for key in ((loop_type, lab.stratum), (loop_type, "all")):
                tally = tallies[key]
                tally.product += len(mine)
                tally.truth += len(truth)
                tally.matched += len({lp.pk for lp, _ in pairs})
                tally.found += len({id(t) for _, t in pairs})
            matched_loops = {lp.pk for lp, _ in pairs}
            matched_truth = {id(t) for _, t in pairs}
            for lp in mine:
                verdicts[lp.pk] = lp.pk in matched_loops
                if lp.pk not in matched_loops:
                    why = next(
                        (
                            r.get("reason", "")
                            for r in lab.rejected
                            if r.get("type") == loop_type
                        ),
                        "(no rejection reason labelled)",
                    )
                    tallies[(loop_type, "all")].fps.append(
                        f"{lab.corpus} {lab.thread} → {lp.counterparty_email or '-'}: "
                        f"{lp.summary[:90]} | {why}"
                    )
            for t in truth:
                if id(t) not in matched_truth:
                    tallies[(loop_type, "all")].misses.append(
                        f"{lab.corpus} {t.get('message_id')} → "
                        f"{t.get('counterparty') or '-'}: {t.get('reason', '')}"
                    )
    return tallies, verdicts


def match(
    loop_type: str, loops: list[OpenLoop | FloorLoop], truth: list[dict[str, Any]]
) -> list[tuple[OpenLoop | FloorLoop, dict[str, Any]]]:
    """Pairs (product loop, truth item). Thread loops: one per type per thread, so
    any pairing; commitments: same message, greedy by text similarity."""
    if not loops or not truth:
        return []
    if not loop_type.startswith("commitment"):
        return list(zip(loops, truth, strict=False))
    candidates = []
    for lp in loops:
        ev = {norm_id(e.get("message_id")) for e in lp.evidence}
        for t in truth:
            if t.get("message_id") in ev:
                sim = similarity(loop_text(lp), t.get("text") or "")
                candidates.append((sim, lp, t))
    candidates.sort(key=lambda c: -c[0])
    used_l: set[int] = set()
    used_t: set[int] = set()
    pairs = []
    for _, lp, t in candidates:
        if lp.pk in used_l or id(t) in used_t:
            continue
        used_l.add(lp.pk)
        used_t.add(id(t))
        pairs.append((lp, t))
    return pairs


def waiting_verdicts(sid: str, verdicts: dict[int, bool | None]) -> list[str]:
    """The ``waiting`` top 10 of the source with a verdict per group
    (LOOPS_LABELLING.md): yes = a real loop and no noise; partly = a real loop and
    noise; no = no real loop; ? = a loop outside the labelled threads decides."""
    report = waiting_report(caller=local_caller(actor="loops_quality"), sources=[sid])
    lines = []
    groups = report["groups"][:10]
    by_id = {
        lp.pk: lp
        for lp in OpenLoop.objects.filter(source_id=sid, status=LoopStatus.OPEN)
    }
    for n, group in enumerate(groups, 1):
        ids = [v["id"] for v in group["loops"]]
        # Every loop of the group, not only the five shown.
        email = group.get("counterparty_email") or group["counterparty"]
        all_ids = [
            pk
            for pk, lp in by_id.items()
            if (lp.counterparty_email or "") == email or pk in ids
        ]
        marks = [verdicts.get(pk) for pk in all_ids]
        real = sum(1 for m in marks if m is True)
        wrong = sum(1 for m in marks if m is False)
        unknown = sum(1 for m in marks if m is None)
        if real and not wrong:
            verdict = "yes" if not unknown else "yes?"
        elif real:
            verdict = "partly"
        elif wrong:
            verdict = "no"
        else:
            verdict = "?"
        kinds = ",".join(sorted({v["loop_type"] for v in group["loops"]}))
        lines.append(
            f"  {n:2}. {verdict:6} score {group['score']:4}  "
            f"{group['loop_count']} loop(s) [{kinds}]  {email}  "
            f"(real {real}, wrong {wrong}, unlabelled {unknown})"
        )
    return lines


def dump(
    sid: str, labels: list[Label], owners: list[str], limit: int, *, blind: bool = False
) -> None:
    """Labelling help: owner-involved threads in the detection window that no label
    covers, with each message's newest text and the product's open loops. ``blind``:
    no loops shown, threads in date order (the order cannot leak which ones hold
    loops), only threads in which an owner wrote, each text up to 1,500 characters."""
    threads = source_messages(sid)
    labelled = {mid for lab in labels for mid in lab.message_ids}
    loops_by_thread: dict[str, list[OpenLoop]] = defaultdict(list)
    for lp in OpenLoop.objects.filter(source_id=sid, status=LoopStatus.OPEN):
        loops_by_thread[lp.thread_id].append(lp)
    source = Source.objects.get(id=sid)
    owner_set = set(source.owner_addresses) | set(owners)
    from datetime import timedelta

    from loops.selectors import reference_time

    newest = reference_time(source=source)

    shown = 0
    order = sorted(
        threads.items(),
        key=lambda kv: (
            (kv[1][0].date is None, kv[1][0].date, kv[0])
            if blind
            else (not loops_by_thread.get(kv[0]), kv[0])
        ),
    )
    for tid, msgs in order:
        if shown >= limit:
            break
        if any(norm_id(m.message_id) in labelled for m in msgs):
            continue
        last = max((m.date for m in msgs if m.date), default=None)
        if last is None or last < newest - timedelta(days=90):
            continue
        involved = any(
            is_mine(m, owner_set) or owner_set & {*m.to, *m.cc} for m in msgs
        )
        if not involved or (blind and not any(is_mine(m, owner_set) for m in msgs)):
            continue
        shown += 1
        print(f"=== THREAD {msgs[0].message_id}  ({len(msgs)} msgs) tid={tid}")
        print("    ids:", json.dumps([m.message_id for m in msgs]))
        for lp in [] if blind else loops_by_thread.get(tid, []):
            print(
                f"    LOOP {lp.loop_type} → {lp.counterparty_email}: {lp.summary[:100]}"
            )
        for m in msgs:
            who = "ME" if is_mine(m, owner_set) else m.from_addr
            to = ",".join(m.to[:4]) + (f"+{len(m.to) - 4}" if len(m.to) > 4 else "")
            cc = f" cc={len(m.cc)}" if m.cc else ""
            print(
                f"  -- {m.date:%Y-%m-%d %H:%M} {who} → {to}{cc} | {m.subject[:70]}"
                f" | {m.message_id}"
            )
            text = collapse(reply_text(m.body))
            print("     " + text[: 1500 if blind else 600])


def parse_args() -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=TYPES)
    parser.add_argument("--corpus")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--dump", type=int, default=0)
    parser.add_argument("--blind", action="store_true")
    parser.add_argument("--assume-answers-visible", action="store_true")
    parser.add_argument("--no-list-asks", action="store_true")
    parser.add_argument(
        "--owners", default="", help="owners for --dump of an unlabelled corpus"
    )
    parser.add_argument(
        "--legacy",
        action="store_true",
        help="the first dev set (replies.jsonl, commitments.jsonl), rules as shipped",
    )
    parser.add_argument("--mailbox", help="with the owner set: only this mailbox")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if not args.legacy and not args.dump:
        from benchmarks.loops_owners import lomo

        lomo(reuse=args.reuse, only=args.mailbox, verbose=args.verbose)
        return
    assert not settings.ANTHROPIC_API_KEY or not settings.LOOPS_EXTRACTION_ENABLED, (
        "offline only: unset ANTHROPIC_API_KEY or LOOPS_EXTRACTION_ENABLED"
    )
    if args.assume_answers_visible:
        import loops.pipeline
        import loops.selectors
        import loops.waiting
        from loops.definitions import MailCoverage

        def visible(*_: Any, **__: Any) -> MailCoverage:
            return MailCoverage()

        loops.pipeline.mail_coverage = visible  # type: ignore[assignment]
        loops.waiting.mail_coverage = visible  # type: ignore[assignment]
        loops.selectors.SourceScans.coverage = visible  # type: ignore[method-assign]
    if args.no_list_asks:
        settings.LOOPS_LIST_ASKS = False
    labels = load_labels()
    # One mailbox per (corpus, owner set): labels of one corpus with other owners
    # are another person's mailbox (their mutual mail is not all "mine").
    mailboxes: dict[tuple[str, tuple[str, ...]], str] = {}
    for lab in labels:
        mailboxes.setdefault((lab.corpus, tuple(sorted(set(lab.owners)))), "")
    if args.corpus:
        wanted = tuple(sorted({o.lower() for o in args.owners.split(",") if o}))
        mailboxes = {
            key: ""
            for key in mailboxes
            if key[0] == args.corpus and (not wanted or key[1] == wanted)
        } or {(args.corpus, wanted): ""}
    shared = {c for c, _ in mailboxes if sum(1 for k in mailboxes if k[0] == c) > 1}
    for corpus, owned in mailboxes:
        mailboxes[(corpus, owned)] = (
            f"{corpus} as {owned[0]}" if corpus in shared else corpus
        )
    types = [args.only] if args.only else TYPES
    total: dict[tuple[str, str], Tally] = defaultdict(Tally)
    floor_total: dict[tuple[str, str], Tally] = defaultdict(Tally)
    samples: dict[tuple[str, str], int] = defaultdict(int)
    by_family: dict[tuple[str, str], Tally] = defaultdict(Tally)
    top10: dict[str, list[str]] = {}
    automated: dict[str, int] = {}
    for (corpus, owned), name in mailboxes.items():
        owners = list(owned)
        theirs = [
            lab
            for lab in labels
            if lab.corpus == corpus and tuple(sorted(set(lab.owners))) == owned
        ]
        sid, seconds = import_corpus(corpus, owners, reuse=args.reuse)
        print(f"{name}: imported/detected in {seconds:.1f} s (source {sid})")
        if args.dump:
            dump(
                sid,
                theirs,
                owners,
                args.dump,
                blind=args.blind,
            )
            continue
        loops = list(
            OpenLoop.objects.filter(
                source_id=sid, status=LoopStatus.OPEN, loop_type__in=types
            )
        )
        messages = source_messages(sid)
        thread_ids = {
            tid: {norm_id(m.message_id) for m in msgs} for tid, msgs in messages.items()
        }
        thread_of = {mid: tid for tid, mids in thread_ids.items() for mid in mids}
        mine = canonical_labels(theirs, copy_map(sid), thread_of)
        tallies, verdicts = evaluate(mine, loops, thread_ids)
        for (loop_type, stratum), tally in tallies.items():
            if stratum == "all":
                t = by_family[(loop_type, family(corpus))]
                t.product += tally.product
                t.matched += tally.matched
                t.truth += tally.truth
                t.found += tally.found
        for key, tally in tallies.items():
            total[key].add(tally)
        known = sorted(
            {a.lower() for a in Source.objects.get(id=sid).owner_addresses}
            | set(owners)
        )
        floor = [lp for lp in floor_loops(messages, known) if lp.loop_type in types]
        for key, tally in evaluate(mine, floor, thread_ids)[0].items():
            f = floor_total[key]
            f.product += tally.product
            f.matched += tally.matched
            f.truth += tally.truth
            f.found += tally.found
        for lab in mine:
            for loop_type in lab.types:
                samples[(loop_type, lab.stratum)] += 1
                samples[(loop_type, "all")] += 1
        all_loops = list(OpenLoop.objects.filter(source_id=sid, status=LoopStatus.OPEN))
        _, all_verdicts = evaluate(mine, all_loops, thread_ids)
        top10[name] = waiting_verdicts(sid, all_verdicts)
        automated[name] = (
            waiting_report(caller=local_caller(actor="loops_quality"), sources=[sid])
            .get("automated", {})
            .get("loop_count", 0)
        )
    if args.dump:
        return
    print()
    print("Per loop type (threads labelled; product loops matched; truth found)")
    for loop_type in types:
        for stratum in ("all", *STRATA):
            n = samples.get((loop_type, stratum), 0)
            if not n:
                continue
            tally = total[(loop_type, stratum)]
            print(f"  {loop_type:22} {stratum:6} n={n:4}  {tally.line()}")
            floor = floor_total[(loop_type, stratum)]
            print(
                f"  {'':22} {'floor':6} {'':6}  {floor.line()}  "
                f"ratio precision {ratio(tally.precision, floor.precision)}"
                f" recall {ratio(tally.recall, floor.recall)}"
            )
        for fam in FAMILIES:
            if (loop_type, fam) in by_family:
                print(f"  {'':22} {fam:24}  {by_family[(loop_type, fam)].line()}")
        if args.verbose:
            for line in total[(loop_type, "all")].fps:
                print(f"      FP   {line}")
            for line in total[(loop_type, "all")].misses:
                print(f"      MISS {line}")
    for corpus, lines in top10.items():
        print(f"\nwaiting top 10 on {corpus}:")
        for line in lines or ["  (no groups)"]:
            print(line)
        counted = [ln.split()[1] for ln in lines]
        defensible = sum(1 for v in counted if v in ("yes", "yes?"))
        print(f"  defensible (yes): {defensible} of {len(lines)}")
        print(f"  automated senders (not ranked): {automated.get(corpus, 0)} loop(s)")


if __name__ == "__main__":
    main()
