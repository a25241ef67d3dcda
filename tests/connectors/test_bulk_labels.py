"""Bulk mail in exported mailboxes (SPEC §5.2 rule 4 for mailbox files).

Exported mailboxes carry no Gmail category labels, and exports such as Enron's dropped
List-Unsubscribe, so newsletters would open "reply owed" loops. The mailbox connector
labels bulk-looking messages CATEGORY_PROMOTIONS from standard headers and the
unsubscribe wording mass mailers put in the body.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from brain.models import RawRecord
from connectors.mail.parsing import parse_rfc822
from connectors.mail.threading import bulk_labels
from connectors.mailbox.sync import mailbox_import
from loops.models import LoopType, OpenLoop
from loops.pipeline import process_threads
from tests.connectors.helpers import DATA, ENRON

BULK = DATA / "enron" / "bulk" / "allen-p"


def test_bulk_category_is_inferred_from_unsubscribe_wording() -> None:
    msg = parse_rfc822((BULK / "inbox" / "1.").read_bytes(), folder="inbox")
    assert bulk_labels(raw=msg.raw, text=msg.full_text) == ["CATEGORY_PROMOTIONS"]


@pytest.mark.parametrize(
    "header",
    ["Precedence: bulk", "Precedence: list", "List-Id: <gas.lists.example.org>"],
)
def test_bulk_category_is_inferred_from_list_headers(header: str) -> None:
    raw = f"From: a@example.org\nTo: me@example.org\n{header}\nSubject: x\n\nHello"
    assert bulk_labels(raw=raw, text="Hello") == ["CATEGORY_PROMOTIONS"]


def test_personal_mail_is_not_bulk() -> None:
    for path in sorted((ENRON / "inbox").iterdir())[:10]:
        msg = parse_rfc822(path.read_bytes(), folder="inbox")
        assert bulk_labels(raw=msg.raw, text=msg.full_text) == [], path.name


def test_a_word_in_a_header_value_or_the_body_start_alone_is_not_a_list_header() -> (
    None
):
    raw = (
        "From: a@example.org\nSubject: Precedence: bulk order\n\nList-Id: not a header"
    )
    assert bulk_labels(raw=raw, text="Can we meet?") == []


@pytest.mark.django_db
def test_bulk_category_mail_in_a_mailbox_opens_no_reply_owed_loop() -> None:
    """GIVEN a marketing mail and a personal mail to me, both past their 24 h grace
    WHEN loops are detected THEN the personal mail opens a reply-owed loop and the
    marketing mail does not."""
    owners = ["pallen@enron.com", "k..allen@enron.com"]
    mailbox_import(source_id="allen-bulk", path=str(BULK), owners=owners)
    thread_ids = {
        r.metadata["thread_id"]
        for r in RawRecord.objects.filter(source_id="allen-bulk")
    }
    process_threads(
        source_id="allen-bulk",
        thread_ids=thread_ids,
        now=datetime(2001, 12, 10, tzinfo=UTC),
    )
    inbound = OpenLoop.objects.filter(
        source_id="allen-bulk", loop_type=LoopType.UNANSWERED_INBOUND
    )
    assert not inbound.filter(
        counterparty_email="itsimazing@response.etracks.com"
    ).exists()
    assert inbound.filter(counterparty_email="jwills3@swbell.net").exists()
