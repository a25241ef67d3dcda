"""MIME parsing (SPEC §6.1, §6.2, §11): real messages from CPython's email tests,
talon's client replies and the Gmail API, plus hand-built RFC 2047 and broken
charset cases."""

from __future__ import annotations

import json

import pytest

from connectors.mail.parsing import (
    MAX_BODY_CHARS,
    MailParseError,
    parse_gmail_message,
    parse_rfc822,
    subject_key,
)
from loops.definitions import is_noise_sender
from tests.connectors.helpers import CPYTHON, GMAIL, TALON


def _read(path) -> bytes:  # type: ignore[no-untyped-def]
    return path.read_bytes()


def test_every_cpython_torture_message_parses_without_crashing() -> None:
    """Bad boundaries, missing separators, DSNs and digests parse; only a file
    without any header (msg_19) is refused, as not mail at all."""
    parsed = {}
    for path in sorted(CPYTHON.glob("msg_*.txt")):
        if path.name == "msg_19.txt":
            with pytest.raises(MailParseError, match="No mail headers"):
                parse_rfc822(_read(path))
            continue
        parsed[path.name] = parse_rfc822(_read(path))
    assert parsed["msg_17.txt"].subject == "Here is your dingus fish"
    assert "StartBoundaryNotFoundDefect" in parsed["msg_17.txt"].defects
    assert parsed["msg_35.txt"].subject == "here's something interesting"
    assert parsed["msg_02.txt"].subject == "Ppp digest, Vol 1 #2 - 5 msgs"


def test_multipart_prefers_text_plain_and_skips_empty_parts() -> None:
    digest = parse_rfc822(_read(CPYTHON / "msg_02.txt"))
    assert digest.body.startswith("Send Ppp mailing list submissions to")
    empty_parts = parse_rfc822(_read(CPYTHON / "msg_08.txt"))
    assert empty_parts.subject == "Lyrics"
    assert empty_parts.body == ""


def test_attachments_are_metadata_only() -> None:
    raw = (
        b"From: a@example.org\r\nTo: b@example.org\r\nSubject: report\r\n"
        b"Message-ID: <att@example.org>\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n'
        b"--b\r\nContent-Type: text/plain\r\n\r\nAttached is the report.\r\n"
        b"--b\r\nContent-Type: application/pdf\r\n"
        b'Content-Disposition: attachment; filename="q3.pdf"\r\n'
        b"Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--b--\r\n"
    )
    msg = parse_rfc822(raw)
    assert msg.body == "Attached is the report."
    assert [(a["filename"], a["mime_type"]) for a in msg.attachments] == [
        ("q3.pdf", "application/pdf")
    ]


def test_html_only_message_is_converted_to_text() -> None:
    raw = (
        b"From: Ann <ann@example.org>\r\nTo: bob@example.org\r\nSubject: html\r\n"
        b"Message-ID: <h1@example.org>\r\nDate: Mon, 2 Apr 2012 20:21:52 +0400\r\n"
        b"Content-Type: text/html; charset=utf-8\r\n\r\n"
        b"<html><head><style>p{color:red}</style></head><body><p>Hello <b>Bob</b></p>"
        b"<p>See <a href='https://example.org/x'>the plan</a></p></body></html>"
    )
    msg = parse_rfc822(raw)
    assert "Hello Bob" in msg.body
    assert "the plan" in msg.body
    assert "color:red" not in msg.body and "<p>" not in msg.body


def test_rfc2047_headers_are_decoded() -> None:
    raw = (
        "From: =?utf-8?b?UmFmYcWCIE1pxYJlY2tp?= <Rafal@Example.org>\r\n"
        "To: =?iso-8859-1?q?Andr=E9?= <andre@example.org>, bob@example.org\r\n"
        "Subject: =?iso-8859-1?Q?Essai_accentu=E9?= =?utf-8?q?_=E2=9C=93?=\r\n"
        "Message-ID: <rfc2047@example.org>\r\n"
        "Date: Wed,  1 Jun 2016 22:00:54 +0200\r\n\r\nbody\r\n"
    ).encode("ascii")
    msg = parse_rfc822(raw)
    assert msg.subject == "Essai accentué ✓"
    assert msg.from_ is not None
    assert (msg.from_.name, msg.from_.addr) == ("Rafał Miłecki", "rafal@example.org")
    assert [(a.name, a.addr) for a in msg.to] == [
        ("André", "andre@example.org"),
        ("", "bob@example.org"),
    ]
    assert msg.date is not None and msg.date.isoformat() == "2016-06-01T20:00:54+00:00"


