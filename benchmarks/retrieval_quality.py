"""Retrieval quality on natural-language questions (issue 26; SPEC §3): recall@1/5/10
of hybrid, keyword-only and vector-only ``page_search`` beside plain BM25 on the same
pages.

The dev set is two corpora of the shared data (``../shared/data`` or
``BRAIN_SHARED_DATA``) and their questions (``tests/data/retrieval_dev``, SOURCE.md
there), each question naming the message that answers it (``page``), or every message
that holds the answer where more than one does (``pages``; SOURCE.md lists them). By
default (``--set both``: the whole dev set) both corpora go into one database
(``brain_retrieval_both_<N>``, two sources searched together) and every question is
asked; the figures are printed for all questions and for each set and part of a set
apart (the even / odd halves and the first set / extension rows of SpamAssassin
count its questions only: the Enron questions chose nothing). ``--set spamassassin``
or ``--set enron`` runs one corpus alone, in its own database.

- SpamAssassin: the first ``--pages`` (default 1,000) messages of
  ``spamassassin_ham/easy-ham-1``, sorted by file name: title = the subject (list
  tags and ``Re:`` removed), body = the text/plain part without ``>``-quoted lines
  (database ``brain_retrieval_<N>`` alone). Questions
  ``questions.jsonl``: 263 who/what/when/where/why questions written by hand from
  single messages, with paraphrase and inflection: ids 1-208 the first set, ids
  209-263 written from a seeded random draw of the messages no earlier question used.
- Enron: the executive mailbox ``enron/allen-p`` (every folder, 3,034 files read by
  the importer's ``iter_mailbox``; copies in several folders are one message, grouped
  by the importer's ``ParsedMail.fingerprint``: 1,397 pages), source
  ``retrieval-enron`` (database ``brain_retrieval_enron`` alone). A page is built as
  for SpamAssassin: title = the subject, body = the message's page text as the mail
  import writes it (``ParsedMail.body``: the writer's own words, a reply's quoted
  history cut, which Outlook-style ``-----Original Message-----`` quoting needs where
  the ``>`` rule does not). Questions ``questions_enron.jsonl``: ids 301-380 drawn
  with a fixed seed, ids 381-440 a blind extension drawn by the same procedure with
  another seed.

Pages are written through the write path and embedded with the configured local
model (built once, reused). For ``--set enron`` and ``--set both`` BM25 reads every
page as stored (title + body from the database), so it sees the texts the product
indexes.

``--pages-from mail`` builds the pages instead the way a user's mail becomes pages:
the same messages imported through the product's mailbox import (parsing, quoted
tails trimmed, threading; one thread page per thread, each message under its
"## Name <address> · date" header, ``connectors.mail.render``), in databases named
``brain_retrieval_mail_…``; a question's answer is then the thread page holding its
message (``build_mail``), and BM25 reads the same thread pages (title + body as
stored). Fewer, longer pages: its figures are not comparable with the default's.

Then per question:

- hybrid: ``page_search`` (query embedding included);
- keyword-only: ``page_search`` with provider ``none``;
- vector-only: the nearest chunks by cosine (exact scan), best chunk per page;
- BM25: ``rank_bm25.BM25Okapi`` (k1 1.5, b 0.75) over the same title + body, tokens
  = lower-cased words (``\\w+``), no stemming or stopwords: the plain bar.

Recall@k counts a question found when one of its pages is among the first k distinct
pages. A question's pages include every near-copy of a labelled page (its title and
body words are copies by ``brain.search.near_copy``: a message sent twice, a
forward): ``page_search`` folds copies into one result, which then answers the
question whichever copy it shows (``with_copies``; the run prints which questions
gained one). BM25 is scored against the same widened pages.
Each arm's figure is printed beside BM25's with the difference in points, for all
questions, for each half of the set: the even ids (on which the fusion weights of
``brain.search.fused_key`` and ``brain.search.SECONDARY_WEIGHT`` were chosen, then
among ids 1-208, and ``brain.search.QUESTION_FRAME``,
``brain.search.KEYWORD_LEAD_MARGIN`` and ``brain.search.PAGE_EXTRA_WEIGHT`` among
ids 1-263, on the SpamAssassin pages alone) and the odd ids (the check half), and for
each draw apart. It also
prints how ``score`` separates the answer from the other results (the calibration
figure of ``brain.search.calibrated_score``).

Usage:
    .venv/bin/python benchmarks/retrieval_quality.py [--pages 1000] [--show-misses 0]
        [--per-question] [--pages-from plain|mail] [--set both|spamassassin|enron]
"""

