"""SPEC §5.2, §5.5: ``waiting --as-of`` replays a day as if the archive ended then,
through the import's own rules (the detector and the cross-thread passes
``process_threads`` runs after it). Small invented messages (invented people: Robin
Vale owns the mailbox, Dana Okafor, her colleague Steven Ruiz and Lee Marsh write
to her)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from brain.access import local_caller
from brain.models import Source
from loops.message import MailMessage
from loops.models import LoopEvent, LoopStatus, LoopType, OpenLoop
from loops.pipeline import process_threads
from loops.services import loop_close
from loops.waiting import waiting_report
from tests.loops.shapes import ROBIN

DANA = "dana@example.com"
STEVEN = "steven.ruiz@example.com"
LEE = "lee@example.net"
T0 = datetime(2025, 3, 3, 15, 0, tzinfo=UTC)
END = T0 + timedelta(days=10)


def mail(
    n: int,
    body: str,
    *,
    frm: str = ROBIN,
    to: tuple[str, ...] = (DANA,),
    at: datetime,
    thread: str,
    subject: str,
) -> MailMessage:
    return MailMessage(
        message_id=f"<{n}.{thread}@example>",
        thread_id=thread,
        subject=subject,
        from_addr=frm,
        to=list(to),
        date=at,
        is_mine=frm == ROBIN,
        body=body,
    )


def _asks_settled_elsewhere() -> list[MailMessage]:
    """Two asks of mine to Dana, settled in other threads: one answered by Dana
    under a subject naming the matter, one by the colleague I handed it to; a
    last note from Lee (no ask) sets the archive's end."""
    return [
        mail(
            1, "Dana, please send me a note describing the rollover option so I "
            "can pass it along to the committee.", at=T0, thread="t-rollover",
            subject="Committee",
        ),
        mail(
            2, "I would like more detail on the margin my positions need. Can the "
            "bonds count toward it? Please forward this email to Steve.", at=T0,
            thread="t-margin", subject="Margin",
        ),
        mail(
            3, "Robin, it would go along these lines: we pay nothing further and "
            "keep the licence.", frm=DANA, to=(ROBIN,), at=T0 + timedelta(days=5),
            thread="t-answer", subject="Rollover option",
        ),
        mail(
            4, "Robin, we placed the funds in the bonds. Anything else I can do?",
            frm=STEVEN, to=(ROBIN,), at=T0 + timedelta(days=6), thread="t-steve",
            subject="Hello",
        ),
        mail(
            5, "Robin, the boat is ready for the season.", frm=LEE, to=(ROBIN,),
            at=END, thread="t-boat", subject="Boat",
        ),
    ]  # fmt: skip


def _loops(report: dict) -> list[tuple[str, str, str]]:  # type: ignore[type-arg]
    return sorted(
        (loop["loop_type"], group["counterparty_email"], loop["summary"])
        for group in report["groups"]
        for loop in group["loops"]
    )


def _import(source: Source, store, messages: list[MailMessage]) -> None:  # type: ignore[no-untyped-def]
    store(source, messages)
    process_threads(
        source_id=source.id, thread_ids=sorted({m.thread_id for m in messages})
    )


def test_replay_at_the_reference_time_equals_the_live_view(robins_mailbox, store):
    _import(robins_mailbox, store, _asks_settled_elsewhere())
    closed = OpenLoop.objects.filter(
        source=robins_mailbox, loop_type=LoopType.UNANSWERED_OUTBOUND
    )
    reasons = sorted(
        LoopEvent.objects.filter(
            loop__in=closed, event_type=LoopEvent.EventType.CLOSED
        ).values_list("extra_data__evidence__reason", flat=True)
    )
    # The import closed both asks in its cross-thread pass.
    assert reasons == ["answered_by_delegate", "answered_in_other_thread"]
    assert not closed.filter(status=LoopStatus.OPEN).exists()
    live = waiting_report(caller=local_caller())
    stored = sorted(OpenLoop.objects.values_list("id", "status", "updated_at"))
    events = LoopEvent.objects.count()
    replay = waiting_report(caller=local_caller(), as_of=END)
    # A replay writes nothing.
    assert sorted(OpenLoop.objects.values_list("id", "status", "updated_at")) == stored
    assert LoopEvent.objects.count() == events
    assert live["as_of"] == replay["as_of"] == END.isoformat()
    assert replay["count"] == live["count"]
    assert _loops(replay) == _loops(live)
    # Only Steven's own question is left; nothing waits on Dana any more.
    assert [who for _, who, _ in _loops(live)] == [STEVEN]


