"""SPEC §5.1/§5.2: each deterministic detector rule, on real message shapes (pure
function, no database)."""

from __future__ import annotations

from datetime import timedelta

from loops.detectors import Mutes, detect_thread
from loops.models import LoopType
from tests.loops.shapes import (
    JEFF,
    LIST_BODY,
    OFFER_REPLY,
    OWNER,
    OWNERS,
    PHILLIP_ANSWERS,
    PHILLIP_ASKS,
    T0,
    msg,
)

LATER = T0 + timedelta(days=5)


def run(messages, *, now=LATER, mutes=None):  # type: ignore[no-untyped-def]
    return detect_thread(
        messages, owner_addresses=OWNERS, mutes=mutes or Mutes(), now=now
    )


def test_inbound_question_opens_unanswered_inbound_with_counterparty_from():
    verdict = run([msg(1)])
    assert [s.loop_type for s in verdict.open] == [LoopType.UNANSWERED_INBOUND]
    spec = verdict.open[0]
    assert spec.counterparty_email == JEFF
    assert spec.dedup_key == "thread:t-kuo:unanswered_inbound"
    assert spec.evidence[0]["message_id"] == "<1.t-kuo@thyme>"
    assert spec.evidence[0]["quote"].startswith(
        "Phillip, I am leaving tomorrow morning."
    )
    assert len(spec.evidence[0]["quote"]) <= 200


def test_noise_sender_opens_nothing():
    verdict = run([msg(1, frm="mailer-daemon@enron.com")])
    assert verdict.open == [] and verdict.reason == "no_substantive_messages"


def test_noise_sender_variants_are_all_noise():
    for sender in (
        "noreply@x.com",
        "no-reply@x.com",
        "donotreply@x.com",
        "do-not-reply@x.com",
        "notifications@github.com",
        "notification@x.com",
        "postmaster@x.com",
        "calendar-notification@google.com",
    ):
        assert run([msg(1, frm=sender)]).open == [], sender


def test_list_mail_with_list_unsubscribe_opens_nothing():
    verdict = run(
        [msg(1, frm="mike@techdirt.com", body=LIST_BODY, list_unsubscribe=True)]
    )
    assert verdict.open == [] and verdict.reason == "list_mail"


def test_cc_only_inbound_opens_nothing():
    verdict = run([msg(1, to=("bitbitch@magnesium.net",), cc=(OWNER,))])
    assert verdict.open == [] and verdict.reason == "cc_only"


def test_self_thread_opens_and_closes_nothing():
    verdict = run(
        [
            msg(
                1,
                frm=OWNER,
                to=("pallen@enron.com",),
                body="Still no word on the closing?",
            )
        ]
    )
    assert (
        verdict.open == [] and verdict.close == [] and verdict.reason == "self_thread"
    )


def test_bulk_category_opens_nothing_unless_i_wrote_in_it():
    bulk = [msg(1, labels=["CATEGORY_PROMOTIONS", "INBOX"])]
    assert run(bulk).reason == "bulk_category"
    mine_then_theirs = [
        msg(1, frm=OWNER, to=(JEFF,), body=PHILLIP_ANSWERS, labels=["CATEGORY_SOCIAL"]),
        msg(2, hours=2, labels=["CATEGORY_SOCIAL"]),
    ]
    assert [s.loop_type for s in run(mine_then_theirs).open] == [
        LoopType.UNANSWERED_INBOUND
    ]


def test_calendar_mail_by_method_or_subject_opens_nothing():
    by_method = msg(1, calendar_method="REQUEST", subject="Meeting with the Kuos")
    by_subject = msg(1, subject="Invitation: Kuo closing @ Tue Sep 11, 2001")
    reply = msg(1, subject="Re: Invitation: Kuo closing @ Tue Sep 11, 2001")
    assert run([by_method]).open == []
    assert run([by_subject]).open == []
    assert len(run([reply]).open) == 1  # a human reply to an invitation is mail


def test_auto_submitted_opens_nothing_but_no_is_human():
    assert run([msg(1, auto_submitted="auto-replied")]).open == []
    assert len(run([msg(1, auto_submitted="no")]).open) == 1


