"""Issue 14, reply loops settled in another thread: one test per fault kind found
on real mail, built from small invented messages (invented people: Robin Vale
owns the mailbox, Dana Okafor and Lee Marsh write to her)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from brain.models import Source
from loops.message import MailMessage
from loops.models import LoopEvent, LoopStatus, LoopType, OpenLoop
from loops.pipeline import CLOSED_BY_SENT_ON, process_threads
from loops.selectors import answers_visible
from tests.loops.shapes import ROBIN

DANA = "dana@example.com"
LEE = "lee@example.net"
T0 = datetime(2025, 3, 3, 15, 0, tzinfo=UTC)
LATER = T0 + timedelta(days=10)

DRAFT = (
    "Kim, after electing in October to take a full distribution of my deferral "
    "account under section six of the plan, a disagreement has arisen about the "
    "phantom stock account. Section six says a participant may elect a single sum "
    "distribution of all deferral accounts subject to a penalty, notwithstanding any "
    "other provision, valued on the last day of the month preceding the request. "
    "I read this paragraph to mean the balance as of the end of September."
)


def mail(
    n: int,
    body: str,
    *,
    frm: str = ROBIN,
    to: tuple[str, ...] = (DANA,),
    hours: float = 0,
    thread: str = "t-ask",
    subject: str = "Harbour lease",
) -> MailMessage:
    return MailMessage(
        message_id=f"<{n}.{thread}@example>",
        thread_id=thread,
        subject=subject,
        from_addr=frm,
        to=list(to),
        date=T0 + timedelta(hours=hours),
        is_mine=frm == ROBIN,
        body=body,
    )


def _closed_reason(loop: OpenLoop) -> str:
    """The evidence reason of the loop's close event."""
    event = LoopEvent.objects.get(loop=loop, event_type=LoopEvent.EventType.CLOSED)
    return str(event.extra_data["evidence"]["reason"])


def _waiting(source: Source) -> OpenLoop:
    return OpenLoop.objects.get(source=source, loop_type=LoopType.UNANSWERED_OUTBOUND)


def test_answer_in_a_new_thread_titled_with_the_matter_closes_my_ask(
    robins_mailbox, store
):
    ask = mail(
        1, "Dana, please send me a note describing the rollover option so I can "
        "pass it along to the committee.",
    )  # fmt: skip
    # Dana writes again the same day about something else: no answer.
    other = mail(
        2, "Robin, the parking passes are at the desk.", frm=DANA, to=(ROBIN,),
        hours=2, thread="t-other", subject="Parking passes",
    )  # fmt: skip
    store(robins_mailbox, [ask, other])
    process_threads(
        source_id=robins_mailbox.id, thread_ids=["t-ask", "t-other"], now=LATER
    )
    loop = _waiting(robins_mailbox)
    assert loop.status == LoopStatus.OPEN
    answer = mail(
        3, "Robin, it would go along these lines: we pay nothing further and keep "
        "the licence.", frm=DANA, to=(ROBIN,), hours=5, thread="t-new",
        subject="Rollover option",
    )  # fmt: skip
    store(robins_mailbox, [answer])
    process_threads(source_id=robins_mailbox.id, thread_ids=["t-new"], now=LATER)
    loop.refresh_from_db()
    assert (loop.status, loop.closed_by) == (LoopStatus.DONE, "reply_detected")
    event = loop.events.filter(event_type="closed").latest("id")
    assert event.extra_data["evidence"]["message_id"] == "<3.t-new@example>"


def test_review_request_is_moot_once_i_send_the_draft_on(robins_mailbox, store):
    ask = mail(1, "Dana, please review before I send it.\n\n" + DRAFT)
    store(robins_mailbox, [ask])
    process_threads(source_id=robins_mailbox.id, thread_ids=["t-ask"], now=LATER)
    loop = _waiting(robins_mailbox)
    assert loop.status == LoopStatus.OPEN
    # A short note to Lee sharing a few words is not the draft.
    note = mail(
        2, "Lee, the phantom stock account question is still open.", to=(LEE,),
        hours=20, thread="t-note", subject="Plan",
    )  # fmt: skip
    store(robins_mailbox, [note])
    process_threads(source_id=robins_mailbox.id, thread_ids=["t-note"], now=LATER)
    loop.refresh_from_db()
    assert loop.status == LoopStatus.OPEN
    sent_on = mail(
        3, DRAFT, to=("kim@example.org",), hours=48, thread="t-sent", subject="Plan"
    )
    store(robins_mailbox, [sent_on])
    process_threads(source_id=robins_mailbox.id, thread_ids=["t-sent"], now=LATER)
    loop.refresh_from_db()
    assert (loop.status, loop.closed_by) == (LoopStatus.DROPPED, CLOSED_BY_SENT_ON)


