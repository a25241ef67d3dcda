"""Loop detection during a mailbox import (SPEC §5.2, §6.2): the loops an import
finds must not depend on how it was batched, interrupted or told its owners.
Regressions from the fresh-clone check."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import connectors.mailbox.sync as sync
from brain.models import RawRecord, Source
from connectors.mailbox.sync import mailbox_import
from loops.models import LoopStatus, OpenLoop
from tests.connectors.helpers import ENRON

pytestmark = pytest.mark.django_db

OWNER = "pallen@enron.com"
ALL_OWNERS = ["pallen@enron.com", "k..allen@enron.com", "phillip.allen@enron.com"]


def _loops(source_id: str) -> set[tuple[str, str, str]]:
    return set(
        OpenLoop.objects.filter(source_id=source_id).values_list(
            "thread_id", "loop_type", "status"
        )
    )


def _open(source_id: str) -> int:
    return OpenLoop.objects.filter(source_id=source_id, status=LoopStatus.OPEN).count()


def test_owners_learned_from_sent_folders_count_for_loop_detection() -> None:
    """Given only one of the owner's addresses, the import learns the others from
    the sent folders before detection runs, so it finds the same loops as an
    import told every address."""
    mailbox_import(source_id="one", path=ENRON, owners=[OWNER])
    mailbox_import(source_id="all", path=ENRON, owners=ALL_OWNERS)
    assert set(Source.objects.get(id="one").owner_addresses) >= {
        "pallen@enron.com",
        "k..allen@enron.com",
    }
    assert _loops("all") and _loops("one") == _loops("all")


def test_loops_do_not_depend_on_the_batch_size() -> None:
    """Every batch measures its windows from the newest message of the whole
    mailbox, not from the newest one stored so far."""
    mailbox_import(source_id="big", path=ENRON, owners=[OWNER], batch_threads=200)
    mailbox_import(source_id="small", path=ENRON, owners=[OWNER], batch_threads=2)
    assert _loops("big") and _loops("small") == _loops("big")


class _Killed(BaseException):
    """Stands for the process being killed during loop detection."""


def test_an_import_killed_during_detection_detects_every_thread_on_rerun(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Detection runs in the batch's transaction: a kill during it rolls the
    batch back, so the re-run writes and detects those threads (before, they
    stayed stored and were never detected)."""
    mailbox_import(source_id="clean", path=ENRON, owners=[OWNER], batch_threads=3)
    real = sync.process_threads
    calls = {"n": 0}

    def killed_in_second_batch(**kwargs):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        result = real(**kwargs)
        if calls["n"] == 2:
            raise _Killed
        return result

    monkeypatch.setattr(sync, "process_threads", killed_in_second_batch)
    with pytest.raises(_Killed):
        mailbox_import(source_id="killed", path=ENRON, owners=[OWNER], batch_threads=3)
    monkeypatch.setattr(sync, "process_threads", real)
    mailbox_import(source_id="killed", path=ENRON, owners=[OWNER], batch_threads=3)
    assert _loops("clean") and _loops("killed") == _loops("clean")


def test_a_message_from_the_future_does_not_make_every_loop_stale() -> None:
    """The mailbox reference time is the newest message, never later than the
    wall clock (a spam dated 2037 used to mark every loop stale)."""
    mailbox_import(source_id="enron", path=ENRON, owners=[OWNER])
    before = _open("enron")
    assert before
    from loops.pipeline import loops_sweep

    future = (timezone.now() + timedelta(days=3650)).isoformat()
    RawRecord.objects.create(
        source_id="enron",
        external_id="<spam-2037@x>",
        kind="rfc822",
        content="",
        content_hash="h",
        metadata={"thread_id": "spam", "date": future},
    )
    loops_sweep(source_ids=["enron"])
    assert _open("enron") == before
