"""Merges undo (SPEC §10; issue 46): a merge records what moved, undo moves exactly
that back in one transaction with an audit row, and an undone or refused pair is
never proposed again."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from accounts.models import User
from brain.access import ReadScope
from brain.models import (
    Alias,
    AuditEvent,
    Fact,
    MergeProposal,
    Page,
    PageMerge,
    RawRecord,
    Relation,
    TimelineEntry,
)
from brain.services.dream import dream_run
from brain.services.entities import entity_resolve
from brain.services.merges import (
    merge_proposal_accept,
    merge_proposal_reject,
    page_merge,
    page_merge_undo,
)
from loops.models import OpenLoop
from tests.factories import (
    AliasFactory,
    FactFactory,
    PageFactory,
    RawRecordFactory,
    RelationFactory,
    SourceFactory,
    TimelineEntryFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def src():  # type: ignore[no-untyped-def]
    return SourceFactory(id="team")


def person(src, title: str):  # type: ignore[no-untyped-def]
    return PageFactory(source=src, person=True, title=title)


def loop(src, counterparty: Page, key: str) -> OpenLoop:  # type: ignore[no-untyped-def]
    return OpenLoop.objects.create(
        source=src,
        dedup_key=key,
        loop_type="unanswered_inbound",
        counterparty=counterparty,
        page=counterparty,
        summary="Reply about the budget",
        detector="manual",
    )


def two_people(src):  # type: ignore[no-untyped-def]
    """Ken (kept) and Kenny (merged away), each with aliases, an address, facts,
    relations, a timeline entry, a raw record and a loop; one shared address."""
    keep, merge = person(src, "Kenneth Lay"), person(src, "Kenny Lay")
    AliasFactory(page=keep, alias="klay@enron.com", kind=Alias.Kind.EMAIL)
    AliasFactory(page=merge, alias="klay@enron.com", kind=Alias.Kind.EMAIL)
    AliasFactory(page=merge, alias="kenny@lay.example", kind=Alias.Kind.EMAIL)
    AliasFactory(page=merge, alias="kenny lay", kind=Alias.Kind.NAME)
    friend = person(src, "Jeff Skilling")
    RelationFactory(from_page=friend, to_page=merge)
    RelationFactory(from_page=merge, to_page=friend)
    RelationFactory(from_page=keep, to_page=merge)  # a self-loop once merged
    FactFactory(source=src, entity=merge, text="Plays the cello")
    FactFactory(source=src, entity=keep, text="Chairman")
    TimelineEntryFactory(page=merge, summary="Met in Houston")
    RawRecordFactory(source=src, page=merge)
    loop(src, merge, "thread:1:reply")
    loop(src, keep, "thread:2:reply")
    return keep, merge, friend


def snapshot(page: Page) -> dict[str, set]:
    """Every row that points at ``page``, by kind."""
    return {
        "aliases": set(Alias.objects.filter(page=page).values_list("alias", "kind")),
        "out": set(
            Relation.objects.filter(from_page=page).values_list("to_page", "context")
        ),
        "in": set(
            Relation.objects.filter(to_page=page).values_list("from_page", "context")
        ),
        "facts": set(Fact.objects.filter(entity=page).values_list("pk", flat=True)),
        "timeline": set(
            TimelineEntry.objects.filter(page=page).values_list("pk", flat=True)
        ),
        "raw": set(RawRecord.objects.filter(page=page).values_list("pk", flat=True)),
        "loops": set(
            OpenLoop.objects.filter(counterparty=page).values_list("pk", flat=True)
        ),
    }


def by_address(address: str) -> Page | None:
    scope = ReadScope(source_ids=("team",), include_private=True)
    return entity_resolve(scope=scope, name=address).page


def test_undo_of_a_merge_moves_every_moved_row_back_to_the_merged_away_page(
    src,  # type: ignore[no-untyped-def]
) -> None:
    keep, merge, _friend = two_people(src)
    before = {"keep": snapshot(keep), "merge": snapshot(merge)}
    counts = page_merge(keep=keep, merge=merge, actor="curator")
    assert by_address("kenny@lay.example").pk == keep.pk  # type: ignore[union-attr]
    assert OpenLoop.objects.filter(counterparty=keep).count() == 2

    undone = page_merge_undo(merge_id=counts["merge_id"], actor="curator")

    merge.refresh_from_db()
    assert merge.deleted_at is None
    assert "merged_into" not in merge.frontmatter
    assert {"keep": snapshot(keep), "merge": snapshot(merge)} == before
    assert by_address("kenny@lay.example").pk == merge.pk  # type: ignore[union-attr]
    assert undone["facts"] == 1 and undone["loops"] == 2 and undone["timeline"] == 1
    audit = AuditEvent.objects.get(action="page_merge_undone")
    assert audit.target_id == f"team:{merge.slug}"
    assert audit.extra_data["merge_id"] == counts["merge_id"]
    record = PageMerge.objects.get(pk=counts["merge_id"])
    assert record.undone_by == "curator" and record.undone_at is not None


def test_a_merge_is_undone_once(src) -> None:  # type: ignore[no-untyped-def]
    from brain.exceptions import InvalidParams

    keep, merge, _friend = two_people(src)
    merge_id = page_merge(keep=keep, merge=merge, actor="curator")["merge_id"]
    page_merge_undo(merge_id=merge_id, actor="curator")
    with pytest.raises(InvalidParams, match="already undone"):
        page_merge_undo(merge_id=merge_id, actor="curator")


def test_restore_in_the_admin_undoes_the_merge_of_a_merged_page(src) -> None:  # type: ignore[no-untyped-def]
    """The reported bug: "Restore" gave back an empty page, its address stayed on
    the kept page."""
    keep, merge, _friend = two_people(src)
    page_merge(keep=keep, merge=merge, actor="curator")
    client = Client()
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    client.post(
        reverse("admin:brain_page_changelist"),
        {"action": "restore_pages", "_selected_action": [merge.pk]},
    )
    merge.refresh_from_db()
    assert merge.deleted_at is None
    assert by_address("kenny@lay.example").pk == merge.pk  # type: ignore[union-attr]
    assert Fact.objects.get(text="Plays the cello").entity_id == merge.pk


def test_an_undone_merge_is_never_proposed_again(src) -> None:  # type: ignore[no-untyped-def]
    keep, merge, _friend = two_people(src)
    merge_id = page_merge(keep=keep, merge=merge, actor="curator")["merge_id"]
    page_merge_undo(merge_id=merge_id, actor="curator")
    report = dream_run(phases=["duplicates"])
    assert report["totals"]["merge_proposals"] == 0
    assert MergeProposal.objects.get().status == "rejected"


def test_an_undone_accepted_proposal_becomes_refused(src) -> None:  # type: ignore[no-untyped-def]
    keep, merge, _friend = two_people(src)
    proposal = MergeProposal.objects.create(
        source=src, keep_page=keep, merge_page=merge, reason="same_email"
    )
    merge_id = merge_proposal_accept(proposal_id=proposal.pk, actor="curator")[
        "merge_id"
    ]
    page_merge_undo(merge_id=merge_id, actor="curator")
    proposal.refresh_from_db()
    assert proposal.status == "rejected"
    assert dream_run(phases=["duplicates"])["totals"]["merge_proposals"] == 0


def test_a_refused_proposal_is_not_proposed_again_by_the_proposer(src) -> None:  # type: ignore[no-untyped-def]
    two_people(src)
    dream_run(phases=["duplicates"])
    proposal = MergeProposal.objects.get()
    merge_proposal_reject(proposal_id=proposal.pk, actor="curator")
    assert dream_run(phases=["duplicates"])["totals"]["merge_proposals"] == 0
    assert MergeProposal.objects.get().status == "rejected"
