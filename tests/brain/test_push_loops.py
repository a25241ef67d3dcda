"""SPEC §9 (with §5): each pushed person carries the due open loops with them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from brain.access import Caller
from brain.models import Source
from brain.services.push import push_context
from tests.brain.test_push import make_page
from tests.factories import SourceFactory

pytestmark = pytest.mark.django_db


def make_loop(source: Source, page, key: str, **kw):  # type: ignore[no-untyped-def]
    from loops.models import OpenLoop

    kw.setdefault("loop_type", "commitment_owed_by_me")
    kw.setdefault("detector", "manual")
    kw.setdefault("summary", f"Loop {key}")
    return OpenLoop.objects.create(
        source=source, dedup_key=key, counterparty=page, **kw
    )


def test_due_open_loops_with_each_pushed_person(
    local: Caller, default_source: Source
) -> None:
    now = timezone.now()
    priya = make_page(default_source, "Priya Raman", "priya")
    make_page(default_source, "Globex", kind="company")
    archive = SourceFactory(id="archive", federated=False)
    make_loop(default_source, priya, "soon", due_at=now + timedelta(days=3))
    make_loop(default_source, priya, "overdue", due_at=now - timedelta(days=2))
    make_loop(default_source, priya, "reply", loop_type="unanswered_inbound")
    make_loop(default_source, priya, "later", due_at=now + timedelta(days=30))
    make_loop(default_source, priya, "closed", status="done", closed_at=now)
    make_loop(archive, priya, "elsewhere", due_at=now)
    result = push_context(caller=local, turns=["Ask Priya and Globex."])
    by_slug = {p["slug"]: p["loops"] for p in result["pages"]}
    assert [loop["summary"] for loop in by_slug["people/priya-raman"]] == [
        "Loop overdue",
        "Loop soon",
        "Loop reply",
    ]
    first = by_slug["people/priya-raman"][0]
    assert set(first) == {"loop_id", "loop_type", "summary", "due_at", "overdue"}
    assert first["overdue"] is True
    assert by_slug["people/priya-raman"][1]["overdue"] is False
    assert by_slug["companies/globex"] == []


def test_at_most_3_due_loops_per_person(local: Caller, default_source: Source) -> None:
    priya = make_page(default_source, "Priya Raman", "priya")
    for i in range(5):
        make_loop(
            default_source, priya, f"k{i}", due_at=timezone.now() + timedelta(hours=i)
        )
    result = push_context(caller=local, turns=["Ask Priya."])
    assert [loop["summary"] for loop in result["pages"][0]["loops"]] == [
        "Loop k0",
        "Loop k1",
        "Loop k2",
    ]
