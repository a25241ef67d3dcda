"""One person, several addresses; my replies the mailbox lacks; promises of a call
kept by the call; requests to act toward someone else (SPEC §5.1a "a reply from
another address of the same person", §5.4 fulfilment). Issue 14 fault kinds,
each from small invented mail (no real names), through the real pipeline and
database where the rule reads stored profiles."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from brain.models import Source
from connectors.mail.parsing import parse_rfc822
from loops.asks import find_asks, live_asks
from loops.definitions import MailCoverage, written_text
from loops.detectors import detect_thread
from loops.message import MailMessage
from loops.models import CLOSED_BY_FULFILLED, LoopStatus, LoopType, OpenLoop
from loops.pipeline import process_threads
from loops.selectors import same_person, sender_contacts
from loops.senders import sender_stats
from loops.services_senders import sender_profiles_refresh
from tests.loops.shapes import ROBIN

WORK = "dana.reyes@harbour.example"
HOME = "dreyes77@freemail.example"
OTHER = "dana.kim@harbour.example"
T0 = datetime(2025, 3, 3, 15, 0, tzinfo=UTC)  # Monday


def mail(
    n: int,
    body: str,
    *,
    frm: str = ROBIN,
    name: str = "",
    to: tuple[str, ...] = (WORK,),
    cc: tuple[str, ...] = (),
    days: float = 0,
    thread: str = "t-ask",
    subject: str = "Harbour lease",
    replied_to: dict[str, str | None] | None = None,
) -> MailMessage:
    return MailMessage(
        message_id=f"<{n}.{thread}@example>",
        thread_id=thread,
        subject=subject,
        from_addr=frm,
        from_name=name,
        to=list(to),
        cc=list(cc),
        date=T0 + timedelta(days=days),
        is_mine=frm == ROBIN,
        body=body,
        replied_to=replied_to,
    )


def _run(source: Source, store, messages: list[MailMessage], now: datetime) -> None:  # type: ignore[no-untyped-def]
    store(source, messages)
    sender_profiles_refresh(source=source)
    process_threads(
        source_id=source.id,
        thread_ids=sorted({m.thread_id for m in messages}),
        now=now,
    )


def _open(source: Source, loop_type: str) -> list[OpenLoop]:
    return list(
        OpenLoop.objects.filter(
            source=source, loop_type=loop_type, status=LoopStatus.OPEN
        )
    )


ASK = "Dana,\n\nWhat financing do you think we could actually get?\n\nRobin"
EARLIER = mail(
    0, "Robin, the survey is attached.\n\nDana Reyes", frm=WORK, name="Dana Reyes",
    to=(ROBIN,), days=-20, thread="t-old", subject="Survey",
)  # fmt: skip


@pytest.mark.django_db
def test_their_later_mail_from_another_address_supersedes_my_ask(robins_mailbox, store):
    # I asked Dana at work; ten days later Dana wrote to me from home, under the
    # same name, about something else: we were in touch, the ask is handled or
    # moot. The same later mail from a different person leaves it waiting.
    later = mail(
        2, "Robin, per the plan here are the draw totals.\n\nDana", frm=HOME,
        name="Dana Reyes", to=(ROBIN,), days=10, thread="t-home", subject="Draws",
    )  # fmt: skip
    _run(
        robins_mailbox,
        store,
        [EARLIER, mail(1, ASK), later],
        now=T0 + timedelta(days=20),
    )
    assert _open(robins_mailbox, LoopType.UNANSWERED_OUTBOUND) == []
    assert same_person(source_id=robins_mailbox.id, addresses=[WORK])[WORK] == {
        WORK,
        HOME,
    }


@pytest.mark.django_db
def test_later_mail_from_a_namesake_of_another_person_does_not_supersede(
    robins_mailbox, store
):
    stranger = mail(
        2, "Robin, here are the draw totals.\n\nDana", frm=OTHER, name="Dana Kim",
        to=(ROBIN,), days=10, thread="t-kim", subject="Draws",
    )  # fmt: skip
    _run(
        robins_mailbox,
        store,
        [EARLIER, mail(1, ASK), stranger],
        now=T0 + timedelta(days=20),
    )
    assert [lp.counterparty_email for lp in _open(
        robins_mailbox, LoopType.UNANSWERED_OUTBOUND
    )] == [WORK]  # fmt: skip


def _home_and_work(home_text: str, work_text: str) -> tuple[MailMessage, MailMessage]:
    """Dana from home (display name "reyes" only, signed "Dana Reyes") and, a day
    later, from work (dana.reyes@, no display name, signed with a company line)."""
    home = mail(
        1, f"Robin,\n\n{home_text}\n\nDana Reyes\n", frm=HOME, name="reyes",
        to=(ROBIN,), thread="t-home",
    )  # fmt: skip
    work = mail(
        2, f"Robin,\n\n{work_text}\n\nDana Reyes\nHarbour Ltd\n", frm=WORK,
        to=(ROBIN,), days=1, thread="t-work",
    )  # fmt: skip
    return home, work


@pytest.mark.django_db
def test_a_second_address_is_the_same_person_by_the_name_they_sign(
    robins_mailbox, store
):
    # The home address shows only a surname ("reyes"); its mail is signed "Dana
    # Reyes", the name the work address ("dana.reyes@") is built from.
    home, work = _home_and_work(
        "I was laid off last week. Drop me a line.", "The survey is attached."
    )
    stats = sender_stats([home, work], owner_addresses=[ROBIN])
    assert set(stats[HOME].full_names) == {"dana reyes"}
    assert set(stats[WORK].full_names) == {"dana reyes"}
    store(robins_mailbox, [home, work])
    sender_profiles_refresh(source=robins_mailbox)
    assert same_person(source_id=robins_mailbox.id, addresses=[HOME])[HOME] == {
        HOME,
        WORK,
    }


@pytest.mark.django_db
def test_my_reply_quoted_in_theirs_counts_as_contact(robins_mailbox, store):
    # Dana asked me something at work. My answer is not in the mailbox (sent
    # from my phone), but Dana's later mail from home quotes it: I was in touch
    # with Dana after the ask, which no longer waits on me.
    ask = mail(
        1, "Robin,\n\nWhat is going on down the street? Give me a call.\n\nDana Reyes",
        frm=WORK, to=(ROBIN,), thread="t-ask",
    )  # fmt: skip
    quoting = mail(
        2, "Thanks. Can I have your cell number?\n\nDana Reyes", frm=HOME,
        name="reyes", to=(ROBIN,), days=12, thread="t-home", subject="Re: news",
        replied_to={"address": ROBIN, "name": "", "date": (
            T0 + timedelta(days=11)
        ).isoformat()},
    )  # fmt: skip
    _run(robins_mailbox, store, [ask, quoting], now=T0 + timedelta(days=20))
    contact = sender_contacts(source_id=robins_mailbox.id, addresses=[WORK])[WORK]
    assert contact.last_to == T0 + timedelta(days=11)
    assert [lp.counterparty_email for lp in _open(
        robins_mailbox, LoopType.UNANSWERED_INBOUND
    )] == [HOME]  # fmt: skip


def test_quoted_header_names_who_wrote_the_message_a_reply_answers() -> None:
    outlook = parse_rfc822(
        b"From: dreyes77@freemail.example\r\nTo: robin@example.org\r\n"
        b"Subject: Re: news\r\nDate: Tue, 27 Nov 2001 07:06:19 -0800\r\n"
        b"Message-ID: <q1@freemail.example>\r\n\r\n"
        b"Can I have your cell number?\r\n\r\nThanks,\r\n"
        b"----- Original Message -----\r\nFrom: <Robin.A.Owner@example.org>\r\n"
        b"To: <dreyes77@freemail.example>\r\n"
        b"Sent: Monday, November 26, 2001 7:44 AM\r\nSubject: RE: news\r\n\r\n"
        b"> Dana,\r\n> Sorry to hear it. Call me today.\r\n"
    )
    assert outlook.replied_to is not None
    assert outlook.replied_to.address == "robin.a.owner@example.org"
    # "Sent:" has no zone: read in the quoting message's own (-0800).
    assert outlook.replied_to.date == datetime(2001, 11, 26, 15, 44, tzinfo=UTC)
    gmail = written_text(
        "Sounds good.\n\nOn Mon, Nov 26, 2001 at 7:44 AM, Robin Owner "
        "<robin@example.org> wrote:\n> Call me today.\n"
    ).replied_to
    assert gmail is not None
    assert (gmail.address, gmail.name) == ("robin@example.org", "Robin Owner")
    assert gmail.date == datetime(2001, 11, 26, 7, 44, tzinfo=UTC)
    bare = written_text(
        "ok\n\nOn Mon, 26 Nov 2001 07:44:12 -0800 Robin Owner <robin@example.org> "
        "wrote:\n> hi\n"
    ).replied_to
    assert bare is not None and bare.name == "Robin Owner"
    assert bare.date == datetime(2001, 11, 26, 15, 44, 12, tzinfo=UTC)
    assert written_text("No quote here.\n\nRobin").replied_to is None


def test_my_other_address_at_my_domain_is_recognised_in_a_quoted_header() -> None:
    from loops.definitions import QuotedAuthor
    from loops.senders import is_my_address

    owners = {"robin.owner@example.org"}
    assert is_my_address(
        QuotedAuthor("robin.a.owner@example.org", "", None), owners, ()
    )
    assert not is_my_address(
        QuotedAuthor("kim.owner@example.org", "", None), owners, ()
    )
    assert is_my_address(
        QuotedAuthor("", "Owner, Robin", None), owners, {"robin owner"}
    )


@pytest.mark.django_db
def test_promise_of_a_call_is_kept_when_they_report_the_conversation(
    robins_mailbox, store
):
    promise = mail(
        1, "Dana,\n\nThe numbers are below. Can you put me in touch with a lender?"
        "\n\nI will follow up with a phone call.\n\nRobin",
    )  # fmt: skip
    held = mail(
        2, "Robin, per our discussion see attached.\n\nDana Reyes", frm=HOME,
        name="Dana Reyes", to=(ROBIN,), days=2, thread="t-home", subject="Letter",
    )  # fmt: skip
    _run(robins_mailbox, store, [EARLIER, promise], now=T0 + timedelta(days=1))
    [loop] = _open(robins_mailbox, LoopType.COMMITMENT_OWED_BY_ME)
    _run(robins_mailbox, store, [held], now=T0 + timedelta(days=3))
    loop.refresh_from_db()
    assert (loop.status, loop.closed_by) == (LoopStatus.DONE, CLOSED_BY_FULFILLED)


@pytest.mark.django_db
def test_promise_of_a_call_stays_open_without_word_of_the_conversation(
    robins_mailbox, store
):
    promise = mail(1, "Dana,\n\nI will follow up with a phone call.\n\nRobin")
    other = mail(
        2, "Robin, the parking passes are at the desk.\n\nDana Reyes", frm=HOME,
        name="Dana Reyes", to=(ROBIN,), days=2, thread="t-home", subject="Passes",
    )  # fmt: skip
    _run(robins_mailbox, store, [EARLIER, promise, other], now=T0 + timedelta(days=3))
    assert len(_open(robins_mailbox, LoopType.COMMITMENT_OWED_BY_ME)) == 1


@pytest.mark.parametrize(
    "body",
    [
        "Remember to fax a copy of the term sheet to Lee Park. (fax: 555-0100)",
        "Please advise Lee Park it will no longer be necessary.",
        "As discussed, please send 5 full sets of the plans to\n\nHarbour Custom "
        "Homes\n12 Quay Road\nPortsmouth\n\nThank you,\n\nRobin Owner\n555-0199",
    ],
)
def test_request_to_act_toward_a_third_party_expires_unchased(body: str) -> None:
    # Its outcome never comes back to me by mail: two weeks on, it is done or moot.
    ask = mail(1, body)
    fresh = detect_thread([ask], owner_addresses=[ROBIN], now=T0 + timedelta(days=5))
    assert [s.loop_type for s in fresh.open] == [LoopType.UNANSWERED_OUTBOUND]
    late = detect_thread([ask], owner_addresses=[ROBIN], now=T0 + timedelta(days=20))
    assert late.open == []


@pytest.mark.parametrize(
    "body",
    [
        "Please take a look at the attached draft and compare it to Acme's proposal.",
        "Please give me a call before you talk to Lee Park.",
        "Please give me your comments on the draft before I send it to Legal.",
        "Please tell Lee Park and me whether the budget was approved.",
        "Please send me the term sheet.",
        "Please send the term sheet to Lee Park and let me know when it is done.",
        "Can you fax the term sheet to Lee Park?",
        "Please mail the check to\n\nRobin Owner\n8 Elm Court\n\nThanks,\nRobin Owner",
    ],
)
def test_request_that_comes_back_to_me_does_not_expire_as_a_delegation(
    body: str,
) -> None:
    late = T0 + timedelta(days=20)
    assert live_asks(body, sent_at=T0, now=late) == find_asks(body) != []


@pytest.mark.django_db
def test_waiting_shows_one_person_writing_from_two_addresses_as_one_group(
    robins_mailbox, store
):
    # Both addresses ask me something; they are one person (the home address
    # signs "Dana Reyes", the work address is dana.reyes@): shown once, by the
    # full name, not as "Reyes" and an address.
    from brain.access import local_caller
    from loops.waiting import waiting_report

    home, work = _home_and_work(
        "I was laid off last week. Can you call me?", "Can you check the survey?"
    )
    _run(robins_mailbox, store, [home, work], now=T0 + timedelta(days=3))
    report = waiting_report(caller=local_caller(), as_of=T0 + timedelta(days=3))
    assert [(g["counterparty_name"], g["loop_count"]) for g in report["groups"]] == [
        ("Dana Reyes", 2)
    ]
    # The entry (two loops on one subject, one entry) shows the sentence that asks.
    assert "> Can you check the survey?" in report["text"]


def test_my_reply_quoting_their_message_shows_they_answered_my_ask() -> None:
    # Dana's answer is not in the mailbox, but my later message replies to it
    # (its quoted header: Dana, after my ask): my ask was answered. A reply of
    # mine to Dana's message from before the ask shows nothing.
    ask = mail(1, "Dana, what do you think of my cost estimate?")
    answered = mail(
        2, "Sounds good. Send it to my home address.", days=16, thread="t-ask",
        replied_to={"address": WORK, "name": "Dana Reyes",
                    "date": (T0 + timedelta(days=15)).isoformat()},
    )  # fmt: skip
    now = T0 + timedelta(days=20)
    verdict = detect_thread([ask, answered], owner_addresses=[ROBIN], now=now)
    assert verdict.open == [] and verdict.reason == "answer_quoted"
    older = mail(
        2, "Sounds good. Send it to my home address.", days=16, thread="t-ask",
        replied_to={"address": WORK, "name": "Dana Reyes",
                    "date": (T0 - timedelta(days=2)).isoformat()},
    )  # fmt: skip
    still = detect_thread([ask, older], owner_addresses=[ROBIN], now=now)
    assert [s.loop_type for s in still.open] == [LoopType.UNANSWERED_OUTBOUND]


def test_their_message_known_only_from_my_reply_counts_as_their_contact() -> None:
    # Dana Kim never appears as a sender, but my reply quotes her message.
    mine = mail(
        1, "Sounds good.", to=(OTHER,), days=10, thread="t-x",
        replied_to={"address": OTHER, "name": "Dana Kim",
                    "date": (T0 + timedelta(days=9)).isoformat()},
    )  # fmt: skip
    stats = sender_stats([mine], owner_addresses=[ROBIN])
    assert stats[OTHER].last_from == T0 + timedelta(days=9)
    assert stats[OTHER].reciprocal


def _coverage(mine_per_day: int, others_per_day: int) -> MailCoverage:
    """Sixty days around T0 with the given messages per day."""
    days = {
        (T0 + timedelta(days=d)).strftime("%Y-%m-%d"): (mine_per_day, others_per_day)
        for d in range(-30, 30)
    }
    return MailCoverage.from_days(days, whole=True)


@pytest.mark.django_db
def test_promise_of_a_call_in_weeks_whose_inbox_was_not_kept_is_not_listed(
    robins_mailbox, store
):
    # Only Dana's mail (or my report) could show the call took place; in weeks
    # of my sent mail alone it cannot be seen, so it is not listed. A promise to
    # send something shows in my own sent mail, and is listed.
    from loops.detectors import Mutes
    from loops.pipeline import thread_rule_extract

    [promise] = store(
        robins_mailbox,
        [mail(1, "Dana,\n\nI will follow up with a phone call on the numbers.\n")],
    )
    [deliver] = store(
        robins_mailbox,
        [mail(2, "Dana,\n\nI will send you the signed lease.\n", thread="t-2")],
    )

    def extract(message: MailMessage, coverage: MailCoverage) -> int:
        return int(
            thread_rule_extract(
                source=robins_mailbox,
                thread_id=message.thread_id,
                messages=[message],
                page=None,
                mutes=Mutes(),
                source_newest=T0 + timedelta(days=1),
                known_keys=set(),
                runs=[],
                coverage=coverage,
            )["loops"]
        )

    assert extract(promise, _coverage(3, 0)) == 0
    assert extract(promise, _coverage(3, 6)) == 1
    assert extract(deliver, _coverage(3, 0)) == 1


@pytest.mark.django_db
def test_later_mail_from_another_address_settles_an_ask_already_waiting(
    robins_mailbox, store
):
    # The ask waits; later mail from Dana's home address arrives in a thread of
    # its own: the ask's thread is not touched, yet the cross-thread pass drops
    # it (we were in touch).
    _run(robins_mailbox, store, [EARLIER, mail(1, ASK)], now=T0 + timedelta(days=5))
    [loop] = _open(robins_mailbox, LoopType.UNANSWERED_OUTBOUND)
    later = mail(
        2, "Robin, here are the draw totals.\n\nDana", frm=HOME, name="Dana Reyes",
        to=(ROBIN,), days=10, thread="t-home", subject="Draws",
    )  # fmt: skip
    _run(robins_mailbox, store, [later], now=T0 + timedelta(days=20))
    loop.refresh_from_db()
    assert (loop.status, loop.closed_by) == (
        LoopStatus.DROPPED,
        "not_expected: superseded",
    )


def test_an_office_address_signed_by_two_people_joins_nobody() -> None:
    # office@ sends as Dana Reyes once and as Anna Lee once: a shared address.
    # It must not make Anna's personal address one person with anybody.
    from loops.selectors import _shared

    office = "office@reyeslaw.example"
    msgs = [
        mail(1, "Robin, the invoice is attached.\n\nDana Reyes", frm=office,
             name="Dana Reyes", to=(ROBIN,), thread="o1"),
        mail(2, "Robin, your file is ready.\n\nAnna Lee", frm=office,
             name="Anna Lee", to=(ROBIN,), thread="o2", days=1),
    ]  # fmt: skip
    stats = sender_stats(msgs, owner_addresses=[ROBIN])
    assert set(stats[office].full_names) == {"dana reyes", "anna lee"}
    assert _shared({"full_names": list(stats[office].full_names)})
    assert not _shared({"full_names": ["dana reyes", "d reyes"]})


def test_a_role_name_is_no_persons_full_name() -> None:
    msgs = [
        mail(1, "Your order shipped.", frm="help@shop.example",
             name="Customer Service", to=(ROBIN,)),
        mail(2, "Invoice 12 is due.", frm="ap@corp.example",
             name="Accounts Payable", to=(ROBIN,), thread="t2"),
    ]  # fmt: skip
    stats = sender_stats(msgs, owner_addresses=[ROBIN])
    assert not stats["help@shop.example"].full_names
    assert not stats["ap@corp.example"].full_names


def test_mass_mail_is_no_contact_with_each_recipient() -> None:
    # My "Happy spring!" to 29 people, and Dana's office notice to 26, are no
    # conversation with each of them; a note to Dana alone is.
    crowd = tuple(f"guest{i}@example.net" for i in range(28))
    mine = mail(1, "Happy spring!", to=(WORK, *crowd), days=5, thread="t-m")
    theirs = mail(
        2, "Office closed Friday.", frm=WORK, name="Dana Reyes",
        to=(ROBIN, *crowd[:25]), days=6, thread="t-n",
    )  # fmt: skip
    stats = sender_stats([mine, theirs], owner_addresses=[ROBIN])
    assert stats[WORK].last_from is None
    assert stats[WORK].last_to is None
    note = mail(3, "Thanks, Dana.", to=(WORK,), days=7, thread="t-o")
    direct = mail(
        4, "Robin, see you Monday.", frm=WORK, name="Dana Reyes", to=(ROBIN,),
        days=8, thread="t-p",
    )  # fmt: skip
    stats = sender_stats([mine, theirs, note, direct], owner_addresses=[ROBIN])
    assert stats[WORK].last_to == T0 + timedelta(days=7)
    assert stats[WORK].last_from == T0 + timedelta(days=8)


def test_their_list_reply_quoting_my_list_post_is_no_contact_with_me() -> None:
    quoted = {
        "address": ROBIN,
        "name": "",
        "date": (T0 + timedelta(days=8)).isoformat(),
    }
    on_list = mail(
        1, "Agreed, the build is slow.", frm=WORK, name="Dana Reyes",
        to=("dev@lists.example",), days=9, thread="t-l", replied_to=quoted,
    )  # fmt: skip
    assert sender_stats([on_list], owner_addresses=[ROBIN])[WORK].last_to is None
    to_me = mail(
        2, "Agreed, the build is slow.", frm=WORK, name="Dana Reyes", to=(ROBIN,),
        days=9, thread="t-d", replied_to=quoted,
    )  # fmt: skip
    assert sender_stats([to_me], owner_addresses=[ROBIN])[WORK].last_to == (
        T0 + timedelta(days=8)
    )


def test_a_quoted_date_readable_either_way_is_unknown() -> None:
    # "11/10/2024": 10 November or 11 October; a wrong month would place the
    # contact weeks away. "25/10/2024" and "Fri, 11 Oct 2024" read one way.
    def author(line: str):  # type: ignore[no-untyped-def]
        return written_text(f"Thanks.\n\n{line}\n> hi\n").replied_to

    assert author("On 11/10/2024 09:00, Bob Smith <bob@x.example> wrote:").date is None
    assert author("On 25/10/2024 09:00, Bob Smith <bob@x.example> wrote:").date == (
        datetime(2024, 10, 25, 9, 0, tzinfo=UTC)
    )
    assert author("On Fri, 11 Oct 2024 09:00, Bob <bob@x.example> wrote:").date == (
        datetime(2024, 10, 11, 9, 0, tzinfo=UTC)
    )


@pytest.mark.django_db
def test_a_promise_that_only_mentions_a_talk_is_not_kept_by_talk(robins_mailbox, store):
    # The promise is the lease, not a call; and "as discussed at the board
    # meeting" is no report of the promised call either.
    promise = mail(
        1, "Dana,\n\nI will send you the revised lease once I talk to our lawyer."
        "\n\nRobin",
    )  # fmt: skip
    other = mail(
        2, "Robin, as discussed at the board meeting last month, the parking "
        "passes are ready.\n\nDana Reyes", frm=WORK, name="Dana Reyes",
        to=(ROBIN,), days=2, thread="t-other", subject="Passes",
    )  # fmt: skip
    _run(robins_mailbox, store, [EARLIER, promise], now=T0 + timedelta(days=1))
    [loop] = _open(robins_mailbox, LoopType.COMMITMENT_OWED_BY_ME)
    _run(robins_mailbox, store, [other], now=T0 + timedelta(days=3))
    loop.refresh_from_db()
    assert loop.status == LoopStatus.OPEN


def test_a_first_middle_last_local_part_names_its_person() -> None:
    # "mery.l.brown@" with no display name is Mery Brown.
    msg = mail(1, "Robin, see you Wednesday.", frm="mery.l.brown@consult.example",
               to=(ROBIN,))  # fmt: skip
    stats = sender_stats([msg], owner_addresses=[ROBIN])
    assert set(stats["mery.l.brown@consult.example"].full_names) == {"mery brown"}


def test_an_address_that_gives_no_name_is_known_by_the_name_it_signs() -> None:
    # dr1977@ has no display name and no name in its address; it signs "Dana
    # Reyes": the same person as dana.reyes@. A closing line is no name.
    odd = "dr1977@freemail.example"
    msgs = [
        mail(1, "Robin,\n\nWhich parking spot is mine?\n\nDana Reyes", frm=odd,
             to=(ROBIN,), thread="t-p"),
        mail(2, "Robin,\n\nSee you there.\n\nBest Regards", frm="zz9@x.example",
             to=(ROBIN,), thread="t-q"),
    ]  # fmt: skip
    stats = sender_stats(msgs, owner_addresses=[ROBIN])
    assert set(stats[odd].full_names) == {"dana reyes"}
    assert not stats["zz9@x.example"].full_names


@pytest.mark.django_db
def test_their_prompt_delivery_under_a_new_subject_answers_my_ask(
    robins_mailbox, store
):
    # The next day, a new thread: "here is the CV you asked for". A delivery of
    # something else ("the parking passes") answers nothing.
    ask = mail(1, "Dana,\n\nCould you send me your updated CV for the partner file?")
    _run(robins_mailbox, store, [EARLIER, ask], now=T0 + timedelta(days=5))
    [loop] = _open(robins_mailbox, LoopType.UNANSWERED_OUTBOUND)
    other = mail(
        2, "Robin, here are the parking passes.\n\nDana", frm=WORK,
        name="Dana Reyes", to=(ROBIN,), days=1, thread="t-passes",
        subject="Passes",
    )  # fmt: skip
    _run(robins_mailbox, store, [other], now=T0 + timedelta(days=5))
    loop.refresh_from_db()
    assert loop.status == LoopStatus.OPEN
    cv = mail(
        3, "Robin, here is the CV you asked for, attached.\n\nDana", frm=WORK,
        name="Dana Reyes", to=(ROBIN,), days=1.5, thread="t-cv", subject="my CV",
    )  # fmt: skip
    _run(robins_mailbox, store, [cv], now=T0 + timedelta(days=5))
    loop.refresh_from_db()
    assert (loop.status, loop.closed_by) == (LoopStatus.DONE, "reply_detected")


@pytest.mark.django_db
def test_a_replay_knows_only_the_contact_made_by_its_day(robins_mailbox, store):
    # I asked Dana on day 0; we were in touch on day 11 and again on day 27. A
    # replay of day 19 sees the day-11 contact (the ask is settled), as an
    # import taken that day would; a replay of day 5 still sees the ask.
    from brain.access import local_caller
    from loops.waiting import waiting_report

    msgs = [
        EARLIER,
        mail(1, ASK),
        mail(2, "Robin, the draw request is attached.\n\nDana Reyes", frm=WORK,
             name="Dana Reyes", to=(ROBIN,), days=11, thread="t-d", subject="Draws"),
        mail(3, "Thanks Dana, funds are wired.", to=(WORK,), days=11.1,
             thread="t-d", subject="Re: Draws"),
        mail(4, "Robin, the party is on the 12th.\n\nDana Reyes", frm=WORK,
             name="Dana Reyes", to=(ROBIN,), days=27, thread="t-p", subject="Party"),
        mail(5, "See you there.", to=(WORK,), days=27.1, thread="t-p",
             subject="Re: Party"),
    ]  # fmt: skip
    _run(robins_mailbox, store, msgs, now=T0 + timedelta(days=28))

    def waiting_on(day: float) -> list[str]:
        report = waiting_report(
            caller=local_caller(sources=[robins_mailbox.id]),
            as_of=T0 + timedelta(days=day),
        )
        return [loop["summary"] for g in report["groups"] for loop in g["loops"]]

    assert waiting_on(19) == []
    assert waiting_on(5) == [f'Waiting on {WORK}: "Harbour lease"']


@pytest.mark.django_db
def test_an_import_drops_waiting_loops_of_weeks_it_finds_hold_no_inbound_mail(
    robins_mailbox, store
):
    # A batch detected before the rest of the mailbox was stored opened a wait;
    # the whole mailbox shows only my own mail in those weeks: nothing could
    # show an answer, so the import's end drops it. Weeks with others' mail
    # keep theirs.
    from loops.models import Detector
    from loops.pipeline import loops_coverage_sweep

    def waiting(key: str, day: float) -> OpenLoop:
        return OpenLoop.objects.create(
            source=robins_mailbox, dedup_key=key,
            loop_type=LoopType.UNANSWERED_OUTBOUND, summary=key,
            detector=Detector.DETERMINISTIC_THREAD, counterparty_email=WORK,
            opened_at=T0 + timedelta(days=day),
            last_activity_at=T0 + timedelta(days=day),
        )  # fmt: skip

    blind, seen = waiting("blind", 10), waiting("seen", 200)
    store(
        robins_mailbox,
        [mail(100 + n, "Note.", days=n / 3, thread=f"m{n}") for n in range(60)]
        + [mail(300 + n, "Note.", days=190 + n / 4, thread=f"s{n}") for n in range(20)]
        + [
            mail(500 + n, "News.", frm=WORK, to=(ROBIN,), days=190 + n / 4,
                 thread=f"o{n}")
            for n in range(40)
        ],
        page=False,
    )  # fmt: skip
    assert (
        loops_coverage_sweep(source=robins_mailbox, now=T0 + timedelta(days=220)) == 1
    )
    blind.refresh_from_db()
    seen.refresh_from_db()
    assert (blind.status, blind.closed_by) == (
        LoopStatus.DROPPED,
        "not_expected: no_inbound_mail",
    )
    assert seen.status == LoopStatus.OPEN


@pytest.mark.django_db
def test_a_person_page_titled_with_the_address_shows_the_known_name(
    robins_mailbox, store
):
    # The people import titled the page "dana.reyes@…" (no display name); the
    # name the address is built from and signs with is known: waiting shows it.
    from brain.access import local_caller
    from loops.waiting import waiting_report
    from tests.factories import AliasFactory, PageFactory, page_type

    page = PageFactory(
        source=robins_mailbox, slug="people/dana-reyes", type=page_type("person"),
        title=WORK,
    )  # fmt: skip
    AliasFactory(page=page, source=robins_mailbox, alias=WORK, kind="email")
    work = mail(
        1, "Robin,\n\nCan you check the survey?\n\nDana Reyes", frm=WORK,
        to=(ROBIN,),
    )  # fmt: skip
    _run(robins_mailbox, store, [work], now=T0 + timedelta(days=3))
    [group] = waiting_report(caller=local_caller(), as_of=T0 + timedelta(days=3))[
        "groups"
    ]
    assert group["counterparty_name"] == "Dana Reyes"