from __future__ import annotations

import argparse
import email
import json
import os
import re
import statistics
import sys
import time
from email import policy
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")

from benchmarks.data import shared_data  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable

    from connectors.mailbox.client import MailboxEntry

QUESTIONS = ROOT / "tests" / "data" / "retrieval_dev" / "questions.jsonl"
QUESTIONS_ENRON = ROOT / "tests" / "data" / "retrieval_dev" / "questions_enron.jsonl"
SOURCE = "retrieval"
SOURCE_ENRON = "retrieval-enron"
# The Enron mailbox under the shared data; its message keys are ``allen-p/<location>``.
ENRON_MAILBOX = Path("enron") / "allen-p"
KS = (1, 5, 10)
# Ids up to this one are the first set; later ids the seeded extension (SOURCE.md).
FIRST_SET = 208
# Ids from this one on are the Enron questions (questions_enron.jsonl); from
# ENRON_EXTENSION on, its blind extension (SOURCE.md).
ENRON_FIRST = 301
ENRON_EXTENSION = 381
_TOKEN = re.compile(r"\w+")


def _embed_all(source_id: str = SOURCE) -> None:
    """Embed every pending chunk of the benchmark source, printing progress."""
    from brain.services.pages import pages_embed_pending

    embedded = pages_embed_pending(
        source_ids=[source_id],
        progress=lambda n: print(f"  embedded {n} chunks", flush=True),
    )
    if embedded:
        print(f"  {embedded} chunks embedded", flush=True)


def page_title(subject: str, fallback: str) -> str:
    """A page title from a subject: list tags and ``Re:``/``Fw:`` removed."""
    subject = re.sub(r"\[[^\]]*\]", "", subject)
    subject = re.sub(r"^\s*((re|fw|fwd)(\[\d+\])?:\s*)+", "", subject, flags=re.I)
    return re.sub(r"\s+", " ", subject).strip(" :") or fallback


def enron_entries() -> list[MailboxEntry]:
    """Every message of the Enron mailbox as the importer reads it
    (``iter_mailbox``), its location prefixed ``allen-p/``."""
    from connectors.mailbox.client import MailboxEntry, iter_mailbox

    folder = shared_data() / ENRON_MAILBOX
    if not folder.is_dir():
        raise SystemExit(f"shared data not found: {folder}")
    return [
        MailboxEntry(
            folder=e.folder, location=f"{ENRON_MAILBOX.name}/{e.location}", data=e.data
        )
        for e in iter_mailbox(folder)
        if not e.problem
    ]


def load_enron_pages() -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """``([(key, title, body)], {message key: page key})`` for the Enron mailbox:
    one page per distinct message (copies in several folders grouped by the
    importer's ``ParsedMail.fingerprint``, keyed by the first copy read), title =
    the subject as for SpamAssassin, body = the page text the mail import writes
    (``ParsedMail.body``: own words, a reply's quoted history cut)."""
    from connectors.mail.parsing import parse_rfc822

    pages: list[tuple[str, str, str]] = []
    first: dict[str, str] = {}
    page_of: dict[str, str] = {}
    for entry in enron_entries():
        parsed = parse_rfc822(entry.data, folder=entry.folder)
        if parsed.fingerprint not in first:
            first[parsed.fingerprint] = entry.location
            title = page_title(parsed.subject, entry.location)
            pages.append((entry.location, title, parsed.body))
        page_of[entry.location] = first[parsed.fingerprint]
    return pages, page_of


def load_pages(n_pages: int) -> list[tuple[str, str, str]]:
    """``[(key, title, body)]`` for the first ``n_pages`` messages of easy-ham-1
    (``key`` = ``easy-ham-1/<file name>``)."""
    folder = shared_data() / "spamassassin_ham" / "easy-ham-1"
    if not folder.is_dir():
        raise SystemExit(f"shared data not found: {folder}")
    pages = []
    for path in sorted(folder.glob("*"))[:n_pages]:
        message = email.message_from_bytes(path.read_bytes(), policy=policy.default)
        title = page_title(str(message["subject"] or ""), path.name[:5])
        try:
            part = message.get_body(preferencelist=("plain",))
            text = part.get_content() if part else ""
        except (LookupError, ValueError):  # odd real mail: keep it, empty body
            text = ""
        lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith(">")]
        pages.append((f"easy-ham-1/{path.name}", title, "\n".join(lines).strip()))
    return pages