def test_broken_charsets_survive_with_replacement_and_a_defect() -> None:
    """A body declared utf-8 holding Latin-1 bytes, an unknown charset label and an
    encoded word with invalid bytes: all decode, nothing raises."""
    raw = (
        b"From: x@example.org\r\nTo: y@example.org\r\n"
        b"Subject: =?UTF-8?q?Rafa=FF=FF=20Mi=FF=FFecki?=\r\n"
        b"Message-ID: <broken@example.org>\r\nDate: not a date\r\n"
        b"Content-Type: text/plain; charset=x-no-such-charset\r\n\r\n"
        b"Caf\xe9 cr\xe8me at 10\r\n"
    )
    msg = parse_rfc822(raw)
    assert msg.subject.startswith("Rafa") and msg.subject.endswith("ecki")
    assert msg.body == "Café crème at 10"
    assert msg.date is None
    assert "date: unparseable" in msg.defects
    assert any(d.startswith("charset:") for d in msg.defects)


def test_raw_8bit_headers_are_decoded() -> None:
    raw = (
        "From: Jürgen <j@example.org>\r\nTo: y@example.org\r\nSubject: Grüße\r\n"
        "Message-ID: <8bit@example.org>\r\n\r\nHallo\r\n"
    ).encode()
    msg = parse_rfc822(raw)
    assert msg.subject == "Grüße"
    assert msg.from_ is not None and msg.from_.name == "Jürgen"


@pytest.mark.parametrize(
    ("name", "reply"),
    [
        ("gmail.eml", "Hello"),
        ("outlook.eml", "Hello"),
        ("apple_mail.eml", "Hello"),
        ("thunderbird.eml", "Hello"),
        ("android.eml", "Hello"),
        ("yahoo.eml", "Hello"),
    ],
)
def test_quoted_reply_tail_is_trimmed_for_each_mail_client(
    name: str, reply: str
) -> None:
    msg = parse_rfc822(_read(TALON / name))
    assert msg.body.strip() == reply
    # The untrimmed text keeps the quote for threading by quoted text.
    assert len(msg.full_text.strip()) > len(msg.body)


def test_message_body_is_capped_at_8000_characters() -> None:
    raw = (
        b"From: a@example.org\r\nSubject: long\r\nMessage-ID: <long@example.org>\r\n\r\n"
        + b"word " * 5000
    )
    msg = parse_rfc822(raw)
    assert len(msg.body) == MAX_BODY_CHARS
    assert msg.body.endswith("[truncated]")


def test_message_without_message_id_gets_a_content_hash_key() -> None:
    raw = b"From: a@example.org\r\nSubject: no id\r\n\r\nhello\r\n"
    msg = parse_rfc822(raw)
    assert msg.key.startswith("sha256:") and len(msg.key) == 7 + 64
    assert parse_rfc822(raw).key == msg.key


def test_calendar_method_list_unsubscribe_and_auto_submitted_are_read() -> None:
    raw = (
        b"From: cal@example.org\r\nTo: me@example.org\r\nSubject: Invitation: Sync\r\n"
        b"Message-ID: <cal@example.org>\r\nList-Unsubscribe: <mailto:u@example.org>\r\n"
        b"Auto-Submitted: auto-generated\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: multipart/alternative; boundary="b"\r\n\r\n'
        b"--b\r\nContent-Type: text/plain\r\n\r\nJoin us\r\n"
        b"--b\r\nContent-Type: text/calendar; method=REQUEST; charset=utf-8\r\n\r\n"
        b"BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n--b--\r\n"
    )
    msg = parse_rfc822(raw)
    assert msg.calendar_method == "REQUEST"
    assert msg.list_unsubscribe is True
    assert msg.auto_submitted == "auto-generated"
    assert msg.body == "Join us"


