"""Sender profiles, the curator's verdict and ``waiting`` as a triage list (SPEC
§5.1a, §5.5) on the real database, through the admin as a staff user. Invented
names and addresses only."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.urls import reverse

from accounts.models import User
from brain.access import local_caller
from brain.models import Source
from loops.message import MailMessage
from loops.models import (
    LoopEvent,
    LoopStatus,
    LoopSuppression,
    LoopType,
    OpenLoop,
    SenderProfile,
)
from loops.pipeline import process_threads
from loops.services_senders import sender_profiles_refresh
from loops.waiting import waiting_report
from tests.factories import SourceFactory

pytestmark = pytest.mark.django_db

ME = "olivia.owner@acme.example"
ANN = "ann.baker@partner.example"
ROBOT = "approvals@systems.example"
T0 = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)


@pytest.fixture
def acme(db: None) -> Source:
    return SourceFactory(
        id="acme", kind=Source.Kind.MAILBOX, owner_addresses=[ME], federated=False
    )


@pytest.fixture
def staff() -> Client:
    user = User.objects.create_superuser("curator", "curator@acme.example", "pw")
    client = Client()
    client.force_login(user)
    return client


def mail(
    n: int,
    body: str,
    *,
    frm: str = ANN,
    to: tuple[str, ...] = (ME,),
    days: float = 0,
    subject: str = "Budget",
    thread: str | None = None,
) -> MailMessage:
    thread = thread or f"t{n}"
    return MailMessage(
        message_id=f"<{n}@mail.example>",
        thread_id=thread,
        subject=subject,
        from_addr=frm,
        to=list(to),
        date=T0 + timedelta(days=days),
        is_mine=frm == ME,
        body=body,
    )


# The newest message of a mailbox source is its "now" (SPEC §5.2): a later note of
# mine puts every test message past its 24 h grace.
CLOCK = MailMessage(
    message_id="<clock@acme.example>",
    thread_id="clock",
    subject="Noted",
    from_addr=ME,
    to=["team@acme.example"],
    date=T0 + timedelta(days=35),
    is_mine=True,
    body="Noted.",
)


def reminders(count: int, *, frm: str = ROBOT) -> list[MailMessage]:
    return [
        mail(
            100 + i,
            f"Request 42 has been pending your approval for {i} days. Can you act?",
            frm=frm,
            days=i,
            subject="Your approval is overdue: request 42",
        )
        for i in range(count)
    ]


def open_inbound(source: Source) -> list[OpenLoop]:
    return list(
        OpenLoop.objects.filter(
            source=source,
            loop_type=LoopType.UNANSWERED_INBOUND,
            status=LoopStatus.OPEN,
        )
    )


def test_profiles_are_computed_over_the_source_and_stored(acme, store) -> None:
    msgs = [*reminders(5), mail(1, "Can you send the Q2 numbers?", days=6)]
    store(acme, msgs)
    out = sender_profiles_refresh(source=acme)
    assert out["profiles"] == 2
    robot = SenderProfile.objects.get(source=acme, address=ROBOT)
    assert robot.kind == SenderProfile.Kind.AUTOMATED
    assert "repetition" in robot.reasons and robot.messages == 5
    assert SenderProfile.objects.get(source=acme, address=ANN).kind == "person"


def test_sender_reasons_read_as_words_in_the_admin(acme, store, staff) -> None:
    """The curator reads why a sender was judged automated in words, on the list
    and on the profile, not the raw JSON list of reason codes."""
    store(acme, reminders(5))
    sender_profiles_refresh(source=acme)
    robot = SenderProfile.objects.get(source=acme, address=ROBOT)
    listing = staff.get(reverse("admin:loops_senderprofile_changelist")).content
    page = staff.get(
        reverse("admin:loops_senderprofile_change", args=[robot.pk])
    ).content
    for html in (listing.decode(), page.decode()):
        assert "sends the same subject or opening again and again" in html
        assert "[&quot;repetition&quot;" not in html and '["repetition"' not in html


def test_automated_sender_loops_are_not_opened_by_the_pipeline(acme, store) -> None:
    msgs = [*reminders(5), mail(1, "Can you send the Q2 numbers?", days=6)]
    store(acme, [*msgs, CLOCK])
    process_threads(source_id=acme.id, thread_ids=[m.thread_id for m in msgs])
    assert [lp.counterparty_email for lp in open_inbound(acme)] == [ANN]


def test_admin_marks_sender_automated_and_its_open_loops_close(
    acme, store, staff
) -> None:
    store(acme, [mail(1, "Can you send the Q2 numbers?", days=6), CLOCK])
    process_threads(source_id=acme.id, thread_ids=["t1"])
    (loop,) = open_inbound(acme)
    profile = SenderProfile.objects.get(source=acme, address=ANN)
    response = staff.post(
        reverse("admin:loops_senderprofile_changelist"),
        {"action": "mark_automated", "_selected_action": [profile.pk]},
        follow=True,
    )
    assert response.status_code == 200
    text = response.content.decode()
    assert "1 sender(s) marked automated" in text and "1 closed" in text
    loop.refresh_from_db()
    assert loop.status == LoopStatus.DROPPED
    assert loop.closed_by == "not_expected: automated_sender"
    profile.refresh_from_db()
    assert profile.kind == profile.admin_kind == "automated"
    assert profile.decided_by == "admin:curator"
    assert LoopEvent.objects.filter(
        event_type=LoopEvent.EventType.SENDER_MARKED, extra_data__address=ANN
    ).exists()
    assert LoopEvent.objects.filter(
        loop=loop, event_type=LoopEvent.EventType.CLOSED
    ).exists()
    # A later refresh keeps the curator's verdict.
    sender_profiles_refresh(source=acme)
    profile.refresh_from_db()
    assert profile.kind == "automated" and profile.computed_kind == "person"


def test_admin_marks_sender_person_and_its_loops_open(acme, store, staff) -> None:
    store(acme, [*reminders(5), CLOCK])
    process_threads(source_id=acme.id, thread_ids=[m.thread_id for m in reminders(5)])
    assert open_inbound(acme) == []
    profile = SenderProfile.objects.get(source=acme, address=ROBOT)
    assert profile.kind == "automated"
    response = staff.post(
        reverse("admin:loops_senderprofile_changelist"),
        {"action": "mark_person", "_selected_action": [profile.pk]},
        follow=True,
    )
    assert "1 sender(s) marked person" in response.content.decode()
    opened = open_inbound(acme)
    assert [lp.counterparty_email for lp in opened] == [ROBOT] * 5
    assert LoopEvent.objects.filter(
        event_type=LoopEvent.EventType.SENDER_MARKED,
        extra_data__address=ROBOT,
        extra_data__kind="person",
    ).exists()
    for loop in opened:
        assert loop.events.filter(event_type=LoopEvent.EventType.OPENED).exists()
    profile.refresh_from_db()
    assert profile.kind == profile.admin_kind == "person"


def test_waiting_collapses_repeats_and_keeps_automated_senders_off_the_ranking(
    acme, store
) -> None:
    # The same question five times from Ann (one subject), one from Bo; and a
    # machine's reminders.
    ann = [
        mail(i, "Can you approve the budget?", days=i, thread=f"a{i}") for i in range(5)
    ]
    bo = [
        mail(50, "Could you review my draft?", frm="bo@firm.example", subject="Draft")
    ]
    msgs = [*ann, *bo, *reminders(6), CLOCK]
    store(acme, msgs)
    sender_profiles_refresh(source=acme)
    profile = SenderProfile.objects.get(source=acme, address=ANN)
    profile.kind = "person"  # Ann repeats herself, yet she is a person
    profile.admin_kind = "person"
    profile.save()
    SenderProfile.objects.filter(source=acme, address=ROBOT).update(
        kind="automated", admin_kind="automated"
    )
    # Loops opened before the robot was known for what it is (a live source that
    # learned late), so the ranking rule is what is tested here.
    for m in reminders(6):
        OpenLoop.objects.create(
            source=acme,
            dedup_key=f"thread:{m.thread_id}:unanswered_inbound",
            loop_type=LoopType.UNANSWERED_INBOUND,
            summary=f'Reply owed to {ROBOT}: "{m.subject}"',
            detector="deterministic_thread",
            counterparty_email=ROBOT,
            thread_id=m.thread_id,
            opened_at=m.date,
            last_activity_at=m.date,
        )
    process_threads(source_id=acme.id, thread_ids=[m.thread_id for m in ann + bo])
    report = waiting_report(caller=local_caller(), sources=["acme"])
    emails = [g["counterparty_email"] for g in report["groups"]]
    assert ROBOT not in emails
    assert report["automated"] == {"loop_count": 6, "senders": [ROBOT]}
    ann_group = next(g for g in report["groups"] if g["counterparty_email"] == ANN)
    assert ann_group["loop_count"] == 5 and ann_group["entry_count"] == 1
    assert ann_group["loops"][0]["repeats"] == 5
    assert (
        "×5" in report["text"] and "Automated senders (not ranked): 6" in report["text"]
    )


def test_waiting_ranking_is_not_won_by_volume_alone(acme, store) -> None:
    topics = "lease roof paint floor garden fence window door boiler garage attic porch"
    chatty = [
        mail(i, f"Can you check the {t} quote?", subject=t.title(), days=30, thread=t)
        for i, t in enumerate(topics.split())
    ]
    old = mail(90, "Can you sign the contract?", frm="dee@landlord.example", days=10)
    store(acme, [*chatty, old, CLOCK])
    process_threads(source_id=acme.id, thread_ids=[m.thread_id for m in [*chatty, old]])
    report = waiting_report(caller=local_caller(), sources=["acme"])
    scores = {g["counterparty_email"]: g["score"] for g in report["groups"]}
    # Twelve distinct asks rank no higher than one (SPEC §5.1b: never by volume):
    # a group scores by its best loop's confidence.
    assert scores[ANN] == scores["dee@landlord.example"] == 100


def test_mute_and_close_its_open_loops_says_what_it_did(acme, store, staff) -> None:
    store(acme, [mail(1, "Can you send the Q2 numbers?", days=6), CLOCK])
    process_threads(source_id=acme.id, thread_ids=["t1"])
    (loop,) = open_inbound(acme)
    response = staff.post(
        reverse("admin:loops_openloop_changelist"),
        {"action": "mute_sender_and_close", "_selected_action": [loop.pk]},
        follow=True,
    )
    assert "1 sender(s) muted and 1 of their open loop(s) closed" in (
        response.content.decode()
    )
    loop.refresh_from_db()
    assert loop.status == LoopStatus.DROPPED and loop.closed_by == "muted"
    assert LoopSuppression.objects.filter(source=acme, value=ANN).exists()


def test_plain_mute_says_existing_loops_stay(acme, store, staff) -> None:
    store(acme, [mail(1, "Can you send the Q2 numbers?", days=6), CLOCK])
    process_threads(source_id=acme.id, thread_ids=["t1"])
    (loop,) = open_inbound(acme)
    response = staff.post(
        reverse("admin:loops_openloop_changelist"),
        {"action": "mute_sender", "_selected_action": [loop.pk]},
        follow=True,
    )
    assert "existing open loops stay open" in response.content.decode()
    loop.refresh_from_db()
    assert loop.status == LoopStatus.OPEN


def test_marking_a_sender_automated_says_which_loops_leave_the_ranking(
    acme, store, staff
) -> None:
    """A promise I made to a sender stays open when the sender is marked
    automated, but leaves the ranking: the message said "0 closed" and the
    dashboard dropped the group without a word (newcomer)."""
    from loops.services import loop_open

    store(acme, [mail(1, "Thanks for the numbers.", days=6), CLOCK])
    process_threads(source_id=acme.id, thread_ids=["t1"])
    loop_open(
        source=acme,
        loop_type=LoopType.COMMITMENT_OWED_BY_ME,
        summary="I promised Ann the Q2 plan",
        actor="test",
        counterparty_email=ANN,
    )
    profile = SenderProfile.objects.get(source=acme, address=ANN)
    response = staff.post(
        reverse("admin:loops_senderprofile_changelist"),
        {"action": "mark_automated", "_selected_action": [profile.pk]},
        follow=True,
    )
    text = response.content.decode()
    assert "1 other open loop(s) with them stay open and leave the Waiting" in text
    page = staff.get(reverse("admin:loops_waiting")).content.decode()
    assert "Automated senders (not ranked)" in page and ANN in page


def test_a_message_opening_reads_the_same_from_a_long_body() -> None:
    """A sender's opening (first 80 characters, digit runs as "#", whitespace
    collapsed) is read from the start of the body; what lies past it, a digit run
    or whitespace cut at the prefix included, does not change it."""
    from loops.senders import _opening

    def whole(text: str) -> str:
        return re.sub(r"\s+", " ", re.sub(r"\d+", "#", text)).strip()[:80]

    texts = [
        " \n" * 300 + "Order 12345 shipped to Quill Inc on 2024-05-06. " * 5,
        "Invoice " + "9" * 1000 + " is due",
        "Short 42 text",
        "word " * 79 + "\n\n\n" + "7" * 50,
        "",
    ]
    for text in texts:
        assert _opening(text) == whole(text)
