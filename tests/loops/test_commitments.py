"""SPEC §5.3 projections and §5.4 closing/correcting through the offline rule
extractor (no API key configured in tests)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from brain.models import AuditEvent, Fact, Relation
from loops.models import (
    Detector,
    ExtractionRun,
    LoopEvent,
    LoopStatus,
    LoopType,
    OpenLoop,
)
from loops.pipeline import process_threads
from loops.services import (
    loop_close,
    loop_confirm_fulfilment,
    loop_correct_due,
    loops_stale_sweep,
)
from tests.loops.shapes import JEFF, OWNER, msg

pytestmark = pytest.mark.django_db

WED = datetime(2001, 9, 5, 17, 0, tzinfo=UTC)  # Wed 5 Sep 2001 10:00 PDT


def promise_thread():  # type: ignore[no-untyped-def]
    return [
        msg(1, at=WED, body="Phillip,\n\nHave you got the Burnet numbers yet?\n\nJeff"),
        msg(
            2,
            frm=OWNER,
            to=(JEFF,),
            at=WED + timedelta(hours=2),
            body="Jeff,\n\nI will send you the Burnet rent roll by Friday.\n\nPhillip",
        ),
    ]


def commitments(source):  # type: ignore[no-untyped-def]
    return OpenLoop.objects.filter(
        source=source, loop_type=LoopType.COMMITMENT_OWED_BY_ME
    )


def test_rule_commitment_creates_loop_fact_and_relation(mailbox, jeff, store):
    store(mailbox, promise_thread())
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    loop = commitments(mailbox).get()
    assert loop.detector == Detector.RULE_EXTRACT and loop.counterparty == jeff
    assert loop.dedup_key.startswith("commit:") and len(loop.dedup_key) == 15
    due = loop.due_at.astimezone(ZoneInfo("UTC"))
    assert (due.date().isoformat(), due.hour, due.minute, due.second) == (
        "2001-09-07",
        23,
        59,
        59,
    )
    assert (
        loop.evidence[-1]["quote"] == "I will send you the Burnet rent roll by Friday."
    )
    fact = loop.fact
    assert fact.kind == Fact.Kind.COMMITMENT and fact.visibility == "private"
    assert fact.entity == jeff and fact.valid_until == loop.due_at
    assert fact.confidence < 0.85
    assert fact.evidence["extractor"] == "rule_extract"
    assert fact.evidence["quote"] == loop.evidence[-1]["quote"]
    assert fact.raw_record_id == loop.evidence[-1]["raw_record_id"]
    rel = Relation.objects.get(from_page=loop.page, to_page=jeff)
    assert rel.relation_type.name == "owes_to"
    assert (
        ExtractionRun.objects.filter(
            extractor="rule_extract", status="extracted"
        ).count()
        == 1
    )


def test_no_relation_when_counterparty_does_not_resolve(mailbox, store):
    store(mailbox, promise_thread())
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    loop = commitments(mailbox).get()
    assert loop.counterparty is None and loop.counterparty_email == JEFF
    assert loop.fact.entity is None
    assert not Relation.objects.exists()


def test_closing_a_commitment_expires_its_fact_unless_shared(mailbox, jeff, store):
    store(mailbox, promise_thread())
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    loop = commitments(mailbox).get()
    twin = OpenLoop.objects.create(
        source=mailbox,
        dedup_key="manual:twin",
        loop_type=loop.loop_type,
        summary="twin",
        detector=Detector.MANUAL,
        fact=loop.fact,
    )
    shared = loop_close(loop=loop, status=LoopStatus.DONE, actor="curator")
    assert shared == {
        "closed": True,
        "id": str(loop.pk),
        "status": "done",
        "fact_expired": False,
        "reason": "shared_with_open_loop",
    }
    assert Fact.objects.get(pk=loop.fact_id).expired_at is None
    result = loop_close(loop=twin, status=LoopStatus.DROPPED, actor="curator")
    assert result["fact_expired"] is True
    assert Fact.objects.get(pk=loop.fact_id).expired_at is not None
    assert AuditEvent.objects.filter(
        action="fact_expired", target_id=str(loop.fact_id)
    ).exists()
    assert (
        loop_close(loop=twin, status=LoopStatus.DONE, actor="curator")["closed"]
        is False
    )


def test_fulfilment_suspected_by_a_later_message_then_confirmed(mailbox, jeff, store):
    store(mailbox, promise_thread())
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    store(
        mailbox,
        [
            msg(
                3,
                frm=OWNER,
                to=(JEFF,),
                at=WED + timedelta(days=1),
                body="Jeff,\n\nAttached is the Burnet rent roll.\n\nPhillip",
            )
        ],
    )
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    loop = commitments(mailbox).get()
    assert loop.status == LoopStatus.OPEN  # never closed automatically on wording
    assert loop.fulfilment_suspected_at is not None
    assert loop.fulfilment_evidence["reason"] == "wording"
    assert loop.fulfilment_evidence["message_id"] == "<3.t-kuo@thyme>"
    assert loop.events.filter(event_type="fulfilment_suspected").count() == 1
    assert loop_confirm_fulfilment(loop=loop, actor="curator")["fact_expired"] is True
    loop.refresh_from_db()
    assert (loop.status, loop.closed_by) == ("done", "fulfilled")


def test_fulfilment_by_attachment(mailbox, store):
    store(mailbox, promise_thread())
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    store(
        mailbox,
        [
            msg(
                3,
                frm=OWNER,
                to=(JEFF,),
                at=WED + timedelta(days=1),
                body="FYI",
                attachments=[{"filename": "rentroll.xls", "size": 20480}],
            )
        ],
    )
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    assert commitments(mailbox).get().fulfilment_evidence["reason"] == "attachment"


def test_unrelated_later_message_is_not_fulfilment(mailbox, store):
    store(mailbox, promise_thread())
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    store(
        mailbox,
        [
            msg(
                3,
                frm=OWNER,
                to=(JEFF,),
                at=WED + timedelta(days=1),
                body="Here is the number for the Kuo's lawyer.",
            )
        ],
    )
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    assert commitments(mailbox).get().fulfilment_suspected_at is None


def test_deadline_correction_updates_due_supersedes_fact_and_records_old_value(
    mailbox, jeff, store
):
    store(mailbox, promise_thread())
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    loop = commitments(mailbox).get()
    old_due, old_fact = loop.due_at, loop.fact
    store(
        mailbox,
        [
            msg(
                3,
                at=WED + timedelta(days=1),
                body="Phillip,\n\nNo rush. Let's make it Monday.\n\nJeff",
            )
        ],
    )
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    loop.refresh_from_db()
    assert loop.due_at.date().isoformat() == "2001-09-10"
    old_fact.refresh_from_db()
    assert old_fact.expired_at is not None and old_fact.superseded_by == loop.fact
    assert loop.fact.valid_until == loop.due_at and loop.fact.expired_at is None
    event = loop.events.get(event_type=LoopEvent.EventType.DUE_CORRECTED)
    assert event.extra_data["old_due_at"] == old_due.isoformat()
    assert event.extra_data["evidence"]["quote"] == "Let's make it Monday."
    # A re-sync does not apply the same correction twice.
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    assert loop.events.filter(event_type=LoopEvent.EventType.DUE_CORRECTED).count() == 1


def test_human_deadline_correction_is_not_reverted_by_resync(mailbox, store):
    store(mailbox, promise_thread())
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    loop = commitments(mailbox).get()
    new_due = datetime(2001, 9, 20, 23, 59, 59, tzinfo=UTC)
    loop_correct_due(
        loop=loop, due_at=new_due, actor="curator", evidence={"note": "phone call"}
    )
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    loop.refresh_from_db()
    assert loop.due_at == new_due


def test_staleness_overdue_and_inactive_or_90_days_inactive(mailbox, store):
    store(mailbox, promise_thread())
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    loop = commitments(mailbox).get()
    assert loops_stale_sweep(source=mailbox, now=loop.due_at + timedelta(days=13)) == 0
    assert loops_stale_sweep(source=mailbox, now=loop.due_at + timedelta(days=15)) == 1
    loop.refresh_from_db()
    assert (loop.status, loop.closed_by) == ("stale", "staleness")
    assert loop.events.filter(event_type="stale").count() == 1
