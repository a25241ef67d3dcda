"""What a page says and what it only repeats (issue 26): ``brain.mailtext`` marks
quoted history, quote lines, signatures and list footers as secondary, and the
chunker never mixes them with the page's own words. Pure functions."""

from __future__ import annotations

from brain.chunking import chunk_segments
from brain.mailtext import split_secondary


def secondary_text(body: str) -> str:
    return "\n".join(text for text, secondary in split_secondary(body) if secondary)


def own_text(body: str) -> str:
    return "\n".join(text for text, secondary in split_secondary(body) if not secondary)


OUTLOOK_REPLY = """meant the primary, not the election.

-----Original Message-----
From: list-admin@example.org [mailto:list-admin@example.org] On Behalf Of Geege
Sent: Wednesday, September 11, 2002 9:32 PM
To: Tom; list@example.org
Subject: RE: election

yesterday we messed up our election too. same six districts as in 2000."""


def test_everything_below_an_original_message_marker_is_quoted_history() -> None:
    assert own_text(OUTLOOK_REPLY) == "meant the primary, not the election.\n"
    assert "same six districts" in secondary_text(OUTLOOK_REPLY)
    assert "From: list-admin" in secondary_text(OUTLOOK_REPLY)


def test_quote_lines_with_initials_and_their_attribution_are_quoted() -> None:
    body = (
        "So would this qualify for the Darwin awards?\n"
        "RH> Today a French officer is supposed to ride a helium balloon\n"
        "RH> up to the edge of space and jump out.\n"
        "\n"
        "    E> The strength to weight ratio of a spider is so high.\n"
        "Could this be a molecular structure?"
    )
    assert "helium" in secondary_text(body) and "spider" in secondary_text(body)
    assert "Darwin" in own_text(body) and "molecular" in own_text(body)


def test_a_markdown_blockquote_is_the_pages_own_text_unless_it_is_mail() -> None:
    note = "Meeting notes.\n\n> Ship it on Friday, said the board.\n\nAgreed."
    assert split_secondary(note) == [(note, False)]
    mail = "On Mon, 2 Sep 2002, Ann wrote:\n> Ship it on Friday.\n\nI disagree."
    assert "Ship it" in secondary_text(mail) and "Ann wrote" in secondary_text(mail)
    assert own_text(mail).strip() == "I disagree."


def test_a_signature_and_a_list_footer_are_secondary() -> None:
    body = (
        "Have a look at smoothwall, it will save you lots of time.\n\nJustin\n\n"
        "-- \nIrish Linux Users' Group: ilug@linux.ie\n"
        "http://www.linux.ie/mailman/listinfo/ilug for (un)subscription information."
    )
    assert own_text(body).strip() == (
        "Have a look at smoothwall, it will save you lots of time.\n\nJustin"
    )
    footer = (
        "Zimbabwe and Zambia are not the same country.\n\nMartin\n\n"
        "------------------------ Yahoo! Groups Sponsor ---------------------~-->\n"
        "Sell a Home for Top $\n\n"
        "To unsubscribe from this group, send an email to:\n"
        "forteana-unsubscribe@egroups.com"
    )
    assert "Zambia" in own_text(footer) and "unsubscribe" in secondary_text(footer)


def test_a_rule_without_list_words_does_not_end_the_own_text() -> None:
    body = (
        "Results below.\n\n------------------------------\nThe cache hit rate is 91%."
    )
    assert split_secondary(body) == [(body, False)]


def test_a_bare_forward_is_what_the_page_says() -> None:
    """Nothing of the page's own around the history: the page is the forwarded
    text, and it stays full evidence."""
    body = (
        "---------- Forwarded message ----------\nFrom: Ann <ann@example.org>\n\n"
        "The budget is approved."
    )
    assert split_secondary(body) == [(body, False)]
    wrapped = (
        "--- begin forwarded text\n\nDate: Thu, 03 Oct 2002 03:21:05 +1000\n"
        "To: John <jsd@example.org>\nFrom: Greg <ggr@example.org>\n"
        "Subject: Re: Optical analog computing?\n\nColossus was not for Enigma.\n\n"
        "--- end forwarded text"
    )
    assert split_secondary(wrapped) == [(wrapped, False)]


def test_the_runs_give_back_every_line_in_order() -> None:
    runs = split_secondary(OUTLOOK_REPLY)
    assert "\n".join(text for text, _ in runs) == OUTLOOK_REPLY
    assert [secondary for _, secondary in runs] == [False, True]


def test_no_chunk_mixes_own_words_and_quoted_history() -> None:
    chunks = chunk_segments(OUTLOOK_REPLY)
    assert chunks[0] == ("meant the primary, not the election.", False)
    assert all(secondary for _, secondary in chunks[1:]) and len(chunks) == 2
    assert chunk_segments("") == []


def test_a_signature_line_with_only_quoted_text_above_it_is_not_a_signature() -> None:
    """A "-- " line ends the page's own text only when some own text is above it;
    here everything above is quoted, so the words below are the page's own."""
    body = "On Monday, Ann wrote:\n> the plan is fine\n--\nAgreed, we go ahead."
    assert "Agreed, we go ahead." in own_text(body)
    signed = "Agreed.\n> the plan is fine\n--\nRobin Quill"
    assert secondary_text(signed).endswith("--\nRobin Quill")
