"""Mail ingestion throughput (SPEC §11: ≥ 300 messages/s without embeddings; with
local embeddings within 80 % of the model's own batch throughput).

Imports the SpamAssassin ham mbox into a throwaway ``mailbox`` source of the local
database (``var/``, or ``DATABASE_URL``) with the real pipeline (parse, dedup,
thread, raw records + thread pages + ledger, person pages, loop detection), prints
messages/s, then deletes the source. With ``--embed`` it repeats the import and
fills the embeddings with ``pages_embed_pending`` (batched), and measures the
model's own batch throughput on the same chunk texts for comparison.

With ``--imap`` it also starts a local Dovecot (as the tests do, see
``tests/connectors/dovecot.py``; needs ``dovecot-imapd``), puts the same messages in
an account's INBOX and syncs them into a throwaway ``imap`` source through
``imap_sync`` (SPEC §6.1a), printing messages/s next to the mailbox-file figure of the
same run, with the server's own fetch rate (read only, nothing stored) as the floor
the sync cannot beat.

``--loop-heavy N`` imports N synthetic one-message threads instead, each a direct
question with a deadline between the owner and one person (half the owner's, half
theirs), so every thread opens a loop (SPEC §11: >= 150 messages/s); the floor is
the same parse-and-thread of those messages.

Usage:
    .venv/bin/python benchmarks/ingest.py [--path MBOX] [--limit N] [--embed] [--imap]
    .venv/bin/python benchmarks/ingest.py --loop-heavy 2000
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")

from benchmarks.data import shared_data  # noqa: E402

DEFAULT_MBOX = shared_data() / "spamassassin_ham" / "easy-ham-1.mbox"


def _limited_copy(path: Path, limit: int, tmp: Path) -> Path:
    import mailbox

    src = mailbox.mbox(str(path))
    tmp.unlink(missing_ok=True)
    out = mailbox.mbox(str(tmp))
    for index, key in enumerate(src.iterkeys()):
        if index >= limit:
            break
        out.add(src.get_message(key))
    out.flush()
    out.close()
    return tmp


def _backend_cpu() -> float | None:
    """CPU seconds (user + system) of this connection's PostgreSQL backend so far,
    from ``/proc`` (the embedded server runs on this machine); None elsewhere."""
    from django.db import connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError, TypeError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu() -> tuple[float, float]:
    """(this process, its finished children: the parse workers) CPU seconds."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _import(
    source_id: str, path: Path, owners: list[str] | None = None
) -> tuple[float, float, dict[str, int], str]:
    """Import ``path``; returns (seconds, parse seconds, report counts, a line of
    CPU seconds per phase: the parse workers, this process while parsing and
    after, and the database backend after parsing)."""
    from connectors.mailbox.sync import mailbox_import

    marks: dict[str, float] = {}
    cpu_marks: dict[str, tuple[float, float]] = {}

    def progress(step: str, done: int, total: int | None) -> None:
        marks[step] = time.perf_counter()
        if step == "parse" and done == total:
            cpu_marks["parse"] = _cpu()

    backend_start = _backend_cpu()
    cpu_start = _cpu()
    start = time.perf_counter()
    report = mailbox_import(
        source_id=source_id, path=path, owners=owners or [], progress=progress
    )
    elapsed = time.perf_counter() - start
    cpu_end = _cpu()
    backend_end = _backend_cpu()
    parse_time = marks.get("parse", start) - start
    parsed = cpu_marks.get("parse", cpu_start)
    backend = (
        f"{backend_end - backend_start:.2f} s"
        if backend_start is not None and backend_end is not None
        else "n/a"
    )
    cpu = (
        f"CPU: parse workers {cpu_end[1] - cpu_start[1]:.2f} s, importing process "
        f"{parsed[0] - cpu_start[0]:.2f} s while parsing + "
        f"{cpu_end[0] - parsed[0]:.2f} s store+detect, database backend {backend} "
        f"(total {cpu_end[0] - cpu_start[0] + cpu_end[1] - cpu_start[1]:.2f} s "
        "outside the database)"
    )
    return elapsed, parse_time, dict(report.counts), cpu


LOOP_OWNER = "me@bench.example"


