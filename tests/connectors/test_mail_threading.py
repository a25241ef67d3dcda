"""Threading and dedup on real mail (SPEC §5.2 last paragraph, §6.2).

Expected values were checked by hand against the copied messages (see
tests/data/SOURCE.md): the SpamAssassin slice has five header-threaded
conversations and seven single messages; the Enron slice (no In-Reply-To or
References at all) has seven conversations and two single messages once the copies
in _sent_mail/, sent/ and all_documents/ are removed.
"""

from __future__ import annotations

from datetime import UTC, datetime

from connectors.mail.parsing import ParsedMail, parse_rfc822
from connectors.mail.threading import (
    KnownMessage,
    dedupe,
    folder_labels,
    owner_namesakes,
    sent_folder_senders,
    thread_messages,
)
from loops.definitions import is_mine
from tests.connectors.helpers import ENRON, SPAMASSASSIN, parse_mailbox


def _by_subject(
    threads: dict[str, list[ParsedMail]],
) -> dict[str, list[list[ParsedMail]]]:
    """subject key of the first message → the threads with that subject."""
    out: dict[str, list[list[ParsedMail]]] = {}
    for members in threads.values():
        out.setdefault(members[0].subject_key, []).append(members)
    return out


def test_header_threading_rebuilds_spamassassin_conversations() -> None:
    messages, duplicates = dedupe(parse_mailbox(SPAMASSASSIN))
    assert (len(messages), len(duplicates)) == (26, 0)
    threads = thread_messages(messages, owner_addresses=set())
    sizes = sorted((len(m) for m in threads.values()), reverse=True)
    assert sizes == [5, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1]
    by_subject = {m[0].subject_key: m for m in threads.values() if len(m) > 1}
    solaris = by_subject["sun solaris.."]
    # The original is stamped after the first reply; the reply quotes it, a later
    # reply's parent is missing from the slice: all five stay one conversation.
    assert [m.from_addr for m in solaris] == [
        "fergal.moran@wasptech.com",
        "kiall@redpie.com",
        "valen@tuatha.org",
        "padraig.brady@corvil.com",
        "albert.white@ireland.sun.com",
    ]
    suse = by_subject["newbie seeks advice - suse 7.2"]
    assert suse[0].from_addr == "peter@staunton.ie" and len(suse) == 4


def test_thread_ids_are_stable_across_runs() -> None:
    first = thread_messages(
        dedupe(parse_mailbox(SPAMASSASSIN))[0], owner_addresses=set()
    )
    second = thread_messages(
        dedupe(parse_mailbox(SPAMASSASSIN))[0], owner_addresses=set()
    )
    assert sorted(first) == sorted(second)


def test_duplicates_across_folders_are_dropped_by_message_id_else_content() -> None:
    """Enron copies in sent/, _sent_mail/ and all_documents/ carry different
    Message-IDs; their From, Date, subject and body match."""
    parsed = parse_mailbox(ENRON)
    messages, duplicates = dedupe(parsed)
    assert (len(parsed), len(messages), len(duplicates)) == (33, 28, 5)
    enron = [m for m in messages if m.subject == "Enron"]
    assert len(enron) == 1
    # The kept copy came from a sent folder, so it is mine.
    assert "SENT" in enron[0].labels


def test_headerless_enron_mail_threads_by_subject_participants_and_quotes() -> None:
    messages, _ = dedupe(parse_mailbox(ENRON))
    threads = thread_messages(messages, owner_addresses={"pallen@enron.com"})
    assert len(threads) == 9
    by_subject = _by_subject(threads)
    sizes = {k: sorted(len(t) for t in v) for k, v in by_subject.items()}
    assert sizes == {
        "distribution form": [5],
        "confirmation: risk management simulation meeting 10/30/01": [5],
        "answer": [3],
        "west position": [4],
        "huntley/question": [5],
        "po spreadsheets": [2],
        "properties for sale": [2],
        # Same subject, different correspondents: two conversations.
        "enron": [1, 1],
    }


def test_sent_folders_and_owner_addresses_decide_which_messages_are_mine() -> None:
    """SPEC §5.1: SENT (a sent folder) or a From among the owner addresses."""
    messages, _ = dedupe(parse_mailbox(ENRON))
    threads = thread_messages(messages, owner_addresses={"pallen@enron.com"})
    by_subject = _by_subject(threads)
    distribution = by_subject["distribution form"][0]
    assert [is_mine(m, {"pallen@enron.com"}) for m in distribution] == [
        False,
        True,
        True,
        False,
        True,
    ]
    west = by_subject["west position"][0]
    assert [is_mine(m, set()) for m in west] == [True, True, True, False]
    assert west[-1].from_addr == "heather.dunton@enron.com"


