"""SPEC §5.3 rule extractor on real sentences (Enron allen-p, parakweet intent set)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from loops.extractors.rules import (
    OWED_BY_ME,
    OWED_TO_ME,
    classify_sentence,
    resolve_due,
    rule_extract,
    sender_timezone,
)
from tests.loops.shapes import JEFF, OFFER_REPLY, OWNER, OWNERS, PHILLIP_ASKS, msg

PDT = timezone(timedelta(hours=-7))
THURSDAY = datetime(2001, 9, 6, 12, 33, tzinfo=PDT)  # sent_items/236
WEDNESDAY = datetime(2001, 9, 5, 10, 0, tzinfo=PDT)


def test_i_will_respond_to_the_offer_on_monday_sent_thursday_is_that_monday():
    match = classify_sentence("I will respond to the offer on Monday.")
    assert match is not None and match.kind == "commitment"
    assert resolve_due(match.deadline, THURSDAY) == date(2001, 9, 10)
    # The real message (sent/205) went out on Friday 2 June 2000: Monday 5 June.
    friday = datetime(2000, 6, 2, 3, 37, tzinfo=PDT)
    assert resolve_due(match.deadline, friday) == date(2000, 6, 5)


def test_i_will_give_you_a_call_on_tuesday():
    match = classify_sentence("I will give you a call on Tuesday morning.")
    assert match is not None and match.kind == "commitment"
    assert resolve_due(match.deadline, THURSDAY) == date(2001, 9, 11)


def test_request_by_6_28_has_that_due_date():
    match = classify_sentence("Please send me the executed lease by 6/28.")
    assert match is not None and match.kind == "request"
    assert resolve_due(match.deadline, datetime(2001, 6, 20, 9, tzinfo=PDT)) == date(
        2001, 6, 28
    )


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("by Friday", date(2001, 9, 7)),  # sent Wednesday: that Friday
        ("by Wednesday", date(2001, 9, 12)),  # same weekday: next week's
        ("next Monday", date(2001, 9, 10)),
        ("5/30", date(2002, 5, 30)),  # already past this year: next year's
        ("end of day", date(2001, 9, 5)),
        ("EOD", date(2001, 9, 5)),
        ("tomorrow", date(2001, 9, 6)),
        ("end of the week", date(2001, 9, 7)),
        ("next week", date(2001, 9, 14)),
        ("September 12th", date(2001, 9, 12)),
        ("within two days", date(2001, 9, 7)),
    ],
)
def test_deadlines_resolve_relative_to_the_sent_date(phrase, expected):  # type: ignore[no-untyped-def]
    assert resolve_due(phrase, WEDNESDAY) == expected


def test_deadline_uses_the_senders_timezone_not_utc():
    late_wednesday = datetime(2001, 9, 5, 22, 0, tzinfo=PDT)  # Thursday in UTC
    assert resolve_due("end of day", late_wednesday.astimezone(UTC), PDT) == date(
        2001, 9, 5
    )
    raw = "Date: Wed, 5 Sep 2001 22:00:00 -0700 (PDT)\nFrom: a@b.c\n\nhi"
    tz = sender_timezone(msg(1), raw)
    assert resolve_due("end of day", late_wednesday.astimezone(UTC), tz) == date(
        2001, 9, 5
    )


@pytest.mark.parametrize(
    "sentence",
    [
        "I will not return until Monday night.",  # Enron, a negation
        "I will probably meet them in Columbus on Monday or Tuesday.",  # a hedge
        "I will be out of the office next week.",  # a state, not an action
        "Do you have an opinion?",
        "Still no word on the Leander closing?",
        "There is a $35 Million expansion adding 250 jobs in Burnet.",
        "Click here to receive your first $10 today:",  # parakweet, marketing
        "If I will be late I'll call you.",  # conditional
        "Will I see you at the meeting on Friday?",
    ],
)
def test_real_non_commitments_do_not_match(sentence):  # type: ignore[no-untyped-def]
    assert classify_sentence(sentence) is None


def test_rule_extract_on_a_thread_finds_my_promises_and_theirs_not_their_requests():
    thread = [
        msg(
            1,
            body="Phillip,\n\nPlease send me the signed release by Friday.\n\nJeff",
            at=datetime(2001, 9, 5, 17, tzinfo=UTC),
        ),
        msg(
            2,
            frm=OWNER,
            to=(JEFF,),
            body=PHILLIP_ASKS,
            at=datetime(2001, 9, 6, 19, 33, tzinfo=UTC),
        ),
        msg(
            3,
            body="I'll overnight you my check tomorrow.\n\nJeff",
            at=datetime(2001, 9, 6, 21, tzinfo=UTC),
        ),
    ]
    found = rule_extract(thread, owner_addresses=OWNERS)
    by_text = {c.text: c for c in found}
    # A request made to me is not my promise until I accept it (issue 14).
    assert "Please send me the signed release by Friday." not in by_text
    call = by_text["I will give you a call on Tuesday morning."]
    assert call.direction == OWED_BY_ME and call.due == date(2001, 9, 11)
    check = by_text["I'll overnight you my check tomorrow."]
    assert check.direction == OWED_TO_ME and check.due == date(2001, 9, 7)
    assert all(c.confidence < 0.85 for c in found)


def test_rule_extract_ignores_list_mail_and_my_requests():
    thread = [
        msg(1, body="We will send you a free quote by Friday.", list_unsubscribe=True),
        msg(2, frm=OWNER, to=(JEFF,), hours=1, body="Please send it by Friday."),
        msg(3, frm=OWNER, to=(JEFF,), hours=2, body=OFFER_REPLY),
    ]
    texts = [c.text for c in rule_extract(thread, owner_addresses=OWNERS)]
    assert texts == ["I will respond to the offer on Monday."]


def test_labelled_intent_set_is_present_and_balanced_enough():
    """The benchmark's labelled sets ship with the tests (SOURCE.txt beside them)."""
    from pathlib import Path

    data = Path(__file__).resolve().parent.parent / "data" / "loops"
    for name, minimum in (("intent_eval.tsv", 30), ("intent_heldout.tsv", 5)):
        rows = [
            line.split("\t", 2)
            for line in (data / name).read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")
        ]
        assert all(label in {"0", "1"} for label, _, _ in rows)
        assert sum(label == "1" for label, _, _ in rows) >= minimum
    assert "Apache" in (data / "SOURCE.txt").read_text()
