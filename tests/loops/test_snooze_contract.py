"""Snoozed loops on the agents' side (issue 47, SPEC §4 ``open_loops``, §5.5): a loop
a curator snoozed is not offered as open work until its date, on HTTP and MCP
alike (MCP: tests/mcp/test_snooze_mcp.py); each loop says ``snoozed_until``; the answer says how many were left out;
``include_snoozed`` lists them; ``waiting`` counts them apart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from brain.models import Source
from loops.models import LoopType, OpenLoop
from loops.services import loop_close, loop_open, loop_snooze


def _loop(source: Source, summary: str, email: str = "dana@example.org") -> OpenLoop:
    return loop_open(
        source=source,
        loop_type=LoopType.UNANSWERED_INBOUND,
        summary=summary,
        actor="t",
        counterparty_email=email,
    )


def parked_pair(source: Source) -> tuple[OpenLoop, OpenLoop, datetime]:
    """One awake loop and one snoozed three days ahead; returns them and the date."""
    awake = _loop(source, "Reply to Ann", "ann@example.org")
    parked = _loop(source, "Reply to Bob", "bob@example.org")
    until = (timezone.now() + timedelta(days=3)).replace(microsecond=0)
    loop_snooze(loop=parked, until=until, actor="curator")
    return awake, parked, until


@pytest.mark.django_db
def test_http_open_loops_leaves_out_a_snoozed_loop_and_says_so(
    mailbox: Source, make_key: Any, api_client: Any
) -> None:
    awake, parked, until = parked_pair(mailbox)
    client = api_client(make_key(mailbox, readable=(mailbox,), trusted=True).plaintext)
    body = client.get(reverse("api:open_loops")).json()
    assert [lp["id"] for lp in body["loops"]] == [str(awake.pk)]
    assert body["loops"][0]["snoozed_until"] is None
    assert body["count"] == 1 and body["snoozed_left_out"] == 1
    assert "include_snoozed=true" in body["note"]

    every = client.get(reverse("api:open_loops"), {"include_snoozed": "true"}).json()
    by_id = {lp["id"]: lp for lp in every["loops"]}
    assert set(by_id) == {str(awake.pk), str(parked.pk)}
    assert by_id[str(parked.pk)]["snoozed_until"] == until.astimezone(UTC).isoformat()
    assert by_id[str(parked.pk)]["status"] == "open"
    assert every["count"] == 2 and every["snoozed_left_out"] == 0
    assert every["note"] is None


@pytest.mark.django_db
def test_a_remote_key_sees_snoozed_until_and_a_woken_loop_comes_back(
    mailbox: Source, make_key: Any, api_client: Any
) -> None:
    _, parked, _ = parked_pair(mailbox)
    client = api_client(make_key(mailbox, readable=(mailbox,)).plaintext)
    url = reverse("api:open_loops")
    body = client.get(url, {"include_snoozed": "true"}).json()
    assert body["redacted"] is True
    assert all("snoozed_until" in lp for lp in body["loops"])
    loop_snooze(loop=parked, until=None, actor="curator")
    body = client.get(url).json()
    assert body["count"] == 2 and body["snoozed_left_out"] == 0


@pytest.mark.django_db
def test_a_closed_loop_is_not_reported_snoozed(
    mailbox: Source, make_key: Any, api_client: Any
) -> None:
    _, parked, _ = parked_pair(mailbox)
    loop_close(loop=parked, status="done", actor="curator")
    client = api_client(make_key(mailbox, readable=(mailbox,), trusted=True).plaintext)
    body = client.get(reverse("api:open_loops"), {"status": "done"}).json()
    assert [lp["snoozed_until"] for lp in body["loops"]] == [None]
    assert body["snoozed_left_out"] == 0


@pytest.mark.django_db
def test_http_waiting_counts_the_snoozed_loops_apart(
    mailbox: Source, make_key: Any, api_client: Any
) -> None:
    _, _, until = parked_pair(mailbox)
    client = api_client(make_key(mailbox, readable=(mailbox,), trusted=True).plaintext)
    body = client.get(reverse("api:waiting")).json()
    assert body["count"] == 1
    assert body["snoozed"] == {
        "loop_count": 1,
        "next_wake_at": until.astimezone(UTC).isoformat(),
        "last_wake_at": until.astimezone(UTC).isoformat(),
    }
    assert f"1 snoozed (until {timezone.localdate(until)})" in body["text"]