def test_list_headers_without_list_unsubscribe_mark_mailing_list_mail() -> None:
    # An older Mailman list: List-Id, X-BeenThere and X-Mailman-Version, no
    # List-Unsubscribe. A person's own message carries none of them.
    head = (
        b"From: me@example.org\r\nTo: Tinkerers <tinkerers@club.example>\r\n"
        b"Subject: [Tinker] backups\r\nMessage-ID: <%d@example.org>\r\n"
    )
    listed = parse_rfc822(
        head % 1 + b"List-Id: Tinkerers <tinkerers.club.example>\r\n"
        b"X-BeenThere: tinkerers@club.example\r\nX-Mailman-Version: 1.1\r\n"
        b"\r\nHas anyone got the backup agent running?\r\n"
    )
    assert listed.mailing_list is True and listed.list_unsubscribe is False
    plain = parse_rfc822(head % 2 + b"\r\nHas anyone got it running?\r\n")
    assert plain.mailing_list is False


def test_noise_senders_match_spec_list() -> None:
    assert is_noise_sender("no-reply@accounts.example.com")
    assert is_noise_sender("notifications@github.com")
    assert is_noise_sender("MAILER-DAEMON@example.org")
    assert not is_noise_sender("jane@example.org")


def test_subject_key_strips_reply_prefixes_and_list_tags() -> None:
    assert subject_key("RE: Re: FW: West Position") == "west position"
    assert subject_key("Re: [ILUG] Sun Solaris..") == "sun solaris.."
    assert subject_key("[zzzzteana] Re: That wacky imam") == "that wacky imam"
    assert subject_key("Fwd:   Hello   world") == "hello world"


def test_gmail_full_format_message_is_parsed_like_rfc822() -> None:
    payload = json.loads(
        (GMAIL / "multipartAlternativeWithAttachmentsMessage.json").read_text()
    )
    msg = parse_gmail_message(payload)
    assert msg.key == payload["id"]
    assert msg.gmail_thread_id == payload["threadId"]
    assert "SENT" in msg.labels
    assert msg.subject == "This is my jam"
    assert msg.body.startswith("cool")
    names = sorted(a["filename"] for a in msg.attachments)
    assert names == ["a3Ln90e_460s.jpg", "feelthebern.jpg"]
    assert all("attachment_id" in a for a in msg.attachments)


def test_gmail_message_without_headers_is_a_permanent_error() -> None:
    with pytest.raises(MailParseError) as excinfo:
        parse_gmail_message({"id": "x", "payload": {"mimeType": "text/plain"}})
    assert excinfo.value.permanent is True


def test_a_file_that_is_not_mail_is_refused_not_imported() -> None:
    """Regression (fresh-clone check): /etc/passwd imported as one undated message,
    because its ``name:value`` lines parse as headers."""
    with pytest.raises(MailParseError, match="Not a mail message"):
        parse_rfc822(
            b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/bin/sh\n"
        )


LIBRARY_REPLY_TEXTS = [
    "Sounds good, see you then.\n\nOn Mon, Jun 3, 2024 at 9:00 AM Ann Quill "
    "<ann@quill.example> wrote:\n> Shall we meet at ten?\n",
    "\n\nOn Mon, Jun 3, 2024 at 9:00 AM Ann <ann@quill.example> wrote:\n> first\n"
    "Answer below the quote.\n",
    "Thanks!\n\n-----Original Message-----\nFrom: Bo Tamsin [mailto:bo@tamsin.example]"
    "\nSent: Tuesday, May 7, 2024 10:01 AM\nTo: Robin\nSubject: numbers\n\nHere.\n"
    "\n-----Original Message-----\nFrom: Robin\nSent: Monday\n\nNumbers?\n",
    "Best regards,\nRobin Quill\nSent from my phone\n",
    "Am 03.06.2024 um 09:00 schrieb Ann <ann@quill.example>:\n> Hallo\n",
    "",
    "no headers at all, just text\r\nwith CRLF\r\n__________\nunder a rule",
]


@pytest.mark.parametrize("text", LIBRARY_REPLY_TEXTS)
def test_latest_reply_is_the_librarys_parse_reply(text: str) -> None:
    """``latest_reply`` skips mail-parser-reply's signature and disclaimer pass
    (its ``parse_reply`` never reads it) and answers what the library answers."""
    from loops.definitions import latest_reply, reply_parser

    assert latest_reply(text) == reply_parser().parse_reply(text)


