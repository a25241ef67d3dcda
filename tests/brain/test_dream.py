"""Dream, the nightly maintenance job (SPEC §10), on the real database."""

from __future__ import annotations

import json
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from brain.models import (
    Alias,
    AuditEvent,
    Fact,
    MergeProposal,
    Page,
    PageType,
    Relation,
)
from brain.services.dream import LOCK_KEY, dream_run
from brain.services.merges import merge_proposal_accept, merge_proposal_reject
from brain.services.people import people_resolve
from jobs.models import Job
from jobs.runner import execute_job
from jobs.services import job_enqueue
from tests.factories import (
    AliasFactory,
    FactFactory,
    PageFactory,
    RelationFactory,
    SourceFactory,
    page_type,
)

pytestmark = pytest.mark.django_db

# The offline phases: no embedding model and no loops service in these tests.
OFFLINE = [
    "link_repair",
    "duplicates",
    "facts",
    "orphans",
    "purge",
    "synthesis",
    "patterns",
]
LLM = ["synthesis", "patterns"]


@pytest.fixture
def src():  # type: ignore[no-untyped-def]
    return SourceFactory(id="team")


def person(src, title: str, **kw):  # type: ignore[no-untyped-def]
    return PageFactory(source=src, person=True, title=title, **kw)


def phase(report: dict, name: str) -> dict:
    return next(p for p in report["phases"] if p["phase"] == name)


def test_dream_skips_while_another_run_holds_the_lock() -> None:
    db = connection.settings_dict
    conninfo = psycopg.conninfo.make_conninfo(
        dbname=db["NAME"], user=db["USER"], host=db["HOST"], port=db["PORT"] or None
    )
    with psycopg.connect(conninfo, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [LOCK_KEY])
        report = dream_run(phases=OFFLINE)
        other.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])
    assert report["status"] == "skipped"
    assert report["reason"] == "cycle_already_running"
    assert report["phases"] == []
    assert dream_run(phases=["orphans"])["status"] != "skipped", "lock released"


def test_dream_on_a_consistent_brain_is_clean_and_reports_every_phase(src) -> None:  # type: ignore[no-untyped-def]
    a, b = person(src, "Ada Lovelace"), person(src, "Charles Babbage")
    RelationFactory(from_page=a, to_page=b)
    RelationFactory(from_page=b, to_page=a)
    report = dream_run(phases=OFFLINE)
    assert report["status"] == "clean", report
    assert [p["phase"] for p in report["phases"]] == OFFLINE
    assert report["schema_version"] == 1
    assert report["totals"]["merge_proposals"] == 0
    assert phase(report, "synthesis")["status"] == "skipped"
    assert phase(report, "patterns")["status"] == "skipped"
    assert all("duration_ms" in p and "summary" in p for p in report["phases"])


def test_llm_phases_are_skipped_without_a_provider_and_spend_nothing() -> None:
    report = dream_run(phases=LLM, budget_usd=1.0)
    for name in LLM:
        llm = phase(report, name)
        assert llm["status"] == "skipped"
        assert llm["summary"] == (
            "skipped: no LLM provider configured (set ANTHROPIC_API_KEY); "
            "$0.00 of $1.00 spent"
        )
    assert report["budget"]["usd"] == 1.0
    assert report["status"] == "clean"


def test_unknown_phase_is_refused() -> None:
    from brain.exceptions import InvalidParams

    with pytest.raises(InvalidParams, match=r"Unknown dream phase\(s\) \['nap'\]"):
        dream_run(phases=["nap"])


