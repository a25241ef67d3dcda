"""SPEC §5.2-§5.4 through ``process_threads`` on a real database: closed means
closed, mutes, grace re-check by the sweep, mailbox reference time, never raising."""

from __future__ import annotations

from datetime import timedelta

import pytest

from loops.models import Detector, GraceHold, LoopEvent, LoopStatus, LoopType, OpenLoop
from loops.pipeline import loops_sweep, process_threads
from loops.services import loop_mute
from tests.loops.shapes import JEFF, OWNER, PHILLIP_ANSWERS, T0, msg

pytestmark = pytest.mark.django_db


def inbound(source):  # type: ignore[no-untyped-def]
    return OpenLoop.objects.filter(source=source, loop_type=LoopType.UNANSWERED_INBOUND)


def test_inbound_loop_opens_with_counterparty_page_page_and_event(mailbox, jeff, store):
    store(
        mailbox,
        [
            msg(1),
            msg(2, frm=OWNER, to=(JEFF,), hours=1, body="Thanks!"),
            msg(3, thread="t-other", hours=60, body="Unrelated, see you."),
        ],
    )
    report = process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    loop = inbound(mailbox).get(thread_id="t-kuo")
    assert report["opened"] == 1 and report["failed"] == 0
    assert (
        loop.status == LoopStatus.OPEN
        and loop.detector == Detector.DETERMINISTIC_THREAD
    )
    assert loop.counterparty == jeff and loop.counterparty_email == JEFF
    assert loop.page.slug == "emails/t-kuo"
    assert loop.evidence[0]["page_slug"] == "emails/t-kuo"
    assert loop.opened_at == T0
    assert list(loop.events.values_list("event_type", flat=True)) == [
        LoopEvent.EventType.OPENED
    ]


def test_reference_time_for_mailbox_sources_is_the_newest_message(mailbox, store):
    # Newest message in the source is 60 h after T0, so the 24 h grace has passed
    # even though the wall clock is 25 years later and irrelevant.
    store(mailbox, [msg(1), msg(2, thread="t-late", hours=60, body="ok")])
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    assert inbound(mailbox).filter(thread_id="t-kuo").count() == 1
    # ...and a thread 20 h before the newest message is still in grace.
    store(mailbox, [msg(5, thread="t-young", hours=41)])
    process_threads(source_id=mailbox.id, thread_ids=["t-young"])
    assert not inbound(mailbox).filter(thread_id="t-young").exists()
    assert GraceHold.objects.filter(source=mailbox, thread_id="t-young").exists()


def test_mailbox_threads_outside_the_90_day_activity_window_are_not_considered(
    mailbox, store
):
    store(
        mailbox,
        [msg(1), msg(2, thread="t-new", at=T0 + timedelta(days=120), body="ok")],
    )
    report = process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    assert report["opened"] == 0 and not inbound(mailbox).exists()


def test_turn_flip_closes_the_stored_loop_with_reply_detected(mailbox, store):
    store(mailbox, [msg(1), msg(9, thread="t-x", hours=30, body="ok")])
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    store(mailbox, [msg(2, frm=OWNER, to=(JEFF,), hours=31, body=PHILLIP_ANSWERS)])
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    loop = inbound(mailbox).get()
    assert loop.status == LoopStatus.DONE and loop.closed_by == "reply_detected"
    assert loop.events.filter(event_type=LoopEvent.EventType.CLOSED).count() == 1


def test_closed_loop_not_resurrected_by_resync(mailbox, store):
    store(mailbox, [msg(1), msg(9, thread="t-x", hours=30, body="ok")])
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    loop = inbound(mailbox).get()
    from loops.services import loop_close

    loop_close(loop=loop, status=LoopStatus.DROPPED, actor="curator")
    for _ in range(2):  # routine re-syncs of the unchanged thread
        process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    loop.refresh_from_db()
    assert loop.status == LoopStatus.DROPPED
    # Strictly newer activity (a nudge from Jeff) reopens it.
    store(mailbox, [msg(3, hours=50, body="Phillip, any news on the Kuo's?")])
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    loop.refresh_from_db()
    assert loop.status == LoopStatus.OPEN
    assert loop.events.filter(event_type=LoopEvent.EventType.REOPENED).count() == 1


