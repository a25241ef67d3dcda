"""Every row an import writes, ids and timestamps aside: the proof that an ingest
speed change changed nothing (SPEC §11 ingest rate; issue 22).

Imports three mailboxes through ``mailbox_import`` into fresh sources: the plain
benchmark mailbox (SpamAssassin easy-ham-1), the loop-heavy synthetic mailbox of
``benchmarks/ingest.py`` (written once, with fixed dates, to ``--loop-heavy-mbox``
so two runs read the same bytes) and the demo mailbox (``demo/enron-allen-p``,
owner ``pallen@enron.com``). Then writes every row of every table of the brain,
loops and connectors apps, one JSON line per row, sorted, to ``--out``: primary
keys are left out, a foreign key is replaced by the digest of the row it points
at (recursively, so renumbered ids compare equal), timestamps that the write
stamps (``auto_now``/``auto_now_add`` fields and the listed clock columns) are
left out, any other date-time of the run's own two days (in a column, a JSON value
or a text) reads ``<now>``, a random UUID ``<uuid>``, the
repository's path ``<root>``, long texts are replaced by their digest.

Run it before and after a change, each on its own fresh database
(``BRAIN_DATA_DIR=$(mktemp -d)``), and ``diff`` the two files:

    BRAIN_DATA_DIR=/tmp/rows-a .venv/bin/python benchmarks/ingest_rows.py --out a.jsonl
    BRAIN_DATA_DIR=/tmp/rows-b .venv/bin/python benchmarks/ingest_rows.py --out b.jsonl
    diff a.jsonl b.jsonl && echo identical
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")
os.environ.setdefault("LOOPS_EXTRACTION_ENABLED", "false")

from benchmarks.data import shared_data  # noqa: E402

APPS = ("brain", "loops", "connectors")
# Columns stamped from the wall clock at write time (not derived from the mail).
CLOCK_COLUMNS = {
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
    "last_seen_at",
    "recorded_at",
    "at",
    "computed_at",
    "held_at",
    "released_at",
    "imported_at",
}
LONG = 200
# Fixed dates for the loop-heavy mailbox: two runs read the same bytes.
LOOP_HEAVY_START = datetime(2026, 1, 1, tzinfo=UTC)


_ISO = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_RUN_STARTED = datetime.now(UTC)


def _recent(moment: datetime) -> bool:
    """A wall-clock stamp of this run (not a date read from the mail)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return abs((moment - _RUN_STARTED).total_seconds()) < 2 * 86400


def _stamp_free(text: str) -> str:
    """``text`` with this run's ISO timestamps replaced by ``<now>`` and random
    UUIDs (``input:<uuid>`` raw record ids) by ``<uuid>``, the repository's path
    by ``<root>``."""

    def repl(match: re.Match[str]) -> str:
        try:
            moment = datetime.fromisoformat(match.group(0).replace("Z", "+00:00"))
        except ValueError:
            return match.group(0)
        return "<now>" if _recent(moment) else match.group(0)

    text = text.replace(str(ROOT), "<root>")
    return _UUID.sub("<uuid>", _ISO.sub(repl, text))


def _value(value: Any) -> Any:
    if isinstance(value, datetime):
        return "<now>" if _recent(value) else value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bytes | memoryview):
        return "sha1:" + hashlib.sha1(bytes(value)).hexdigest()
    if isinstance(value, dict):
        return {k: _value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_value(v) for v in value]
    if isinstance(value, str):
        value = _stamp_free(value)
        if len(value) > LONG:
            return "sha1:" + hashlib.sha1(value.encode()).hexdigest()
        return value
    return (
        value if value is None or isinstance(value, int | float | bool) else str(value)
    )


def dump(out: Path) -> int:
    """Write every row of ``APPS``' tables, normalised, to ``out``; returns rows."""
    from django.apps import apps

    rows: dict[str, dict[Any, dict[str, Any]]] = {}
    fks: dict[str, list[tuple[str, str]]] = {}
    for model in apps.get_models():
        if model._meta.app_label not in APPS:
            continue
        label = model._meta.label
        fields = []
        fks[label] = []
        for f in model._meta.concrete_fields:
            if f.primary_key:
                continue
            if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
                continue
            if f.name in CLOCK_COLUMNS:
                continue
            if f.is_relation:
                fks[label].append((f.attname, f.related_model._meta.label))
            fields.append(f.attname)
        pk = model._meta.pk.attname
        table = {}
        for row in model.objects.all().values(pk, *fields):
            key = row.pop(pk)
            table[key] = row
        rows[label] = table

    digests: dict[tuple[str, Any], str] = {}

    def digest(label: str, key: Any, depth: int = 0) -> str:
        if (label, key) in digests:
            return digests[(label, key)]
        row = rows.get(label, {}).get(key)
        if row is None or depth > 8:
            return f"{label}:{key}"
        digests[(label, key)] = f"{label}:cycle"
        doc = normalised(label, row, depth)
        text = json.dumps(doc, sort_keys=True, default=str)
        digests[(label, key)] = hashlib.sha1(text.encode()).hexdigest()[:16]
        return digests[(label, key)]

    def normalised(label: str, row: dict[str, Any], depth: int) -> dict[str, Any]:
        doc = {name: _value(v) for name, v in row.items()}
        for attname, target in fks[label]:
            if row.get(attname) is not None:
                doc[attname] = digest(target, row[attname], depth + 1)
        return doc

    lines = []
    for label, table in sorted(rows.items()):
        for row in table.values():
            doc = normalised(label, row, 0)
            lines.append(label + " " + json.dumps(doc, sort_keys=True, default=str))
    lines.sort()
    out.write_text("\n".join(lines) + "\n")
    return len(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--loop-heavy-mbox", type=Path, default=ROOT / "var" / "rows-loops.mbox"
    )
    parser.add_argument("--loop-heavy", type=int, default=2000)
    parser.add_argument(
        "--dump-only", action="store_true", help="dump the database as it is"
    )
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    from benchmarks.ingest import LOOP_OWNER, _loop_heavy_mbox
    from brain.models import Source
    from connectors.mailbox.sync import mailbox_import

    if args.dump_only:
        print(f"{dump(args.out)} rows written to {args.out}")
        return
    call_command("migrate", verbosity=0, interactive=False)
    if not args.loop_heavy_mbox.exists():
        _loop_heavy_mbox(args.loop_heavy, args.loop_heavy_mbox, start=LOOP_HEAVY_START)
    imports = [
        ("rows-plain", shared_data() / "spamassassin_ham" / "easy-ham-1.mbox", []),
        ("rows-loops", args.loop_heavy_mbox, [LOOP_OWNER]),
        ("rows-demo", ROOT / "demo" / "enron-allen-p", ["pallen@enron.com"]),
    ]
    Source.objects.filter(id__in=[s for s, _, _ in imports]).delete()
    for source_id, path, owners in imports:
        report = mailbox_import(source_id=source_id, path=path, owners=owners)
        print(source_id, dict(report.counts))
    count = dump(args.out)
    print(f"{count} rows written to {args.out}")


if __name__ == "__main__":
    main()
