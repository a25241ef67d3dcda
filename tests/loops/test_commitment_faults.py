"""Issue 14, commitments: one test per fault kind found on real mail, each built
from a small invented message (invented people: Robin Vale owns the mailbox, Dana
Okafor and Lee Marsh write to her)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from connectors.mail.parsing import parse_rfc822
from connectors.mailbox.sync import mailbox_import
from loops.extractors import classifier
from loops.extractors.rules import (
    OWED_BY_ME,
    OWED_TO_ME,
    classify_sentence,
    rule_extract,
)
from loops.extractors.sentences import split_sentences
from loops.message import MailMessage
from loops.models import LoopStatus, LoopType, OpenLoop
from loops.pipeline import process_threads
from tests.loops.shapes import ROBIN

DANA = "dana@example.com"
LEE = "lee@example.net"
CROWD = tuple(f"trader{i}@example.org" for i in range(42))
MONDAY = datetime(2025, 3, 3, 15, 0, tzinfo=UTC)  # Monday 3 March 2025


def mail(
    n: int,
    body: str,
    *,
    frm: str = DANA,
    to: tuple[str, ...] = (ROBIN,),
    cc: tuple[str, ...] = (),
    at: datetime = MONDAY,
    hours: float = 0,
    thread: str = "t-dana",
    **extra: object,
) -> MailMessage:
    return MailMessage(
        message_id=f"<{n}.{thread}@example>",
        thread_id=thread,
        subject="Re: the Harbour lease",
        from_addr=frm,
        to=list(to),
        cc=list(cc),
        date=at + timedelta(hours=hours),
        is_mine=frm == ROBIN,
        body=body,
        **extra,  # type: ignore[arg-type]
    )


def found(*messages: MailMessage) -> list[tuple[str, str]]:
    return [
        (c.direction, c.text) for c in rule_extract(messages, owner_addresses=[ROBIN])
    ]


def test_request_to_me_is_not_my_promise():
    to_the_desk = mail(
        1,
        "Lee Marsh is taking the lead for the client arriving on Wednesday, please "
        "help him with his requirements.\n\nDana",
        to=(ROBIN, *CROWD),
    )
    to_me = mail(2, "Robin,\n\nPlease send me the signed lease by Friday.\n\nDana")
    assert found(to_the_desk) == []
    assert found(to_me) == []


def test_request_i_accepted_is_my_promise():
    ask = mail(1, "Robin,\n\nPlease send me the signed lease by Friday.\n\nDana")
    yes = mail(2, "Will do.\n\nRobin", frm=ROBIN, to=(DANA,), hours=2)
    assert found(ask, yes) == [
        (OWED_BY_ME, "Please send me the signed lease by Friday.")
    ]


@pytest.mark.parametrize(
    "line",
    [
        "See you on June 3!",
        "Register today.",
        "Order your report today for $100 off the regular price.",
        "We'll tell you which stocks have the edge.",
        "Click here today and we'll send you a free digital camera!",
    ],
)
def test_marketing_lines_are_not_commitments(line):
    assert found(mail(1, f"Dear Robin,\n\n{line}\n\nThe Acme Team")) == []


@pytest.mark.parametrize(
    "line",
    [
        "We will then promptly remove your name from our mailing list.",
        "Yes, I will attend ____",
        "[ ] I will bring a guest",
        "I will respond to your message when I return on Monday.",
        "I am out of the office and will reply to your e-mail next week.",
    ],
)
def test_boilerplate_and_form_lines_are_not_commitments(line):
    assert classify_sentence(line) is None
    assert found(mail(1, line)) == []


def test_plans_agendas_and_organisation_statements_are_not_commitments():
    agenda = mail(
        1,
        "At that meeting, we will be discussing the budget. We will go over "
        "storage balances and weather.",
    )
    farewell = mail(
        2,
        "I resigned today. I will probably be heading up to Denver in January.",
        to=(ROBIN, *CROWD[:20]),
        thread="t-farewell",
    )
    plan = mail(3, "I am going to use the proceeds to buy another building.")
    assert found(agenda) == [] and found(farewell) == [] and found(plan) == []


def test_announcement_to_many_is_not_a_promise_to_me():
    note = mail(1, "I will send you the new rota tomorrow.", to=(ROBIN, *CROWD[:8]))
    assert found(note) == []
    assert found(mail(2, "I will send you the new rota tomorrow.")) == [
        (OWED_TO_ME, "I will send you the new rota tomorrow.")
    ]


@pytest.mark.parametrize(
    "line",
    [
        "Here is the map which we will use for the walk.",
        "I am not sure what I will do at this point.",
        "The total cash that Lee and I will pay the sellers is $5,875.",
    ],
)
def test_relative_clauses_are_not_commitments(line):
    assert classify_sentence(line) is None


@pytest.mark.parametrize(
    "line",
    [
        "There are three other deals that I will fax to you.",
        "I promise that I will send it tomorrow.",
    ],
)
def test_relative_clause_that_hands_something_over_is_a_promise(line):
    match = classify_sentence(line)
    assert match is not None and match.kind == "commitment"


@pytest.mark.parametrize(
    "line",
    [
        "Just let me know, otherwise I will take a cab.",
        "I will gladly talk further.",
        "Email me your number and I will call you.",
        "If you agree, I will draft the side letter.",
        "Assuming this is true, I will work directly with him.",
        "You can fill in the amounts and I will input them.",
        "I think I will sell some more of the summer contracts.",
        "Should completion become an issue I will then ask for your assistance.",
        "Will have some time today to work on a utility letter.",
    ],
)
def test_offers_and_conditionals_are_not_commitments(line):
    assert classify_sentence(line) is None


@pytest.mark.parametrize(
    "line",
    [
        "That's a good idea. I'm not sure I'll get to it any time soon.",
        "I don't know if I will have the numbers before the board meets.",
        "I will, however, admit to being taught well past my competence.",
        "I'll start:",
        "I will explain:",
    ],
)
def test_hedges_admissions_and_announced_content_are_not_commitments(line):
    """Fault kinds from an owner-blind review of list mail (issue 14): a hedged
    or negated "I'll" ("I'm not sure I'll…"), a statement verb ("I will admit…"),
    and an "I'll start:" whose content follows at once are not promises; a real
    promise after the same words stays one."""
    assert classify_sentence(line) is None


def test_hedge_words_do_not_swallow_real_promises():
    for line in (
        "Not sure about the venue, but I will send you the agenda tomorrow.",
        "I will, however, send you the signed copy by Friday.",
        "I'll start the draft tonight and send it to you.",
    ):
        match = classify_sentence(line)
        assert match is not None and match.kind == "commitment", line


def test_promise_right_after_a_conditional_offer_belongs_to_it():
    offer = mail(
        1,
        "If we could work together on this basis, I will complete the selections. "
        "I will make the adjustments as we get quotes.",
        frm=ROBIN,
        to=(DANA,),
    )
    assert found(offer) == []


@pytest.mark.parametrize(
    "line",
    [
        "I'll keep you posted.",
        "I will let you know.",
        "I will let you know next week if I need to see the inside.",
        "I will get back to you with more.",
        "I'll keep you all posted!",
        "I will let everyone know.",
    ],
)
def test_vague_keep_you_posted_is_not_a_commitment(line):
    assert classify_sentence(line) is None


def test_vague_follow_up_with_a_deadline_is_a_commitment():
    match = classify_sentence("I will get back to you by Friday.")
    assert match is not None and match.kind == "commitment"


def test_sentence_splitting_does_not_break_at_abbreviations():
    text = (
        "Mr. Abel met Dr. Brandt of Quill Inc. at 5 p.m. and J. R. Tamsin agreed. "
        "I will send you the minutes tomorrow."
    )
    assert split_sentences(text) == [
        "Mr. Abel met Dr. Brandt of Quill Inc. at 5 p.m. and J. R. Tamsin agreed.",
        "I will send you the minutes tomorrow.",
    ]
    promise = mail(1, text, frm=ROBIN, to=(DANA,))
    assert found(promise) == [(OWED_BY_ME, "I will send you the minutes tomorrow.")]


def test_explicit_date_beats_weekday():
    promise = mail(
        1, "I'll send you the deck by Wednesday, May 7.", frm=ROBIN, to=(DANA,)
    )
    (candidate,) = rule_extract([promise], owner_addresses=[ROBIN])
    assert MONDAY.date() == date(2025, 3, 3) and MONDAY.weekday() == 0
    assert candidate.due == date(2025, 5, 7)


def test_non_action_verb_filter_keeps_real_promises():
    for line in (
        "I'll look over the list and give you a call.",
        "I will be in the office tomorrow and send you the report then.",
        "I WILL TALK TO LEE ABOUT HIS SHARE OF THE LEGAL BILLS.",
    ):
        match = classify_sentence(line)
        assert match is not None and match.kind == "commitment", line
    assert classify_sentence("I will talk to you next week.") is None


def test_subjectless_reply_promise_is_a_commitment():
    match = classify_sentence("Right, will fix.")
    assert match is not None and match.kind == "commitment"
    assert classify_sentence("Will do.") is None  # an acceptance, nothing to track


def test_promise_kept_later_in_the_thread_is_fulfilled():
    promise = mail(
        1, "I'll set up a call with Lee for Thursday.", frm=ROBIN, to=(DANA,)
    )
    kept = mail(2, "The call is confirmed for 10 am.", frm=ROBIN, to=(DANA,), hours=3)
    assert found(promise) == [(OWED_BY_ME, "I'll set up a call with Lee for Thursday.")]
    assert found(promise, kept) == []


def test_promise_kept_later_in_the_thread_closes_its_open_loop(robins_mailbox, store):
    promise = mail(
        1, "I'll set up a call with Lee for Thursday.", frm=ROBIN, to=(DANA,)
    )
    store(robins_mailbox, [promise])
    process_threads(source_id=robins_mailbox.id, thread_ids=["t-dana"])
    loop = OpenLoop.objects.get(
        source=robins_mailbox, loop_type=LoopType.COMMITMENT_OWED_BY_ME
    )
    assert loop.status == LoopStatus.OPEN
    kept = mail(2, "The call is confirmed for 10 am.", frm=ROBIN, to=(DANA,), hours=3)
    store(robins_mailbox, [kept])
    process_threads(source_id=robins_mailbox.id, thread_ids=["t-dana"])
    loop.refresh_from_db()
    assert (loop.status, loop.closed_by) == (LoopStatus.DONE, "fulfilled")
    assert loop.fulfilment_evidence["message_id"] == "<2.t-dana@example>"
    assert loop.events.filter(event_type="fulfilment_suspected").exists()


def _open_promise(source, store, body: str, to: str = DANA) -> OpenLoop:  # type: ignore[no-untyped-def]
    store(source, [mail(1, body, frm=ROBIN, to=(to,))])
    process_threads(source_id=source.id, thread_ids=["t-dana"])
    loop = OpenLoop.objects.get(source=source, loop_type=LoopType.COMMITMENT_OWED_BY_ME)
    assert loop.status == LoopStatus.OPEN
    return loop


def test_promise_kept_in_another_thread_with_the_same_counterparty_is_fulfilled(
    robins_mailbox, store
):
    loop = _open_promise(
        robins_mailbox, store, "I will arrange for the extra copies to be mailed."
    )
    # A later thread with Dana on another subject: one shared word is chance.
    other = mail(
        2, "The invoice was mailed.", frm=ROBIN, to=(DANA,), hours=5, thread="t-b"
    )
    # The same words to someone else keep nothing for Dana.
    elsewhere = mail(
        3, "The extra copies were mailed.", frm=ROBIN, to=(LEE,), hours=6, thread="t-c"
    )
    store(robins_mailbox, [other, elsewhere])
    process_threads(source_id=robins_mailbox.id, thread_ids=["t-b", "t-c"])
    loop.refresh_from_db()
    assert loop.status == LoopStatus.OPEN
    kept = mail(
        4, "Dana, the copies were mailed this morning.", frm=ROBIN, to=(DANA,),
        hours=24, thread="t-d",
    )  # fmt: skip
    store(robins_mailbox, [kept])
    process_threads(source_id=robins_mailbox.id, thread_ids=["t-d"])
    loop.refresh_from_db()
    assert (loop.status, loop.closed_by) == (LoopStatus.DONE, "fulfilled")
    assert loop.fulfilment_evidence["message_id"] == "<4.t-d@example>"
    assert loop.fulfilment_evidence["reason"] == "kept_in_other_thread"


def test_promise_to_arrange_delivery_kept_by_asking_a_third_party_in_another_thread(
    robins_mailbox, store
):
    builder = "dana@okaforbuild.example"
    loop = _open_promise(
        robins_mailbox,
        store,
        "I will arrange for the additional plans to be mailed.",
        to=builder,
    )
    unrelated = mail(
        2, "Please send the survey to the bank.", frm=ROBIN, to=(LEE,), hours=2,
        thread="t-b",
    )  # fmt: skip
    store(robins_mailbox, [unrelated])
    process_threads(source_id=robins_mailbox.id, thread_ids=["t-b"])
    loop.refresh_from_db()
    assert loop.status == LoopStatus.OPEN
    asked = mail(
        3,
        "As discussed, please send 5 full sets to Okafor Build, 12 Quay Road.",
        frm=ROBIN, to=(LEE,), hours=3, thread="t-c",
    )  # fmt: skip
    store(robins_mailbox, [asked])
    process_threads(source_id=robins_mailbox.id, thread_ids=["t-c"])
    loop.refresh_from_db()
    assert (loop.status, loop.closed_by) == (LoopStatus.DONE, "fulfilled")
    assert loop.fulfilment_evidence["message_id"] == "<3.t-c@example>"


def test_mailbox_dated_after_the_wall_clock_still_gets_loops_with_a_warning(
    db, tmp_path
):
    future = "Mon, 03 Mar 2031 09:00:00 +0000"
    (tmp_path / "1.eml").write_text(
        f"From: Robin Vale <{ROBIN}>\nTo: Dana Okafor <{DANA}>\n"
        f"Subject: Harbour lease\nDate: {future}\nMessage-ID: <1.future@example>\n\n"
        "Dana,\n\nI will send you the signed lease by Friday.\n\nRobin\n"
    )
    report = mailbox_import(source_id="robin-2031", path=tmp_path, owners=[ROBIN])
    assert any("after this machine's clock" in w for w in report.warnings)
    loop = OpenLoop.objects.get(
        source_id="robin-2031", loop_type=LoopType.COMMITMENT_OWED_BY_ME
    )
    assert loop.due_at.date() == date(2031, 3, 7)
    result = process_threads(source_id="robin-2031", thread_ids=[loop.thread_id])
    assert "after the wall clock" in result["warnings"][0]


@pytest.mark.slow
def test_commitment_classifier_ships_as_weights_and_separates_promises():
    weights = classifier.weights()
    assert len(weights["coef"]) == 384 and 0 < weights["threshold"] < 1
    assert weights["meta"]["script"] == "loops/extractors/train_classifier.py"
    promise, pitch = classifier.score(
        [
            "I will fax you the signed lease tomorrow morning.",
            "Click here today and we'll send you a free digital camera!",
        ]
    )
    assert promise >= classifier.threshold() and promise > pitch


def test_interleaved_reply_opening_with_its_attribution_keeps_the_promise():
    raw = (
        b"From: Dana Reed <dana@example.com>\r\n"
        b"To: Robin Vale <robin@example.org>\r\n"
        b"Subject: Re: [PATCH] harbour: save the lease state\r\n"
        b"Message-ID: <2.t-dana@example>\r\n"
        b"Date: Mon, 03 Mar 2025 16:00:00 +0000\r\n"
        b"\r\n"
        b"On Mon, Mar 3, 2025 at 3:00 PM, Robin Vale\r\n"
        b"<robin@example.org> wrote:\r\n"
        b"> Is the state saved before the tenant moves?\r\n"
        b"\r\n"
        b"Yes, it is saved first.\r\n"
        b"\r\n"
        b"> We may want to clear the old record after the move.\r\n"
        b"\r\n"
        b"Right, will fix.\r\n"
    )
    parsed = parse_rfc822(raw)
    assert "wrote:" not in parsed.body
    assert "Right, will fix." in parsed.body
    reply = mail(2, parsed.body)
    assert ("owed_to_me", "Right, will fix.") in found(reply)


_LIST = {
    "cc": ("harbour-devel@lists.example.org",),
    "list_unsubscribe": True,
    "labels": ["CATEGORY_PROMOTIONS"],
}


def test_direct_reply_in_a_list_thread_i_wrote_in_is_not_mass_mail():
    mine = mail(
        1,
        "We may want to clear the old record after the move.",
        frm=ROBIN,
        to=(DANA,),
        cc=("harbour-devel@lists.example.org",),
        labels=["CATEGORY_PROMOTIONS"],
    )
    reply = mail(
        2,
        "Right, will fix.",
        cc=("harbour-devel@lists.example.org",),
        hours=2,
        list_unsubscribe=True,
        labels=["CATEGORY_PROMOTIONS"],
    )
    assert ("owed_to_me", "Right, will fix.") in found(mine, reply)
    # The same list mail before I wrote, or in a thread I never wrote in, stays
    # mass mail.
    assert found(reply) == []
    early = mail(0, "We will send the new record layout.", **_LIST)  # type: ignore[arg-type]
    assert found(early, mine) == []


def test_supercite_name_quote_is_not_my_promise():
    """Supercite and Gnus quote with the writer's first name ("Soren> I'll send…",
    often indented): a name of five letters or more was read as my own words, so
    the promise I quoted became mine (seen on a list: "Chris> I'm not sure I'll get
    to it…")."""
    quoting = mail(
        1,
        '>>>>> "Soren" == Soren Lind <soren@example.org> writes:\n\n'
        "  Soren> I will send the lease drafts tomorrow.\n\n"
        "Thanks, that helps.\n\nRobin",
        frm=ROBIN,
        to=(DANA,),
    )
    assert found(quoting) == []


LIST = "harbour-talk@lists.example.org"


def test_list_turns_of_phrase_are_not_promises():
    """Fault kind (owner-blind review of list posters, issue 14): in a post a
    mailing list delivered, "I'll bite", "I'll throw you a bone", "I'll stick with
    …" or a sarcastic "I'll hire a skywriter" are talk, not work; a promise there
    must name a concrete deliverable ("I'll fix it", "I'll send you the logs")."""
    talk = (
        "Sure, I'll bite: the article had rhetoric. I'll throw you a bone though, "
        "most people agree. I'll just stick with the simplest theory for now. "
        "Great idea, I'll hire a skywriter to tell everyone."
    )
    post = mail(1, talk, frm=ROBIN, to=(LIST,), cc=(DANA,), mailing_list=True)
    assert found(post) == []
    work = "Doh, you are right. I'll fix it tonight. I'll send you the logs."
    fix = mail(2, work, frm=ROBIN, to=(LIST,), cc=(DANA,), mailing_list=True)
    assert [text for _direction, text in found(fix)] == [
        "I'll fix it tonight.",
        "I'll send you the logs.",
    ]
    # The same turns of phrase in a direct message are judged as before.
    assert found(mail(3, "I'll fix it tonight.", frm=ROBIN, to=(DANA,))) != []