def test_link_repair_repoints_relations_of_merged_pages_and_removes_dangling_ones(
    src,  # type: ignore[no-untyped-def]
) -> None:
    keep, gone, other, deleted = (
        person(src, "Kept"),
        person(src, "Merged"),
        person(src, "Other"),
        person(src, "Deleted"),
    )
    Page.objects.filter(pk=gone.pk).update(
        deleted_at=timezone.now(), frontmatter={"merged_into": keep.slug}
    )
    Page.objects.filter(pk=deleted.pk).update(deleted_at=timezone.now())
    to_merged = RelationFactory(from_page=other, to_page=gone)
    to_deleted = RelationFactory(from_page=other, to_page=deleted)
    fact = FactFactory(source=src, entity=gone, text="Likes tea")

    report = dream_run(phases=["link_repair"])
    repair = phase(report, "link_repair")
    assert repair["counts"]["relations_repointed"] == 1
    assert repair["counts"]["relations_removed"] == 1
    assert repair["counts"]["facts_repointed"] == 1
    to_merged.refresh_from_db()
    assert to_merged.to_page_id == keep.pk
    assert to_merged.provenance["repaired_by"] == "dream"
    assert not Relation.objects.filter(pk=to_deleted.pk).exists()
    fact.refresh_from_db()
    assert fact.entity_id == keep.pk
    removed = AuditEvent.objects.get(
        action="relation_removed", target_id=str(to_deleted.pk)
    )
    assert removed.actor == "dream" and removed.extra_data["dream_generated"] is True
    assert removed.extra_data["to"] == deleted.slug
    assert report["status"] == "ok"


def test_link_repair_reports_broken_wiki_links(src) -> None:  # type: ignore[no-untyped-def]
    target = person(src, "Target")
    PageFactory(
        source=src, slug="notes/a", body=f"See [[{target.slug}]] and [[people/nobody]]."
    )
    report = dream_run(phases=["link_repair"])
    repair = phase(report, "link_repair")
    assert repair["status"] == "warn"
    assert repair["details"]["broken_citations"] == [
        {"source": "team", "page": "notes/a", "link": "people/nobody"}
    ]
    assert report["status"] == "partial"


def test_pages_sharing_an_email_alias_get_one_merge_proposal_even_when_dream_runs_twice(
    src,  # type: ignore[no-untyped-def]
) -> None:
    older, newer = person(src, "K. Lay"), person(src, "Kenneth Lay")
    for page in (older, newer):
        AliasFactory(page=page, alias="klay@enron.com", kind=Alias.Kind.EMAIL)
    RelationFactory(from_page=person(src, "Jeff"), to_page=newer)

    first = dream_run(phases=["duplicates"])
    second = dream_run(phases=["duplicates"])
    assert first["totals"]["merge_proposals"] == 1
    assert second["totals"]["merge_proposals"] == 0
    assert second["status"] == "clean"
    proposal = MergeProposal.objects.get()
    # The page more others link to is kept.
    assert (proposal.keep_page_id, proposal.merge_page_id) == (newer.pk, older.pk)
    assert proposal.reason == "same_email"
    assert proposal.evidence == {"email": "klay@enron.com"}
    assert proposal.created_by == "dream"


def company(src, title: str):  # type: ignore[no-untyped-def]
    return PageFactory(
        source=src, type=PageType.objects.get(name="company"), title=title
    )


def test_near_identical_entity_names_are_proposed_and_different_names_are_not(
    src,  # type: ignore[no-untyped-def]
) -> None:
    acme, acme_inc = company(src, "Acme Widgets"), company(src, "Acme Widgets Inc")
    company(src, "Globex North"), company(src, "Initech South")
    PageFactory(source=src, title="Acme Widgets notes")  # a note, not an entity
    dream_run(phases=["duplicates"])
    proposal = MergeProposal.objects.get()
    assert {proposal.keep_page_id, proposal.merge_page_id} == {acme.pk, acme_inc.pk}
    assert proposal.reason == "similar_name"
    assert 0.75 <= proposal.score < 1


def test_people_are_not_proposed_on_title_similarity_alone(src) -> None:  # type: ignore[no-untyped-def]
    """Issue 25: similar titles are no evidence that two people are one."""
    person(src, "Sara Connor"), person(src, "Sarah Connor")
    person(src, "Nora Port"), person(src, "Nora V. Porter")
    dream_run(phases=["duplicates"])
    assert not MergeProposal.objects.exists()


def test_a_rejected_pair_is_not_proposed_again(src) -> None:  # type: ignore[no-untyped-def]
    company(src, "Acme Corp"), company(src, "Acme Corp.")
    dream_run(phases=["duplicates"])
    merge_proposal_reject(proposal_id=MergeProposal.objects.get().pk, actor="curator")
    report = dream_run(phases=["duplicates"])
    assert report["totals"]["merge_proposals"] == 0
    assert MergeProposal.objects.get().status == "rejected"