def _loop_heavy_mbox(count: int, tmp: Path, start: datetime | None = None) -> Path:
    """A synthetic mbox of ``count`` one-message threads, each a direct question with
    a deadline between ``LOOP_OWNER`` and its own person, at least 72 h older than
    the newest message (one closing newsletter): the even ones mine to them
    (``unanswered_outbound``), the odd ones theirs to me (``unanswered_inbound``), so
    every thread opens a loop (SPEC §5.2; SPEC §11 "loop-heavy mail"). Half the mail
    comes from others: a mailbox of nothing but my own questions opens no waiting
    loop (it cannot show answers), and the benchmark measured no loops at all."""
    import mailbox
    from datetime import UTC, timedelta
    from email.message import EmailMessage
    from email.utils import format_datetime

    tmp.unlink(missing_ok=True)
    out = mailbox.mbox(str(tmp))
    start = start or datetime.now(UTC) - timedelta(days=30)
    topics = ("budget", "contract", "schedule", "invoice", "launch", "report")

    def add(
        sender: str, to: str, subject: str, n: int, when: datetime, body: str
    ) -> None:
        msg = EmailMessage()
        msg["From"], msg["To"], msg["Subject"] = sender, to, subject
        msg["Message-ID"] = f"<loop-heavy-{n}@bench.example>"
        msg["Date"] = format_datetime(when)
        msg.set_content(body)
        out.add(msg)

    for n in range(count):
        topic = topics[n % len(topics)]
        person = f"Person {n} <person{n}@partner{n % 40}.example>"
        me = f"Me <{LOOP_OWNER}>"
        sender, recipient = (me, person) if n % 2 == 0 else (person, me)
        greeting = f"Person {n}" if n % 2 == 0 else "Sam"
        add(
            sender,
            recipient,
            f"{topic.title()} numbers for account {n}",
            n,
            start + timedelta(minutes=n),
            f"Hi {greeting},\n\nCould you send me the {topic} numbers for account "
            f"{n} by Friday? We need them before the review.\n\nThanks\n",
        )
    add(
        "Newsletter <noreply@news.example>",
        LOOP_OWNER,
        "Weekly digest",
        count,
        start + timedelta(days=10),
        "This week's digest.\n",
    )
    out.flush()
    out.close()
    return tmp


def _profiled(fn):  # type: ignore[no-untyped-def]
    if not os.environ.get("BENCH_PROFILE"):
        return fn()
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    result = profiler.runcall(fn)
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
    return result


def _parse_only(path: Path) -> float:
    from connectors.mail.parsing import parse_rfc822
    from connectors.mail.threading import dedupe, folder_labels, thread_messages
    from connectors.mailbox.client import iter_mailbox

    start = time.perf_counter()
    parsed = []
    for entry in iter_mailbox(path):
        msg = parse_rfc822(entry.data, folder=entry.folder)
        msg.labels = folder_labels(entry.folder)
        parsed.append(msg)
    parse_time = time.perf_counter() - start
    unique, _ = dedupe(parsed)
    threads = thread_messages(unique, owner_addresses=set())
    elapsed = time.perf_counter() - start
    rate = len(parsed) / elapsed
    print(
        f"floor, parse+dedup+thread only (one process): {len(parsed)} messages, "
        f"{len(threads)} threads in {elapsed:.2f} s = {rate:.0f} messages/s "
        f"(parse {parse_time:.2f} s)"
    )
    return rate


