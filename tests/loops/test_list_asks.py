"""My asks to a mailing list (SPEC §5.1a "my asks", issue 14: "a broadcast
question of mine to many recipients is one loop whose counterparty is the group";
LOOPS_LABELLING: a list is a valid counterparty only for my broadcast asks), and
the ask kinds the dev set's misses showed the ask detector lacked. Invented small
messages, invented names and addresses.

The list rule is behind ``settings.LOOPS_LIST_ASKS`` (off: on the labelled dev
set it keeps outbound precision below the 0.9 target), so the detector tests pass
``list_asks=True``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings

from loops.asks import find_asks
from loops.detectors import detect_thread
from loops.message import MailMessage
from loops.models import LoopStatus, LoopType, OpenLoop
from loops.pipeline import process_threads
from tests.loops.shapes import ROBIN

LIST = "gadget-users@lists.example.org"
QUIET_LIST = "tinkerers@club.example"  # a list address that looks like a person's
DANA = "dana.reyes@example.net"
EVAN = "evan.ito@example.com"
T0 = datetime(2024, 5, 6, 9, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=6)
HELP = (
    "I'm trying to get the gadget daemon to start at boot on my laptop, but it\n"
    "exits with status 13 when run from init.\n\n"
    "Has anyone seen this, or know where to start looking?\n\nRobin"
)


def post(
    n: int,
    body: str,
    *,
    frm: str = ROBIN,
    to: tuple[str, ...] = (LIST,),
    cc: tuple[str, ...] = (),
    hours: float = 0,
    subject: str = "[Gadget] daemon exits with status 13",
    thread: str = "t-list",
    reply_to: str | None = None,
    listed: bool = True,
) -> MailMessage:
    """A message delivered through the list (``mailing_list``) unless ``listed`` is
    False; ``reply_to`` names the message it answers (In-Reply-To)."""
    return MailMessage(
        message_id=f"<{n}.{thread}@mail.example>",
        thread_id=thread,
        subject=subject,
        from_addr=frm,
        to=list(to),
        cc=list(cc),
        date=T0 + timedelta(hours=hours),
        is_mine=frm == ROBIN,
        body=body,
        mailing_list=listed,
        list_unsubscribe=listed,
        in_reply_to=reply_to,
        references=[reply_to] if reply_to else [],
    )


def detect(messages: list[MailMessage], *, list_asks: bool = True):  # type: ignore[no-untyped-def]
    return detect_thread(
        messages, owner_addresses=[ROBIN], now=NOW, list_asks=list_asks
    )


def waiting(messages: list[MailMessage]) -> list[tuple[str, str]]:
    return [(s.loop_type, s.counterparty_email) for s in detect(messages).open]


def test_broadcast_ask_to_list_opens_one_loop_with_list_counterparty() -> None:
    # My help request to the list, chased once by me: one loop, on the list.
    bump = post(2, "Any ideas, anyone? Still stuck on this.", hours=30)
    assert waiting([post(1, HELP)]) == [(LoopType.UNANSWERED_OUTBOUND, LIST)]
    assert waiting([post(1, HELP), bump]) == [(LoopType.UNANSWERED_OUTBOUND, LIST)]
    # A list whose posting address looks like a person's is known by its headers.
    quiet = post(1, HELP, to=(QUIET_LIST,))
    assert waiting([quiet]) == [(LoopType.UNANSWERED_OUTBOUND, QUIET_LIST)]


def test_list_ask_opening_by_name_waits_on_that_recipient() -> None:
    body = "Dana, would you rather keep one plugin package or one per plugin?"
    ask = post(1, body, cc=(DANA,))
    assert waiting([ask]) == [(LoopType.UNANSWERED_OUTBOUND, DANA)]


def test_list_announcement_opens_no_outbound_loop() -> None:
    assert waiting([post(1, HELP)]) != []  # the same shape with an ask waits
    news = (
        "Gadget 2.3 is out: faster sync and a fixed installer.\n"
        "Please upgrade before reporting sync bugs.\n\nRobin"
    )
    verdict = detect([post(1, news, subject="[ANN] Gadget 2.3 released")])
    assert verdict.open == [] and verdict.reason == "mailing_list"


def test_list_poll_and_rhetorical_question_open_no_loop() -> None:
    assert waiting([post(1, HELP)]) != []
    for body in (
        "I have drafted a new layout for the config docs.\n\nComments?",
        "Any comments welcome.",
        "Here is my plan for the sync rewrite. What do you think?",
        "So the 500 MB image shrank to 51 MB and still plays?!",
        "Spent all Sunday on a script that renames my photos. Was I bored or what?",
    ):
        assert waiting([post(1, body)]) == [], body


def test_patch_or_commit_notice_posted_to_list_opens_no_loop() -> None:
    assert waiting([post(1, HELP)]) != []
    patch = (
        "This fixes the crash on empty folders. Can someone review it?\n\n"
        "Index: lib/sync.c\n--- lib/sync.c\n+++ lib/sync.c\n@@ -10,6 +10,8 @@\n"
    )
    commit = (
        "Update of /cvsroot/gadget/lib\nIn directory cvs1:/tmp/cvs-serv1/lib\n\n"
        "Modified Files: sync.c\nLog Message:\nwhy did this ever work? fixed\n"
    )
    assert waiting([post(1, patch, subject="[PATCH] sync: empty folders")]) == []
    assert waiting([post(1, commit, subject="CVS: gadget/lib sync.c")]) == []


def test_reply_from_any_list_member_closes_list_ask() -> None:
    ask = post(1, HELP)
    assert waiting([ask]) == [(LoopType.UNANSWERED_OUTBOUND, LIST)]
    # Someone I never wrote to answers on the list: the turn passes to them.
    answer = post(
        2,
        "Status 13 is a permission problem: the log file is not writable.",
        frm=EVAN,
        hours=5,
        subject="Re: [Gadget] daemon exits with status 13",
        reply_to=ask.message_id,
    )
    verdict = detect([ask, answer])
    assert verdict.open == [] and LoopType.UNANSWERED_OUTBOUND in verdict.close


def test_my_question_in_someone_elses_list_thread_opens_no_list_loop() -> None:
    assert waiting([post(1, HELP)]) != []
    theirs = post(
        1, "My backup job hangs every night.", frm=EVAN, subject="[Gadget] backups"
    )
    mine = post(
        2,
        "Does it hang when run by hand too?",
        hours=2,
        subject="Re: [Gadget] backups",
        reply_to=theirs.message_id,
    )
    assert waiting([theirs, mine]) == []
    # Nor does my reply to a post this mailbox lacks (In-Reply-To, "Re:").
    assert waiting([mine]) == []


def test_my_follow_up_without_an_ask_opens_no_list_loop() -> None:
    # My newest words on the thread report the fix: nothing is waited for.
    fixed = post(2, "Never mind: the log file was not writable. Fixed now.", hours=8)
    assert waiting([post(1, HELP)]) != []
    assert waiting([post(1, HELP), fixed]) == []


def test_list_ask_to_a_person_with_the_list_copied_opens_no_list_loop() -> None:
    assert waiting([post(1, HELP)]) != []
    copied = post(1, HELP, to=(DANA,), cc=(LIST,))
    assert waiting([copied]) == []


def test_list_asks_are_off_by_default() -> None:
    # Off until the rule reaches the issue 14 precision target on the dev set.
    assert settings.LOOPS_LIST_ASKS is False
    verdict = detect([post(1, HELP)], list_asks=False)
    assert verdict.open == [] and verdict.reason == "mailing_list"


@pytest.mark.django_db
def test_stored_list_ask_waits_on_the_list(robins_mailbox, store, settings) -> None:  # type: ignore[no-untyped-def]
    settings.LOOPS_LIST_ASKS = True
    store(
        robins_mailbox,
        [
            post(1, HELP),
            post(2, "Lunch on Friday?", to=(DANA,), thread="t-x", hours=100),
        ],
    )
    process_threads(source_id=robins_mailbox.id, thread_ids=["t-list"])
    loop = OpenLoop.objects.get(source=robins_mailbox, thread_id="t-list")
    assert loop.loop_type == LoopType.UNANSWERED_OUTBOUND
    assert loop.status == LoopStatus.OPEN and loop.counterparty_email == LIST


# --- ask kinds the dev set's misses showed ---------------------------------


def test_does_anyone_know_without_question_mark_is_an_ask() -> None:
    text = "Does anyone know how the daemon can log to syslog instead of a file."
    assert [a.kind for a in find_asks(text)] == ["question"]


def test_help_would_be_appreciated_is_a_request() -> None:
    for text in (
        "The tests pass but the build fails. Any help would be appreciated.",
        "Any suggestions of simpler setups would be much appreciated.",
    ):
        assert find_asks(text), text
    # Comments invited on an announcement are not a request (a poll).
    assert not find_asks("Version 2 is out. Feedback is welcome.")


def test_remember_to_is_a_request() -> None:
    assert [a.kind for a in find_asks("Remember to fax the signed lease to Dana.")] == [
        "request"
    ]
    assert find_asks("Don't forget to send Evan the keys.")
    ask = MailMessage(
        message_id="<1.t-fax@mail.example>",
        thread_id="t-fax",
        subject="",
        from_addr=ROBIN,
        to=[DANA],
        date=T0,
        is_mine=True,
        body="Robin\nCell 555-0100\n\nRemember to fax a copy of the lease to Evan.",
    )
    verdict = detect_thread([ask], owner_addresses=[ROBIN], now=NOW)
    assert [(s.loop_type, s.counterparty_email) for s in verdict.open] == [
        (LoopType.UNANSWERED_OUTBOUND, DANA)
    ]


def test_list_sponsor_footer_question_is_not_an_ask() -> None:
    footer = (
        "Fixed the typo in the manual.\n\n"
        "This sf.net email is sponsored by: Tired of that same old cell phone?"
    )
    assert find_asks(footer) == []


def test_greeting_before_a_name_still_names_the_addressee() -> None:
    # "Hi Dana," names Dana as "Dana," does: the list ask waits on her, and a
    # message to me and Dana that opens "Hi Dana," asks her, not me.
    body = "Hi Dana,\n\nwould you rather keep one plugin package or one per plugin?"
    assert waiting([post(1, body, cc=(DANA,))]) == [
        (LoopType.UNANSWERED_OUTBOUND, DANA)
    ]
    hand_off = MailMessage(
        message_id="<1.t-hand@mail.example>",
        thread_id="t-hand",
        subject="Lease",
        from_addr=EVAN,
        to=[ROBIN, DANA],
        date=T0,
        body="Hi Dana,\n\ncan you send me the signed lease?",
    )
    verdict = detect_thread([hand_off], owner_addresses=[ROBIN], now=NOW)
    assert verdict.open == []