HEADER_SCAN_TEXTS = [
    *LIBRARY_REPLY_TEXTS,
    "\nFrom: Ann\nTo: Bo\n",
    "From: Ann\nSent: Monday\nTo: Bo\nSubject: x\n\nbody",
    "> > On Tue, 4 Jun 2024, Bo wrote:\n> > quoted\nreply\n",
    "Le 3 juin 2024 à 09:00, Ann a écrit :\n> Bonjour\n",
    "El lun, 3 jun 2024, Ann escribió:\n> Hola\n",
    "De : Ann\nEnvoyé : lundi\nÀ : Bo\nObjet : x\n",
    "De: Ann\nEnviado: lunes\nPara: Bo\nAsunto: x\n",
    "Von: Ann\nGesendet: Montag\nAn: Bo\nBetreff: x\n",
    "*From:* Ann\n*Sent:* Monday\n\n\n\n-----Original Message-----\n",
    "text\n\n\n  :\n  :\nmore\n",
    "On Mon Ann wrote:\nOn Tue Bo wrote:\nOn Wed Cy wrote:",
    "x" * 50 + "From: in the middle\nTo: of a line\n",
]


@pytest.mark.parametrize("text", HEADER_SCAN_TEXTS)
def test_header_scan_at_line_starts_finds_what_findall_finds(text: str) -> None:
    """``findall_at_lines`` tries the library's header expression only where a
    header can start (the text's start, each newline and the position after it)
    and finds exactly what ``findall`` finds trying every character, on the text
    as the library normalises it and as given."""
    from mailparser_reply.parser import EmailMessage

    from loops.definitions import _header_regex, findall_at_lines, reply_parser

    languages = reply_parser().languages
    pattern = _header_regex(tuple(EmailMessage(text="", languages=languages).languages))
    for variant in (text, EmailMessage(text=text, languages=languages).text):
        assert findall_at_lines(pattern, variant) == pattern.findall(variant)


# --- page text: the writer's own words wherever they sit (SPEC §6.1) --------------


def _text_mail(body: str, *, subject: str = "Re: Plan") -> bytes:
    return (
        "From: Bo Tamsin <bo@tamsin.example>\r\nTo: ann@quill.example\r\n"
        f"Subject: {subject}\r\nMessage-ID: <page-text@tamsin.example>\r\n"
        "Date: Tue, 4 Jun 2024 10:00:00 +0000\r\n\r\n" + body.replace("\n", "\r\n")
    ).encode()


def test_bottom_posted_reply_keeps_the_answer_below_the_quote() -> None:
    """A greeting above "On … wrote:" is not the whole reply: the answer written
    below the quote is the writer's and stays on the page; the quote and its
    attribution do not."""
    msg = parse_rfc822(
        _text_mail(
            "Hi Ann,\n\nOn Mon, Jun 3, 2024 at 9:00 AM Ann Quill <ann@quill.example>"
            " wrote:\n> Can you send the floor plan?\n\nAttached, with the"
            " measurements.\n\nBo\n"
        )
    )
    assert msg.body == "Hi Ann,\n\nAttached, with the measurements.\n\nBo"
    assert msg.has_quote


def test_interleaved_reply_keeps_every_answer() -> None:
    """Own words above, between and below the quote blocks all stay, in order."""
    msg = parse_rfc822(
        _text_mail(
            "Answers inline.\n\nOn Mon, 3 Jun 2024, Ann Quill wrote:\n"
            "> Can you send the floor plan?\nAttached.\n>\n> And the budget?\n"
            "By Friday.\n> Who signs it?\nRobin does.\n"
        )
    )
    assert msg.body == "Answers inline.\n\nAttached.\nBy Friday.\nRobin does."


