"""SPEC §5.3 structural eligibility for extraction (first matching rule wins)."""

from __future__ import annotations

from loops.detectors import Mutes
from loops.eligibility import extraction_eligibility
from tests.loops.shapes import JEFF, OWNER, OWNERS, PHILLIP_ANSWERS, msg


def check(messages, mutes=None):  # type: ignore[no-untyped-def]
    return extraction_eligibility(
        messages, owner_addresses=OWNERS, mutes=mutes or Mutes(), thread_id="t-kuo"
    )


def test_eligibility_rules_in_order():
    assert check([]) == (False, "no_substantive_messages")
    assert check([msg(1, labels=["SPAM"])]) == (False, "spam_or_trash")
    assert check([msg(1, frm="noreply@enron.com")]) == (
        False,
        "no_substantive_messages",
    )
    assert check([msg(1)], Mutes(senders=frozenset({JEFF}))) == (False, "suppressed")
    mine = msg(
        2, frm=OWNER, to=(JEFF,), body=PHILLIP_ANSWERS, labels=["CATEGORY_FORUMS"]
    )
    assert check([msg(1, labels=["CATEGORY_FORUMS"]), mine]) == (
        True,
        "owner_participated",
    )
    assert check([msg(1, labels=["CATEGORY_PROMOTIONS"])]) == (False, "bulk_category")
    assert check([msg(1, list_unsubscribe=True)]) == (False, "list_mail")
    assert check([msg(1)]) == (True, "human_correspondence")
