"""The learned decision over loop candidates (SPEC §5.1b, issue 43): the shipped
model is the training script's output, it closes what is moot and keeps what is
fresh, the owner's side is never a counterparty, one outlier date moves no clock,
and ``waiting`` ranks by the decision, never by volume. Mail is invented."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from brain.access import local_caller
from loops.decisions import MODEL_FILE, fit_table, loops_decide, shipped_model
from loops.models import CLOSED_BY_MODEL, LoopStatus, OpenLoop
from loops.pipeline import process_threads
from loops.selectors import newest_message_at, reference_time, settled_clock
from loops.waiting import LoopView, group_score, loop_view, waiting_report
from tests.loops.shapes import ROBIN, msg

if TYPE_CHECKING:
    from collections.abc import Callable

    from brain.models import Source
    from loops.message import MailMessage

TABLE = (
    MODEL_FILE.parents[2] / "tests" / "data" / "loops_dev" / "owners" / "table.jsonl"
)
NOW = datetime(2001, 12, 20, 17, 0, tzinfo=UTC)
DANA = "dana.reyes@example.org"
LEE = "lee.okafor@example.org"


def test_the_training_script_rebuilds_the_shipped_model_bit_for_bit() -> None:
    """``benchmarks/loops_train.py`` fits ``loops.decisions.fit_table`` on the
    committed table: the same table gives the shipped file byte for byte."""
    assert fit_table(TABLE.read_text()).as_json() == MODEL_FILE.read_text()


def test_the_shipped_model_loads_once_per_process_offline() -> None:
    model = shipped_model()
    assert model is not None and shipped_model() is model
    assert shipped_model.cache_info().currsize == 1
    assert model.meta["rows"] >= 200 and len(model.meta["mailboxes"]) == 7


def _ask(n: int, who: str, at: datetime, body: str, thread: str) -> MailMessage:
    return msg(n, frm=who, to=(ROBIN,), at=at, body=body, thread=thread, subject="Q")


def _clock() -> MailMessage:
    """A message at ``NOW`` in a thread of its own: the mailbox's reference time,
    which puts every test message past its grace window (SPEC §5.2)."""
    return msg(
        3, frm=LEE, to=(ROBIN,), at=NOW, body="Numbers attached.", thread="t-last"
    )


def _history(who: str, until: datetime) -> list[MailMessage]:
    """An exchange between Robin and ``who`` a month before ``until``: not a
    first contact."""
    start = until - timedelta(days=30)
    return [
        msg(
            900,
            frm=ROBIN,
            to=(who,),
            at=start,
            body="Lunch next week?",
            thread=f"h-{who}",
        ),
        msg(
            901,
            frm=who,
            to=(ROBIN,),
            at=start + timedelta(hours=2),
            body="Sure, Tuesday works.",
            thread=f"h-{who}",
        ),
    ]


@pytest.fixture
def decided(
    robins_mailbox: Source,
    store: Callable[..., list[MailMessage]],
    settings: object,
) -> dict[str, OpenLoop]:
    """Two asks of Robin, detected with the decision off, then decided once: an
    ask for a call two months before the reference time, and a fresh question
    from someone Robin writes with."""
    settings.LOOPS_DECISIONS_ENABLED = False  # type: ignore[attr-defined]
    old = _ask(
        1,
        DANA,
        NOW - timedelta(days=60),
        "Could you send me the volumes for the Calpine conference call?",
        "t-old",
    )
    fresh = _ask(
        2,
        LEE,
        NOW - timedelta(days=2),
        "What did you decide about the Houston lease renewal?",
        "t-fresh",
    )
    last = _clock()
    store(
        robins_mailbox,
        [*_history(DANA, old.sent_at), *_history(LEE, fresh.sent_at), old, fresh, last],
    )
    process_threads(
        source_id=robins_mailbox.id, thread_ids=["t-old", "t-fresh", "t-last"]
    )
    loops_decide(source=robins_mailbox, now=reference_time(source=robins_mailbox))
    return {
        lp.thread_id: lp
        for lp in OpenLoop.objects.filter(
            source=robins_mailbox, loop_type="unanswered_inbound"
        )
    }


def test_moot_after_its_moment(decided: dict[str, OpenLoop]) -> None:
    """Class 1: an ask for a call two months gone closes (``model``); a
    two-day-old question from a correspondent stays open, ranked above it."""
    assert decided["t-old"].status == LoopStatus.DROPPED
    assert decided["t-old"].closed_by.startswith(CLOSED_BY_MODEL)
    assert decided["t-fresh"].status == LoopStatus.OPEN
    assert decided["t-fresh"].confidence > decided["t-old"].confidence


def test_waiting_says_how_many_candidates_the_model_did_not_keep(
    decided: dict[str, OpenLoop],
) -> None:
    """A list the model thinned never passes for the whole truth: waiting counts
    the candidates it closed and the digest says how to keep one."""
    report = waiting_report(caller=local_caller(actor="test"), sources=["robin"])
    assert report["not_kept"] == {"loop_count": 1}
    assert "Judged not open by the learned decision: 1 candidate" in report["text"]


def test_the_owner_side_is_never_waiting(
    robins_mailbox: Source, store: Callable[..., list[MailMessage]], settings: object
) -> None:
    """Class 6: the owner's assistant writes from the owner's sent folder; her own
    ask to the owner is logistics on the owner's side, never a loop (a hard gate:
    it states a fact)."""
    settings.LOOPS_DECISIONS_ENABLED = False  # type: ignore[attr-defined]
    assistant = "pat.assistant@example.org"
    for_owner = msg(
        1,
        frm=assistant,
        to=(LEE,),
        at=NOW - timedelta(days=3),
        body="Robin can meet Thursday at 3.",
        thread="t-book",
        mine=True,
    )
    ask = _ask(
        2, assistant, NOW - timedelta(days=1), "Do you want the car at 7 or 8?", "t-car"
    )
    last = _clock()
    store(robins_mailbox, [for_owner, ask, last])
    process_threads(
        source_id=robins_mailbox.id, thread_ids=["t-book", "t-car", "t-last"]
    )
    assert OpenLoop.objects.get(source=robins_mailbox, thread_id="t-car").is_open
    loops_decide(source=robins_mailbox, now=NOW)
    car = OpenLoop.objects.get(source=robins_mailbox, thread_id="t-car")
    assert not car.is_open and car.confidence == 0.0


def test_a_clock_no_outlier_can_move(
    robins_mailbox: Source, store: Callable[..., list[MailMessage]]
) -> None:
    """Class 5: one message dated 2004 in a 2001 mailbox does not set "now"
    (SPEC §5.2: no other message in the 30 days before it)."""
    mail = [
        _ask(n, LEE, NOW - timedelta(days=n), f"Note {n}.", f"t-{n}")
        for n in range(1, 61)
    ]
    stray = _ask(
        99, DANA, datetime(2004, 5, 1, tzinfo=UTC), "Placeholder date?", "t-stray"
    )
    store(robins_mailbox, [*mail, stray])
    assert newest_message_at(source_id=robins_mailbox.id) == NOW - timedelta(days=1)
    assert reference_time(source=robins_mailbox).year == 2001


def test_settled_clock_needs_a_neighbour() -> None:
    day = timedelta(days=1)
    bulk = [NOW - (40 + n) * day for n in range(60)]
    assert settled_clock([NOW, *bulk]) == NOW - 40 * day
    assert settled_clock([NOW, NOW - 3 * day, *bulk]) == NOW
    assert settled_clock([NOW, NOW - 40 * day]) == NOW  # no bulk: no outlier
    assert settled_clock([NOW]) == NOW
    assert settled_clock([]) is None


def _view(n: int, confidence: float) -> LoopView:
    loop = OpenLoop(
        pk=n,
        loop_type="unanswered_inbound",
        counterparty_email=f"p{n}@x.org",
        summary="s",
        opened_at=NOW,
        last_activity_at=NOW,
        confidence=confidence,
    )
    return loop_view(loop)


def test_ranking_by_recency_and_relationship_never_by_volume() -> None:
    """Class 8: five doubtful loops from one sender rank below one likely loop."""
    five = [_view(n, 0.3) for n in range(5)]
    one = [_view(9, 0.8)]
    assert group_score(one, None, NOW) > group_score(five, None, NOW)
    assert group_score(five, None, NOW) == group_score(five[:1], None, NOW)


def test_missing_sent_mail_is_warned_and_reply_owed_verdicts_held_back(
    robins_mailbox: Source, store: Callable[..., list[MailMessage]]
) -> None:
    """Class 7: a window of 240 received and 2 sent messages cannot show whether
    Robin answered: waiting says so and lists no reply-owed loop (waiting-on-them
    stays), instead of calling the inbox complete."""
    received = [
        _ask(
            n,
            f"p{n % 40}@example.org",
            NOW - timedelta(hours=6 * n),
            "Status?",
            f"r{n}",
        )
        for n in range(240)
    ]
    sent = [
        msg(
            1000 + n,
            frm=ROBIN,
            to=(LEE,),
            at=NOW - timedelta(days=n + 1),
            body="Any news on the lease?",
            thread=f"s{n}",
        )
        for n in range(2)
    ]
    store(robins_mailbox, [*received, *sent], page=False)
    for n, loop_type in enumerate(("unanswered_inbound", "unanswered_outbound")):
        OpenLoop.objects.create(
            source=robins_mailbox,
            dedup_key=f"k{n}",
            loop_type=loop_type,
            counterparty_email=LEE,
            summary=f"loop {n}",
            thread_id=f"x{n}",
            detector="deterministic_thread",
            opened_at=NOW,
            last_activity_at=NOW,
        )
    report = waiting_report(
        caller=local_caller(actor="test"), sources=[robins_mailbox.id]
    )
    assert report["held_back"] == {"loop_count": 1, "sources": [robins_mailbox.id]}
    assert [lp["loop_type"] for g in report["groups"] for lp in g["loops"]] == [
        "unanswered_outbound"
    ]
    assert report["completeness"] == "partial" and not report["clean"]
    assert any("only 2 sent" in w for w in report["warnings"]), report["warnings"]


def _decide_all(source: Source, messages: list[MailMessage]) -> list[OpenLoop]:
    """Detect ``messages`` (rules), run the decision once, return the open loops."""
    process_threads(
        source_id=source.id, thread_ids=sorted({m.thread_id for m in messages})
    )
    loops_decide(source=source, now=reference_time(source=source))
    return list(OpenLoop.objects.filter(source=source, status=LoopStatus.OPEN))


def test_strangers_one_way_mail_is_not_owed_a_reply(
    robins_mailbox: Source, store: Callable[..., list[MailMessage]], settings: object
) -> None:
    """Class 2: a stranger's grievance letter, worded as questions, owes nothing
    (LOOPS_LABELLING.md); a colleague's question of the same day stays."""
    settings.LOOPS_DECISIONS_ENABLED = False  # type: ignore[attr-defined]
    stranger = _ask(
        1,
        "angry.shareholder@mailbox.example",
        NOW - timedelta(days=2),
        "How could you let this happen? Who will repay my savings? Answer me!",
        "t-grief",
    )
    colleague = _ask(
        2,
        LEE,
        NOW - timedelta(days=2),
        "Robin, can you approve the Houston lease renewal today?",
        "t-lease",
    )
    last = _clock()
    mail = [*_history(LEE, colleague.sent_at), stranger, colleague, last]
    store(robins_mailbox, mail)
    open_threads = {lp.thread_id for lp in _decide_all(robins_mailbox, mail)}
    assert "t-grief" not in open_threads
    assert "t-lease" in open_threads