def test_merging_keeps_aliases_and_redirects_the_merged_page(src) -> None:  # type: ignore[no-untyped-def]
    keep, merge = person(src, "Kenneth Lay"), person(src, "Ken Lay")
    AliasFactory(page=keep, alias="klay@enron.com", kind=Alias.Kind.EMAIL)
    AliasFactory(page=merge, alias="klay@enron.com", kind=Alias.Kind.EMAIL)
    AliasFactory(page=merge, alias="ken.lay@enron.com", kind=Alias.Kind.EMAIL)
    friend = person(src, "Jeff Skilling")
    RelationFactory(from_page=friend, to_page=merge)
    RelationFactory(from_page=keep, to_page=merge)  # would become a self-loop
    FactFactory(source=src, entity=merge, text="Chairman")
    proposal = MergeProposal.objects.create(
        source=src, keep_page=keep, merge_page=merge, reason="same_email"
    )

    counts = merge_proposal_accept(proposal_id=proposal.pk, actor="admin:root")
    assert counts.pop("merge_id") > 0
    assert counts == {
        "aliases": 3,
        "relations": 1,
        "facts": 1,
        "raw_records": 0,
        "timeline": 0,
        "loops": 0,
    }
    aliases = set(Alias.objects.filter(page=keep).values_list("alias", flat=True))
    assert aliases == {"klay@enron.com", "ken.lay@enron.com", "ken lay", merge.slug}
    merge.refresh_from_db()
    assert merge.deleted_at is not None
    assert merge.frontmatter["merged_into"] == keep.slug
    assert Relation.objects.filter(from_page=friend, to_page=keep).exists()
    assert not Relation.objects.filter(to_page=merge).exists()
    assert Fact.objects.get(text="Chairman").entity_id == keep.pk
    assert AuditEvent.objects.filter(
        action="page_merged", target_id=f"team:{keep.slug}"
    ).exists()
    proposal.refresh_from_db()
    assert (proposal.status, proposal.decided_by) == ("merged", "admin:root")


def test_fact_consolidation_supersedes_exact_duplicates_and_expires_lapsed_facts(
    src,  # type: ignore[no-untyped-def]
) -> None:
    ada = person(src, "Ada")
    first = FactFactory(source=src, entity=ada, text="Prefers email")
    dupe = FactFactory(source=src, entity=ada, text="  prefers EMAIL ")
    other_kind = FactFactory(
        source=src, entity=ada, text="Prefers email", kind=Fact.Kind.PREFERENCE
    )
    lapsed_at = timezone.now() - timedelta(days=1)
    lapsed = FactFactory(
        source=src, entity=ada, text="In Paris this week", valid_until=lapsed_at
    )
    report = dream_run(phases=["facts"])
    assert report["totals"] == {
        "facts_attached": 0,
        "facts_deduplicated": 1,
        "facts_expired": 1,
    }
    dupe.refresh_from_db()
    assert dupe.expired_at is not None and dupe.superseded_by_id == first.pk
    assert dupe.expired_reason == f"dream: exact duplicate of fact #{first.pk}"
    for untouched in (first, other_kind):
        untouched.refresh_from_db()
        assert untouched.expired_at is None
    lapsed.refresh_from_db()
    assert lapsed.expired_at == lapsed_at
    assert lapsed.expired_reason == "dream: valid_until passed"
    events = AuditEvent.objects.filter(actor="dream", target_type="fact")
    assert {e.action for e in events} == {"fact_superseded", "fact_expired"}
    assert all(e.extra_data["dream_generated"] for e in events)
    assert dream_run(phases=["facts"])["status"] == "clean"


def test_purge_removes_pages_soft_deleted_more_than_72_hours_ago(src) -> None:  # type: ignore[no-untyped-def]
    old, recent, live = person(src, "Old"), person(src, "Recent"), person(src, "Live")
    now = timezone.now()
    Page.objects.filter(pk=old.pk).update(deleted_at=now - timedelta(hours=73))
    Page.objects.filter(pk=recent.pk).update(deleted_at=now - timedelta(hours=71))
    fact = FactFactory(source=src, entity=old, text="kept")
    report = dream_run(phases=["purge"])
    assert report["totals"] == {"pages_purged": 1}
    assert set(Page.objects.values_list("pk", flat=True)) >= {recent.pk, live.pk}
    assert not Page.objects.filter(pk=old.pk).exists()
    fact.refresh_from_db()
    assert fact.entity_id is None and fact.text == "kept"
    event = AuditEvent.objects.get(
        action="page_deleted", target_id=f"team:{old.slug}", actor="dream"
    )
    assert event.extra_data["purged"] is True and event.actor == "dream"