def test_replay_before_the_answer_in_another_thread_still_waits(robins_mailbox, store):
    _import(robins_mailbox, store, _asks_settled_elsewhere())
    # After the grace period, before either answer: both asks wait on Dana.
    waiting = _loops(
        waiting_report(caller=local_caller(), as_of=T0 + timedelta(days=4))
    )
    assert [(t, who) for t, who, _ in waiting] == [
        (LoopType.UNANSWERED_OUTBOUND, DANA),
        (LoopType.UNANSWERED_OUTBOUND, DANA),
    ]
    # Dana's answer is known, the colleague's is not yet.
    waiting = _loops(
        waiting_report(caller=local_caller(), as_of=T0 + timedelta(days=5, hours=1))
    )
    assert [summary for _, _, summary in waiting] == [
        'Waiting on dana@example.com: "Margin"'
    ]


def test_replay_leaves_out_a_promise_the_import_saw_kept_in_another_thread(
    robins_mailbox, store
):
    promise = mail(
        1, "I will arrange for the extra copies to be mailed.", at=T0,
        thread="t-dana", subject="Copies",
    )  # fmt: skip
    kept = mail(
        2, "Dana, the copies were mailed this morning.", at=T0 + timedelta(days=1),
        thread="t-kept", subject="Copies",
    )  # fmt: skip
    _import(robins_mailbox, store, [promise])
    _import(robins_mailbox, store, [kept])
    loop = OpenLoop.objects.get(
        source=robins_mailbox, loop_type=LoopType.COMMITMENT_OWED_BY_ME
    )
    # Closed by the import, stamped with the wall clock (after the mail's dates).
    assert (loop.status, loop.closed_by) == (LoopStatus.DONE, "fulfilled")
    at_end = T0 + timedelta(days=1)
    assert waiting_report(caller=local_caller())["count"] == 0
    assert waiting_report(caller=local_caller(), as_of=at_end)["count"] == 0
    before = waiting_report(caller=local_caller(), as_of=T0 + timedelta(hours=2))
    assert [t for t, _, _ in _loops(before)] == [LoopType.COMMITMENT_OWED_BY_ME]


def test_replay_leaves_out_a_commitment_the_import_marked_stale(robins_mailbox, store):
    promise = mail(
        1, "I will arrange for the extra copies to be mailed.", at=T0,
        thread="t-dana", subject="Copies",
    )  # fmt: skip
    # Mail on other matters 100 days on: the promise saw no activity for 90 days.
    later = mail(
        2, "Robin, the boat is ready for the season.", frm=LEE, to=(ROBIN,),
        at=T0 + timedelta(days=100), thread="t-boat", subject="Boat",
    )  # fmt: skip
    _import(robins_mailbox, store, [promise])
    _import(robins_mailbox, store, [later])
    loop = OpenLoop.objects.get(
        source=robins_mailbox, loop_type=LoopType.COMMITMENT_OWED_BY_ME
    )
    assert loop.status == LoopStatus.STALE
    assert waiting_report(caller=local_caller())["count"] == 0
    at_end = T0 + timedelta(days=100)
    assert waiting_report(caller=local_caller(), as_of=at_end)["count"] == 0
    early = waiting_report(caller=local_caller(), as_of=T0 + timedelta(days=2))
    assert [t for t, _, _ in _loops(early)] == [LoopType.COMMITMENT_OWED_BY_ME]


def test_replay_keeps_a_loop_a_person_closed_closed(robins_mailbox, store):
    """Regression (newcomer): a loop closed in the console is stamped with the wall
    clock (2026), after every date of a mailbox file, so the replay of the mailbox's
    own day showed it open again and replay no longer equalled the live view. A
    person's verdict (done, dropped, muted) holds on every replayed day; the
    import's own closes keep their place in the mail's time."""
    ask = mail(
        1, "Robin, could you send me the signed lease by Friday?", frm=DANA,
        to=(ROBIN,), at=T0, thread="t-lease", subject="Lease",
    )  # fmt: skip
    promise = mail(
        2, "Lee, I will arrange for the extra copies to be mailed.", to=(LEE,),
        at=T0, thread="t-copies", subject="Copies",
    )  # fmt: skip
    # Later mail moves the mailbox's clock past the 24-hour grace of Dana's ask.
    later = mail(
        3, "Robin, the boat is ready for the season.", frm=LEE, to=(ROBIN,),
        at=END, thread="t-boat", subject="Boat",
    )  # fmt: skip
    _import(robins_mailbox, store, [ask, promise, later])
    loops = OpenLoop.objects.filter(source=robins_mailbox, status=LoopStatus.OPEN)
    assert sorted(loops.values_list("loop_type", flat=True)) == [
        LoopType.COMMITMENT_OWED_BY_ME,
        LoopType.UNANSWERED_INBOUND,
    ]
    assert waiting_report(caller=local_caller(), as_of=END)["count"] == 2
    for loop in loops:
        loop_close(loop=loop, status=LoopStatus.DROPPED, actor="admin:curator")
    assert waiting_report(caller=local_caller())["count"] == 0
    assert waiting_report(caller=local_caller(), as_of=END)["count"] == 0
    assert (
        waiting_report(caller=local_caller(), as_of=T0 + timedelta(days=2))["count"]
        == 0
    )