def test_a_matter_settled_elsewhere_does_not_stay_open(
    robins_mailbox: Source, store: Callable[..., list[MailMessage]], settings: object
) -> None:
    """Class 3: Dana asked for the Q3 budget plan; Robin sent it two days later
    under a new subject with Dana copied: nothing is owed."""
    settings.LOOPS_DECISIONS_ENABLED = False  # type: ignore[attr-defined]
    ask = _ask(
        1,
        DANA,
        NOW - timedelta(days=6),
        "Can you send me the Q3 budget plan for Calpine?",
        "t-ask",
    )
    ask.subject = "Calpine Q3 budget"
    sent = msg(
        2,
        frm=ROBIN,
        to=(LEE,),
        cc=(DANA,),
        at=NOW - timedelta(days=4),
        body="Attached is the Q3 budget plan for Calpine.",
        subject="Q3 budget plan - Calpine",
        thread="t-plan",
    )
    last = _clock()
    mail = [*_history(DANA, ask.sent_at), ask, sent, last]
    store(robins_mailbox, mail)
    assert "t-ask" not in {lp.thread_id for lp in _decide_all(robins_mailbox, mail)}


def test_promises_that_are_not_promises_and_one_promise_is_one_loop(
    robins_mailbox: Source, store: Callable[..., list[MailMessage]], settings: object
) -> None:
    """Class 4: "I'll be on my cell", "I will keep you posted" and "I don't think
    we'll have anything for you today" promise nothing; one promise said twice
    in a message is one loop."""
    settings.LOOPS_DECISIONS_ENABLED = False  # type: ignore[attr-defined]
    note = msg(
        1,
        frm=ROBIN,
        to=(LEE,),
        at=NOW - timedelta(days=2),
        thread="t-cell",
        body="I'll be on my cell all afternoon. I will keep you posted. "
        "I don't think we'll have anything for you today.",
        subject="Today",
    )
    pledge = msg(
        2,
        frm=ROBIN,
        to=(DANA,),
        at=NOW - timedelta(days=2),
        thread="t-pledge",
        subject="Contract",
        body="I will send you the signed contract by Friday. As I said, "
        "I'll send the signed contract on Friday.",
    )
    last = _clock()
    mail = [
        *_history(LEE, note.sent_at),
        *_history(DANA, pledge.sent_at),
        note,
        pledge,
        last,
    ]
    store(robins_mailbox, mail)
    loops = _decide_all(robins_mailbox, mail)
    promises = [lp for lp in loops if lp.loop_type == "commitment_owed_by_me"]
    assert "t-cell" not in {lp.thread_id for lp in promises}
    assert [lp.thread_id for lp in promises] == ["t-pledge"]