def test_orphan_report_counts_live_entity_pages_without_inbound_links(src) -> None:  # type: ignore[no-untyped-def]
    a, b, c = person(src, "A"), person(src, "B"), person(src, "C")
    RelationFactory(from_page=a, to_page=b)
    PageFactory(source=src, title="a note nobody links to")  # records are leaves
    orphans = phase(dream_run(phases=["orphans"]), "orphans")
    assert orphans["counts"] == {"orphans_found": 2, "grounded": 0}
    assert sorted(orphans["details"]["sample"]) == sorted([a.slug, c.slug])


def test_people_a_connector_captured_from_records_are_grounded_not_orphans(src) -> None:  # type: ignore[no-untyped-def]
    """A brain built from mail alone: its people come from headers and nothing
    links to them; the orphan report counts them as grounded and stays ``ok``,
    while the pages someone wrote and nobody links to still count."""
    people_resolve(
        source=src,
        sightings={f"p{i}@example.org": {f"Person {i}": 1} for i in range(12)},
        create=[f"p{i}@example.org" for i in range(12)],
        owner_addresses=["me@example.org"],
        actor="test",
    )
    written = person(src, "Written By Hand")
    orphans = phase(dream_run(phases=["orphans"]), "orphans")
    assert orphans["counts"] == {"orphans_found": 1, "grounded": 12}
    assert orphans["details"]["sample"] == [written.slug]
    assert orphans["status"] == "ok"


def test_dream_runs_as_a_job_and_its_report_is_the_job_result(settings) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    job, _ = job_enqueue(kind="dream", params={"phases": OFFLINE}, dispatch=False)
    done = execute_job(job_id=job.pk)
    assert done is not None and done.status == Job.Status.SUCCEEDED, done.error
    assert done.result["status"] in {"clean", "ok"}
    assert [p["phase"] for p in done.result["phases"]] == OFFLINE
    assert done.progress["step"] == len(OFFLINE)


def test_curators_merge_from_the_admin(src) -> None:  # type: ignore[no-untyped-def]
    keep, merge = person(src, "Sara Connor"), person(src, "Sara Connor")
    for page, email in (
        (keep, "sara.connor@corp.example"),
        (merge, "sconnor@corp.example"),
    ):
        AliasFactory(page=page, alias="sara connor", kind=Alias.Kind.NAME)
        AliasFactory(page=page, alias=email, kind=Alias.Kind.EMAIL)
    dream_run(phases=["duplicates"])
    proposal = MergeProposal.objects.get()
    assert proposal.reason == "people_evidence"
    assert "same name: sara connor" in proposal.evidence["evidence"]
    client = Client()
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    listing = client.get(reverse("admin:brain_mergeproposal_changelist"))
    assert listing.status_code == 200
    assert proposal.merge_page.slug in listing.content.decode()
    response = client.post(
        reverse("admin:brain_mergeproposal_changelist"),
        {"action": "merge_selected", "_selected_action": [proposal.pk]},
        follow=True,
    )
    assert f"#{proposal.pk} merged" in response.content.decode()
    merged = Page.objects.get(pk=proposal.merge_page_id)
    assert merged.deleted_at is not None
    assert {keep.pk, merge.pk} == {proposal.keep_page_id, proposal.merge_page_id}


def test_record_pages_sharing_an_address_in_their_title_are_not_duplicates(
    src,  # type: ignore[no-untyped-def]
) -> None:
    """Mail thread pages get their subject as an alias; two threads with the same
    subject mentioning an address are not one entity."""
    for n in range(2):
        page = PageFactory(
            source=src,
            slug=f"emails/2001/10/access-request-{n}",
            type=page_type("email"),
            title="Access Request for matt.smith@enron.com",
        )
        AliasFactory(
            page=page, alias="access request for matt.smith@enron.com", kind="email"
        )
    assert dream_run(phases=["duplicates"])["totals"]["merge_proposals"] == 0


