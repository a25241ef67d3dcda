"""loop_snooze (SPEC §5.5): a snoozed loop stays open but leaves waiting until its
date; waking it (None) brings it back; closed loops cannot be snoozed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from brain.access import local_caller
from brain.exceptions import InvalidParams
from brain.models import Source
from loops.models import LoopEvent, LoopStatus, LoopType, OpenLoop
from loops.services import loop_close, loop_open, loop_snooze
from loops.waiting import waiting_report

pytestmark = pytest.mark.django_db


def _summaries(report: dict) -> set[str]:  # type: ignore[type-arg]
    return {lp["summary"] for g in report["groups"] for lp in g["loops"]}


def _loop(source: Source, summary: str) -> OpenLoop:
    return loop_open(
        source=source,
        loop_type=LoopType.UNANSWERED_INBOUND,
        summary=summary,
        actor="t",
        counterparty_email="dana@example.org",
    )


def test_snoozed_loop_is_hidden_from_waiting_until_its_date() -> None:
    source = Source.objects.create(id="mail", name="mail", kind="mailbox")
    snoozed = _loop(source, "Reply to Dana later")
    _loop(source, "Reply to Dana now")
    caller = local_caller(actor="t")
    loop_snooze(loop=snoozed, until=timezone.now() + timedelta(days=3), actor="t")
    assert _summaries(waiting_report(caller=caller)) == {"Reply to Dana now"}
    snoozed.refresh_from_db()
    assert snoozed.status == LoopStatus.OPEN
    loop_snooze(loop=snoozed, until=timezone.now() - timedelta(minutes=1), actor="t")
    assert "Reply to Dana later" in _summaries(waiting_report(caller=caller))
    assert (
        LoopEvent.objects.filter(
            loop=snoozed, event_type=LoopEvent.EventType.SNOOZED
        ).count()
        == 2
    )


def test_a_closed_loop_cannot_be_snoozed() -> None:
    source = Source.objects.create(id="mail", name="mail", kind="mailbox")
    loop = _loop(source, "Reply to Dana")
    loop_close(loop=loop, actor="t")
    with pytest.raises(InvalidParams):
        loop_snooze(loop=loop, until=timezone.now() + timedelta(days=1), actor="t")
