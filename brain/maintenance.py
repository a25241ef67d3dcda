"""Settled indexes after a bulk write (SPEC §3 retrieval, §11 search right after an
import; issue 48).

Rows a bulk import inserts land in each GIN index's *pending list* (``fastupdate``,
PostgreSQL's default): cheap to write, but every search scans the whole list until
something merges it (a ``VACUUM``, autovacuum minutes later, or the insert that
overflows ``gin_pending_list_limit``). The planner also meets the new rows with the
statistics of the table as it was before the import. So every bulk write path
(markdown import, mail import, sync, restore) ends with ``tables_settle``: one
``gin_clean_pending_list`` per GIN index of the tables it filled, then ``ANALYZE``
of those tables, so the first search after an import runs at settled speed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import DatabaseError, connection, transaction
from django.db.models import Model

from brain.models import (
    Alias,
    Chunk,
    DanglingLink,
    Fact,
    Page,
    PageRevision,
    RawRecord,
    Relation,
    TimelineEntry,
    TitleWord,
)

logger = logging.getLogger(__name__)

# The tables the page write path (``brain.services.pages.pages_write``) and the
# fact service fill: what every importer of pages leaves behind.
PAGE_WRITE_MODELS: tuple[type[Model], ...] = (
    Page,
    Chunk,
    Alias,
    TitleWord,
    Relation,
    DanglingLink,
    TimelineEntry,
    PageRevision,
    RawRecord,
    Fact,
)

# Benchmarks turn it off (``benchmarks/import_markdown.py --no-settle``) to measure
# what the settle buys; nothing else should.
SETTLE_ENABLED = True

_GIN_INDEXES_SQL = """
SELECT i.indexrelid::regclass::text
  FROM pg_index i
  JOIN pg_class c ON c.oid = i.indexrelid
  JOIN pg_am a ON a.oid = c.relam
 WHERE a.amname = 'gin' AND i.indrelid = ANY(%s::regclass[])
 ORDER BY 1
"""


@dataclass
class SettleReport:
    """What ``tables_settle`` did: ``tables`` analysed, ``gin_pages`` the pending-list
    pages merged into the GIN indexes (per index name), ``seconds`` it took, and
    ``skipped`` the steps the database refused (``"gin <index>"`` or
    ``"analyze"``: not the owner; logged, never raised)."""

    tables: list[str] = field(default_factory=list)
    gin_pages: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    skipped: list[str] = field(default_factory=list)


def tables_settle(
    models: Sequence[type[Model]] = PAGE_WRITE_MODELS,
    *,
    tables: Sequence[str] = (),
) -> SettleReport:
    """Merge the GIN pending lists of ``models``' tables (and of the ``tables``
    named, e.g. every table a restore loaded) and ``ANALYZE`` them (issue 48,
    SPEC §11): call it once at the end of a bulk write, after its last commit. One query lists the GIN indexes, one ``gin_clean_pending_list`` per
    index (its pending list merged in bulk, far cheaper than row by row), one
    ``ANALYZE t1, t2, …``; cost grows with the pending list and the sample
    ``ANALYZE`` reads (at most ``300 × default_statistics_target`` rows a table),
    not with the tables' size. Inside a transaction (tests) it works the same.
    A step the role may not run (it does not own the table) is skipped and
    listed in ``skipped``. Returns a ``SettleReport``."""
    report = SettleReport()
    names = list(dict.fromkeys([*(m._meta.db_table for m in models), *tables]))
    if not SETTLE_ENABLED or not names:
        return report
    started = time.perf_counter()
    report.tables = names
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(_GIN_INDEXES_SQL, [names])
        indexes = [row[0] for row in cursor.fetchall()]
        for index in indexes:
            try:
                with transaction.atomic():
                    cursor.execute(
                        "SELECT gin_clean_pending_list(%s::regclass)", [index]
                    )
                    report.gin_pages[index] = int(cursor.fetchone()[0] or 0)
            except DatabaseError as exc:
                logger.warning("gin_clean_pending_list(%s) refused: %s", index, exc)
                report.skipped.append(f"gin {index}")
        try:
            with transaction.atomic():
                cursor.execute("ANALYZE " + ", ".join(quote(t) for t in names))
        except DatabaseError as exc:
            logger.warning("ANALYZE %s refused: %s", names, exc)
            report.skipped.append("analyze")
    report.seconds = time.perf_counter() - started
    return report


__all__ = ["PAGE_WRITE_MODELS", "SettleReport", "tables_settle"]
