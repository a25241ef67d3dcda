"""Fake Google at the HTTP layer: ``HttpMockSequence`` responses shaped like the
real API (field names from the discovery documents; message payloads modelled on
the real ``users.messages.get`` captures in tests/data/gmail_api)."""

from __future__ import annotations

import base64
import json
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

from googleapiclient.http import HttpMockSequence

from tests.connectors.helpers import GMAIL

ME = "owner@example.com"
ALIAS = "owner.alias@example.org"


def ok(body: dict[str, Any]) -> tuple[dict[str, str], str]:
    """A 200 JSON response."""
    return {"status": "200", "content-type": "application/json"}, json.dumps(body)


def error(
    status: int, reason: str = "", headers: dict[str, str] | None = None
) -> tuple[dict[str, str], str]:
    """A Google JSON error response."""
    body = {
        "error": {
            "code": status,
            "message": reason or "error",
            "errors": [
                {"reason": reason or "error", "domain": "global", "message": reason}
            ],
        }
    }
    return {
        "status": str(status),
        "content-type": "application/json",
        **(headers or {}),
    }, json.dumps(body)


def sequence(*responses: tuple[dict[str, str], str]) -> HttpMockSequence:
    """An ``HttpMockSequence`` that fails loudly when the code asks for more."""
    return HttpMockSequence(list(responses))


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


def message(
    *,
    gmail_id: str,
    thread_id: str,
    sender: str,
    to: str,
    subject: str,
    date: str,
    body: str,
    labels: list[str],
    message_id: str,
    in_reply_to: str | None = None,
) -> dict[str, Any]:
    """A ``users.messages.get`` (format=full) message with a text/plain body."""
    headers = [
        {"name": "Delivered-To", "value": ME},
        {"name": "MIME-Version", "value": "1.0"},
        {"name": "Date", "value": date},
        {"name": "Message-ID", "value": f"<{message_id}>"},
        {"name": "Subject", "value": subject},
        {"name": "From", "value": sender},
        {"name": "To", "value": to},
        {"name": "Content-Type", "value": 'text/plain; charset="UTF-8"'},
    ]
    if in_reply_to:
        headers += [
            {"name": "In-Reply-To", "value": f"<{in_reply_to}>"},
            {"name": "References", "value": f"<{in_reply_to}>"},
        ]
    millis = int(parsedate_to_datetime(date).timestamp() * 1000)
    return {
        "id": gmail_id,
        "threadId": thread_id,
        "labelIds": labels,
        "snippet": body[:100],
        "historyId": "4900",
        "internalDate": str(millis),
        "payload": {
            "partId": "",
            "mimeType": "text/plain",
            "filename": "",
            "headers": headers,
            "body": {"size": len(body), "data": _b64(body)},
        },
        "sizeEstimate": 400 + len(body),
    }


def thread(thread_id: str, *messages: dict[str, Any]) -> dict[str, Any]:
    """A ``users.threads.get`` (format=full) response."""
    return {"id": thread_id, "historyId": "4990", "messages": list(messages)}


def real_message(name: str, *, gmail_id: str, thread_id: str) -> dict[str, Any]:
    """A captured real Gmail message (tests/data/gmail_api) under new ids."""
    data = json.loads((GMAIL / name).read_text())
    data["id"], data["threadId"] = gmail_id, thread_id
    return data


# A conversation used by several tests: Ann asks, I answer, Ann replies later.
def ann_question() -> dict[str, Any]:
    return message(
        gmail_id="m1",
        thread_id="t1",
        sender="Ann Lee <ann@example.net>",
        to=ME,
        subject="Budget for Q3",
        date="Mon, 02 Nov 2026 09:00:00 +0000",
        body="Hi, can you send the Q3 budget by Friday?\n\nAnn",
        labels=["INBOX", "UNREAD"],
        message_id="q3-1@example.net",
    )


def my_answer() -> dict[str, Any]:
    return message(
        gmail_id="m2",
        thread_id="t1",
        sender=f"Owner <{ALIAS}>",
        to="Ann Lee <ann@example.net>",
        subject="Re: Budget for Q3",
        date="Mon, 02 Nov 2026 10:00:00 +0000",
        body="Sure, I will send it on Thursday.\n\nOn Mon, Ann Lee wrote:\n> can you send",
        labels=["SENT"],
        message_id="q3-2@example.org",
        in_reply_to="q3-1@example.net",
    )


def ann_reply() -> dict[str, Any]:
    return message(
        gmail_id="m4",
        thread_id="t1",
        sender="Ann Lee <ann@example.net>",
        to=ME,
        subject="Re: Budget for Q3",
        date="Tue, 03 Nov 2026 08:00:00 +0000",
        body="Thanks, Thursday works.",
        labels=["INBOX"],
        message_id="q3-4@example.net",
        in_reply_to="q3-2@example.org",
    )


def newsletter() -> dict[str, Any]:
    return message(
        gmail_id="m3",
        thread_id="t2",
        sender="News <noreply@news.example.com>",
        to=ME,
        subject="Weekly digest",
        date="Sun, 01 Nov 2026 06:00:00 +0000",
        body="This week in news.",
        labels=["INBOX", "CATEGORY_UPDATES"],
        message_id="digest@news.example.com",
    )


def rfc_date(days_ago: int) -> str:
    from datetime import UTC, datetime, timedelta

    return format_datetime(datetime(2026, 11, 5, tzinfo=UTC) - timedelta(days=days_ago))
