"""Train the learned open-loop decision (SPEC §5.1b, issue 43) from the many-owner
dev set and ship it.

1. Every labelled mailbox (``tests/data/loops_dev/owners/``) is imported from the
   shared data with the decision off, and each open candidate in a labelled
   thread becomes a row: its features (``loops.features``), its verdict (1 real,
   0 not) and its owner.
2. The rows are written to ``tests/data/loops_dev/owners/table.jsonl`` (floats
   rounded to 6 places; ordered by mailbox, thread, type and evidence, never by
   database id).
3. The model is fitted from that file alone (``loops.decisions.fit``) and written
   to ``loops/data/decisions.json``. Fitting the same table gives the same bytes:
   ``tests/loops/test_decisions.py`` refits the committed table and compares.

Run: ``.venv/bin/python benchmarks/loops_train.py [--reuse] [--from-table]``
(``--from-table``: skip step 1-2 and refit the committed table).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")
os.environ.setdefault("LOOPS_EXTRACTION_ENABLED", "false")

import django  # noqa: E402

django.setup()

from benchmarks.loops_owners import (  # noqa: E402
    OWNERS,
    loop_key,
    mailbox_rows,
    owner_sets,
)
from loops.decisions import MODEL_FILE, fit_table, table_line  # noqa: E402

TABLE = OWNERS / "table.jsonl"


def build_table(*, reuse: bool) -> int:
    """Write ``TABLE`` from the dev set; returns the row count."""
    lines = []
    for owner_set in owner_sets():
        box = mailbox_rows(owner_set, reuse=reuse)
        for loop in sorted(box.loops, key=loop_key):
            verdict = box.verdicts.get(loop.pk)
            if verdict is None:
                continue
            lines.append(
                table_line(
                    mailbox=owner_set.name,
                    key=loop_key(loop),
                    label=int(verdict),
                    features=box.features[loop.pk],
                )
            )
        print(f"{owner_set.name}: {len(box.loops)} candidates", flush=True)
    TABLE.write_text("".join(lines))
    return len(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--from-table", action="store_true")
    args = parser.parse_args()
    if not args.from_table:
        print(f"{build_table(reuse=args.reuse)} labelled candidates → {TABLE}")
    model = fit_table(TABLE.read_text())
    MODEL_FILE.parent.mkdir(parents=True, exist_ok=True)
    MODEL_FILE.write_text(model.as_json())
    meta = model.meta
    print(
        f"model: {meta['rows']} rows, {meta['positives']} real, threshold "
        f"{model.threshold:.3f}, owners {', '.join(meta['mailboxes'])} → {MODEL_FILE}"
    )
    for name, weight in sorted(
        zip(model.names, model.coef, strict=True), key=lambda p: -abs(p[1])
    ):
        print(f"  {name:28} {weight:+.3f}")


if __name__ == "__main__":
    main()