def test_muted_sender_opens_nothing_but_existing_loops_keep_their_state(mailbox, store):
    store(mailbox, [msg(1), msg(9, thread="t-x", hours=30, body="ok")])
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    loop_mute(source=mailbox, kind="sender", value=JEFF.upper(), actor="curator")
    store(mailbox, [msg(5, thread="t-new", hours=29, body="Another question?")])
    store(mailbox, [msg(10, thread="t-y", hours=60, body="ok")])
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo", "t-new"])
    assert inbound(mailbox).filter(thread_id="t-new").count() == 0
    assert inbound(mailbox).get(thread_id="t-kuo").status == LoopStatus.OPEN
    assert (
        LoopEvent.objects.filter(event_type="muted", extra_data__value=JEFF).count()
        == 1
    )


def test_grace_recheck_by_the_first_sweep_after_the_window(google, store):
    store(google, [msg(1, at=T0)])
    process_threads(
        source_id=google.id, thread_ids=["t-kuo"], now=T0 + timedelta(hours=2)
    )
    assert not inbound(google).exists()
    hold = GraceHold.objects.get(source=google, thread_id="t-kuo")
    assert hold.recheck_at == T0 + timedelta(hours=24)
    early = loops_sweep(source_ids=[google.id], now=T0 + timedelta(hours=23))
    assert early["rechecked"] == 0 and not inbound(google).exists()
    result = loops_sweep(
        source_ids=[google.id], now=T0 + timedelta(hours=25)
    )  # no new mail
    assert result["rechecked"] == 1 and result["opened"] == 1
    assert inbound(google).get().opened_at == T0
    assert not GraceHold.objects.filter(source=google).exists()


def test_process_threads_never_raises_into_the_caller(mailbox, store, caplog):
    store(mailbox, [msg(1)])
    assert (
        process_threads(source_id="no-such-source", thread_ids=["t-kuo"])["failed"] == 1
    )
    from brain.models import RawRecord

    RawRecord.objects.filter(source=mailbox).update(
        metadata={"thread_id": "t-kuo", "date": "garbage"}
    )
    report = process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    assert report["failed"] == 1 and report["threads"] == 1


def test_process_threads_twice_is_noop(mailbox, jeff, store):
    store(
        mailbox,
        [
            msg(1),
            msg(
                2,
                frm=OWNER,
                to=(JEFF,),
                hours=30,
                body="I will send you the release by Friday.",
            ),
        ],
    )
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    before = (OpenLoop.objects.count(), LoopEvent.objects.count())
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    assert (OpenLoop.objects.count(), LoopEvent.objects.count()) == before


def test_loops_sweep_command_prints_what_it_did(google, store, capsys):
    from django.core.management import call_command

    store(google, [msg(1, at=T0)])
    process_threads(
        source_id=google.id, thread_ids=["t-kuo"], now=T0 + timedelta(hours=1)
    )
    call_command(
        "loops_sweep",
        "--source",
        google.id,
        "--now",
        (T0 + timedelta(hours=30)).isoformat(),
    )
    out = capsys.readouterr().out
    assert "1 thread(s) re-checked, 1 loop(s) opened" in out


def test_a_failing_thread_rolls_back_alone_and_is_retried_next_run(
    mailbox, jeff, store, monkeypatch
):
    """Detection commits once per chunk with a savepoint per thread (SPEC §11):
    a thread that fails after its detector wrote a loop loses that loop and its
    extraction run, the other thread of the chunk keeps its own, and the next run
    processes the failed thread again."""
    import loops.pipeline as pipeline
    from loops.models import ExtractionRun

    store(
        mailbox,
        [
            msg(1),
            msg(2, thread="t-two", hours=1),
            msg(3, thread="t-other", hours=60, body="Unrelated, see you."),
        ],
    )
    follow_up = pipeline.thread_follow_up

    def fail_on_t_two(**kwargs):  # type: ignore[no-untyped-def]
        if kwargs["thread_id"] == "t-two":
            raise RuntimeError("injected")
        return follow_up(**kwargs)

    monkeypatch.setattr(pipeline, "thread_follow_up", fail_on_t_two)
    report = process_threads(source_id=mailbox.id, thread_ids=["t-kuo", "t-two"])
    assert report["failed"] == 1 and report["threads"] == 2
    assert set(inbound(mailbox).values_list("thread_id", flat=True)) == {"t-kuo"}
    assert set(ExtractionRun.objects.values_list("thread_id", flat=True)) == {"t-kuo"}

    monkeypatch.setattr(pipeline, "thread_follow_up", follow_up)
    report = process_threads(source_id=mailbox.id, thread_ids=["t-kuo", "t-two"])
    assert report["failed"] == 0
    assert set(inbound(mailbox).values_list("thread_id", flat=True)) == {
        "t-kuo",
        "t-two",
    }
    assert ExtractionRun.objects.filter(thread_id="t-two").count() == 1
