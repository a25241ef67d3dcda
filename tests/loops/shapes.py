"""Real message shapes for loop tests.

Bodies and headers are copied (trimmed) from real mail in the shared data sets:
Enron (allen-p mailbox, CMU release, research use; owner pallen@enron.com /
phillip.allen@enron.com), SpamAssassin easy-ham-2 (CC0 contents) for list mail,
and the Gmail API fixtures (MIT) for labels. See tests/data/loops/SOURCE.txt.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from loops.message import MailMessage

OWNER = "phillip.allen@enron.com"
OWNERS = (OWNER, "pallen@enron.com", "k..allen@enron.com")
# The owner of the invented fault-kind mailboxes (``robins_mailbox``).
ROBIN = "robin@example.org"
JEFF = "jsmith@austintx.com"
T0 = datetime(2001, 9, 6, 16, 26, tzinfo=UTC)  # Thu 6 Sep 2001 09:26 PDT

# Enron allen-p sent_items/236 and the quoted Jeff Smith messages in it.
JEFF_ASKS = (
    "Phillip,\n\nI am leaving tomorrow morning.  Have you worked out a time to meet the\n"
    "Kuo's?  I can overnight you my check to present to them on Sat. if they have\n"
    "signed the release.\n\nLet me know what you want to do.\n\nThanks.\n\nJeff"
)
PHILLIP_ANSWERS = (
    "They cannot meet on Saturday.  I will probably meet them in Columbus on\n"
    "Monday or Tuesday.  I will let you know when.\n\nPhillip"
)
PHILLIP_ASKS = (
    "That should be ok.  I will give you a call on Tuesday morning.  A\n\n"
    "Still no word on the Leander closing?"
)
# Enron allen-p sent/205 (2 Jun 2000).
OFFER_REPLY = (
    "Jeff,\n\n I will respond to the offer on Monday.  There is a $35 Million expansion \n"
    "adding 250 jobs in Burnet.  I am tempted to hold for $3000/acre.  Owner \n"
    "financing would still work.   Do you have an opinion?\n\nPhillip."
)
# SpamAssassin easy-ham-2/00930 (FoRK list mail).
LIST_BODY = (
    "At 12:12 AM 7/30/02 -0700, bitbitch@magnesium.net wrote:\n"
    "Isn't this just the old pump and dump? What do you think?"
)


def msg(
    n: int,
    *,
    frm: str = JEFF,
    to: tuple[str, ...] = (OWNER,),
    cc: tuple[str, ...] = (),
    at: datetime | None = None,
    hours: float = 0,
    body: str = JEFF_ASKS,
    subject: str = "RE:",
    thread: str = "t-kuo",
    mine: bool | None = None,
    **extra: object,
) -> MailMessage:
    """One message of a thread: ``hours`` after ``T0`` unless ``at`` is given."""
    return MailMessage(
        message_id=f"<{n}.{thread}@thyme>",
        thread_id=thread,
        subject=subject,
        from_addr=frm,
        from_name="Jeff Smith" if frm == JEFF else "",
        to=list(to),
        cc=list(cc),
        date=at or T0 + timedelta(hours=hours),
        is_mine=frm in OWNERS if mine is None else mine,
        body=body,
        **extra,  # type: ignore[arg-type]
    )
