"""Who expects a reply and what opens a reply loop (SPEC §5.1a), one test per fault
kind named in issue 14, each built from a small invented message (invented names
and addresses; no real people)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from connectors.mail.parsing import parse_rfc822
from connectors.mail.threading import dedupe, thread_messages
from loops.asks import find_asks, is_fulfilment
from loops.definitions import MailCoverage, collapse, quoted_messages, reply_text
from loops.detectors import detect_thread
from loops.message import MailMessage
from loops.models import CLOSED_BY_FULFILLED, LoopType
from loops.senders import (
    AUTOMATED,
    PERSON,
    Contact,
    classify_senders,
    has_opt_out_wording,
    local_part_is_role,
    reported_contacts,
)

ME = "olivia.owner@acme.example"
ANN = "ann.baker@partner.example"
BOB = "bob.carter@partner.example"
LIST = "gardeners@lists.allotment.example"
T0 = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)  # Monday
NOW = T0 + timedelta(days=5)


def mail(
    n: int,
    body: str,
    *,
    frm: str = ANN,
    to: tuple[str, ...] = (ME,),
    cc: tuple[str, ...] = (),
    hours: float = 0,
    subject: str = "Budget",
    thread: str = "t1",
    name: str = "",
    html_only: bool = False,
) -> MailMessage:
    return MailMessage(
        message_id=f"<{n}.{thread}@mail.example>",
        thread_id=thread,
        subject=subject,
        from_addr=frm,
        from_name=name,
        to=list(to),
        cc=list(cc),
        date=T0 + timedelta(hours=hours),
        is_mine=frm == ME,
        body=body,
        html_only=html_only,
    )


def detect(messages: list[MailMessage], kinds: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return detect_thread(messages, owner_addresses=[ME], now=NOW, sender_kinds=kinds)


def opened(
    messages: list[MailMessage], kinds: dict[str, str] | None = None
) -> list[str]:
    return [spec.loop_type for spec in detect(messages, kinds).open]


# --- reply expectation -------------------------------------------------------


def test_question_addressed_to_me_opens_a_reply_owed_loop() -> None:
    assert opened([mail(1, "Olivia,\n\nCan you send me the Q2 numbers?\n\nAnn")]) == [
        LoopType.UNANSWERED_INBOUND
    ]


def test_request_without_question_mark_opens_a_reply_owed_loop() -> None:
    body = "Olivia,\n\nPlease let me know your preference for the venue.\n\nAnn"
    assert opened([mail(1, body)]) == [LoopType.UNANSWERED_INBOUND]


def test_fyi_opens_nothing() -> None:
    body = "FYI, the new price list is attached. It takes effect next month.\n\nAnn"
    verdict = detect([mail(1, body)])
    assert verdict.open == [] and verdict.reason == "no_ask"


def test_thanks_opens_nothing() -> None:
    assert opened([mail(1, "Thanks so much, that was very helpful!\n\nAnn")]) == []


def test_joke_with_a_pleasantry_question_opens_nothing() -> None:
    body = "How are you ? Saw this cartoon and thought of you, you will love it!"
    assert opened([mail(1, body)]) == []


def test_joke_to_a_list_is_not_an_ask_of_me() -> None:
    """On mail that went through a mailing list, an ask in a paragraph with a
    smiley or a grin is banter for the list ("… and send me two :)"), even when
    its To names me alone; the same ask without the smiley, or the smiley in
    personal mail, still asks me."""
    joke = "Keep it till it has chicks, and send me two :)\n\nBo"
    mine = mail(1, "Some local wildlife: photos on my page.", frm=ME, to=(LIST,))
    on_list = replace(mail(2, joke, frm=BOB, cc=(LIST,), hours=1), mailing_list=True)
    verdict = detect([mine, on_list])
    assert verdict.open == [] and verdict.reason == "jest_on_list"
    grin = replace(on_list, body="Send me two of them <grin>")
    assert opened([mine, grin]) == []
    earnest = replace(on_list, body="Keep it till it has chicks, and send me two.")
    assert opened([mine, earnest]) == [LoopType.UNANSWERED_INBOUND]
    personal = replace(on_list, mailing_list=False, cc=[])
    assert opened([mine, personal]) == [LoopType.UNANSWERED_INBOUND]


def test_mass_letter_to_a_crowd_opens_nothing() -> None:
    crowd = tuple(f"colleague{i}@acme.example" for i in range(12))
    body = "All,\n\nPlease submit your expense reports by the end of the month."
    verdict = detect([mail(1, body, to=(ME, *crowd))])
    assert verdict.open == [] and verdict.reason == "crowd"


def test_reply_to_me_alone_with_a_crowd_in_copy_is_addressed_to_me() -> None:
    # I sent a proposal to a list and eleven people; Ann answers me alone in To,
    # keeping them in Cc (reply-all), and asks me to change it: the ask is mine.
    crowd = (
        "dev-list@lists.partner.example",
        *(f"dev{i}@acme.example" for i in range(10)),
    )
    proposal = mail(1, "Here is the new helper for the parser.", frm=ME, to=crowd)
    review = mail(
        2,
        "Could you rename the helper before we merge it?",
        to=(ME,),
        cc=crowd,
        hours=2,
    )
    verdict = detect([proposal, review])
    assert [s.loop_type for s in verdict.open] == [LoopType.UNANSWERED_INBOUND]
    assert verdict.open[0].counterparty_email == ANN


def test_a_crowd_in_copy_still_marks_a_cold_message_or_a_group_greeting() -> None:
    # Without a message of mine in the thread, or opening "All,", a message to
    # me with a crowd in copy stays a crowd message (precision first).
    crowd = tuple(f"colleague{i}@acme.example" for i in range(12))
    cold = mail(1, "Could you send your slides by Friday?", to=(ME,), cc=crowd)
    assert opened([cold]) == []
    mine = mail(1, "Slides attached for the review.", frm=ME, to=crowd)
    greeting = mail(
        2,
        "All,\n\nCould you send your comments by Friday?",
        to=(ME,),
        cc=crowd,
        hours=2,
    )
    assert opened([mine, greeting]) == []


def test_group_greeting_marks_a_crowd_of_a_few() -> None:
    others = tuple(f"lead{i}@acme.example" for i in range(4))
    body = "Team,\n\nCan everyone update the tracker today?"
    assert opened([mail(1, body, to=(ME, *others))]) == []


@pytest.mark.parametrize("body", ["", "test", "   \n\n", "-- \nAnn Baker\nPartner Co"])
def test_empty_or_test_body_opens_nothing(body: str) -> None:
    assert opened([mail(1, body)]) == []


def test_cold_solicitation_opens_nothing() -> None:
    pitch = mail(
        1,
        "Dear Olivia, our seminar is coming to town. Register today for the "
        "early bird discount! Would you like to reserve a seat?",
        frm="hello@seminars.example",
    )
    kinds = {
        a: kind
        for a, (kind, _, _) in classify_senders([pitch], owner_addresses=[ME]).items()
    }
    assert kinds["hello@seminars.example"] == AUTOMATED
    assert opened([pitch], kinds) == []


@pytest.mark.parametrize(
    "body",
    [
        "Here is the agenda. Let me know if you have any questions.",
        "Attached is the draft. Please call if you need anything else.",
        "If you would like, we can set up a call next week.",
        "Feel free to reach out with comments.",
        "Let me know if the link does not work for you.",
        "Here are the volume charts. Please call with questions.",
        "The file is attached. Email me with any comments.",
        "Your positions are attached. Let me know if anything looks to be incorrect.",
        "Here is the schedule. Tell me if something is missing.",
    ],
)
def test_conditional_offer_opens_nothing(body: str) -> None:
    assert opened([mail(1, body)]) == []


def test_conditional_offer_does_not_hide_a_real_question() -> None:
    body = "Please let me know if you still need the forecast."
    assert [a.kind for a in find_asks(body)] == ["request"]
    asked = "Can you let me know if anything changed in the lease?"
    assert [a.kind for a in find_asks(asked)] == ["question"]


def test_question_to_another_recipient_is_not_mine() -> None:
    body = "Bob,\n\nCan you help Olivia with the numbers below?\n\nAnn"
    assert opened([mail(1, body, to=(ME,), cc=(BOB,))]) == []


def test_ask_tied_to_a_day_long_past_is_moot() -> None:
    body = "Are you coming to the site visit on Friday?"
    late = detect_thread(
        [mail(1, body)], owner_addresses=[ME], now=T0 + timedelta(days=40)
    )
    assert late.open == []
    assert opened([mail(1, body)]) == [LoopType.UNANSWERED_INBOUND]


@pytest.mark.parametrize(
    "body",
    [
        "Olivia,\n\nCould you send your notes for the March 6th interviews?\n\nAnn",
        "Olivia,\n\nPlease send the signed lease by Mar 7. Also, can you call me?",
        "Olivia,\n\nCan you confirm the room for 3/6/2024?",
    ],
)
def test_ask_tied_to_a_long_past_calendar_date_is_moot(body: str) -> None:
    # Sent Monday 4 March about 6-7 March: moot at the end of the month, live the
    # day after it was sent (an explicit date, read relative to the message date).
    asked = [mail(1, body)]
    late = T0 + timedelta(days=26)
    assert detect_thread(asked, owner_addresses=[ME], now=late).open == []
    assert [
        s.loop_type
        for s in detect_thread(
            asked, owner_addresses=[ME], now=T0 + timedelta(days=2)
        ).open
    ] == [LoopType.UNANSWERED_INBOUND]


def test_ask_naming_a_calendar_date_still_ahead_stays_live() -> None:
    body = "Olivia,\n\nCould you send your notes before the April 20 board meeting?"
    late = T0 + timedelta(days=26)
    assert [
        s.loop_type
        for s in detect_thread([mail(1, body)], owner_addresses=[ME], now=late).open
    ] == [LoopType.UNANSWERED_INBOUND]


def test_silence_as_consent_deadline_long_past_is_moot() -> None:
    ask = mail(1, "Please review the attached design for sign-off.", cc=(BOB,))
    nudge = mail(
        2,
        "If I do not hear from you by COB tomorrow I will take your silence as "
        "acceptance of the design.",
        hours=96,
    )
    late = detect_thread(
        [ask, nudge], owner_addresses=[ME], now=T0 + timedelta(days=40)
    )
    assert late.open == [] and late.reason == "settled_by_silence"
    # Before the deadline has long passed, the ask is still owed.
    assert opened([ask, nudge]) == [LoopType.UNANSWERED_INBOUND]


def test_automated_sender_opens_no_reply_owed_loop() -> None:
    body = "Your approval is overdue. Can you review request 42?"
    kinds = {"approvals@acme.example": AUTOMATED}
    verdict = detect([mail(1, body, frm="approvals@acme.example")], kinds)
    assert verdict.open == [] and verdict.reason == "automated_sender"
    assert verdict.retract == {LoopType.UNANSWERED_INBOUND: "automated_sender"}


# --- fulfilment --------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    ["Done.", "Sent!", "Attached is the Q2 report.", "Hi Olivia, I have sent it over."],
)
def test_counterparty_done_sent_attached_fulfils_my_request(reply: str) -> None:
    ask = mail(1, "Ann, can you send me the Q2 report?", frm=ME, to=(ANN,))
    answer = mail(2, reply, hours=30)
    verdict = detect([ask, answer])
    assert LoopType.UNANSWERED_OUTBOUND in verdict.close
    closed_by, evidence = verdict.closed_by[LoopType.UNANSWERED_OUTBOUND]
    assert closed_by == CLOSED_BY_FULFILLED
    assert evidence["message_id"] == answer.message_id
    assert verdict.open == []  # the delivery opens no reply-owed loop


def test_fulfilment_wording_is_not_a_signature() -> None:
    assert not is_fulfilment("Sent from my phone")
    assert not is_fulfilment("I will send it tomorrow.")


def test_fulfilment_is_read_in_the_first_three_sentences_only() -> None:
    # The rule reads the opening sentences (SPEC §5.1a); the cut stops there.
    opening = "Hi Ann.\nThanks for waiting.\n"
    assert is_fulfilment(opening + "Attached is the rent roll.\nMore to follow.")
    assert not is_fulfilment(opening + "Good news first.\nAttached is the rent roll.")
    assert is_fulfilment("Done. https://example.org/x\n\nMore.\n-- \nAnn")


# --- my asks -----------------------------------------------------------------


def test_broadcast_question_is_one_loop_without_a_single_counterparty() -> None:
    team = tuple(f"member{i}@acme.example" for i in range(6))
    verdict = detect([mail(1, "Who can cover the Friday shift?", frm=ME, to=team)])
    assert [s.loop_type for s in verdict.open] == [LoopType.UNANSWERED_OUTBOUND]
    assert verdict.open[0].counterparty_email == ""
    assert "6 recipients" in verdict.open[0].summary


def test_outbound_loop_needs_a_real_ask_of_a_person() -> None:
    assert opened([mail(1, "FYI, see the attached minutes.", frm=ME, to=(ANN,))]) == []
    kinds = {"orders@shop.example": AUTOMATED}
    to_machine = mail(
        1, "Can you confirm my order?", frm=ME, to=("orders@shop.example",)
    )
    assert opened([to_machine], kinds) == []


def test_my_ask_posted_to_a_mailing_list_opens_nothing() -> None:
    body = "Parser folks: is the -x flag documented anywhere?"
    post = mail(1, body, frm=ME, to=(ANN,), cc=("parser-users@lists.example.org",))
    verdict = detect([post])
    assert verdict.open == [] and verdict.reason == "mailing_list"
    devel = mail(1, body, frm=ME, to=("parser-devel@example.org",))
    assert opened([devel]) == []


def test_counterparty_handing_my_ask_to_someone_else_does_not_answer_it() -> None:
    carol = "carol.diaz@partner.example"
    ask = mail(1, "Ann, does section 4 apply to my case?", frm=ME, to=(ANN,))
    handoff = mail(2, "Carol,\n\nCan you help with below?\n\nAnn", cc=(carol,), hours=2)
    verdict = detect([ask, handoff])
    assert [s.loop_type for s in verdict.open] == [LoopType.UNANSWERED_OUTBOUND]
    assert verdict.open[0].counterparty_email == ANN
    # A reply that answers me closes it.
    answer = mail(3, "Olivia, yes: section 4 applies.", hours=3)
    assert LoopType.UNANSWERED_OUTBOUND in detect([ask, handoff, answer]).close


def test_my_request_without_question_mark_opens_a_waiting_loop() -> None:
    body = "Ann, please send the signed contract to the title company."
    assert opened([mail(1, body, frm=ME, to=(ANN,))]) == [LoopType.UNANSWERED_OUTBOUND]


# --- quoted text -------------------------------------------------------------


def test_notes_style_header_quote_is_cut_before_rules() -> None:
    body = (
        "That works for me.\n\nOlivia.Owner@acme.ex\nample          To:     Ann Baker/Partner@Partner\n"
        "cc:\n03/04/2024 09:02 AM     Subject:     RE: Budget\n\nCan we meet at 10 instead?"
    )
    assert reply_text(body) == "That works for me."
    assert opened([mail(1, body)]) == []


def test_outlook_original_message_quote_is_cut_before_rules() -> None:
    body = (
        "Noted.\n\n-----Original Message-----\nFrom: Owner, Olivia\nSent: Monday\n"
        "To: Baker, Ann\nSubject: Budget\n\nCould you send the file?"
    )
    assert reply_text(body) == "Noted."


def test_on_wrote_quote_is_cut_and_bottom_posted_text_kept() -> None:
    top = "Sounds good.\n\nOn Mon, Mar 4, 2024, Olivia Owner wrote:\n> Can you call me?"
    assert reply_text(top) == "Sounds good."
    bottom = (
        "Hi Olivia,\n\nOn Mon, Mar 4, 2024 Olivia Owner wrote:\n> patch here\n\n"
        "Applied, thanks.\n\n-- \nAnn\nTo unsubscribe from this list"
    )
    assert "Applied, thanks." in reply_text(bottom)
    assert "unsubscribe" not in reply_text(bottom)


def test_forward_keeps_forwarded_text_on_page_but_loops_do_not_treat_it_as_mine() -> (
    None
):
    """A forward's page keeps the forwarded message, but the loop rules read only
    the forwarder's own note: the forwarded question is neither the forwarder's
    ask of me nor, in my forward, my ask of them."""
    forwarded = (
        "---------- Forwarded message ---------\nFrom: Cy Vale <cy@vale.example>\n"
        "Date: Fri, 1 Mar 2024\nSubject: Budget\nTo: Ann <ann.baker@partner.example>"
        "\n\nCan you confirm the totals by Friday?"
    )
    theirs = parse_rfc822(
        _raw(
            "f1@partner.example",
            ANN,
            ME,
            "Fwd: Budget",
            "Mon, 4 Mar 2024 09:00:00 +0000",
            f"FYI, for your files.\n\n{forwarded}",
        ).encode()
    )
    assert "Can you confirm the totals by Friday?" in theirs.body
    assert reply_text(theirs.body) == "FYI, for your files."
    message = mail(1, theirs.body, subject=theirs.subject)
    assert opened([message]) == []
    mine = mail(2, theirs.body, frm=ME, to=(BOB,), subject=theirs.subject, hours=1)
    assert opened([mine]) == []


# --- who expects a reply -----------------------------------------------------


def _kinds(messages: list[MailMessage]) -> dict[str, str]:
    return {
        a: kind
        for a, (kind, _, _) in classify_senders(messages, owner_addresses=[ME]).items()
    }


def test_forwarded_newsletter_footer_is_not_the_forwarders_wording() -> None:
    """A person who forwards newsletters is not automated by the newsletters'
    opt-out footers: the forwarded message is its writer's wording (the page
    keeps it, the sender signals leave it out)."""
    forward = (
        "Worth a read.\n\n---------- Forwarded message ---------\nFrom: Garden News"
        " <news@garden.example>\nSubject: Issue {n}\n\nSpring bulbs are in.\n\n"
        "You are receiving this because you subscribed. To unsubscribe click here."
    )
    msgs = [mail(i, forward.format(n=i), subject=f"Fwd: Issue {i}") for i in range(3)]
    assert _kinds(msgs)[ANN] == PERSON


def test_reciprocity_keeps_a_busy_sender_a_person() -> None:
    msgs = [
        mail(i, f"Weekly status {i}: all good.", subject="Status", hours=i * 24)
        for i in range(6)
    ]
    assert _kinds(msgs)[ANN] == AUTOMATED  # repetition, never answered
    msgs.append(mail(99, "Thanks Ann, looks fine.", frm=ME, to=(ANN,), hours=200))
    assert _kinds(msgs)[ANN] == PERSON


def test_repetition_of_near_identical_subjects_is_automated() -> None:
    msgs = [
        mail(
            i,
            f"Request {i} has been pending your approval for {i} days.",
            frm="tickets@helpdesk.example",
            subject=f"Your approval is overdue: request {100 + i}",
            hours=i,
        )
        for i in range(5)
    ]
    assert _kinds(msgs)["tickets@helpdesk.example"] == AUTOMATED


def test_announcements_to_crowds_are_automated() -> None:
    crowd = tuple(f"staff{i}@acme.example" for i in range(15))
    msgs = [
        mail(i, f"Newsletter item {i} is out.", frm="carl.comms@acme.example", to=crowd)
        for i in range(3)
    ]
    assert _kinds(msgs)["carl.comms@acme.example"] == AUTOMATED


@pytest.mark.parametrize(
    "footer",
    [
        "To be  removed from this list, reply with REMOVE in the subject.",
        "If you no longer\nwish to receive these e-mails, click here to unsubscribe.",
        "Reply with remove to stop.",
        "To u nsubscribe? no: to be\tremoved, write to us.",
    ],
)
def test_opt_out_wording_is_matched_robustly(footer: str) -> None:
    assert has_opt_out_wording(f"Great deals inside.\n\n{footer}")


@pytest.mark.parametrize(
    "address",
    [
        "mailman@lists.example",
        "arsystem@mailman.acme.example",
        "webmaster@shop.example",
        "update@news.example",
        "edelivery@bank.example",
        "news@paper.example",
        "events@venue.example",
        "enron_update@expenses.example",
        "leave-12345@lists.example",
    ],
)
def test_role_like_local_parts_are_recognised(address: str) -> None:
    assert local_part_is_role(address)
    assert _kinds([mail(1, "Hello", frm=address)])[address] == AUTOMATED


def test_personal_addresses_are_not_role_like() -> None:
    assert not local_part_is_role("ann.baker@partner.example")
    assert not local_part_is_role("no.address@acme.example")


@pytest.mark.parametrize(
    "name", ["Performance Evaluation Process", "Office of the Chairman", "IT Help Desk"]
)
def test_sender_named_as_a_process_or_office_is_automated(name: str) -> None:
    # A personal-looking address, but the name is a process: its "please give
    # your feedback" is a system's request, not a person waiting on me.
    ask = mail(1, "Olivia, you have been selected. Please complete the form.",
               frm="perfrev@acme.example", name=name)  # fmt: skip
    assert _kinds([ask])["perfrev@acme.example"] == AUTOMATED
    assert opened([ask], _kinds([ask])) == []
    # A person's name stays a person; and so does an office the owner wrote to.
    assert _kinds([replace(ask, from_name="Ann Baker")])["perfrev@acme.example"] == (
        PERSON
    )
    answer = mail(2, "Done, thanks.", frm=ME, to=("perfrev@acme.example",), hours=1)
    assert _kinds([ask, answer])["perfrev@acme.example"] == PERSON


def test_html_only_marketing_is_automated() -> None:
    msgs = [
        mail(i, f"Spring collection {i}", frm="dana@boutique.example", html_only=True)
        for i in range(2)
    ]
    assert _kinds(msgs)["dana@boutique.example"] == AUTOMATED


# --- threads and copies ------------------------------------------------------


def _parsed(raw: str, folder: str = "inbox"):  # type: ignore[no-untyped-def]
    return parse_rfc822(raw.encode(), folder=folder)


def _raw(mid: str, frm: str, to: str, subject: str, date: str, body: str) -> str:
    return (
        f"Message-ID: <{mid}>\nFrom: {frm}\nTo: {to}\nSubject: {subject}\n"
        f"Date: {date}\n\n{body}\n"
    )


def test_reply_from_another_address_of_the_same_person_joins_my_thread() -> None:
    mine = _parsed(
        _raw(
            "a1@acme.example",
            "Olivia Owner <olivia.owner@acme.example>",
            "Ann Baker <ann.baker@partner.example>",
            "Venue",
            "Mon, 4 Mar 2024 09:00:00 +0000",
            "Ann, which venue do you prefer?",
        ),
        folder="sent",
    )
    reply = _parsed(
        _raw(
            "a2@home.example",
            "Ann Baker <ann@home.example>",
            "Olivia Owner <olivia.owner@acme.example>",
            "Re: Venue",
            "Mon, 4 Mar 2024 18:00:00 +0000",
            "The harbour hall, please.",
        )
    )
    threads = thread_messages([mine, reply], owner_addresses={ME})
    assert len(threads) == 1


def test_reply_quoting_my_message_without_re_joins_my_thread() -> None:
    mine = _parsed(
        _raw(
            "b1@acme.example",
            "olivia.owner@acme.example",
            "bob.carter@partner.example",
            "Shipping dates",
            "Mon, 4 Mar 2024 09:00:00 +0000",
            "Bob, could you confirm the shipping dates for the spring order?",
        ),
        folder="sent",
    )
    reply = _parsed(
        _raw(
            "b2@partner.example",
            "bob.carter@partner.example",
            "olivia.owner@acme.example",
            "Shipping dates",
            "Tue, 5 Mar 2024 09:00:00 +0000",
            "April 2 and April 9.\n\n> Bob, could you confirm the shipping dates "
            "for the spring order?",
        )
    )
    other = _parsed(
        _raw(
            "b3@partner.example",
            "bob.carter@partner.example",
            "olivia.owner@acme.example",
            "Shipping dates",
            "Mon, 1 Jan 2024 09:00:00 +0000",
            "Shipping dates for the winter order are fixed.",
        )
    )
    threads = thread_messages([other, mine, reply], owner_addresses={ME})
    together = [t for t in threads.values() if len(t) == 2]
    assert together and {m.key for m in together[0]} == {mine.key, reply.key}


def test_two_copies_hours_apart_count_once() -> None:
    body = "Olivia, can you approve the invoice?"
    first = _parsed(
        _raw("c1@x.example", ANN, ME, "Invoice", "Mon, 4 Mar 2024 09:00:00 +0000", body)
    )
    copy = _parsed(
        _raw(
            "c2@x.example", ANN, ME, "Invoice", "Mon, 4 Mar 2024 09:00:00 -0500", body
        ),
        folder="all_documents",
    )
    next_day = _parsed(
        _raw("c3@x.example", ANN, ME, "Invoice", "Tue, 5 Mar 2024 09:00:00 +0000", body)
    )
    kept, duplicates = dedupe([first, copy, next_day])
    assert [m.key for m in kept] == [first.key, next_day.key]
    assert duplicates == [(copy, first)]


def test_subject_less_reply_joins_by_participants() -> None:
    mine = _parsed(
        _raw(
            "d1@acme.example",
            ME,
            ANN,
            "",
            "Mon, 4 Mar 2024 09:00:00 +0000",
            "Ann, is Tuesday fine?",
        ),
        folder="sent",
    )
    reply = _parsed(
        _raw(
            "d2@partner.example",
            ANN,
            ME,
            "RE:",
            "Mon, 4 Mar 2024 12:00:00 +0000",
            "Tuesday is fine.",
        )
    )
    assert len(thread_messages([mine, reply], owner_addresses={ME})) == 1


def test_follow_up_on_the_same_subject_without_re_joins() -> None:
    ask = _parsed(
        _raw(
            "e1@partner.example",
            ANN,
            ME,
            "Contracts",
            "Mon, 4 Mar 2024 09:00:00 +0000",
            "How should we sign?",
        )
    )
    again = _parsed(
        _raw(
            "e2@partner.example",
            ANN,
            ME,
            "Contracts",
            "Wed, 6 Mar 2024 09:00:00 +0000",
            "Any news on signing?",
        )
    )
    much_later = _parsed(
        _raw(
            "e3@partner.example",
            ANN,
            ME,
            "Contracts",
            "Mon, 1 Apr 2024 09:00:00 +0000",
            "New contracts are ready.",
        )
    )
    threads = thread_messages([ask, again, much_later], owner_addresses={ME})
    assert sorted(len(t) for t in threads.values()) == [1, 2]


# --- contact elsewhere -------------------------------------------------------


def test_my_report_that_i_spoke_to_them_settles_my_ask_to_them() -> None:
    # I asked Ann; days later I tell a third person "I spoke to Ann Baker, she will
    # send it": the conversation happened off the mail, my ask is not waiting.
    carol = "carol.diaz@partner.example"
    ask = mail(1, "Ann, can you send me the signed lease?", frm=ME, to=(ANN,))
    her_old_note = mail(
        5, "Olivia, the budget is attached.", thread="t0", hours=-48, name="Ann Baker"
    )
    report = mail(
        2,
        "Carol,\n\nI spoke to Ann Baker this morning; she will send the lease "
        "to the title company.\n\nOlivia",
        frm=ME,
        to=(carol,),
        subject="Lease",
        thread="t2",
        hours=30,
    )
    signals = classify_senders([her_old_note, ask, report], owner_addresses=[ME])[ANN][
        2
    ]
    contact = Contact(None, None, datetime.fromisoformat(signals["last_reported"]))
    verdict = detect_thread(
        [ask], owner_addresses=[ME], now=NOW, contacts={ANN: contact}
    )
    assert verdict.open == [] and verdict.reason == "reported_contact"
    # Without the report (or with one older than my ask) the ask waits.
    assert opened([ask]) == [LoopType.UNANSWERED_OUTBOUND]
    older = Contact(None, None, T0 - timedelta(days=1))
    stale = detect_thread([ask], owner_addresses=[ME], now=NOW, contacts={ANN: older})
    assert [s.loop_type for s in stale.open] == [LoopType.UNANSWERED_OUTBOUND]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("I spoke to Ann Baker this afternoon about the lease.", {ANN}),
        ("Bob Cartr is going to pull the files from the larger days.", {BOB}),
        ("We talked with ann.baker@partner.example yesterday.", {ANN}),
        ("Bob said the numbers are fine.", {BOB}),
        # A first name two people share names nobody; no contact verb, nobody.
        ("I spoke to Anna this morning.", set()),
        ("Ann Baker's report is attached.", set()),
        ("I will talk to Ann Baker next week.", set()),
    ],
)
def test_reported_contact_names_one_person_by_name_or_address(
    text: str, found: set[str]
) -> None:
    people = {
        ANN: {"ann", "baker", "anna"},
        BOB: {"bob", "carter"},
        "anna.ruiz@partner.example": {"anna", "ruiz"},
    }
    assert reported_contacts(text, people) == found


def test_my_call_request_long_unanswered_is_settled_off_the_mail() -> None:
    # "Please call me so we can…": the call answers it; weeks later with nothing
    # in the mail it took place or is moot. A call asked OF me stays owed.
    mine = mail(
        1,
        "Ann,\n\nCan you call me to discuss the panel quote? The new quote is 30% "
        "higher than April's. Have material costs gone up that much?\n\nOlivia",
        frm=ME,
        to=(ANN,),
    )
    weeks = T0 + timedelta(days=40)
    assert detect_thread([mine], owner_addresses=[ME], now=weeks).open == []
    assert opened([mine]) == [LoopType.UNANSWERED_OUTBOUND]
    theirs = mail(
        1, "Olivia,\n\nHow is the new house going? Give me a call when you can.\n\nAnn"
    )
    assert [
        s.loop_type
        for s in detect_thread([theirs], owner_addresses=[ME], now=weeks).open
    ] == [LoopType.UNANSWERED_INBOUND]
    # "Call or email" leaves the channel open: an emailed answer is expected.
    either = mail(
        1,
        "Ann, have you gathered the title work? Call or email when you can.",
        frm=ME,
        to=(ANN,),
    )
    assert [
        s.loop_type
        for s in detect_thread([either], owner_addresses=[ME], now=weeks).open
    ] == [LoopType.UNANSWERED_OUTBOUND]


def test_broadcast_instruction_without_a_question_opens_nothing() -> None:
    # "Please push on with the review" to a team is an instruction, not a
    # question the group owes me an answer to; a broadcast question still waits.
    team = tuple(f"member{i}@acme.example" for i in range(5))
    order = mail(1, "Team, please push forward with the review.", frm=ME, to=team)
    verdict = detect([order])
    assert verdict.open == [] and verdict.reason == "broadcast_instruction"
    asked = mail(1, "Team, who can review the layer by Friday?", frm=ME, to=team)
    assert opened([asked]) == [LoopType.UNANSWERED_OUTBOUND]


def test_my_later_message_to_them_elsewhere_supersedes_my_old_ask() -> None:
    # Weeks after asking Ann, I wrote to her about other things without repeating
    # the ask: I moved on. A nudge in the thread itself does not count.
    ask = mail(
        1, "Ann, what do you think of the Elm Street building?", frm=ME, to=(ANN,)
    )
    late = T0 + timedelta(days=30)
    moved_on = Contact(None, T0 + timedelta(days=20), None)
    verdict = detect_thread(
        [ask], owner_addresses=[ME], now=late, contacts={ANN: moved_on}
    )
    assert verdict.open == [] and verdict.reason == "superseded_by_me"
    nudge = mail(2, "Ann, just following up on this.", frm=ME, to=(ANN,), hours=480)
    in_thread = Contact(None, nudge.date, None)
    kept = detect_thread(
        [ask, nudge], owner_addresses=[ME], now=late, contacts={ANN: in_thread}
    )
    assert [s.loop_type for s in kept.open] == [LoopType.UNANSWERED_OUTBOUND]


def test_source_of_only_my_sent_mail_opens_no_waiting_loop() -> None:
    # A sent folder alone cannot show whether anyone answered.
    ask = mail(1, "Ann, can you send me the rent roll?", frm=ME, to=(ANN,))
    blind = detect_thread([ask], owner_addresses=[ME], now=NOW, answers_visible=False)
    assert blind.open == [] and blind.reason == "no_inbound_mail"
    assert opened([ask]) == [LoopType.UNANSWERED_OUTBOUND]


def test_numbered_issues_of_one_running_title_are_automated() -> None:
    # A newsletter mailed to me alone: "Field Notes 00412: …", "Field Notes
    # 00414: …" — its questions are headlines, not asks of me.
    letter = "writer@columns.example"
    issues = [
        mail(n, f"Key ideas: {topic}. Is it the future? Links below.", frm=letter,
             subject=f"Field Notes {412 + 2 * n}: {topic}", thread=f"fn{n}")
        for n, topic in enumerate(["Solar roads", "Kelp farms", "Wind kites", "Mud"])
    ]  # fmt: skip
    verdicts = classify_senders(issues, owner_addresses=[ME])
    assert verdicts[letter][0] == AUTOMATED
    assert "repetition" in verdicts[letter][1]
    # A person's different subjects are not a series.
    notes = [
        mail(n, "Can you check this?", frm=ANN, subject=s, thread=f"a{n}")
        for n, s in enumerate(["Budget", "Q3 plan", "Lease", "Parking"])
    ]
    assert classify_senders(notes, owner_addresses=[ME])[ANN][0] == PERSON


def test_my_message_delivered_through_a_list_opens_no_waiting_loop() -> None:
    # My own commit notice came back with the list's List-Unsubscribe: it was
    # posted to a list, whatever the list address looks like.
    body = "Update of /cvsroot/app/lib\nModified Files: Conf.pm\nWhy? See the log."
    post = mail(1, body, frm=ME, to=("app-commits@example.org",))
    post.list_unsubscribe = True
    verdict = detect([post])
    assert verdict.open == [] and verdict.reason == "mailing_list"


def test_my_ask_echoed_by_a_list_without_list_unsubscribe_opens_nothing() -> None:
    # An older list server sends List-Id and X-BeenThere but no List-Unsubscribe,
    # and its posting address looks like a person's: my question came back
    # through it all the same, so the list's readers, not a person, may answer.
    body = "Has anyone got the backup agent running on Linux?"
    post = mail(1, body, frm=ME, to=("tinkerers@club.example",))
    assert opened([post]) == [LoopType.UNANSWERED_OUTBOUND]  # a person's address
    post.mailing_list = True
    verdict = detect([post])
    assert verdict.open == [] and verdict.reason == "mailing_list"


def test_my_unchased_question_on_a_crowd_announcement_expires() -> None:
    # Ann announced a new report to a crowd; I replied with a question about it
    # and never chased. Two weeks on it is moot; the same question to a note she
    # wrote to me alone still waits, and so does one I chased.
    crowd = (ME, *(f"reader{i}@partner.example" for i in range(12)))
    note = "The weekly report moves to paper copies. Tell me if you have comments."
    announced = mail(1, note, to=crowd)
    ask = mail(
        2, "Ann, is this the report from Bob's group?", frm=ME, to=(ANN,), hours=12
    )
    late = T0 + timedelta(days=20)
    verdict = detect_thread([announced, ask], owner_addresses=[ME], now=late)
    assert verdict.open == [] and verdict.reason == "reply_to_crowd_expired"
    # Within the lifetime it waits.
    soon = detect_thread([announced, ask], owner_addresses=[ME], now=NOW)
    assert [s.loop_type for s in soon.open] == [LoopType.UNANSWERED_OUTBOUND]
    # Her note to me alone: my question stays owed an answer.
    personal = mail(1, note)
    kept = detect_thread([personal, ask], owner_addresses=[ME], now=late)
    assert [s.loop_type for s in kept.open] == [LoopType.UNANSWERED_OUTBOUND]
    # I chased it: the ask is live.
    chase = mail(3, "Ann, any word on my question below?", frm=ME, to=(ANN,), hours=100)
    chased = detect_thread([announced, ask, chase], owner_addresses=[ME], now=late)
    assert [s.loop_type for s in chased.open] == [LoopType.UNANSWERED_OUTBOUND]


def test_their_pitch_after_my_decline_opens_nothing() -> None:
    # I asked a broker for numbers, then declined ("Thank you anyway"); his
    # rebuttal with another listing and "let me know what you are looking for"
    # is a pitch, not an ask I owe an answer to. Without my decline it is owed.
    asked = mail(
        1,
        "Ann, can you send me the numbers on the Elm St. building?",
        frm=ME,
        to=(ANN,),
    )
    numbers = mail(2, "Olivia, the numbers are attached.", hours=24)
    declined = mail(
        3,
        "Ann,\n\nYour numbers look optimistic. I would not be comfortable purchasing "
        "the building at this time. Thank you anyway.\n\nOlivia",
        frm=ME,
        to=(ANN,),
        hours=30,
    )
    pitch = mail(
        4,
        "Olivia, our numbers are conservative. I have added another building for "
        "your consideration. Do let me know what you would like to find.",
        hours=40,
    )
    verdict = detect([asked, numbers, declined, pitch])
    assert verdict.open == [] and verdict.reason == "after_my_decline"
    kept = mail(
        3, "Ann,\n\nYour numbers look optimistic. What cap rate do you assume?",
        frm=ME, to=(ANN,), hours=30,
    )  # fmt: skip
    assert opened([asked, numbers, kept, pitch]) == [LoopType.UNANSWERED_INBOUND]


def test_questions_in_an_article_forwarded_as_fyi_are_not_asks() -> None:
    # "Don't know if you saw this already. Interesting." above a pasted magazine
    # piece: its rhetorical questions are the journalist's, not Ann's.
    article = (
        "Don't know if you saw this already. Interesting.\n\nAnn\n\n"
        "Turbines and Demand, by A. Writer, Trade Weekly.\n"
        "All those new turbines mean more fuel demand, right? Maybe not. "
        "Orders tripled in the late nineties. Utilities ordered in bulk. "
        "Demand had to rise. But did it? Analysts are split. Prices fell. "
        "What comes next? Nobody knows. Stay tuned."
    )
    assert find_asks(article) == []
    assert opened([mail(1, article)]) == []
    # A short FYI note that asks something still asks.
    short = "FYI, the lease is below. Can you check the dates?"
    assert [a.kind for a in find_asks(short)] == ["question"]


# --- their answer seen only quoted in my own later mail ----------------------

ASK = "Ann, how long does the harbour lease run, and what deposit does it need?"
ANSWER = "The lease runs to June; the deposit is two months of rent."
OUTLOOK_FORWARD = f"""Bob, see Ann's answer below.