def test_a_source_of_only_my_sent_mail_cannot_see_answers(robins_mailbox, store):
    sent = [
        mail(n, f"Dana, can you send me report {n}?", hours=n, thread=f"t{n}")
        for n in range(60)
    ]
    store(robins_mailbox, sent, page=False)
    assert not answers_visible(source_id=robins_mailbox.id, owners=[ROBIN])
    process_threads(source_id=robins_mailbox.id, thread_ids=["t1", "t2"], now=LATER)
    assert not OpenLoop.objects.filter(source=robins_mailbox).exists()
    # Two answers in sixty-two messages: others' mail is in the source.
    answers = [
        mail(100 + n, "Robin, report attached.", frm=DANA, to=(ROBIN,), hours=n,
             thread=f"t{n}")
        for n in (1, 2)
    ]  # fmt: skip
    store(robins_mailbox, answers, page=False)
    assert answers_visible(source_id=robins_mailbox.id, owners=[ROBIN])
    # ... but in the weeks of these asks it holds two of others' messages to my
    # sixty: a sent folder with a stray answer, which still cannot show whether
    # Dana answered the rest (``MailCoverage``).
    process_threads(source_id=robins_mailbox.id, thread_ids=["t3"], now=LATER)
    assert not OpenLoop.objects.filter(source=robins_mailbox).exists()
    # With the inbox of those weeks kept (others write more than I do), my
    # unanswered ask waits on Dana.
    inbox = [
        mail(200 + n, f"Robin, notes from meeting {n}.", frm=f"p{n}@example.org",
             to=(ROBIN,), hours=n, thread=f"in{n}")
        for n in range(40)
    ]  # fmt: skip
    store(robins_mailbox, inbox, page=False)
    process_threads(source_id=robins_mailbox.id, thread_ids=["t3"], now=LATER)
    assert _waiting(robins_mailbox).counterparty_email == DANA


def test_their_ask_answered_in_my_message_under_a_sibling_subject_closes(
    robins_mailbox, store
):
    # Dana sends the amendment "For Execution"; I answer under the blackline's
    # thread ("RE: Blackline of the First Amendment"): her ask is answered.
    ask = mail(
        1, "Robin, please sign the amendment and fax a copy to me.", frm=DANA,
        to=(ROBIN,), subject="First Amendment to Lease - For Execution",
    )  # fmt: skip
    unrelated = mail(
        2, "Dana, the parking passes are at the desk.", hours=20, thread="t-park",
        subject="Parking passes for the lease team",
    )  # fmt: skip
    store(robins_mailbox, [ask, unrelated])
    process_threads(
        source_id=robins_mailbox.id, thread_ids=["t-ask", "t-park"], now=LATER
    )
    loop = OpenLoop.objects.get(
        source=robins_mailbox, loop_type=LoopType.UNANSWERED_INBOUND
    )
    assert loop.status == LoopStatus.OPEN
    reply = mail(
        3, "Dana, here are my comments; I would rather sign both at once.",
        hours=30, thread="t-blackline",
        subject="RE: Blackline of First Amendment to Lease",
    )  # fmt: skip
    store(robins_mailbox, [reply])
    process_threads(source_id=robins_mailbox.id, thread_ids=["t-blackline"], now=LATER)
    loop.refresh_from_db()
    assert (loop.status, loop.closed_by) == (LoopStatus.DONE, "reply_detected")
    # Regression (newcomer): my own reply elsewhere was recorded as
    # "answered_by_delegate" (the sender was not the loop's party).
    assert _closed_reason(loop) == "replied_in_other_thread"


