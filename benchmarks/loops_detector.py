"""Throughput of the pure loop code (no database): the deterministic detector and
the rule extractor over the demo Enron mailbox (demo/enron-allen-p), threaded here by
normalised subject plus participants (a stand-in for the mailbox connector).

Run: .venv/bin/python benchmarks/loops_detector.py [MAILDIR]
Prints messages, threads, and messages/s with p50/p95/p99 per-thread latency.
"""

from __future__ import annotations

import email
import email.policy
import os
import statistics
import sys
import time
from email.utils import getaddresses, parsedate_to_datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")

import django  # noqa: E402

django.setup()

from datetime import UTC  # noqa: E402

from loops.definitions import normalise_subject  # noqa: E402
from loops.detectors import detect_thread  # noqa: E402
from loops.extractors.rules import rule_extract  # noqa: E402
from loops.message import MailMessage  # noqa: E402

OWNERS = ("pallen@enron.com", "phillip.allen@enron.com", "k..allen@enron.com")


def load(folder: Path) -> list[MailMessage]:
    """Parse every file of a maildir tree into MailMessages (sent folders = mine)."""
    out = []
    for path in sorted(
        p for p in folder.rglob("*") if p.is_file() and p.name != "SOURCE.txt"
    ):
        msg = email.message_from_bytes(path.read_bytes(), policy=email.policy.compat32)
        try:
            date = parsedate_to_datetime(msg["Date"]).astimezone(UTC)
        except (TypeError, ValueError):
            date = None
        frm = (getaddresses([msg.get("From", "")]) or [("", "")])[0][1].lower()
        to = [a.lower() for _, a in getaddresses(msg.get_all("To", [])) if a]
        body = msg.get_payload(decode=True) or b""
        subject = msg.get("Subject", "")
        people = "|".join(sorted({frm, *to}))
        out.append(
            MailMessage(
                message_id=msg.get("Message-ID", str(path)),
                subject=subject,
                thread_id=f"{normalise_subject(subject)}#{people}",
                from_addr=frm,
                to=to,
                date=date,
                is_mine="sent" in str(path.parent),
                body=body.decode("latin-1"),
            )
        )
    return out


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "demo" / "enron-allen-p"
    messages = load(folder)
    threads: dict[str, list[MailMessage]] = {}
    for m in messages:
        threads.setdefault(m.thread_id, []).append(m)
    now = max(m.date for m in messages if m.date)
    # Warm-up: dateparser loads its locale data on first use (about 3 s, once per
    # process); the figures below are the steady state.
    from loops.extractors.rules import resolve_due

    resolve_due("June 28th", now)
    timings = []
    start = time.perf_counter()
    for thread in threads.values():
        t0 = time.perf_counter()
        detect_thread(thread, owner_addresses=OWNERS, now=now)
        rule_extract(thread, owner_addresses=OWNERS)
        timings.append((time.perf_counter() - t0) * 1000)
    total = time.perf_counter() - start
    q = statistics.quantiles(timings, n=100)
    print(f"messages={len(messages)} threads={len(threads)}")
    print(
        f"throughput={len(messages) / total:,.0f} messages/s (detector + rule extractor)"
    )
    print(f"per-thread ms: p50={q[49]:.2f} p95={q[94]:.2f} p99={q[98]:.2f}")


if __name__ == "__main__":
    main()