-----Original Message-----
From: \tBaker, Ann
Sent:\tMonday, March 04, 2024 11:02 AM
To:\tOwner, Olivia
Subject:\tRE: Budget

{ANSWER}

 -----Original Message-----
From: \tOwner, Olivia
Sent:\tMonday, March 04, 2024 9:00 AM
To:\tBaker, Ann
Subject:\tBudget

{ASK}
"""
ATTRIBUTION_FORWARD = f"""Bob, see Ann's answer below.

On Mon, Mar 4, 2024 at 11:02 AM Ann Baker <{ANN}> wrote:
> {ANSWER}
>
> On Mon, Mar 4, 2024 at 9:00 AM Olivia Owner <{ME}> wrote:
>> {ASK}
"""


@pytest.mark.parametrize("forward", [OUTLOOK_FORWARD, ATTRIBUTION_FORWARD])
def test_answer_quoted_in_my_later_mail_closes_my_ask(forward: str) -> None:
    # A sent folder (or a mailbox that lost her reply) holds my ask and my forward
    # of her answer to Bob: the forward quotes her reply, which quotes my ask.
    ask = mail(1, ASK, frm=ME, to=(ANN,))
    fwd = mail(2, forward, frm=ME, to=(BOB,), hours=3, subject="FW: Budget")
    verdict = detect([ask, fwd])
    assert verdict.open == [] and verdict.reason == "answer_quoted"
    assert LoopType.UNANSWERED_OUTBOUND in verdict.close
    closed_by, proof = verdict.closed_by[LoopType.UNANSWERED_OUTBOUND]
    assert closed_by == "reply_detected" and proof["message_id"] == fwd.message_id


def test_quoted_mail_that_is_no_answer_to_my_ask_leaves_it_open() -> None:
    # My forward quotes only my own ask, or an older note of hers that does not
    # quote the ask: nothing shows she answered it.
    ask = mail(1, ASK, frm=ME, to=(ANN,))
    only_mine = OUTLOOK_FORWARD.split(" -----Original Message-----")[1]
    own = mail(
        2,
        f"Bob, FYI.\n\n-----Original Message-----{only_mine}",
        frm=ME,
        to=(BOB,),
        hours=3,
    )
    older = OUTLOOK_FORWARD.replace(ASK, "Olivia, the budget call moved to Friday.")
    theirs_before = mail(3, older, frm=ME, to=(BOB,), hours=4)
    assert opened([ask, own]) == [LoopType.UNANSWERED_OUTBOUND]
    assert opened([ask, theirs_before]) == [LoopType.UNANSWERED_OUTBOUND]


def test_quoted_messages_lists_each_quoted_sender_newest_first() -> None:
    quoted = quoted_messages(OUTLOOK_FORWARD)
    assert [sender for sender, _ in quoted] == ["Baker, Ann", "Owner, Olivia"]
    assert ANSWER in quoted[0][1] and ASK in collapse(quoted[1][1])
    assert quoted_messages("Ann, thanks. No history here.") == []


def test_my_thanks_after_my_ask_closes_it() -> None:
    # Ann answered by phone or from another address: the thread holds only my ask
    # and, an hour later, my "Thanks" to her.
    ask = mail(1, ASK, frm=ME, to=(ANN,))
    thanks = mail(2, "Thanks.\n\nOlivia", frm=ME, to=(ANN,), hours=1)
    verdict = detect([ask, thanks])
    assert verdict.open == [] and verdict.reason == "thanked_after_ask"
    assert verdict.closed_by[LoopType.UNANSWERED_OUTBOUND][1]["message_id"] == (
        thanks.message_id
    )
    # A chase that says thanks in passing is still waiting; so is thanks to
    # someone else.
    chase = mail(
        3, "Thanks in advance - any news on the lease?", frm=ME, to=(ANN,), hours=30
    )
    to_bob = mail(4, "Thanks.\n\nOlivia", frm=ME, to=(BOB,), hours=2)
    assert opened([ask, chase]) == [LoopType.UNANSWERED_OUTBOUND]
    assert opened([ask, to_bob]) == [LoopType.UNANSWERED_OUTBOUND]


def test_find_asks_answers_a_new_list_each_call() -> None:
    """The asks of a text are computed once and reused; a caller changing the
    list it got does not change what the next caller gets."""
    text = "Could you send the Quill invoice? Please call me too."
    first = find_asks(text)
    first.clear()
    again = find_asks(text)
    assert [a.kind for a in again] == ["question", "request"]
    assert again is not find_asks(text)


# --- the writer's words only, written order, objections -----------------------


def test_reply_dated_before_its_question_by_a_skewed_clock_still_answers_it() -> None:
    # Ann's follow-up question, and my answer to it from a machine whose clock is a
    # few minutes behind: its In-Reply-To names her message, so it comes after.
    question = mail(2, "Olivia, I tried the new link and it fails. Is there a typo?")
    answer = replace(
        mail(3, "No typo: the server was down. Try again now.", frm=ME, to=(ANN,)),
        date=question.sent_at - timedelta(minutes=3),
        in_reply_to=question.message_id.strip("<>"),
    )
    assert opened([question, answer]) == []
    # Without the reply header the Date order stands: her question is the last turn.
    unlinked = replace(answer, in_reply_to=None)
    assert opened([question, unlinked]) == [LoopType.UNANSWERED_INBOUND]
    # My question answered by a skewed clock: nothing waits on Ann either.
    ask = mail(4, "Ann, can you send me the Q2 numbers?", frm=ME, to=(ANN,))
    reply = replace(
        mail(5, "Attached are the Q2 numbers.", hours=-0.1),
        in_reply_to=ask.message_id,
    )
    assert opened([ask, reply]) == []


def test_webmail_advert_under_the_sign_off_is_not_an_ask() -> None:
    body = (
        "Olivia,\n\nI agree with the plan for the shed; the roof can wait.\n\n"
        "- Ann\n\nDo You Webmail!?\nEverything you need on one page\n"
        "http://portal.mail.example"
    )
    assert opened([mail(1, body, name="Ann Baker")]) == []
    # Signed with the address's name alone ("ann.baker@…"), the same.
    assert opened([mail(2, body.replace("- Ann", "Thanks,\nBaker"))]) == []
    # A question above the sign-off still asks; so does a P.S. below it.
    asked = body.replace("can wait.", "can wait. Can you send the quote?")
    assert opened([mail(3, asked, name="Ann Baker")]) == [LoopType.UNANSWERED_INBOUND]
    postscript = body.replace(
        "\n\nDo You", "\n\nP.S. Could you bring the ladder on Sunday?\n\nDo You"
    )
    assert opened([mail(4, postscript, name="Ann Baker")]) == [
        LoopType.UNANSWERED_INBOUND
    ]


@pytest.mark.parametrize(
    "body",
    [
        "I'm changing the install notes to the new steps. Let me know ASAP if "
        "that's inappropriate, since we ship today!",
        "I will book the hall for the 12th. Let me know if you disagree.",
        "Here is my reply to the council. Tell me if any of this is wrong.",
    ],
)
def test_asking_for_objections_is_not_an_ask(body: str) -> None:
    # Silence is consent: I go ahead unless someone objects.
    assert opened([mail(1, body, frm=ME, to=(ANN,))]) == []


def test_asking_whether_something_is_wrong_is_still_an_ask() -> None:
    for body in ("Can you tell me if this is wrong?", "Let me know if that is OK."):
        assert opened([mail(1, body, frm=ME, to=(ANN,))]) == [
            LoopType.UNANSWERED_OUTBOUND
        ], body


@pytest.mark.parametrize(
    "body",
    [
        "Ah. As in copying the results from the shared server? OK, done.\n\n"
        "Good point.",
        "Where did you put the minutes? Never mind, found it.",
        "Is the shed key under the mat? Done: I used the spare.",
    ],
)
def test_question_its_writer_answers_at_once_is_not_an_ask(body: str) -> None:
    # Interleaved under my quoted points: her clarifying question, then her own
    # "OK, done." The question is settled by the writer who asked it.
    assert opened([mail(1, body)]) == []
    asked = body.replace("?", "? And could you send me the agenda?", 1)
    assert opened([mail(2, asked)]) == [LoopType.UNANSWERED_INBOUND]


def _coverage(mine_per_day: int, others_per_day: int) -> MailCoverage:
    """Sixty days around T0 with the given messages per day."""
    days = {
        (T0 + timedelta(days=d)).strftime("%Y-%m-%d"): (mine_per_day, others_per_day)
        for d in range(-30, 30)
    }
    return MailCoverage.from_days(days, whole=True)


def test_my_ask_in_a_period_whose_inbox_was_not_kept_waits_on_nobody() -> None:
    # An export whose sent folder reaches back further than its inbox: in the
    # weeks around my ask it holds my mail and next to nothing others sent me, so
    # it cannot show whether Ann answered. The source as a whole has an inbox.
    ask = mail(1, "Ann, can you send me the signed lease?", frm=ME, to=(ANN,))
    sent_only = _coverage(mine_per_day=3, others_per_day=0)
    kept = _coverage(mine_per_day=3, others_per_day=6)
    assert detect_thread([ask], owner_addresses=[ME], now=NOW, coverage=kept).open
    blind = detect_thread([ask], owner_addresses=[ME], now=NOW, coverage=sent_only)
    assert blind.open == [] and blind.reason == "no_inbound_mail"
    # Too little of my own mail around it to tell: the source-level rule stands.
    quiet = _coverage(mine_per_day=0, others_per_day=0)
    assert detect_thread([ask], owner_addresses=[ME], now=NOW, coverage=quiet).open


@pytest.mark.parametrize(
    "question,withdrawal",
    [
        ("Where are the spare keys?", "Never mind, I found them."),
        ("Do you have Dan's number?", "Oh wait, I have it."),
        ("Could you send the contract?", "Actually don't bother, legal sent it."),
        ("Are the slides on the share?", "Scratch that, found them."),
    ],
)
def test_question_its_writer_takes_back_is_not_an_ask(
    question: str, withdrawal: str
) -> None:
    # In the same message, or in the writer's next message of the thread.
    assert opened([mail(1, f"{question} {withdrawal}")]) == []
    theirs = [mail(1, question), mail(2, withdrawal, hours=0.5)]
    assert opened(theirs) == []
    mine = [
        mail(1, question, frm=ME, to=(ANN,)),
        mail(2, withdrawal, frm=ME, to=(ANN,), hours=0.5),
    ]
    assert opened(mine) == []
    # A new ask beside the withdrawal still opens.
    again = mail(3, f"{withdrawal} But can you bring the ladder?", hours=1)
    assert opened([mail(1, question), again]) == [LoopType.UNANSWERED_INBOUND]


def test_my_mailing_to_subscribers_asks_no_person() -> None:
    # My daily headline mailer, sent to each subscriber's own address: the
    # footer says it is a subscription; its "please" and questions ask nobody.
    issue = (
        "Garden Daily Headlines\n\nIs it time to plant the tulips?\n"
        "Please send your photos for the autumn show.\n\n"
        "You have received this message because you subscribed to it. To stop "
        "receiving this and other messages, please go to your user page."
    )
    assert opened([mail(1, issue, frm=ME, to=(ANN,))]) == []
    # The same ask without the footer is mine to Ann.
    personal = issue.split("\n\nYou have")[0]
    assert opened([mail(2, personal, frm=ME, to=(ANN,))]) == [
        LoopType.UNANSWERED_OUTBOUND
    ]


def test_question_mark_inside_a_quotation_is_not_my_question() -> None:
    # The quoted clause's question mark (a lost character in an export) is the
    # quoted text's; the request in my own words still asks.
    body = (
        'Ann, section 6.3 begins "Notwithstanding any other provision of the '
        'plan?". That settles it in my reading.'
    )
    assert find_asks(body) == []
    asks = find_asks(body + " Please advise of a convenient time to meet.")
    assert [a.kind for a in asks] == ["request"]
    # A short quoted phrase stays part of my own question.
    assert [a.kind for a in find_asks('Did you mean "Section 6.2?"')] == ["question"]


def test_waiting_evidence_names_the_sentence_that_asks() -> None:
    # The reader of the waiting list sees the ask itself, not the message's
    # opening lines; softeners dropped by the rules leave no stray punctuation.
    ask = mail(
        1,
        "Ann,\n\nThanks for pulling together the copies of the organisation "
        "documents. Have you had a chance to gather the title work?\n\nOlivia",
        frm=ME,
        to=(ANN,),
    )
    [spec] = detect([ask]).open
    assert spec.evidence[-1]["ask"] == "Have you had a chance to gather the title work?"
    assert spec.evidence[-1]["quote"].startswith("Ann, Thanks for pulling")
    theirs = mail(
        2, "Olivia,\n\nAlso, if you have time, could you send me the definition?"
    )
    [inbound] = detect([theirs]).open
    assert inbound.evidence[-1]["ask"] == "Also, could you send me the definition?"


@pytest.mark.parametrize(
    "told",
    [
        "The broker called back shortly after I spoke to you to let me know that "
        "the air park building had sold.",
        "She let me know that the lease was signed.",
    ],
)
def test_someone_else_letting_me_know_is_not_an_ask(told: str) -> None:
    # A message told of, not an ask of the reader; the ask beside it still asks.
    assert find_asks(told) == []
    asks = find_asks(f"{told} Let me know what you think of this property.")
    assert [a.sentence for a in asks] == [
        "Let me know what you think of this property."
    ]


@pytest.mark.parametrize(
    "body",
    [
        "Ann,\n\nThe build is green again.\n\nBob, does it work for you now?",
        "Ann,\n\nI'm hearing reports of DNS trouble. Anyone else noticing this?",
    ],
)
def test_question_to_another_recipient_or_to_anyone_is_not_an_ask_of_me(
    body: str,
) -> None:
    # Sent to me and Bob: a question addressed to Bob by name, or put to
    # whoever reads, asks nothing of me in particular. To me alone it does.
    assert opened([mail(1, body, to=(ME,), cc=(BOB,))]) == []
    assert opened([mail(1, body.replace("Bob, d", "D"), to=(ME,))]) == [
        LoopType.UNANSWERED_INBOUND
    ]


def test_my_forward_of_their_ask_to_myself_answers_nobody() -> None:
    # Ann asks; I forward her mail to my other address: her ask still waits
    # on me.
    home = "olivia@home.example"
    ask = mail(1, "Olivia,\n\nCould you please e-mail me the draw file?\n\nAnn")
    forward = mail(
        2, "---------- Forwarded message ---------\nFrom: Ann\n\nOlivia, could you "
        "please e-mail me the draw file?", frm=ME, to=(home,), hours=20,
        subject="Fwd: Budget",
    )  # fmt: skip
    verdict = detect_thread([ask, forward], owner_addresses=[ME, home], now=NOW)
    assert [s.loop_type for s in verdict.open] == [LoopType.UNANSWERED_INBOUND]
    # My reply to Ann still answers her.
    reply = mail(2, "Ann, attached.", frm=ME, to=(ANN,), hours=20)
    answered = detect_thread([ask, reply], owner_addresses=[ME, home], now=NOW)
    assert answered.open == []


def test_their_reply_to_my_missing_reply_starts_a_new_turn() -> None:
    # Ann asked; my answer is not in the mailbox, but her next message quotes
    # it: what she asked before, I answered. Only her new ask waits, from then.
    first = mail(1, "Olivia,\n\nI was laid off. Give me a call when you can.\n\nAnn")
    second = mail(2, "Thanks. Can I have your cell number?\n\nAnn", hours=30)
    second.replied_to = {
        "address": ME,
        "name": "",
        "date": (T0 + timedelta(hours=29)).isoformat(),
    }
    [spec] = detect([first, second]).open
    assert spec.opened_at == second.date
    assert [e["message_id"] for e in spec.evidence] == [second.message_id]
    # Without the quoted reply the clock starts at her first ask.
    second.replied_to = None
    [plain] = detect([first, second]).open
    assert plain.opened_at == first.date


def test_questions_inside_a_quoted_article_are_not_the_senders_asks() -> None:
    body = (
        "Olivia,\n\nThought you would enjoy this one:\n\n"
        '"Will the Fed raise rates again in November? Could you be ready for a '
        'downturn? Analysts are split on the outlook for next year."\n\nAnn'
    )
    assert opened([mail(1, body)]) == []
    asked = body.replace("\n\nAnn", "\n\nCan we discuss it at lunch?\n\nAnn")
    assert opened([mail(1, asked)]) == [LoopType.UNANSWERED_INBOUND]


def test_an_ask_to_meet_on_a_named_day_is_moot_once_the_day_has_passed() -> None:
    # Sent on a Monday: "Friday" is that Friday. Two days after it, the meeting
    # took place or another was set; before then it still asks.
    ask = mail(1, "Ann, can we meet on Friday at 10 am?", frm=ME, to=(ANN,))
    friday = T0 + timedelta(days=4)
    still = detect_thread([ask], owner_addresses=[ME], now=friday)
    assert [s.loop_type for s in still.open] == [LoopType.UNANSWERED_OUTBOUND]
    later = detect_thread([ask], owner_addresses=[ME], now=friday + timedelta(days=3))
    assert later.open == []
    # A deliverable asked for by a named day is not a meeting: it still waits.
    report = mail(1, "Ann, can you send the report on Friday?", frm=ME, to=(ANN,))
    assert detect_thread(
        [report], owner_addresses=[ME], now=friday + timedelta(days=3)
    ).open


def test_my_ask_to_each_of_them_waits_on_those_who_have_not_answered() -> None:
    # "Can each of you…": Bob's answer leaves Carol's owed. Once both answered,
    # nothing waits. A plain ask to several is answered by one reply.
    carol = "carol.diaz@partner.example"
    ask = mail(
        1, "Can each of you send me your availability for the offsite?", frm=ME,
        to=(ANN, BOB, carol),
    )  # fmt: skip
    bob = mail(2, "I'm free Oct 12-13.", frm=BOB, hours=3)
    [spec] = detect([ask, bob]).open
    assert (spec.loop_type, spec.counterparty_email) == (
        LoopType.UNANSWERED_OUTBOUND,
        ANN,
    )
    ann = mail(3, "Any day works for me.", frm=ANN, hours=4)
    [spec] = detect([ask, bob, ann]).open
    assert spec.counterparty_email == carol
    done = mail(4, "The 12th is fine.", frm=carol, hours=5)
    assert detect([ask, bob, ann, done]).open == []
    plain = mail(
        1, "Can you send me your availability for the offsite?", frm=ME,
        to=(ANN, BOB, carol),
    )  # fmt: skip
    assert detect([plain, bob]).open == []


def test_a_question_about_what_happens_on_a_named_day_is_moot_once_it_has_passed() -> (
    None
):
    # "Are you coming on Friday?" sent on a Monday asks about that Friday; two
    # days after it, it happened or did not. A bare "Please reply" beside it asks
    # only for that answer. Before then it still asks.
    body = (
        "Are you coming on Friday? Do you want me to drive by the houses tomorrow, "
        "or are we going to do it Friday?\n\nPlease reply\n\nAnn"
    )
    ask = mail(1, body, frm=ANN, to=(ME,))
    friday = T0 + timedelta(days=4)
    still = detect_thread([ask], owner_addresses=[ME], now=friday)
    assert [s.loop_type for s in still.open] == [LoopType.UNANSWERED_INBOUND]
    later = detect_thread([ask], owner_addresses=[ME], now=friday + timedelta(days=3))
    assert later.open == []
    # A day named as a deadline, a thing to deliver, or a day told as past is no
    # event: those still ask after the day.
    for kept in (
        "Can you tell me before Friday which house you liked?",
        "Could you bring the signed lease on Friday?",
        "Did you get the plans I left for you on Friday?",
    ):
        m = mail(1, kept, frm=ANN, to=(ME,))
        verdict = detect_thread(
            [m], owner_addresses=[ME], now=friday + timedelta(days=3)
        )
        assert [s.loop_type for s in verdict.open] == [LoopType.UNANSWERED_INBOUND], (
            kept
        )


def test_an_ask_preparing_a_meeting_on_a_named_day_is_moot_once_it_took_place() -> None:
    # Sent on a Monday: "our Wednesday 10:00 meeting" is that Wednesday. The ask
    # beside it prepares the meeting; two days after it, it took place.
    body = (
        "I will book a room for our Wednesday 10:00 meeting and send you the room "
        "number. Also, if you have time, could you send me a definition of the "
        "hedge ratio?\n\nThank you,\nAnn"
    )
    ask = mail(1, body, frm=ANN, to=(ME,))
    wednesday = T0 + timedelta(days=2)
    before = detect_thread([ask], owner_addresses=[ME], now=wednesday)
    assert [s.loop_type for s in before.open] == [LoopType.UNANSWERED_INBOUND]
    after = detect_thread(
        [ask], owner_addresses=[ME], now=wednesday + timedelta(days=3)
    )
    assert after.open == []
    # A meeting told as past sets nothing up: the ask after it still waits.
    past = mail(
        1,
        "Thanks for Monday's meeting. Could you send me the minutes?",
        frm=ANN,
        to=(ME,),
    )
    kept = detect_thread(
        [past], owner_addresses=[ME], now=wednesday + timedelta(days=3)
    )
    assert [s.loop_type for s in kept.open] == [LoopType.UNANSWERED_INBOUND]


def test_an_ask_to_fix_a_meeting_on_a_day_named_beside_it_is_moot_once_it_passed() -> (
    None
):
    # My ask for a time names no day; the sentence before it does ("tomorrow
    # afternoon"): two days after that day, we met or set another time.
    body = (
        "Ann, I would like to have a meeting to go over the payment method. "
        "Tomorrow afternoon at 2 PM or later would work for us. Please let me "
        "know what time we could meet.\n\nOlivia"
    )
    ask = mail(1, body, frm=ME, to=(ANN,))
    before = detect_thread(
        [ask], owner_addresses=[ME], now=T0 + timedelta(days=3, hours=1)
    )
    assert [s.loop_type for s in before.open] == [LoopType.UNANSWERED_OUTBOUND]
    after = detect_thread(
        [ask], owner_addresses=[ME], now=T0 + timedelta(days=3, hours=16)
    )
    assert after.open == []
    # Not a meeting: a question beside a named day still waits.
    other = mail(
        1,
        "Ann, I am out this afternoon. What did the auditors say about the "
        "payment method?\n\nOlivia",
        frm=ME,
        to=(ANN,),
    )
    kept = detect_thread([other], owner_addresses=[ME], now=T0 + timedelta(days=4))
    assert [s.loop_type for s in kept.open] == [LoopType.UNANSWERED_OUTBOUND]