def test_interleaved_reply_quoted_with_a_parenthesis_keeps_every_answer() -> None:
    """Real list mail: an old client quotes with ") " instead of "> ". The
    writer's answers between the quotes are the message; before, the body held
    nothing of them (everything under "On … wrote:" was dropped)."""
    msg = parse_rfc822(
        _text_mail(
            "On 19/08/02 12:29 -0500, Ann Quill wrote:\n"
            ") This isn't a multipart message though.\n\n"
            "Then the whole thing is one part.\n\n"
            ") I see methods 1-4 in the manual page.\n\n"
            "Method 5 is in the source code.\n"
        )
    )
    assert (
        msg.body
        == "Then the whole thing is one part.\n\nMethod 5 is in the source code."
    )


@pytest.mark.parametrize(
    "attribution",
    [
        "Ann Quill <ann@quill.example> writes:",
        "Ann Quill wrote:",
        "At 10:02 AM 6/3/2024 -0400, you wrote:",
        "Quoting Ann Quill (ann@quill.example):",
        "On Mon, 3 Jun 2024 09:00:00 -0400\nAnn Quill <ann@quill.example> wrote:",
    ],
)
def test_writes_attribution_is_dropped_and_the_answer_kept(attribution: str) -> None:
    """Attribution lines in any form ("X writes:", "X wrote:", "At … you wrote:",
    "Quoting X:", an "On … wrote:" wrapped over two lines) are dropped with the
    quote under them, also when the quote holds an older "On … wrote:" header;
    the answer below is kept."""
    msg = parse_rfc822(
        _text_mail(
            f"{attribution}\n> On Sun, Jun 2, 2024, Bo Tamsin wrote:\n>> Plan attached.\n"
            "> Is the kitchen wall load-bearing?\n\nIt is not; the beam above it is."
            "\n"
        )
    )
    assert msg.body == "It is not; the beam above it is."


@pytest.mark.parametrize(
    ("subject", "forward"),
    [
        (
            "Re: Kitchen",
            "--- begin forwarded text\n\nDate: Mon, 3 Jun 2024\nFrom: Cy Vale\n\n"
            "The beam is rated for 400 kg.\n\n--- end forwarded text",
        ),
        (
            "Fw: Kitchen",
            "-----Original Message-----\nFrom: Cy Vale [mailto:cy@vale.example]\n"
            "Sent: Monday, June 3, 2024 9:00 AM\nTo: Bo Tamsin\nSubject: Kitchen\n\n"
            "The beam is rated for 400 kg.",
        ),
        (
            "Kitchen",
            "---------- Forwarded message ---------\nFrom: Cy Vale <cy@vale.example>"
            "\nDate: Mon, Jun 3, 2024\nSubject: Kitchen\nTo: Bo <bo@tamsin.example>"
            "\n\nThe beam is rated for 400 kg.",
        ),
    ],
)
def test_forward_keeps_the_forwarded_text_on_the_page(
    subject: str, forward: str
) -> None:
    """A forward with a note above keeps the forwarded message on the page (its
    marker line on): it is often the only copy in the mailbox. A reply's quoted
    history is still cut (``test_quoted_reply_tail_is_trimmed_for_each_mail_client``)."""
    msg = parse_rfc822(
        _text_mail(f"See the load figure below.\n\n{forward}\n", subject=subject)
    )
    assert msg.body.startswith("See the load figure below.\n\n")
    assert "The beam is rated for 400 kg." in msg.body
    assert forward.splitlines()[0] in msg.body


def test_reply_with_outlook_history_still_cuts_it() -> None:
    """An "-----Original Message-----" block under a reply (not a forward) is quoted
    history: cut from the page."""
    msg = parse_rfc822(
        _text_mail(
            "Noted.\n\n-----Original Message-----\nFrom: Ann Quill\nSent: Monday\n"
            "To: Bo Tamsin\nSubject: Plan\n\nCould you send the file?\n"
        )
    )
    assert msg.body == "Noted."


def test_page_text_survives_the_reply_library_failing(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The library's expressions must never fail an import: when mail-parser-reply
    raises on a text, the page keeps the writer's words, quotes still dropped."""
    import loops.definitions

    class Broken:
        def __init__(self, **_: object) -> None:
            raise RecursionError("the library gave up")

    monkeypatch.setattr(loops.definitions, "EmailMessage", Broken)
    msg = parse_rfc822(
        _text_mail("Attached, with the measurements.\n\n> Can you send it?\n\nBo\n")
    )
    assert msg.body == "Attached, with the measurements.\n\nBo"
