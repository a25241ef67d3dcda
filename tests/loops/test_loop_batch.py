"""Loop writes on import are batched like page writes (SPEC §11 loop-heavy mail):
the new detector loops of a chunk cost a fixed number of statements."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from loops.models import LoopEvent, LoopStatus, LoopType, OpenLoop
from loops.pipeline import process_threads
from tests.loops.shapes import OWNER, msg

if TYPE_CHECKING:
    from collections.abc import Callable

    from brain.models import Source

pytestmark = pytest.mark.django_db

# A question of mine with no promise in it: the detector's loop only (a promise
# would add a commitment loop, written by the commitment projection).
ASK = "Still no word on the Leander closing?"
# Every statement of one process_threads call on one chunk: the source and its
# reference time, mutes and grace holds, the chunk's messages, pages, loops and
# state, the source-wide sender and bounce reads, the three batched inserts and the
# cross-thread passes (the reply-loop pass reads its counterparties' contacts, so
# later contact settles loops of threads the chunk did not touch). A new
# per-thread statement shows up as a difference between 3 and 12 threads; a new
# per-chunk one as a change of this number.
CHUNK_QUERIES = 27


def asks(
    store: Callable[..., object], mailbox: Source, first: int, count: int
) -> list[str]:
    """``count`` threads, each a question of mine to its own person, old enough
    to open an ``unanswered_outbound`` loop; returns their thread ids."""
    threads = [f"t-ask-{n}" for n in range(first, first + count)]
    store(
        mailbox,
        [
            msg(
                n,
                frm=OWNER,
                to=(f"person{n}@partner.example",),
                thread=thread,
                hours=n / 100,
                body=ASK,
            )
            for n, thread in zip(range(first, first + count), threads, strict=True)
        ],
    )
    return threads


def test_new_loops_of_a_chunk_cost_the_same_statements_for_3_or_12_threads(
    mailbox: Source, store: Callable[..., object]
) -> None:
    store(mailbox, [msg(999, thread="t-newest", hours=500, body="See you then.")])
    small, large = asks(store, mailbox, 0, 3), asks(store, mailbox, 100, 12)

    with CaptureQueriesContext(connection) as three:
        first = process_threads(source_id=mailbox.id, thread_ids=small)
    with CaptureQueriesContext(connection) as twelve:
        second = process_threads(source_id=mailbox.id, thread_ids=large)

    assert (first["opened"], second["opened"]) == (3, 12)
    assert len(twelve.captured_queries) == len(three.captured_queries)
    assert len(three.captured_queries) == CHUNK_QUERIES
    loops = OpenLoop.objects.filter(
        source=mailbox, loop_type=LoopType.UNANSWERED_OUTBOUND
    )
    assert loops.count() == 15
    assert set(loops.values_list("status", flat=True)) == {LoopStatus.OPEN}
    assert (
        LoopEvent.objects.filter(
            loop__in=loops, event_type=LoopEvent.EventType.OPENED
        ).count()
        == 15
    )


def test_a_batched_loop_is_the_row_the_one_by_one_path_writes(
    mailbox: Source, store: Callable[..., object], jeff: object
) -> None:
    """Same fields, counterparty page and opened event as ``loop_upsert``; a second
    run refreshes nothing and opens nothing."""
    from tests.loops.shapes import JEFF

    store(mailbox, [msg(999, thread="t-newest", hours=500, body="See you then.")])
    store(
        mailbox,
        [
            msg(
                1,
                frm=OWNER,
                to=(JEFF,),
                thread="t-ask-jeff",
                body=ASK,
            )
        ],
    )
    assert (
        process_threads(source_id=mailbox.id, thread_ids=["t-ask-jeff"])["opened"] == 1
    )
    loop = OpenLoop.objects.get(source=mailbox, thread_id="t-ask-jeff")
    assert loop.counterparty == jeff and loop.counterparty_email == JEFF
    assert loop.dedup_key == "thread:t-ask-jeff:unanswered_outbound"
    assert loop.page is not None and loop.evidence[0]["page_slug"] == loop.page.slug
    event = loop.events.get()
    assert event.event_type == LoopEvent.EventType.OPENED
    assert event.extra_data["detector"] == loop.detector
    again = process_threads(source_id=mailbox.id, thread_ids=["t-ask-jeff"])
    assert again["opened"] == 0 and loop.events.count() == 1
