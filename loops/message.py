"""The normalised mail message every detector and extractor reads (SPEC §5.1).

Connectors (Gmail and mailbox files alike) turn each captured message into a
``MailMessage`` and store ``to_metadata()`` in ``RawRecord.metadata``; loops code
rebuilds it with ``MailMessage.from_metadata``. Nothing in ``loops`` parses MIME or
talks to Google.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# Labels with meaning for the detectors. Gmail's own label ids; mailbox connectors set
# SENT for messages in sent folders and may set SPAM/TRASH from folder names.
SENT = "SENT"
SPAM = "SPAM"
TRASH = "TRASH"
BULK_CATEGORIES = ("CATEGORY_PROMOTIONS", "CATEGORY_SOCIAL", "CATEGORY_FORUMS")


@dataclass
class MailMessage:
    """One message of a thread, as the loops pipeline sees it.

    Addresses are lower-cased bare addresses (``jane@example.org``). ``date`` is an
    aware UTC datetime or None when the message has no usable Date. ``body`` is the
    text (HTML converted) as its page shows it, at most 8,000 chars: the writer's
    own words (quotes and their attribution lines dropped, a reply's quoted tail
    cut) and a forward's forwarded message; the rules read the writer's newest
    words of it through ``loops.definitions.reply_text``.
    ``is_mine`` is decided by the connector: SENT label, a sent folder, or a From that
    is one of the source's owner addresses. ``html_only`` is True when the message
    had an HTML body and no plain-text alternative (a marketing signal, §5.1a).
    ``failed_recipients``: on a delivery-failure notice, the recipients its
    delivery-status report names as failed (empty otherwise). ``mailing_list`` is
    True when a list server delivered the message (its list headers, with or
    without List-Unsubscribe). ``replied_to``: who wrote the message this one
    quotes as a reply, from the quoted header (``{"address", "name", "date"}``,
    the date ISO 8601 UTC or None; None when nothing is quoted under a header;
    ``loops.definitions.replied_to_author`` reads it back): a reply of mine the
    mailbox lacks still shows in the reply that quotes it.
    """

    message_id: str
    thread_id: str
    subject: str = ""
    from_addr: str = ""
    from_name: str = ""
    to: list[str] = field(default_factory=list)
    cc: list[str] = field(default_factory=list)
    bcc: list[str] = field(default_factory=list)
    date: datetime | None = None
    is_mine: bool = False
    labels: list[str] = field(default_factory=list)
    list_unsubscribe: bool = False
    mailing_list: bool = False
    auto_submitted: str | None = None
    calendar_method: str | None = None
    in_reply_to: str | None = None
    references: list[str] = field(default_factory=list)
    body: str = ""
    attachments: list[dict[str, Any]] = field(default_factory=list)
    link: str | None = None
    html_only: bool = False
    failed_recipients: list[str] = field(default_factory=list)
    replied_to: dict[str, Any] | None = None
    raw_record_id: int | None = None

    @property
    def sent_at(self) -> datetime:
        """``date`` of a message known to have one (the pipeline and extractors
        only reach dated messages); raises ``ValueError`` for an undated one."""
        if self.date is None:
            raise ValueError(f"Message {self.message_id} has no usable Date.")
        return self.date

    def to_metadata(self) -> dict[str, Any]:
        """JSON-safe dict for ``RawRecord.metadata`` (date as ISO 8601 UTC)."""
        # A shallow copy per field (not ``asdict``'s deep copy: SPEC §11 ingest rate).
        data: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, list):
                value = [dict(v) if isinstance(v, dict) else v for v in value]
            data[name] = value
        data["date"] = self.date.isoformat() if self.date else None
        data.pop("raw_record_id", None)
        return data

    @classmethod
    def from_metadata(
        cls, data: dict[str, Any], *, raw_record_id: int | None = None
    ) -> MailMessage:
        """Rebuild a message from ``RawRecord.metadata``; unknown keys are ignored."""
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in known}
        if values.get("date"):
            values["date"] = datetime.fromisoformat(values["date"])
        values["raw_record_id"] = raw_record_id
        return cls(**values)