def test_my_ask_handed_to_a_colleague_by_first_name_closes_when_they_write(
    robins_mailbox, store
):
    # I asked Dana to pass my questions to "Steve"; Steven at Dana's firm wrote to
    # me later (a new thread, another subject): the hand-off was taken up.
    ask = mail(
        1, "I would like more detail on the margin my positions need. "
        "Can the bonds count toward it? Please forward this email to Steve.",
    )  # fmt: skip
    store(robins_mailbox, [ask])
    process_threads(source_id=robins_mailbox.id, thread_ids=["t-ask"], now=LATER)
    loop = _waiting(robins_mailbox)
    assert loop.status == LoopStatus.OPEN
    # A Steve at another firm writing to me is not Dana's colleague.
    stranger = mail(
        2, "Robin, the boat is ready for the season.", frm="steve@marina.example",
        to=(ROBIN,), hours=30, thread="t-boat", subject="Boat",
    )  # fmt: skip
    store(robins_mailbox, [stranger])
    process_threads(source_id=robins_mailbox.id, thread_ids=["t-boat"], now=LATER)
    loop.refresh_from_db()
    assert loop.status == LoopStatus.OPEN
    steven = mail(
        3, "Robin, we placed the funds in the bonds. Anything else I can do?",
        frm="steven.ruiz@example.com", to=(ROBIN,), hours=60, thread="t-steve",
        subject="Hello",
    )  # fmt: skip
    store(robins_mailbox, [steven])
    process_threads(source_id=robins_mailbox.id, thread_ids=["t-steve"], now=LATER)
    loop.refresh_from_db()
    assert (loop.status, loop.closed_by) == (LoopStatus.DONE, "reply_detected")
    event = loop.events.filter(event_type="closed").latest("id")
    assert event.extra_data["evidence"]["reason"] == "answered_by_delegate"


def test_a_first_name_two_colleagues_share_hands_off_to_nobody(robins_mailbox, store):
    ask = mail(1, "Can the bonds count toward margin? Please pass this on to Steve.")
    notes = [
        mail(n, "Robin, the statement is ready.", frm=frm, to=(ROBIN,), hours=60 + n,
             thread=f"t-{n}", subject="Statement")
        for n, frm in ((2, "steven.ruiz@example.com"), (3, "steve.lamb@example.com"))
    ]  # fmt: skip
    store(robins_mailbox, [ask, *notes])
    process_threads(
        source_id=robins_mailbox.id, thread_ids=["t-ask", "t-2", "t-3"], now=LATER
    )
    assert _waiting(robins_mailbox).status == LoopStatus.OPEN


def test_their_ask_to_contact_someone_closes_on_my_report_that_i_reached_them(
    robins_mailbox, store
):
    # Dana asks me to ring a candidate; days later, in a thread she opened about
    # the same candidate, I tell her "I spoke to Kim R." — her ask is answered.
    ask = mail(
        1, "Robin, is there any way you could contact the candidate below? "
        "Her resume is attached.", frm=DANA, to=(ROBIN,),
    )  # fmt: skip
    other = mail(
        2, "Dana, the parking passes are at the desk.", to=(DANA,), hours=20,
        thread="t-park", subject="Parking",
    )  # fmt: skip
    store(robins_mailbox, [ask, other])
    process_threads(
        source_id=robins_mailbox.id, thread_ids=["t-ask", "t-park"], now=LATER
    )
    loop = OpenLoop.objects.get(
        source=robins_mailbox, loop_type=LoopType.UNANSWERED_INBOUND
    )
    assert loop.status == LoopStatus.OPEN
    report = mail(
        3, "Dana, I spoke to Kim R. I would recommend she interviews.", to=(DANA,),
        hours=96, thread="t-kim", subject="The applicant we discussed",
    )  # fmt: skip
    store(robins_mailbox, [report])
    process_threads(source_id=robins_mailbox.id, thread_ids=["t-kim"], now=LATER)
    loop.refresh_from_db()
    assert (loop.status, loop.closed_by) == (LoopStatus.DONE, "reply_detected")
    assert _closed_reason(loop) == "reported_reaching"