def test_an_as_of_replay_is_decided_as_an_import_would_be(
    robins_mailbox: Source, store: Callable[..., list[MailMessage]], settings: object
) -> None:
    """``waiting --as-of`` replays detection (SPEC §5.5); the learned decision
    judges the replayed loops as an import at that time would (SPEC §5.1b): the
    stranger's one-way letter is not listed, the colleague's question is, ranked
    by its probability rather than by a flat 1.0."""
    settings.LOOPS_DECISIONS_ENABLED = True  # type: ignore[attr-defined]
    stranger = _ask(
        1,
        "angry.shareholder@mailbox.example",
        NOW - timedelta(days=2),
        "How could you let this happen? Who will repay my savings? Answer me!",
        "t-grief",
    )
    colleague = _ask(
        2,
        LEE,
        NOW - timedelta(days=2),
        "Robin, can you approve the Houston lease renewal today?",
        "t-lease",
    )
    store(
        robins_mailbox,
        [*_history(LEE, colleague.sent_at), stranger, colleague, _clock()],
    )
    report = waiting_report(
        caller=local_caller(actor="test"),
        sources=[robins_mailbox.id],
        as_of=NOW + timedelta(hours=1),
    )
    waiting_on = {g["counterparty_email"] for g in report["groups"]}
    assert LEE in waiting_on
    assert "angry.shareholder@mailbox.example" not in waiting_on
    lee = next(g for g in report["groups"] if g["counterparty_email"] == LEE)
    assert 0 < lee["loops"][0]["confidence"] < 1
