"""Issue 14, two ``waiting`` faults found on the demo mailbox, one test per kind,
built from small invented messages (invented people: Robin Vale owns the
mailbox; Dana and Lee run a building firm; Kim Ashby writes to Robin):

- a bounced message of mine: my ask whose copy bounced for an address waits on
  nobody there; the copy I re-sent to another address carries the one loop;
- one request shown as two loops: a chase of an ask ("Follow up: …", quoting it)
  is the same loop, refreshed, not a second one.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from brain.models import Source
from connectors.mail.parsing import parse_rfc822
from connectors.mail.threading import thread_messages
from loops.definitions import bounced_recipients
from loops.message import MailMessage
from loops.models import LoopStatus, LoopType, OpenLoop
from loops.pipeline import process_threads
from tests.loops.shapes import ROBIN

DANA = "dana@builders.example"
LEE = "lee@builders.example"
KIM = "kim@example.com"
T0 = datetime(2025, 3, 3, 15, 0, tzinfo=UTC)
LATER = T0 + timedelta(days=10)

ESTIMATE = (
    "Dana & Lee,\n\nRather than fill in the finish schedule, I have attached a "
    "spreadsheet that estimates the costs of the cottage. I would be interested in "
    "working on a cost plus fixed fee basis. Take a look at the numbers and let me "
    "know what you think.\n\nRobin"
)
RESENT = (
    "-----Original Message-----\nFrom: Vale, Robin\nSent: Monday, March 03, 2025 "
    "3:00 PM\nTo: 'dana@builders.example'\nSubject:\n\n" + ESTIMATE
)


def mail(
    n: int,
    body: str,
    *,
    frm: str = ROBIN,
    to: tuple[str, ...] = (DANA,),
    minutes: float = 0,
    thread: str = "t-estimate",
    subject: str = "",
    failed: tuple[str, ...] = (),
) -> MailMessage:
    return MailMessage(
        message_id=f"<{n}.{thread}@example>",
        thread_id=thread,
        subject=subject,
        from_addr=frm,
        to=list(to),
        date=T0 + timedelta(minutes=minutes),
        is_mine=frm == ROBIN,
        body=body,
        failed_recipients=list(failed),
    )


def _open(source: Source, loop_type: str) -> list[OpenLoop]:
    return list(
        OpenLoop.objects.filter(
            source=source, loop_type=loop_type, status=LoopStatus.OPEN
        )
    )


def _exchange_bounce(minutes: float = 0.02) -> MailMessage:
    """An exported Exchange notice: addressed to the recipient that failed, the
    original inline, no delivery-status part."""
    return mail(
        9, "--------- Inline attachment follows ---------\n\n" + ESTIMATE,
        frm="exchange.administrator@robinco.example", to=(DANA,), minutes=minutes,
        thread="t-bounce",
        subject="Undeliverable: Delivery Status Notification (Failure)",
    )  # fmt: skip


def test_bounced_ask_waits_on_the_address_i_resent_it_to(robins_mailbox, store):
    ask = mail(1, ESTIMATE)
    resent = mail(2, RESENT, to=(LEE,), minutes=16, subject="FW:")
    store(robins_mailbox, [ask, resent, _exchange_bounce()])
    process_threads(
        source_id=robins_mailbox.id, thread_ids=["t-estimate", "t-bounce"], now=LATER
    )
    loops = _open(robins_mailbox, LoopType.UNANSWERED_OUTBOUND)
    assert [lp.counterparty_email for lp in loops] == [LEE]


def test_bounced_ask_to_its_only_recipient_opens_no_loop(robins_mailbox, store):
    store(robins_mailbox, [mail(1, ESTIMATE), _exchange_bounce()])
    process_threads(
        source_id=robins_mailbox.id, thread_ids=["t-estimate", "t-bounce"], now=LATER
    )
    assert _open(robins_mailbox, LoopType.UNANSWERED_OUTBOUND) == []


def test_bounce_days_after_the_ask_is_about_another_message(robins_mailbox, store):
    store(robins_mailbox, [mail(1, ESTIMATE), _exchange_bounce(minutes=60 * 24 * 5)])
    process_threads(
        source_id=robins_mailbox.id, thread_ids=["t-estimate", "t-bounce"], now=LATER
    )
    loops = _open(robins_mailbox, LoopType.UNANSWERED_OUTBOUND)
    assert [lp.counterparty_email for lp in loops] == [DANA]


DSN = (
    "From: MAILER-DAEMON@mx.robinco.example\nTo: robin@example.org\n"
    "Subject: Delivery Status Notification (Failure)\n"
    "Message-ID: <dsn1@mx.robinco.example>\nDate: Mon, 3 Mar 2025 15:01:00 -0000\n"
    "MIME-Version: 1.0\n"
    'Content-Type: multipart/report; report-type=delivery-status; boundary="B"\n\n'
    "--B\nContent-Type: text/plain\n\nYour message could not be delivered.\n\n"
    "--B\nContent-Type: message/delivery-status\n\n"
    "Reporting-MTA: dns; mx.robinco.example\n\n"
    "Final-Recipient: rfc822; lee@builders.example\nAction: delivered\n"
    "Status: 2.0.0\n\n"
    "Final-Recipient: rfc822; Dana@Builders.example\nAction: failed\n"
    "Status: 5.1.1\n\n"
    "--B\nContent-Type: message/rfc822\n\nFrom: robin@example.org\n"
    "To: dana@builders.example\nSubject: Estimate\n\nTake a look.\n\n--B--\n"
)


def test_delivery_status_report_names_the_failed_recipient() -> None:
    parsed = parse_rfc822(DSN.encode())
    assert parsed.failed_recipients == [DANA]
    notice = mail(
        9, parsed.body, frm=parsed.from_addr, to=(ROBIN,), thread="t-dsn",
        failed=tuple(parsed.failed_recipients),
    )  # fmt: skip
    assert bounced_recipients(notice, {ROBIN}) == [DANA]
    # An ordinary message names nobody, whatever it says.
    assert (
        bounced_recipients(mail(3, "Returned mail? No idea.", frm=KIM), {ROBIN}) == []
    )


def test_bounce_reported_by_a_delivery_status_report_opens_no_loop(
    robins_mailbox, store
):
    notice = mail(
        9, "Your message could not be delivered.", frm="mailer-daemon@mx.example",
        to=(ROBIN,), minutes=1, thread="t-dsn", subject="Failure notice",
        failed=(DANA,),
    )  # fmt: skip
    store(robins_mailbox, [mail(1, ESTIMATE), notice])
    process_threads(
        source_id=robins_mailbox.id, thread_ids=["t-estimate", "t-dsn"], now=LATER
    )
    assert _open(robins_mailbox, LoopType.UNANSWERED_OUTBOUND) == []


WORKSHEETS = (
    "Please populate the attached worksheets for the access review and return them "
    "to me once complete. Let me know if you have any questions.\n\nThank you,\nKim"
)


def test_chase_with_a_follow_up_prefix_joins_the_thread_it_chases() -> None:
    first = parse_rfc822(
        (
            f"From: {KIM}\nTo: {ROBIN}, ann@example.org, carl@example.org\n"
            "Subject: Access review worksheets\nMessage-ID: <w1@example.com>\n"
            f"Date: Mon, 1 Dec 2025 10:00:00 -0000\n\n{WORKSHEETS}\n"
        ).encode()
    )
    chase = parse_rfc822(
        (
            f"From: {KIM}\nTo: {ROBIN}, ann@example.org\n"
            "Subject: Follow up:   Access review worksheets\n"
            "Message-ID: <w2@example.com>\nDate: Thu, 4 Dec 2025 12:00:00 -0000\n\n"
            "Please return the worksheets once complete.\n\n"
            " -----Original Message-----\nFrom: Ashby, Kim\n"
            "Sent: Monday, December 01, 2025 10:00 AM\nTo: Vale, Robin\n"
            f"Subject: Access review worksheets\n\n{WORKSHEETS}\n"
        ).encode()
    )
    threads = thread_messages([first, chase], owner_addresses={ROBIN})
    assert [[m.message_id for m in ms] for ms in threads.values()] == [
        ["w1@example.com", "w2@example.com"]
    ]


def test_chase_of_an_ask_refreshes_its_one_loop(robins_mailbox, store):
    ask = mail(
        1, WORKSHEETS, frm=KIM, to=(ROBIN, "ann@example.org"), thread="t-ws",
        subject="Access review worksheets",
    )  # fmt: skip
    store(robins_mailbox, [ask])
    process_threads(source_id=robins_mailbox.id, thread_ids=["t-ws"], now=LATER)
    (loop,) = _open(robins_mailbox, LoopType.UNANSWERED_INBOUND)
    chase = mail(
        2, "Please return the worksheets once complete.", frm=KIM, to=(ROBIN,),
        minutes=3 * 24 * 60, thread="t-ws", subject="Follow up: Access review worksheets",
    )  # fmt: skip
    store(robins_mailbox, [chase])
    process_threads(
        source_id=robins_mailbox.id,
        thread_ids=["t-ws"],
        now=LATER + timedelta(days=3),
    )
    (again,) = _open(robins_mailbox, LoopType.UNANSWERED_INBOUND)
    assert again.pk == loop.pk
    assert again.last_activity_at == chase.date
    assert [e["message_id"] for e in again.evidence] == [
        ask.message_id,
        chase.message_id,
    ]
    assert loop.events.filter(event_type="refreshed").exists()