def test_an_ask_with_a_deadline_is_due_then_and_ranks_overdue_first(
    robins_mailbox, store
):
    """Review of the allen-p replays: a fresh ask with a deadline ("I hope I can
    get it before then", the Monday named before it) ranked below month-old asks,
    because an unanswered loop had no due date and age filled the score. Its
    deadline is now its due date (SPEC §5.5 due bonus: overdue 50), in the stored
    loop and in an ``--as-of`` replay alike; the replay shows the evidence link
    the stored view shows."""
    old = mail(
        1, "Robin, what did the inspector say about the roof?", frm=LEE,
        to=(ROBIN,), at=T0 - timedelta(days=30), thread="t-roof", subject="Roof",
    )  # fmt: skip
    # T0 is a Monday; "Friday ... before then" is that Friday, T0 + 4 days.
    fresh = mail(
        2, "Robin, could you e-mail me the draw file? I am out all day Friday so "
        "I hope I can get it before then.", frm=DANA, to=(ROBIN,), at=T0,
        thread="t-draw", subject="Draw file",
    )  # fmt: skip
    fresh = replace(fresh, link="https://mail.example/m/2")
    end = mail(
        3, "Robin, the boat is ready for the season.", frm=STEVEN, to=(ROBIN,),
        at=T0 + timedelta(days=6), thread="t-boat", subject="Boat",
    )  # fmt: skip
    _import(robins_mailbox, store, [old, fresh, end])
    loop = OpenLoop.objects.get(thread_id="t-draw")
    assert loop.due_at is not None
    assert loop.due_at.date() == (T0 + timedelta(days=4)).date()
    for report in (
        waiting_report(caller=local_caller()),
        waiting_report(caller=local_caller(), as_of=T0 + timedelta(days=6)),
    ):
        first = report["groups"][0]
        assert first["counterparty_email"] == DANA
        assert first["nearest_due_at"] is not None
        assert first["loops"][0]["link"] == "https://mail.example/m/2"


def test_waiting_links_the_message_that_asks_not_my_later_forward(
    robins_mailbox, store
):
    """Review of the allen-p replays: waiting linked my later forward of the
    thread to a colleague (the newest evidence), not the mail that asks the
    lawyer for the revised draft; a reader checking the loop opened the wrong
    message. The link and quote are the asking message's, live and replayed."""
    ask = replace(
        mail(
            1, "Dana, can you send me a revised draft of the amendment?",
            at=T0, thread="t-amend", subject="Amendment",
        ),
        link="https://mail.example/m/ask",
    )  # fmt: skip
    forward = replace(
        mail(
            2, "Steven, see the changes I asked Dana for below.", to=(STEVEN,),
            at=T0 + timedelta(hours=1), thread="t-amend", subject="Amendment",
        ),
        link="https://mail.example/m/forward",
    )  # fmt: skip
    end = mail(
        3, "Robin, the boat is ready for the season.", frm=LEE, to=(ROBIN,),
        at=T0 + timedelta(days=6), thread="t-boat", subject="Boat",
    )  # fmt: skip
    _import(robins_mailbox, store, [ask, forward, end])
    for report in (
        waiting_report(caller=local_caller()),
        waiting_report(caller=local_caller(), as_of=T0 + timedelta(days=6)),
    ):
        (shown,) = [
            loop
            for group in report["groups"]
            for loop in group["loops"]
            if loop["loop_type"] == LoopType.UNANSWERED_OUTBOUND
        ]
        assert shown["link"] == "https://mail.example/m/ask"
        assert "revised draft" in shown["quote"]