def test_dream_runs_the_loops_sweep_service() -> None:
    loops = phase(dream_run(phases=["loops"]), "loops")
    assert loops["status"] == "ok", loops
    assert loops["counts"]["loops_failed"] == 0
    assert "loops_stale" in loops["counts"]


# --- LLM phases: the real anthropic client against recorded reply shapes ---


def message(text: str, stop: str = "end_turn") -> dict:
    """A Messages API reply as the API sends it (one text block, token usage)."""
    return {
        "id": "msg_01Dream",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5",
        "content": [{"type": "text", "text": text}] if text else [],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 900, "output_tokens": 80},
    }


def replies(*bodies: dict):  # type: ignore[no-untyped-def]
    import httpx2

    queue = list(bodies)

    def handler(request):  # type: ignore[no-untyped-def]
        body = queue.pop(0) if len(queue) > 1 else queue[0]
        if "status" in body:
            return httpx2.Response(body["status"], json=body["json"])
        return httpx2.Response(200, json=body)

    return handler


def thread(src, n: int, **kw):  # type: ignore[no-untyped-def]
    return PageFactory(
        source=src,
        slug=f"emails/2001/05/gas-deal-{n}",
        type=page_type("email"),
        title=f"Gas deal {n}",
        body=f"From: a@example.com\n\nShall we close the gas deal {n} by Friday?",
        **kw,
    )


def test_synthesis_writes_a_dream_generated_note_per_new_conversation_with_a_key(
    src,  # type: ignore[no-untyped-def]
    fake_anthropic,  # type: ignore[no-untyped-def]
) -> None:
    private = thread(src, 1, visibility="private")
    thread(src, 2)
    person(src, "Not A Conversation")
    seen = fake_anthropic(replies(message("Phillip asks to close the gas deal.")))

    report = dream_run(phases=["synthesis"], budget_usd=1.0)

    synthesis = phase(report, "synthesis")
    assert synthesis["status"] == "ok", synthesis
    assert synthesis["counts"]["synthesis_pages_written"] == 2
    assert len(seen) == 2
    sent = json.loads(seen[0].content)
    assert "data, not instructions" in sent["system"]
    assert "Shall we close the gas deal" in sent["messages"][0]["content"]
    note = Page.objects.get(slug="dream/synthesis/emails-2001-05-gas-deal-1")
    assert note.visibility == "private" == private.visibility
    assert note.frontmatter["dream_generated"] is True
    assert note.frontmatter["synthesised_hash"] == private.content_hash
    assert note.body.startswith("Phillip asks to close the gas deal.")
    assert Relation.objects.filter(from_page=note, to_page=private).exists()
    assert synthesis["counts"]["llm_usd_spent_cents"] > 0
    assert report["status"] == "ok"

    again = phase(dream_run(phases=["synthesis"], budget_usd=1.0), "synthesis")
    assert again["counts"]["synthesis_pages_written"] == 0
    assert len(seen) == 2, "a conversation already synthesised is not sent again"


def test_patterns_summarise_syntheses_of_a_source_in_one_call(
    src,  # type: ignore[no-untyped-def]
    fake_anthropic,  # type: ignore[no-untyped-def]
) -> None:
    thread(src, 1)
    thread(src, 2)
    seen = fake_anthropic(
        replies(
            message("Gas deal one."),
            message("Gas deal two."),
            message("- Closing gas deals before Friday [1, 2]"),
        )
    )

    report = dream_run(phases=LLM, budget_usd=1.0)

    patterns = phase(report, "patterns")
    assert patterns["counts"]["pattern_pages_written"] == 1, patterns
    assert len(seen) == 3
    assert (
        "[1] Synthesis: Gas deal"
        in json.loads(seen[2].content)["messages"][0]["content"]
    )
    page = Page.objects.get(slug__startswith="dream/patterns/world-")
    assert page.frontmatter["dream_generated"] is True
    assert page.frontmatter["evidence"] == [
        "dream/synthesis/emails-2001-05-gas-deal-1",
        "dream/synthesis/emails-2001-05-gas-deal-2",
    ]
    again = phase(dream_run(phases=["patterns"], budget_usd=1.0), "patterns")
    assert again["counts"]["pattern_pages_written"] == 0
    assert len(seen) == 3, "the same evidence is not sent twice"