def message_files(n_pages: int) -> list[Path]:
    """The first ``n_pages`` files of easy-ham-1, sorted by name."""
    folder = shared_data() / "spamassassin_ham" / "easy-ham-1"
    if not folder.is_dir():
        raise SystemExit(f"shared data not found: {folder}")
    return sorted(folder.glob("*"))[:n_pages]


def build_mail(
    files: list[Path],
    *,
    source_id: str = SOURCE,
    entries: list[MailboxEntry] | None = None,
) -> dict[str, str]:
    """``--pages-from mail``: import the messages as a user would, through the
    product's mailbox import (``connectors.mailbox.sync.mailbox_import``: parsing,
    quoted tails trimmed, threading, one thread page per thread rendered by
    ``connectors.mail.render``, each message under its "## Name <address> · date"
    header), unless already there, and embed them. Returns each message key
    (``easy-ham-1/<file name>``, or the location of ``entries`` when given: the
    Enron mailbox, into ``source_id``) → the slug of the page holding it (a copy's:
    the kept copy's page); a message without a page (held, noise) is left out."""
    from brain.models import Source
    from connectors.mail.parsing import parse_rfc822
    from connectors.mailbox.client import MailboxEntry
    from connectors.mailbox.sync import mailbox_import
    from connectors.models import ImportedItem

    if entries is None:
        entries = [
            MailboxEntry(
                folder="", location=f"easy-ham-1/{f.name}", data=f.read_bytes()
            )
            for f in files
        ]
    if not ImportedItem.objects.filter(source_id=source_id).exists():
        Source.objects.filter(id=source_id).delete()
        started = time.perf_counter()
        report = mailbox_import(
            source_id=source_id,
            path=files[0].parent if files else shared_data() / ENRON_MAILBOX,
            entries=entries,
            actor="retrieval_quality",
        )
        print(
            f"  imported: {dict(report.counts)} "
            f"({time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    _embed_all(source_id)
    ledger = {
        row.external_id: row
        for row in ImportedItem.objects.filter(source_id=source_id).select_related(
            "page"
        )
    }
    out: dict[str, str] = {}
    for entry in entries:
        row = ledger.get(parse_rfc822(entry.data).key)
        if row is not None and row.page is None and row.reason.startswith("copy of "):
            row = ledger.get(row.reason.removeprefix("copy of "))
        if row is not None and row.page is not None and row.page.deleted_at is None:
            out[entry.location] = row.page.slug
    return out


def slug_of(key: str) -> str:
    """The page slug of a message key (``notes/00001`` for SpamAssassin,
    ``notes/enron-sent-items-33`` for ``allen-p/sent_items/33.``)."""
    if key.startswith(f"{ENRON_MAILBOX.name}/"):
        folder, _, name = key.removeprefix(f"{ENRON_MAILBOX.name}/").rpartition("/")
        words = re.sub(r"[^a-z0-9]+", "-", f"{folder}/{name}".lower()).strip("-")
        return f"notes/enron-{words}"
    return "notes/" + key.split("/")[-1].split(".")[0]


def build(pages: list[tuple[str, str, str]], source_id: str = SOURCE) -> None:
    """Write the pages (batches of 100) into ``source_id`` and embed them, unless
    already there."""
    from brain.access import local_caller
    from brain.models import Page, Source
    from brain.services.pages import PageInput, pages_write
    from brain.services.sources import source_ensure

    have = Page.objects.filter(source_id=source_id, deleted_at__isnull=True).count()
    if have != len(pages):
        Source.objects.filter(id=source_id).delete()
        source = source_ensure(
            source_id=source_id, kind=Source.Kind.MANUAL, name=source_id
        )
        started = time.perf_counter()
        for start in range(0, len(pages), 100):
            pages_write(
                source=source,
                actor=local_caller(),
                items=[
                    PageInput(
                        mode="upsert",
                        slug=slug_of(key),
                        title=title,
                        body=body or title,
                        type_name="note",
                    )
                    for key, title, body in pages[start : start + 100]
                ],
                embed=False,
            )
            print(
                f"  wrote {min(start + 100, len(pages))}/{len(pages)} pages "
                f"({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
    _embed_all(source_id)


def vector_only(
    vector: list[float], limit: int = 10, sources: tuple[str, ...] = (SOURCE,)
) -> list[str]:
    """Distinct page slugs by the cosine of their best chunk (exact scan)."""
    from django.db import connection
    from pgvector import Vector

    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT p.slug, max(1 - (c.embedding <=> %(v)s::vector)) AS sim
            FROM brain_chunk c JOIN brain_page p ON p.id = c.page_id
            WHERE c.source_id = ANY(%(s)s) AND c.embedding IS NOT NULL
            GROUP BY p.slug ORDER BY sim DESC, p.slug LIMIT %(n)s
            """,
            {"v": Vector(vector).to_text(), "s": list(sources), "n": limit},
        )
        return [row[0] for row in cursor.fetchall()]


def distinct(slugs: list[str]) -> list[str]:
    """``slugs`` without repeats, first occurrence kept."""
    return list(dict.fromkeys(slugs))


def recall(ranked: list[list[str]], gold: list[list[str]], k: int) -> float:
    """Share of questions one of whose answer slugs is among the first ``k``
    distinct slugs."""
    found = sum(
        any(g in r[:k] for g in golds) for r, golds in zip(ranked, gold, strict=True)
    )
    return found / len(gold)


def answer_pages(question: dict) -> list[str]:
    """The message keys that answer ``question``: ``pages`` (every page holding the
    answer, where more than one does) or the one ``page``."""
    return list(question.get("pages") or [question["page"]])


MODES = ("BM25", "hybrid", "keyword-only", "vector-only")


def with_copies(
    gold: list[list[str]], pages: list[tuple[str, str, str]]
) -> tuple[list[list[str]], list[int]]:
    """Each question's answer slugs plus the slugs of pages that are near-copies of
    an answer page (a message sent twice, a forward): their title and body words
    are copies by ``brain.search.near_copy``, the rule by which ``page_search``
    folds copies into one result (``fold_near_duplicates``), so the copy it shows
    answers the question as well as the labelled page. ``pages`` are ``(slug,
    title, body)``. Returns the widened answers and the indexes of the questions
    that gained a page."""
    from brain.search import copy_words, near_copy

    words = {slug: copy_words(title, body) for slug, title, body in pages}
    copies: dict[str, list[str]] = {}
    for slug in {s for answers in gold for s in answers}:
        mine = words[slug]
        copies[slug] = [
            other
            for other, theirs in words.items()
            if other != slug and near_copy(mine, theirs)
        ]
    widened_gold: list[list[str]] = []
    widened: list[int] = []
    for n, answers in enumerate(gold):
        more = [c for s in answers for c in copies[s] if c not in answers]
        widened_gold.append(list(dict.fromkeys([*answers, *more])))
        if more:
            widened.append(n)
    return widened_gold, widened


def _is_spam(question_id: int) -> bool:
    """True for a question of the SpamAssassin set (ids below ``ENRON_FIRST``)."""
    return question_id < ENRON_FIRST


def position(slugs: list[str], answers: list[str]) -> str:
    """The 1-based rank of the first of ``answers`` in ``slugs`` as text, ``-`` when
    none is there."""
    ranks = [slugs.index(a) + 1 for a in answers if a in slugs]
    return str(min(ranks)) if ranks else "-"


def table(ranked: dict[str, list[list[str]]], gold: list[list[str]]) -> None:
    """Print recall@1/5/10 per ranker beside BM25's, with the difference in
    points."""
    floor = {k: recall(ranked["BM25"], gold, k) for k in KS}
    print(f"{'ranker':<14}" + "".join(f"  recall@{k:<2} (vs BM25)  " for k in KS))
    for mode in MODES:
        cells = []
        for k in KS:
            value = recall(ranked[mode], gold, k)
            diff = (value - floor[k]) * 100
            cells.append(f"  {value:9.3f} ({diff:+5.1f} pt)  ")
        print(f"{mode:<14}" + "".join(cells))


def main() -> None:
    """Build the pages, run the four rankers on every question, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument(
        "--show-misses", type=int, default=0, help="Print N hybrid misses at @5."
    )
    parser.add_argument(
        "--per-question",
        action="store_true",
        help="For each question hybrid misses at rank 1, print every ranker's rank "
        "of its answer (within the first 10 pages).",
    )
    parser.add_argument(
        "--pages-from",
        choices=("plain", "mail"),
        default="plain",
        help="plain: one page per message, subject and plain text without > lines "
        "(load_pages); mail: the messages imported through the product's mailbox "
        "import, one page per thread (build_mail).",
    )
    parser.add_argument(
        "--set",
        choices=("spamassassin", "enron", "both"),
        default="both",
        help="both (the whole dev set): both corpora in one database, both "
        "question sets; spamassassin: the first --pages messages of easy-ham-1 and "
        "questions.jsonl; enron: the allen-p mailbox and questions_enron.jsonl.",
    )
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections
    from rank_bm25 import BM25Okapi

    from benchmarks.search import use_database
    from brain import embeddings
    from brain.access import ReadScope
    from brain.models import Page
    from brain.search import page_search

    connections.close_all()
    mail = args.pages_from == "mail"
    spam = args.set in ("spamassassin", "both")
    enron = args.set in ("enron", "both")
    name = {"spamassassin": f"{args.pages}", "enron": "enron"}.get(
        args.set, f"both_{args.pages}"
    )
    use_database(f"brain_retrieval_{'mail_' if mail else ''}{name}")
    call_command("migrate", verbosity=0)
    files = [QUESTIONS] * spam + [QUESTIONS_ENRON] * enron
    questions = [
        json.loads(line) for path in files for line in path.read_text().splitlines()
    ]
    sources = (SOURCE,) * spam + (SOURCE_ENRON,) * enron
    page_of: dict[str, str] = {}
    plain: list[tuple[str, str, str]] = []
    if spam and mail:
        page_of |= build_mail(message_files(args.pages))
    elif spam:
        plain = load_pages(args.pages)
        page_of |= {key: slug_of(key) for key, _t, _b in plain}
        build(plain)
    if enron and mail:
        page_of |= build_mail([], source_id=SOURCE_ENRON, entries=enron_entries())
    elif enron:
        enron_pages, alias = load_enron_pages()
        page_of |= {key: slug_of(page) for key, page in alias.items()}
        build(enron_pages, SOURCE_ENRON)
    asked = len(questions)
    questions = [q for q in questions if set(answer_pages(q)) <= set(page_of)]
    if mail or enron:  # BM25 reads the pages as stored
        pages = list(
            Page.objects.filter(source_id__in=sources, deleted_at__isnull=True)
            .order_by("slug")
            .values_list("slug", "title", "body")
        )
    else:
        pages = [(slug_of(key), title, body) for key, title, body in plain]
    corpora = ", ".join(["easy-ham-1"] * spam + [str(ENRON_MAILBOX)] * enron)
    print(
        f"{len(pages)} pages from {len(page_of)} messages ({corpora}, "
        f"--pages-from {args.pages_from}), {len(questions)} of {asked} questions "
        f"({', '.join(str(f.relative_to(ROOT)) for f in files)})",
        flush=True,
    )

    tokenized = [_TOKEN.findall(f"{t}\n{b}".lower()) for _s, t, b in pages]
    bm25 = BM25Okapi(tokenized)
    page_slugs = [slug for slug, _t, _b in pages]
    # Imported mail is private (SPEC §8): its owner searches it.
    scope = ReadScope(source_ids=sources, include_private=mail)
    gold = [
        list(dict.fromkeys(page_of[key] for key in answer_pages(q))) for q in questions
    ]
    gold, widened = with_copies(gold, pages)
    if widened:
        print(
            f"{len(widened)} question(s) also count a near-copy of the answer page "
            f"(search folds copies together): ids "
            f"{', '.join(str(questions[n]['id']) for n in widened)}",
            flush=True,
        )
    vectors, _model = embeddings.embed_texts([q["question"] for q in questions])
    if vectors is None:
        raise SystemExit("no embedding provider: set BRAIN_EMBEDDING_PROVIDER=local")

    ranked: dict[str, list[list[str]]] = {}
    timings: dict[str, list[float]] = {}
    gold_scores: list[float] = []
    other_scores: list[float] = []
    for mode in ("hybrid", "keyword-only"):
        settings.BRAIN_EMBEDDING_PROVIDER = "local" if mode == "hybrid" else "none"
        ranked[mode], timings[mode] = [], []
        for question, vector, answer in zip(questions, vectors, gold, strict=True):
            started = time.perf_counter()
            response = page_search(
                scope=scope,
                query=question["question"],
                limit=10,
                query_embedding=vector if mode == "hybrid" else None,
            )
            timings[mode].append((time.perf_counter() - started) * 1000)
            ranked[mode].append(distinct([r.slug for r in response.results]))
            if mode == "hybrid":
                for result in response.results:
                    (gold_scores if result.slug in answer else other_scores).append(
                        result.score
                    )
    settings.BRAIN_EMBEDDING_PROVIDER = "local"
    ranked["vector-only"] = [vector_only(v, sources=sources) for v in vectors]
    ranked["BM25"] = []
    for question in questions:
        scores = bm25.get_scores(_TOKEN.findall(question["question"].lower()))
        order = sorted(range(len(pages)), key=lambda i: -scores[i])[:10]
        ranked["BM25"].append([page_slugs[i] for i in order])

    ids = [int(q["id"]) for q in questions]
    parts: list[tuple[str, Callable[[int], bool]]] = [("all questions", lambda i: True)]
    if spam and enron:
        parts += [
            (f"SpamAssassin questions (ids below {ENRON_FIRST})", _is_spam),
            (f"Enron questions (ids {ENRON_FIRST}-)", lambda i: not _is_spam(i)),
        ]
    if enron:
        parts += [
            (
                f"Enron ids {ENRON_FIRST}-{ENRON_EXTENSION - 1} (the first draw)",
                lambda i: ENRON_FIRST <= i < ENRON_EXTENSION,
            ),
            (
                f"Enron ids {ENRON_EXTENSION}- (the blind extension)",
                lambda i: i >= ENRON_EXTENSION,
            ),
        ]
    if spam:
        of = "SpamAssassin " if enron else ""  # Enron ids tuned nothing
        parts += [
            (
                f"{of}even ids (the half the weights were chosen on)",
                lambda i: _is_spam(i) and i % 2 == 0,
            ),
            (f"{of}odd ids (the check half)", lambda i: _is_spam(i) and i % 2 == 1),
            (f"{of}ids 1-{FIRST_SET} (the first set)", lambda i: i <= FIRST_SET),
            (
                f"{of}ids {FIRST_SET + 1}- (the seeded extension)",
                lambda i: FIRST_SET < i < ENRON_FIRST,
            ),
        ]
    for label, keep in parts:
        rows = [n for n, i in enumerate(ids) if keep(i)]
        if not rows:
            continue
        part = {mode: [lists[n] for n in rows] for mode, lists in ranked.items()}
        answers = [gold[n] for n in rows]
        print(f"\n{label}: {len(rows)} questions")
        table(part, answers)
    for mode in ("hybrid", "keyword-only"):
        p50 = statistics.median(timings[mode])
        p95 = statistics.quantiles(timings[mode], n=20)[-1]
        print(f"{mode} latency: p50 {p50:.1f} ms, p95 {p95:.1f} ms (this corpus)")
    if gold_scores and other_scores:
        cut = 0.5
        print(
            f"hybrid score: answer page median {statistics.median(gold_scores):.2f} "
            f"({sum(s >= cut for s in gold_scores) / len(gold_scores):.0%} ≥ {cut}); "
            f"other results median {statistics.median(other_scores):.2f} "
            f"({sum(s >= cut for s in other_scores) / len(other_scores):.0%} ≥ {cut})"
        )
    misses = [
        (q["question"], g, r[:5])
        for q, g, r in zip(questions, gold, ranked["hybrid"], strict=True)
        if not set(g) & set(r[:5])
    ]
    for question, answer, got in misses[: args.show_misses]:
        print(f"MISS {question!r} -> want {answer}, got {got}")
    if args.per_question:
        print("\nQuestions hybrid does not answer at rank 1: the answer's rank per arm")
        for n, question in enumerate(questions):
            if set(ranked["hybrid"][n][:1]) & set(gold[n]):
                continue
            cells = " ".join(
                f"{mode}={position(ranked[mode][n], gold[n])}" for mode in MODES
            )
            print(f"  {question['id']:>4} {cells}  {question['question']}")


if __name__ == "__main__":
    main()