def test_folder_names_map_to_labels() -> None:
    assert folder_labels("sent_items") == ["SENT"]
    assert folder_labels("_sent_mail") == ["SENT"]
    assert folder_labels("[Gmail]/Sent Mail") == ["SENT"]
    assert folder_labels("Junk E-mail") == ["SPAM"]
    assert folder_labels("Trash") == ["TRASH"]
    assert folder_labels("deleted_items") == []
    assert folder_labels("inbox") == []


def _msg(raw: str) -> ParsedMail:
    return parse_rfc822(raw.encode())


def test_a_later_headerless_reply_joins_the_thread_of_an_earlier_import() -> None:
    reply = _msg(
        "From: bob@example.org\nTo: me@example.org\nSubject: RE: Budget\n"
        "Message-ID: <r2@example.org>\nDate: Tue, 2 Oct 2001 10:00:00 -0000\n\nOk.\n"
    )
    known = [
        KnownMessage(
            key="<r1@example.org>",
            thread_id="mknownthread0001",
            subject_key="budget",
            participants=("bob@example.org", "me@example.org"),
            date=datetime(2001, 10, 1, tzinfo=UTC),
        )
    ]
    threads = thread_messages([reply], owner_addresses={"me@example.org"}, known=known)
    assert list(threads) == ["mknownthread0001"]


def test_a_reply_to_someone_else_with_the_same_subject_is_another_thread() -> None:
    first = _msg(
        "From: me@example.org\nTo: ann@example.org\nSubject: Lunch\n"
        "Message-ID: <l1@example.org>\nDate: Mon, 1 Oct 2001 10:00:00 -0000\n\nNoon?\n"
    )
    other = _msg(
        "From: carl@example.org\nTo: me@example.org\nSubject: Re: Lunch\n"
        "Message-ID: <l2@example.org>\nDate: Mon, 1 Oct 2001 11:00:00 -0000\n\nSure.\n"
    )
    threads = thread_messages([first, other], owner_addresses={"me@example.org"})
    assert len(threads) == 2


def test_only_regular_senders_of_sent_folders_become_owner_addresses() -> None:
    """A colleague's message filed in Sent Items does not make them 'me'."""

    def sent(sender: str, n: int) -> ParsedMail:
        msg = _msg(
            f"From: {sender}\nTo: x@example.org\nSubject: s{n}\n"
            f"Message-ID: <{n}.{sender}>\n\nbody {n}\n"
        )
        msg.labels = ["SENT"]
        return msg

    messages = [sent("me@example.org", n) for n in range(30)]
    messages += [sent("colleague@example.org", 99)]
    assert sent_folder_senders(messages) == {"me@example.org"}


def _raw(mid: str, subject: str, frm: str, date: str, extra: str = "") -> bytes:
    return (
        f"From: {frm}\nTo: list@example.org\nSubject: {subject}\n"
        f"Date: {date}\nMessage-ID: <{mid}>\n{extra}\nBody of {subject}.\n"
    ).encode()


def test_a_bogus_parent_id_without_at_joins_nothing() -> None:
    """Real lkml mail (notmuch corpus): git send-email's prompt answered "yes" left
    ``In-Reply-To: <yes>`` / ``References: <yes>`` on unrelated series, and the
    phantom parent folded a 2010 cifs series into a 2009 notmuch thread. An id
    without "@" is no message id (RFC 5322 msg-id is id-left "@" id-right)."""
    messages = [
        parse_rfc822(
            _raw(
                "1-a@host.example",
                "[PATCH 1/2] lib/message: add flags",
                "Stefan <stefan@example.org>",
                "Sat, 21 Nov 2009 16:11:00 -0800",
                "In-Reply-To: <yes>\nReferences: <yes>\n",
            )
        ),
        parse_rfc822(
            _raw(
                "2-b@host.example",
                "[RFC][PATCH 00/10] cifs: local caching",
                "Suresh <suresh@example.org>",
                "Tue, 22 Jun 2010 20:50:05 +0530",
                "In-Reply-To: <yes>\nReferences: <yes>\n",
            )
        ),
        parse_rfc822(
            _raw(
                "3-c@host.example",
                "Re: [RFC][PATCH 00/10] cifs: local caching",
                "Jeff <jeff@example.org>",
                "Tue, 22 Jun 2010 21:37:00 +0530",
                "In-Reply-To: <2-b@host.example>\n"
                "References: <yes> <2-b@host.example>\n",
            )
        ),
    ]
    assert messages[0].in_reply_to is None and messages[0].references == []
    assert messages[2].references == ["2-b@host.example"]
    threads = thread_messages(messages, owner_addresses=set())
    assert sorted(len(m) for m in threads.values()) == [1, 2]