def _imap(path: Path, file_rate: float, stamp: str, sources: list[str]) -> None:
    """Sync ``path``'s messages from a local Dovecot; print the figures."""
    import mailbox

    from brain.models import Source
    from brain.services.sources import source_ensure
    from connectors.imap.client import ImapReader
    from connectors.imap.sync import FETCH_CHUNK, imap_sync
    from tests.connectors.dovecot import make_account, start_dovecot, stop_dovecot

    box = mailbox.mbox(str(path))
    messages = [box.get_bytes(key) for key in box.iterkeys()]
    box.close()
    server = start_dovecot()
    try:
        account = make_account(server, {"INBOX": messages})
        settings = account.settings(timeout=120.0)
        start = time.perf_counter()
        with ImapReader(settings) as reader:
            reader.examine("INBOX")
            uids = reader.uids_after(0)
            fetched = 0
            for offset in range(0, len(uids), FETCH_CHUNK):
                fetched += len(reader.fetch(uids[offset : offset + FETCH_CHUNK]))
        fetch_time = time.perf_counter() - start
        source_id = f"bench-imap-{stamp}"
        sources.append(source_id)
        source = source_ensure(source_id=source_id, kind=Source.Kind.IMAP)
        start = time.perf_counter()
        report = imap_sync(source=source, settings=settings)
        elapsed = time.perf_counter() - start
    finally:
        stop_dovecot(server)
    stored = report.counts.get("messages", 0)
    print(
        f"imap (local Dovecot, plain loopback): {report.counts.get('fetched', 0)} "
        f"fetched, {stored} messages stored, {report.counts.get('threads', 0)} threads "
        f"in {elapsed:.2f} s = {stored / elapsed:.0f} messages/s; "
        f"mailbox file, same messages, same run: {file_rate:.0f} messages/s; "
        f"server fetch alone (floor): {fetched} in {fetch_time:.2f} s = "
        f"{fetched / fetch_time:.0f} messages/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, default=DEFAULT_MBOX)
    parser.add_argument(
        "--limit", type=int, default=0, help="only the first N messages"
    )
    parser.add_argument(
        "--embed", action="store_true", help="also measure with local embeddings"
    )
    parser.add_argument(
        "--imap",
        action="store_true",
        help="also sync the same messages from a local Dovecot (SPEC §6.1a)",
    )
    parser.add_argument(
        "--loop-heavy",
        type=int,
        default=0,
        metavar="N",
        help="import N synthetic threads that each open a loop instead of --path",
    )
    parser.add_argument(
        "--parse-only",
        action="store_true",
        help="only parse, deduplicate and thread (no database writes)",
    )
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    from brain.models import Chunk, Source

    if args.parse_only:
        _parse_only(
            args.path
            if not args.limit
            else _limited_copy(
                args.path, args.limit, ROOT / "var" / "bench-ingest.mbox"
            )
        )
        return
    call_command("migrate", verbosity=0, interactive=False)
    path = args.path
    owners: list[str] = []
    if args.loop_heavy:
        path = _loop_heavy_mbox(args.loop_heavy, ROOT / "var" / "bench-loops.mbox")
        owners = [LOOP_OWNER]
    elif args.limit:
        path = _limited_copy(path, args.limit, ROOT / "var" / "bench-ingest.mbox")

    stamp = time.strftime("%H%M%S")
    sources = []
    try:
        source_id = f"bench-ingest-{stamp}"
        sources.append(source_id)
        elapsed, parse_time, counts, cpu = _profiled(
            lambda: _import(source_id, path, owners)
        )
        messages = counts.get("messages", 0)
        if args.loop_heavy:
            from loops.models import OpenLoop

            opened = OpenLoop.objects.filter(source_id=source_id).count()
            print(
                f"loop-heavy: {opened} loops opened from {messages} messages "
                f"({opened / max(messages, 1):.0%}); target >= 150 messages/s"
            )
        print(f"mailbox: {path} ({counts.get('files', 0)} files)")
        print(
            f"without embeddings: {messages} messages, {counts.get('threads', 0)} threads, "
            f"{counts.get('people', 0)} people in {elapsed:.2f} s "
            f"= {messages / elapsed:.0f} messages/s "
            f"(parse+thread {parse_time:.2f} s, store+detect {elapsed - parse_time:.2f} s); "
            f"target >= {150 if args.loop_heavy else 300} messages/s (SPEC §11)"
        )
        print(cpu)
        print(
            "accounting (SPEC §6): "
            + ", ".join(
                f"{counts.get(k, 0)} {k}"
                for k in ("items", "stored", "duplicates", "held", "lost")
            )
        )
        floor = _parse_only(path)
        print(
            f"import / floor = {messages / elapsed / floor:.2f} "
            "(the import parses on every core; the floor on one)"
        )
        if args.imap:
            _imap(path, messages / elapsed, stamp, sources)
        if args.embed:
            from brain.embeddings import embed_texts
            from brain.services.pages import pages_embed_pending

            source_id = f"bench-embed-{stamp}"
            sources.append(source_id)
            embed_texts(["load the model before timing"])  # not part of either rate
            import_time, _, counts, _ = _import(source_id, path)
            start = time.perf_counter()
            embedded = pages_embed_pending(source_ids=[source_id])
            embed_time = time.perf_counter() - start
            total = import_time + embed_time
            messages = counts.get("messages", 0)
            print(
                f"with local embeddings: {messages} messages in {total:.2f} s "
                f"= {messages / total:.0f} messages/s (import {import_time:.2f} s, "
                f"{embedded} chunks embedded in {embed_time:.2f} s = "
                f"{embedded / embed_time:.0f} chunks/s)"
            )
            texts = list(
                Chunk.objects.filter(page__source_id=source_id)
                .order_by("id")
                .values_list("text", flat=True)
            )
            start = time.perf_counter()
            for offset in range(0, len(texts), 64):
                embed_texts(texts[offset : offset + 64])
            model_time = time.perf_counter() - start
            model_rate = len(texts) / model_time
            print(
                f"model batch throughput on the same {len(texts)} chunks: "
                f"{model_rate:.0f} chunks/s; the pipeline reaches "
                f"{(embedded / embed_time) / model_rate:.0%} of it (target >= 80 %)"
            )
    finally:
        Source.objects.filter(id__in=sources).delete()


if __name__ == "__main__":
    main()