def test_24h_inbound_grace_holds_then_opens():
    verdict = run([msg(1)], now=T0 + timedelta(hours=23))
    assert verdict.open == [] and verdict.reason == "grace"
    assert verdict.recheck_at == T0 + timedelta(hours=24)
    assert len(run([msg(1)], now=T0 + timedelta(hours=24)).open) == 1


def test_72h_outbound_grace_holds_then_opens():
    thread = [msg(1), msg(2, frm=OWNER, to=(JEFF,), hours=1, body=PHILLIP_ASKS)]
    held = run(thread, now=T0 + timedelta(hours=72))
    assert held.open == [] and held.reason == "grace"
    assert held.recheck_at == T0 + timedelta(hours=73)
    opened = run(thread, now=T0 + timedelta(hours=73))
    assert [s.loop_type for s in opened.open] == [LoopType.UNANSWERED_OUTBOUND]
    assert opened.open[0].counterparty_email == JEFF
    assert LoopType.UNANSWERED_INBOUND in opened.close


def test_question_inside_a_url_does_not_count():
    fyi = "FYI the listing: http://www.austintx.com/listing.asp?id=91&acres=yes\n\nPhillip"
    thread = [msg(1, frm=OWNER, to=(JEFF,), body=fyi)]
    verdict = run(thread)
    assert verdict.open == [] and verdict.reason == "no_question"


def test_acknowledgement_only_reply_does_not_answer_a_question():
    thanks = [msg(1), msg(2, frm=OWNER, to=(JEFF,), hours=1, body="Thanks!\n\nPhillip")]
    verdict = run(thanks)
    assert [s.loop_type for s in verdict.open] == [LoopType.UNANSWERED_INBOUND]
    assert LoopType.UNANSWERED_INBOUND not in verdict.close
    got_it = [msg(1), msg(2, frm=OWNER, to=(JEFF,), hours=1, body="Got it, thanks.")]
    assert LoopType.UNANSWERED_INBOUND not in run(got_it).close
    will_do = [msg(1), msg(2, frm=OWNER, to=(JEFF,), hours=1, body="Will do")]
    verdict = run(will_do)
    assert verdict.open == [] and LoopType.UNANSWERED_INBOUND in verdict.close


def test_nudge_does_not_restart_the_clock():
    thread = [
        msg(1),
        msg(2, hours=30, body="Bumping this.  Let me know.\n\nJeff"),
    ]
    verdict = run(thread, now=T0 + timedelta(hours=31))
    assert verdict.open[0].opened_at == T0  # the first unanswered message
    assert verdict.open[0].last_activity_at == T0 + timedelta(hours=30)


def test_turn_flip_closes():
    theirs_last = run(
        [msg(1, frm=OWNER, to=(JEFF,), body=OFFER_REPLY), msg(2, hours=3)]
    )
    assert theirs_last.close == [LoopType.UNANSWERED_OUTBOUND]
    mine_last = run(
        [msg(1), msg(2, frm=OWNER, to=(JEFF,), hours=3, body=PHILLIP_ANSWERS)]
    )
    assert mine_last.close == [LoopType.UNANSWERED_INBOUND]
    assert mine_last.open == []  # "I will let you know when." asks nothing


def test_muted_sender_and_muted_thread_open_nothing():
    assert run([msg(1)], mutes=Mutes(senders=frozenset({JEFF}))).reason == "muted"
    assert run([msg(1)], mutes=Mutes(threads=frozenset({"t-kuo"}))).reason == "muted"
    outbound = [msg(1, frm=OWNER, to=(JEFF,), body=PHILLIP_ASKS)]
    assert run(outbound, mutes=Mutes(senders=frozenset({JEFF}))).reason == "muted"


def test_message_without_date_is_not_substantive():
    assert run([_undated()]).reason == "no_substantive_messages"


def _undated():  # type: ignore[no-untyped-def]
    m = msg(1)
    m.date = None
    return m


def test_messages_after_reference_time_are_ignored_for_replay():
    thread = [msg(1), msg(2, frm=OWNER, to=(JEFF,), hours=30, body=PHILLIP_ANSWERS)]
    before_reply = run(thread, now=T0 + timedelta(hours=29))
    assert [s.loop_type for s in before_reply.open] == [LoopType.UNANSWERED_INBOUND]
    after_reply = run(thread, now=T0 + timedelta(hours=31))
    assert after_reply.open == []