def test_an_in_reply_to_phrase_naming_the_author_is_no_parent_id() -> None:
    """Real SpamAssassin-list mail (exmh/nmh): ``In-Reply-To: Message from "Craig"
    <craig@…> of "<date>." <id>`` names the author answered before the id. Taken
    as the parent, the address joined every reply to Craig, months apart and on
    unrelated subjects, into one thread."""
    phrase = (
        'In-Reply-To: Message from "Craig Hughes" <craig@example.org>\n'
        '   of "{date}." <{parent}>\n'
    )
    messages = [
        parse_rfc822(
            _raw(
                "p1@example.org",
                "release notes",
                "Craig Hughes <craig@example.org>",
                "Mon, 02 Sep 2002 22:37:10 -0700",
            )
        ),
        parse_rfc822(
            _raw(
                "p2@example.org",
                "corpus of mail",
                "Craig Hughes <craig@example.org>",
                "Wed, 09 Oct 2002 08:37:09 -0700",
            )
        ),
        parse_rfc822(
            _raw(
                "r1@example.net",
                "Re: release notes",
                "Justin <justin@example.net>",
                "Tue, 03 Sep 2002 13:38:29 +0100",
                "Cc: craig@example.org\n"
                + phrase.format(
                    date="Mon, 02 Sep 2002 22:37:10 PDT", parent="p1@example.org"
                ),
            )
        ),
        parse_rfc822(
            _raw(
                "r2@example.net",
                "Re: corpus of mail",
                "Justin <justin@example.net>",
                "Wed, 09 Oct 2002 17:23:25 +0100",
                "Cc: craig@example.org\n"
                + phrase.format(
                    date="Wed, 09 Oct 2002 08:37:09 PDT", parent="p2@example.org"
                ),
            )
        ),
    ]
    assert [m.in_reply_to for m in messages[2:]] == ["p1@example.org", "p2@example.org"]
    threads = thread_messages(messages, owner_addresses=set())
    assert sorted(
        sorted(m.message_id for m in members) for members in threads.values()
    ) == [["p1@example.org", "r1@example.net"], ["p2@example.org", "r2@example.net"]]


def test_an_in_reply_to_without_angle_brackets_still_names_the_parent() -> None:
    parent = parse_rfc822(
        _raw(
            "q1@example.org",
            "keys",
            "Ann <ann@example.org>",
            "Mon, 2 Sep 2002 10:00:00 +0000",
        )
    )
    reply = parse_rfc822(
        _raw(
            "r1@example.net",
            "the keys you asked about",
            "Ron <ron@example.net>",
            "Mon, 2 Sep 2002 11:00:00 +0000",
            "In-Reply-To: q1@example.org\n",
        )
    )
    assert reply.in_reply_to == "q1@example.org"
    threads = thread_messages([parent, reply], owner_addresses=set())
    assert sorted(len(m) for m in threads.values()) == [2]


def test_an_address_that_only_sends_under_my_own_name_is_mine() -> None:
    """My home address forwarding to work ("Pat Quill <pat@home.example>") is me,
    never a correspondent owed a reply; another person, or an address that also
    sends under another name, is not."""

    def sent(sender: str, n: int) -> ParsedMail:
        return _msg(
            f"From: {sender}\nTo: pat.quill@work.example\nSubject: s{n}\n"
            f"Message-ID: <{n}@x>\n\nbody {n}\n"
        )

    owners = {"pat.quill@work.example"}
    messages = [
        sent("Pat Quill <pat.quill@work.example>", 1),
        sent("Pat Quill <pat@home.example>", 2),
        sent('"Quill, Pat" <pat@home.example>', 3),
        sent("Dana Reyes <dana@example.net>", 4),
        sent("Pat Quill <desk@shared.example>", 5),
        sent("Front Desk <desk@shared.example>", 6),
    ]
    assert owner_namesakes(messages, owners) == {"pat@home.example"}


def test_the_owners_name_is_also_learned_from_mail_addressed_to_the_owner() -> None:
    """The owner sent nothing in the mailbox; others address the owner as "Pat
    Quill": an address sending only under that name is the owner's."""
    owners = {"pat.quill@work.example"}
    messages = [
        _msg(
            "From: Bob Kline <bob@kline.example>\n"
            "To: Pat Quill <pat.quill@work.example>\nSubject: Draw\n"
            "Message-ID: <1@x>\n\nCould you send me the draw file?\n"
        ),
        _msg(
            "From: Pat Quill <pat@home.example>\nTo: pat.quill@work.example\n"
            "Subject: Fwd: Draw\nMessage-ID: <2@x>\n\nforwarded\n"
        ),
    ]
    assert owner_namesakes(messages, owners) == {"pat@home.example"}