def test_llm_phases_stop_at_the_budget_and_leave_the_rest_for_the_next_run(
    src,  # type: ignore[no-untyped-def]
    fake_anthropic,  # type: ignore[no-untyped-def]
) -> None:
    thread(src, 1)
    seen = fake_anthropic(replies(message("never asked")))
    synthesis = phase(dream_run(phases=["synthesis"], budget_usd=0.001), "synthesis")
    assert seen == []
    assert synthesis["counts"]["synthesis_deferred"] == 1
    assert not Page.objects.filter(slug__startswith="dream/").exists()


def test_a_refusal_or_a_cut_reply_writes_no_synthesis(
    src,  # type: ignore[no-untyped-def]
    fake_anthropic,  # type: ignore[no-untyped-def]
) -> None:
    thread(src, 1)
    thread(src, 2)
    fake_anthropic(
        replies(message("", stop="refusal"), message("Half a sent", stop="max_tokens"))
    )
    synthesis = phase(dream_run(phases=["synthesis"], budget_usd=1.0), "synthesis")
    assert synthesis["counts"]["synthesis_pages_written"] == 0
    assert "1 refused, 1 cut at the token limit" in synthesis["summary"]
    assert not Page.objects.filter(slug__startswith="dream/").exists()


def test_an_api_error_stops_the_llm_phase_and_the_run_is_partial(
    src,  # type: ignore[no-untyped-def]
    fake_anthropic,  # type: ignore[no-untyped-def]
) -> None:
    thread(src, 1)
    overloaded = {
        "status": 529,
        "json": {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"},
        },
    }
    fake_anthropic(replies(overloaded))
    report = dream_run(phases=["synthesis"], budget_usd=1.0)
    synthesis = phase(report, "synthesis")
    assert synthesis["status"] == "warn"
    assert "Overloaded" in synthesis["details"]["error"]
    assert synthesis["counts"]["synthesis_deferred"] == 1
    assert report["status"] == "partial"


def test_a_dream_job_whose_report_is_partial_ends_partial(src) -> None:  # type: ignore[no-untyped-def]
    """The job status follows the report: a warning phase is not "Succeeded"."""
    PageFactory(source=src, body="See [[people/nobody-here]] for details.")
    job, _ = job_enqueue(
        kind="dream", params={"phases": ["link_repair"]}, dispatch=False
    )
    done = execute_job(job_id=job.pk)
    assert done is not None
    assert done.result["status"] == "partial"
    assert done.status == Job.Status.PARTIAL
    assert done.error == "dream partial: link_repair warn"
    assert done.history[-1]["outcome"] == "partial"


def test_the_dream_job_hands_pending_embeddings_to_one_embed_pending_job(
    src,  # type: ignore[no-untyped-def]
    settings,  # type: ignore[no-untyped-def]
) -> None:
    from brain.models import Chunk

    settings.BRAIN_EMBEDDING_PROVIDER = "local"
    page = PageFactory(source=src)
    for ordinal in range(3):
        Chunk.objects.create(
            page=page,
            source=src,
            visibility=page.visibility,
            ordinal=ordinal,
            text=f"chunk {ordinal}",
            content_hash=str(ordinal),
        )
    for _ in range(2):
        job, _ = job_enqueue(
            kind="dream", params={"phases": ["embeddings"]}, dispatch=False
        )
        done = execute_job(job_id=job.pk)
        assert done is not None and done.status == Job.Status.SUCCEEDED, done.error
        embeddings = phase(done.result, "embeddings")
        assert embeddings["counts"] == {"chunks_embedded": 0, "chunks_pending": 3}
    queued = Job.objects.filter(kind="embed_pending")
    assert queued.count() == 1, "a second dream finds the queued job"
    assert embeddings["summary"] == (
        f"3 chunk(s) to embed handed to the embed_pending job #{queued.get().pk} "
        "(already queued)"
    )
    assert Chunk.objects.filter(embedding__isnull=False).count() == 0
