"""The curation console (issue 19): home, triage, person cards, merges, wiki pages.

Driven through Django's test client against the real database; the browser suite
(tests/console/test_browser.py) drives the same pages in headless Chromium.
"""

from __future__ import annotations

import re
from datetime import timedelta
from html.parser import HTMLParser
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from brain.access import local_caller
from brain.models import (
    Alias,
    MergeProposal,
    Page,
    PageRevision,
    PageType,
    Relation,
    RelationType,
    Source,
)
from brain.services.entities import entity_card
from brain.services.facts import fact_remember
from brain.services.pages import page_write
from jobs.models import Job, WorkerHeartbeat
from loops.models import LoopEvent, LoopStatus, LoopSuppression, LoopType, OpenLoop
from loops.services import loop_open, loop_snooze

pytestmark = pytest.mark.django_db

CALLER = local_caller(actor="test")


@pytest.fixture
def staff() -> Client:
    user = User.objects.create_superuser("curator", "curator@example.org", "pw")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def mail_source() -> Source:
    return Source.objects.create(id="work-mail", name="Work mail", kind="mailbox")


def person(source: Source, title: str, email: str) -> Page:
    return page_write(
        source=source,
        mode="create",
        actor=CALLER,
        title=title,
        type_name="person",
        body=f"{title} works with us.",
        frontmatter={"aliases": [email]},
        embed=False,
    ).page


def a_loop(
    source: Source,
    email: str,
    summary: str,
    loop_type: str = LoopType.UNANSWERED_INBOUND,
) -> OpenLoop:
    return loop_open(
        source=source,
        loop_type=loop_type,
        summary=summary,
        actor="test",
        counterparty_email=email,
        evidence=[{"quote": f"Quote for {summary}", "link": "mid:abc@example.org"}],
    )


def texts(response) -> str:  # type: ignore[no-untyped-def]
    return response.content.decode()


def ranked(html: str) -> str:
    """The waiting page's ranked groups: above the digest, without the snoozed
    list (``<details id="waiting-snoozed">``)."""
    before = html.split("Paste-ready")[0]
    if '<details id="waiting-snoozed"' in before:
        head, rest = before.split('<details id="waiting-snoozed"', 1)
        before = head + rest.split("</details>", 1)[1]
    return before


# --- home and navigation -------------------------------------------------------------


def test_home_is_a_branded_dashboard_with_waiting_and_job_buttons(
    staff: Client, mail_source: Source
) -> None:
    html = texts(staff.get(reverse("admin:index")))
    assert "Brain console" in html
    assert "Django administration" not in html
    assert reverse("admin:loops_waiting") in html
    for label in ("Sync now", "Embed now", "Run dream", "Work mail", "Worker:"):
        assert label in html, label
    # Third-party internals are grouped after the curator's apps.
    assert html.index("Third-party internals") > html.index("Open loops")
    assert html.index("Third-party internals") < html.index("Scheduled tasks")


def test_view_site_leads_to_the_console_not_a_404(staff: Client) -> None:
    response = staff.get("/")
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:index")


def test_embed_now_enqueues_a_job_and_warns_without_a_worker(staff: Client) -> None:
    response = staff.post(
        reverse("admin:console_run"), {"kind": "embed_pending"}, follow=True
    )
    job = Job.objects.get(kind="embed_pending")
    html = texts(response)
    assert f"Queued job #{job.pk} (embed_pending)" in html
    assert "No worker is running" in html


def test_run_job_refuses_an_unknown_kind(staff: Client) -> None:
    response = staff.post(
        reverse("admin:console_run"), {"kind": "drop_db"}, follow=True
    )
    assert "Unknown job kind" in texts(response)
    assert not Job.objects.exists()


def test_dream_partial_is_shown_as_partial(staff: Client) -> None:
    job = Job.objects.create(
        kind="dream",
        status=Job.Status.SUCCEEDED,
        result={"status": "partial", "phases": [{"name": "links", "ok": False}]},
    )
    assert "Succeeded, partial" in texts(
        staff.get(reverse("admin:jobs_job_changelist"))
    )
    assert "Succeeded, partial" in texts(staff.get(reverse("admin:index")))
    Job.objects.create(kind="dream", status=Job.Status.PARTIAL, result={})
    assert "dream</a>: Partial" in texts(staff.get(reverse("admin:index")))
    change = texts(staff.get(reverse("admin:jobs_job_change", args=[job.pk])))
    # JSON fields render as tables, not raw JSON.
    assert 'class="json-table"' in change
    assert "{&quot;status&quot;" not in change


def test_queued_job_without_a_live_worker_warns(staff: Client) -> None:
    Job.objects.create(kind="embed_pending")
    url = reverse("admin:jobs_job_changelist")
    assert "No worker is running" in texts(staff.get(url))
    assert "no worker is running" in texts(staff.get(reverse("admin:index")))
    WorkerHeartbeat.objects.create(name="host:1")
    assert "No worker is running" not in texts(staff.get(url))


# --- waiting triage ------------------------------------------------------------------


def test_waiting_with_an_unknown_source_says_so_instead_of_500(staff: Client) -> None:
    response = staff.get(reverse("admin:loops_waiting"), {"source": "typo"})
    assert response.status_code == 200
    assert "There is no source &#x27;typo&#x27;" in texts(response)


def test_waiting_rows_have_human_labels_links_and_actions(
    staff: Client, mail_source: Source
) -> None:
    dana = person(mail_source, "Dana Reyes", "dana@example.org")
    loop = a_loop(mail_source, "dana@example.org", "Send the Q3 numbers")
    html = texts(staff.get(reverse("admin:loops_waiting")))
    assert "Reply owed by me" in html
    assert "unanswered_inbound</td>" not in html
    assert reverse("admin:console_person", args=[mail_source.id, dana.slug]) in html
    assert reverse("admin:console_loop_act", args=[loop.pk]) in html
    for label in ("Done", "Drop", "Change due", "Mute sender &amp; close their loops"):
        assert label in html, label


def test_waiting_filter_keeps_what_i_owe(staff: Client, mail_source: Source) -> None:
    a_loop(mail_source, "a@example.org", "Reply to Ann")
    a_loop(
        mail_source, "b@example.org", "Bob owes a draft", LoopType.UNANSWERED_OUTBOUND
    )
    html = texts(staff.get(reverse("admin:loops_waiting"), {"mine": "by_me"}))
    assert "Reply to Ann" in html.split("Paste-ready")[0]
    assert "Bob owes a draft" not in html.split("Paste-ready")[0]


def test_waiting_filter_also_filters_the_count_and_the_digest(
    staff: Client, mail_source: Source
) -> None:
    """Regression (newcomer): "what I owe" kept the rows but the header still counted
    both directions and the paste-ready digest still listed what others owe me."""
    a_loop(mail_source, "a@example.org", "Reply to Ann")
    a_loop(
        mail_source, "b@example.org", "Bob owes a draft", LoopType.UNANSWERED_OUTBOUND
    )
    html = texts(staff.get(reverse("admin:loops_waiting"), {"mine": "by_me"}))
    assert "1 open loop(s)" in html
    digest = html.split("Paste-ready")[1]
    assert "Reply to Ann" in digest
    assert "Bob owes a draft" not in digest and "b@example.org" not in digest
    html = texts(staff.get(reverse("admin:loops_waiting"), {"mine": "to_me"}))
    assert "1 open loop(s)" in html
    assert "Reply to Ann" not in html and "Bob owes a draft" in html


def test_console_pages_answer_bad_text_in_the_query_string_without_a_500(
    staff: Client, mail_source: Source
) -> None:
    """Regression (newcomer): a NUL in the console search or the waiting filter, or
    a 5,000-character search word, answered a 500 Server Error page."""
    search = reverse("admin:console_search")
    waiting = reverse("admin:loops_waiting")
    for url, params in ((search, {"q": "a\x00b"}), (waiting, {"source": "\x00"})):
        response = staff.get(url, params)
        assert response.status_code == 400, (url, response.status_code)
        assert "NUL character" in texts(response)
    assert staff.get(search, {"q": "x" * 5000}).status_code == 200


def test_the_loop_form_cannot_edit_a_loop_around_its_history(
    staff: Client, mail_source: Source
) -> None:
    """Regression (newcomer): the loop's change form saved a new summary and an
    invalid counterparty address with no check and no event in its History."""
    loop = a_loop(mail_source, "dana@example.org", "Send the Q3 numbers")
    url = reverse("admin:loops_openloop_change", args=[loop.pk])
    staff.post(
        url,
        {
            "summary": "Edited by hand",
            "counterparty_email": "not-an-email",
            "counterparty_name": "X",
            "_continue": "1",
        },
    )
    loop.refresh_from_db()
    assert (loop.summary, loop.counterparty_email) == (
        "Send the Q3 numbers",
        "dana@example.org",
    )
    html = texts(staff.get(url))
    assert 'name="summary"' not in html and 'name="counterparty_email"' not in html


def test_home_counts_open_loops_as_waiting_does_with_snoozed_apart(
    staff: Client, mail_source: Source
) -> None:
    """Regression (newcomer): with one loop snoozed, Home said 2 open loops while
    Waiting listed 1."""
    a_loop(mail_source, "a@example.org", "Reply to Ann")
    later = a_loop(mail_source, "b@example.org", "Reply to Bob")
    loop_snooze(loop=later, until=timezone.now() + timedelta(days=3), actor="test")
    home = texts(staff.get(reverse("admin:index")))
    waiting = texts(staff.get(reverse("admin:loops_waiting")))
    assert "1 open loop(s)" in home and "(1 more snoozed)" in home
    assert "1 open loop(s)" in waiting


def test_done_closes_the_loop_and_says_so(staff: Client, mail_source: Source) -> None:
    loop = a_loop(mail_source, "dana@example.org", "Send the Q3 numbers")
    waiting = reverse("admin:loops_waiting")
    response = staff.post(
        reverse("admin:console_loop_act", args=[loop.pk]),
        {"action": "done", "next": waiting},
        follow=True,
    )
    assert response.redirect_chain[-1][0] == waiting
    assert "“Send the Q3 numbers” closed as done." in texts(response)
    loop.refresh_from_db()
    assert loop.status == LoopStatus.DONE


def test_next_outside_the_site_is_ignored(staff: Client, mail_source: Source) -> None:
    loop = a_loop(mail_source, "dana@example.org", "Send the Q3 numbers")
    response = staff.post(
        reverse("admin:console_loop_act", args=[loop.pk]),
        {"action": "drop", "next": "https://evil.example/"},
    )
    assert response["Location"] == reverse(
        "admin:loops_openloop_change", args=[loop.pk]
    )


def test_change_due_moves_the_deadline_and_records_an_event(
    staff: Client, mail_source: Source
) -> None:
    loop = a_loop(mail_source, "dana@example.org", "Send the Q3 numbers")
    response = staff.post(
        reverse("admin:console_loop_act", args=[loop.pk]),
        {"action": "due", "due": "2031-05-04"},
        follow=True,
    )
    assert "due date changed from no due date to 2031-05-04" in texts(response)
    loop.refresh_from_db()
    assert loop.due_at is not None
    assert loop.due_at.date().isoformat() == "2031-05-04"
    assert LoopEvent.objects.filter(
        loop=loop, event_type=LoopEvent.EventType.DUE_CORRECTED
    ).exists()


def test_change_due_rejects_a_non_date(staff: Client, mail_source: Source) -> None:
    loop = a_loop(mail_source, "dana@example.org", "Send the Q3 numbers")
    response = staff.post(
        reverse("admin:console_loop_act", args=[loop.pk]),
        {"action": "due", "due": "next tuesday"},
        follow=True,
    )
    assert "is not a date" in texts(response)
    loop.refresh_from_db()
    assert loop.due_at is None


def test_mute_and_close_mutes_the_sender_and_closes_all_their_loops(
    staff: Client, mail_source: Source
) -> None:
    first = a_loop(mail_source, "news@example.org", "Newsletter one")
    a_loop(mail_source, "news@example.org", "Newsletter two")
    other = a_loop(mail_source, "dana@example.org", "Send the Q3 numbers")
    response = staff.post(
        reverse("admin:console_loop_act", args=[first.pk]),
        {"action": "mute_close"},
        follow=True,
    )
    html = texts(response)
    assert "Muted news@example.org" in html
    assert "Closed 2 open loop(s) with them" in html
    assert LoopSuppression.objects.filter(
        source=mail_source, kind="sender", value="news@example.org"
    ).exists()
    assert set(
        OpenLoop.objects.filter(counterparty_email="news@example.org").values_list(
            "status", flat=True
        )
    ) == {LoopStatus.DROPPED}
    other.refresh_from_db()
    assert other.status == LoopStatus.OPEN


def test_loop_page_has_buttons_quotes_history_and_no_delete(
    staff: Client, mail_source: Source
) -> None:
    loop = a_loop(mail_source, "dana@example.org", "Send the Q3 numbers")
    html = texts(staff.get(reverse("admin:loops_openloop_change", args=[loop.pk])))
    assert "Reply owed by me" in html
    assert 'class="loop-done"' in html
    assert '<blockquote class="console-quote">Quote for Send the Q3 numbers' in html
    assert "Opened" in html  # the LoopEvent history
    assert "deletelink" not in html


# --- person cards and merges ---------------------------------------------------------


def test_person_card_shows_loops_facts_relations_and_merge_search(
    staff: Client, mail_source: Source
) -> None:
    dana = person(mail_source, "Dana Reyes", "dana@example.org")
    twin = person(mail_source, "D. Reyes", "dana.r@example.org")
    a_loop(mail_source, "dana@example.org", "Send the Q3 numbers")
    old = fact_remember(
        caller=CALLER,
        source=mail_source,
        text="Dana works at Acme",
        provenance="test",
        entity=dana,
    ).fact
    old.expired_at = timezone.now() - timedelta(days=1)
    old.expired_reason = "superseded"
    old.save(update_fields=["expired_at", "expired_reason"])
    fact_remember(
        caller=CALLER,
        source=mail_source,
        text="Dana works at Initech",
        provenance="test",
        entity=dana,
    )
    url = reverse("admin:console_person", args=[mail_source.id, dana.slug])
    html = texts(staff.get(url, {"q": "dana.r@"}))
    assert "dana@example.org" in html  # alias
    assert "Send the Q3 numbers" in html
    assert "Dana works at Initech" in html
    assert "<del>Dana works at Acme</del>" in html
    preview = f"{reverse('admin:console_merge')}?keep={dana.pk}&amp;merge={twin.pk}"
    assert preview in html


def test_merge_two_people_through_the_merge_service(
    staff: Client, mail_source: Source
) -> None:
    dana = person(mail_source, "Dana Reyes", "dana@example.org")
    twin = person(mail_source, "dana.r@example.org", "dana.r@example.org")
    preview = staff.get(
        reverse("admin:console_merge"), {"keep": dana.pk, "merge": twin.pk}
    )
    assert "Merged away: dana.r@example.org" in texts(preview)
    response = staff.post(
        reverse("admin:console_merge"),
        {"keep": dana.pk, "merge": twin.pk, "decision": "merge"},
        follow=True,
    )
    assert "Merged dana.r@example.org into Dana Reyes" in texts(response)
    twin.refresh_from_db()
    assert twin.deleted_at is not None
    assert Alias.objects.filter(page=dana, alias="dana.r@example.org").exists()


def test_a_merged_away_page_redirects_to_the_kept_page(
    staff: Client, mail_source: Source
) -> None:
    """Issue 47: a merged-away page's card and page URLs answered a bare 404; they
    redirect (302) to the kept page's, and the kept card does not list the merged
    slug as a name (its title and addresses stay)."""
    dana = person(mail_source, "Dana Reyes", "dana@example.org")
    twin = person(mail_source, "Dana R.", "dana.r@example.org")
    staff.post(
        reverse("admin:console_merge"),
        {"keep": dana.pk, "merge": twin.pk, "decision": "merge"},
    )
    for view in ("admin:console_person", "admin:console_page"):
        response = staff.get(reverse(view, args=[mail_source.id, twin.slug]))
        assert response.status_code == 302
        assert response["Location"] == reverse(view, args=[mail_source.id, dana.slug])
    gone = staff.get(reverse("admin:console_page", args=[mail_source.id, "nobody"]))
    assert gone.status_code == 404
    card = texts(
        staff.get(reverse("admin:console_person", args=[mail_source.id, dana.slug]))
    )
    known = card.split("Also known as:</strong>")[1].split("</p>")[0]
    assert "dana.r@example.org" in known and "dana r." in known
    assert twin.slug not in known
    assert Alias.objects.filter(page=dana, alias=twin.slug).exists()


def test_wiki_links_read_as_the_linked_pages_title(
    staff: Client, mail_source: Source
) -> None:
    """Issue 47: ``[[people/x]]`` rendered the slug; it reads the page's title (an
    explicit label and a link to no page keep their text)."""
    dana = person(mail_source, "Dana Reyes", "dana@example.org")
    notes = page_write(
        source=mail_source,
        mode="create",
        actor=CALLER,
        title="Offsite notes",
        body=f"Met [[{dana.slug}]], [[{dana.slug}|our CFO]] and [[people/nobody]].",
        embed=False,
    ).page
    html = texts(
        staff.get(reverse("admin:console_page", args=[mail_source.id, notes.slug]))
    )
    href = reverse("admin:console_page", args=[mail_source.id, dana.slug])
    assert f'<a href="{href}" rel="noopener noreferrer">Dana Reyes</a>' in html
    assert f'<a href="{href}" rel="noopener noreferrer">our CFO</a>' in html
    assert ">people/nobody</a>" in html


def test_the_card_lists_every_relation_the_api_card_shows(
    staff: Client, mail_source: Source
) -> None:
    """Issue 47: the card said "Relations: None" where the API card showed an edge
    (a thread that owes the person a reply): it lists every edge of
    ``entity_card``; a thread's mere mention stays in the thread list."""
    dana = person(mail_source, "Dana Reyes", "dana@example.org")
    thread = page_write(
        source=mail_source,
        mode="create",
        actor=CALLER,
        slug="emails/2026/11/2026-11-30-budget-0a1b2c3d",
        title="Budget for the offsite",
        type_name="email",
        body="## Dana\n\nCan you send it?",
        embed=False,
    ).page
    for name in ("owes_to", "mentions"):
        Relation.objects.create(
            source=mail_source,
            from_page=thread,
            to_page=dana,
            relation_type=RelationType.objects.get(name=name),
        )
    api = entity_card(scope=CALLER.read_scope([mail_source.id]), page=dana)
    html = texts(
        staff.get(reverse("admin:console_person", args=[mail_source.id, dana.slug]))
    )
    relations = html.split('id="person-relations"')[1].split("</ul>")[0]
    assert [e["type"] for e in api["edges"]] == ["owes_to"]
    assert "Budget for the offsite" in relations and "owes_to" in relations
    assert "mentions" not in relations and "None." not in relations


def test_people_are_paginated_and_every_person_is_reachable(
    staff: Client, mail_source: Source
) -> None:
    """Issue 47: People showed the first 100 of 124, so people still titled by
    their address (sorted last) were reachable only through Find."""
    for n in range(120):
        Page.objects.create(
            source=mail_source,
            slug=f"people/person-{n:03d}",
            title=f"Person {n:03d}",
            type=PageType.objects.get(name="person"),
        )
    for n in range(4):
        person(mail_source, f"someone{n}@example.org", f"someone{n}@example.org")
    seen: list[str] = []
    url = reverse("admin:console_people")
    first = texts(staff.get(url))
    assert "People 1–100 of 124 (page 1 of 2)" in first
    second = texts(staff.get(url, {"page": 2}))
    for html in (first, second):
        table = html.split('id="people"')[1].split("</table>")[0]
        seen += re.findall(r'/admin/console/person/work-mail/([^"]+)/"', table)
    assert len(seen) == len(set(seen)) == 124
    assert "someone3@example.org" in second and 'id="people-previous"' in second


def test_merge_proposal_reject_from_the_side_by_side_page(
    staff: Client, mail_source: Source
) -> None:
    dana = person(mail_source, "Dana Reyes", "dana@example.org")
    twin = person(mail_source, "D. Reyes", "dana.r@example.org")
    proposal = MergeProposal.objects.create(
        source=mail_source, keep_page=dana, merge_page=twin, reason="name", score=0.9
    )
    listing = texts(staff.get(reverse("admin:brain_mergeproposal_changelist")))
    assert f"?proposal={proposal.pk}" in listing
    response = staff.post(
        reverse("admin:console_merge"),
        {"proposal": proposal.pk, "decision": "reject"},
        follow=True,
    )
    assert "stay separate" in texts(response)
    proposal.refresh_from_db()
    assert proposal.status == MergeProposal.Status.REJECTED


# --- wiki pages ----------------------------------------------------------------------


def test_page_renders_sanitised_markdown_with_wiki_links(
    staff: Client, mail_source: Source
) -> None:
    page = page_write(
        source=mail_source,
        mode="create",
        actor=CALLER,
        slug="notes/plan",
        title="Plan",
        body="# Plan\n\n**bold** <script>alert(1)</script> "
        "[x](javascript:alert(1)) see [[notes/other|the other]]",
        embed=False,
    ).page
    html = texts(
        staff.get(reverse("admin:console_page", args=[mail_source.id, page.slug]))
    )
    body = html.split('id="page-body">')[1].split("</div>")[0]
    assert "<strong>bold</strong>" in body
    assert "<script>" not in body
    assert "javascript:" not in body.replace("[x](javascript:alert(1))", "")
    assert reverse("admin:console_page", args=[mail_source.id, "notes/other"]) in body


def test_edit_saves_through_the_write_function_and_revert_is_a_revision(
    staff: Client, mail_source: Source
) -> None:
    page = page_write(
        source=mail_source,
        mode="create",
        actor=CALLER,
        slug="notes/plan",
        title="Plan",
        body="Original plan text.",
        frontmatter={"owner": "dana"},
        embed=False,
    ).page
    edit = reverse("admin:console_page_edit", args=[mail_source.id, page.slug])
    response = staff.post(
        edit,
        {"title": "Plan", "body": "Zanzibar offsite in May.", "mode": "replace"},
        follow=True,
    )
    assert "Page saved; a revision was recorded" in texts(response)
    page.refresh_from_db()
    assert page.body.strip() == "Zanzibar offsite in May."
    assert page.frontmatter["owner"] == "dana"  # frontmatter kept
    assert Job.objects.filter(kind="embed_pending").exists()  # embedding deferred
    found = texts(staff.get(reverse("admin:console_search"), {"q": "Zanzibar"}))
    assert "notes/plan" in found.split('id="search-results"')[1]

    revisions = texts(
        staff.get(
            reverse("admin:console_page_revisions", args=[mail_source.id, page.slug])
        )
    )
    assert '<div class="add">+Zanzibar offsite in May.</div>' in revisions
    assert '<div class="del">-Original plan text.</div>' in revisions
    latest = PageRevision.objects.filter(page=page).order_by("-created_at", "-id")[0]
    before = PageRevision.objects.filter(page=page).count()
    response = staff.post(
        reverse("admin:console_revision_revert", args=[latest.pk]), follow=True
    )
    assert "Reverted" in texts(response)
    page.refresh_from_db()
    assert page.body.strip() == "Original plan text."
    assert PageRevision.objects.filter(page=page).count() == before + 1


def test_thread_page_renders_as_a_conversation(
    staff: Client, mail_source: Source
) -> None:
    many = ", ".join(f"p{i}@example.org" for i in range(43))
    body = (
        "# Budget\n\n## Dana Reyes <dana@example.org> · 2026-03-01 09:00\n"
        f"To: {many}\n\nCan you send the numbers?\n\n"
        "## → Me <me@example.org> · 2026-03-01 10:00\n\nSure, Friday."
    )
    page = page_write(
        source=mail_source,
        mode="create",
        actor=CALLER,
        slug="threads/budget",
        title="Budget",
        type_name="email",
        body=body,
        embed=False,
    ).page
    html = texts(
        staff.get(reverse("admin:console_page", args=[mail_source.id, page.slug]))
    )
    assert html.count('class="console-msg') == 2
    assert 'class="console-msg mine"' in html
    assert "and 40 more" in html
    assert "p42@example.org" not in html.split("<details>")[0]


def test_revision_audit_and_loop_event_pages_show_their_content(
    staff: Client, mail_source: Source
) -> None:
    page = page_write(
        source=mail_source,
        mode="create",
        actor=CALLER,
        slug="notes/plan",
        title="Plan",
        body="Original plan text.",
        embed=False,
    ).page
    revision = PageRevision.objects.filter(page=page).first()
    assert revision is not None
    html = texts(
        staff.get(reverse("admin:brain_pagerevision_change", args=[revision.pk]))
    )
    assert (
        reverse("admin:console_page_revisions", args=[mail_source.id, page.slug])
        in html
    )
    loop = a_loop(mail_source, "dana@example.org", "Send the Q3 numbers")
    staff.post(
        reverse("admin:console_loop_act", args=[loop.pk]),
        {"action": "due", "due": "2031-05-04"},
    )
    event = LoopEvent.objects.get(
        loop=loop, event_type=LoopEvent.EventType.DUE_CORRECTED
    )
    html = texts(staff.get(reverse("admin:loops_loopevent_change", args=[event.pk])))
    assert '<table class="json-table">' in html
    assert "new_due_at" in html


def test_person_card_lists_the_threads_they_took_part_in(
    staff: Client, mail_source: Source
) -> None:
    dana = person(mail_source, "Dana Reyes", "dana@example.org")
    for slug, who in (
        ("emails/budget", "dana@example.org"),
        ("emails/other", "x@y.org"),
    ):
        page_write(
            source=mail_source,
            mode="create",
            actor=CALLER,
            slug=slug,
            title=slug.split("/")[1].title(),
            type_name="email",
            body="## Someone\n\nHello.",
            frontmatter={"participants": [who, "me@example.org"]},
            embed=False,
        )
    url = reverse("admin:console_person", args=[mail_source.id, dana.slug])
    html = texts(staff.get(url))
    threads = html.split('id="person-threads"')[1].split("</ul>")[0]
    assert "Budget" in threads
    assert "Other" not in threads


def test_loop_history_shows_event_details_as_tables_not_python_reprs(
    staff: Client, mail_source: Source
) -> None:
    """Regression (newcomer): the loop page's History column printed nested event
    data as Python reprs (``[{'quote': ...}]``)."""
    loop = a_loop(mail_source, "dana@example.org", "Send the Q3 numbers")
    html = texts(staff.get(reverse("admin:loops_openloop_change", args=[loop.pk])))
    history = html.split("<h3>History</h3>")[1].split("</table>", 1)[0]
    # Issue 47: the evidence is quoted once, above the history, not in it.
    assert "Quote for Send the Q3 numbers" not in history
    assert html.count("Quote for Send the Q3 numbers") == 2  # quote + raw JSON
    assert "{&#x27;" not in history and "[{" not in history
    assert '<table class="json-table">' in history


def test_snooze_hides_the_loop_from_waiting_and_says_until_when(
    staff: Client, mail_source: Source
) -> None:
    loop = a_loop(mail_source, "dana@example.org", "Send the Q3 numbers")
    day = (timezone.localdate() + timedelta(days=5)).isoformat()
    response = staff.post(
        reverse("admin:console_loop_act", args=[loop.pk]),
        {"action": "snooze", "until": day, "next": reverse("admin:loops_waiting")},
        follow=True,
    )
    html = texts(response)
    assert f"snoozed until {day}: it stays open" in html
    assert "Send the Q3 numbers</a>" not in ranked(html)
    assert f"1 snoozed (until {day})" in html
    loop.refresh_from_db()
    assert loop.status == LoopStatus.OPEN
    past = staff.post(
        reverse("admin:console_loop_act", args=[loop.pk]),
        {"action": "snooze", "until": "2001-01-01"},
        follow=True,
    )
    # Regression (newcomer, on a replayed 2001 mailbox): the refusal said "today"
    # without saying which day that is.
    assert (
        f"Snooze until a day after today ({timezone.localdate()}): snoozing "
        "follows the real calendar" in texts(past)
    )


# --- the loop page's action forms (what a browser actually submits) -----------------


class _FormOwner(HTMLParser):
    """Which form owns each button, as an HTML parser decides it: a ``<form>`` start
    tag inside an open form is ignored (WHATWG "form element pointer"), so a nested
    form's button and inputs belong to the outer form. Collects, per button class,
    the owning form's action and the named fields it would submit."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None
        self.depth = 0
        self.buttons: dict[str, dict[str, Any]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            if self.open is None:
                self.open = {"action": a.get("action", ""), "fields": {}}
                self.forms.append(self.open)
                self.depth = 1
            else:
                self.depth += 1  # ignored by the parser, as is its end tag
        elif self.open is not None and tag == "input" and a.get("name"):
            if a.get("type") not in ("checkbox", "submit"):
                self.open["fields"].setdefault(a["name"], a.get("value", ""))
        elif self.open is not None and tag == "button":
            for cls in a.get("class", "").split() or [a.get("type", "")]:
                self.buttons.setdefault(cls, self.open)

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self.open is not None:
            self.depth -= 1
            if self.depth == 0:
                self.open = None


def _submit(staff: Client, page_url: str, button: str) -> Any:
    """Load ``page_url`` and post exactly what clicking ``button`` (a class) posts."""
    parser = _FormOwner()
    parser.feed(texts(staff.get(page_url)))
    form = parser.buttons[button]
    return staff.post(form["action"] or page_url, form["fields"], follow=True)


def test_loop_page_buttons_post_to_their_own_action_not_the_change_form(
    staff: Client, mail_source: Source
) -> None:
    """Done and Reopen on the loop's admin page (was: nested in the change form, so
    Done answered "Please correct the error below." and the loop stayed open)."""
    loop = a_loop(mail_source, "dana@example.org", "Send the Q3 numbers")
    page = reverse("admin:loops_openloop_change", args=[loop.pk])
    done = texts(_submit(staff, page, "loop-done"))
    assert "Please correct the error" not in done
    assert "“Send the Q3 numbers” closed as done." in done
    loop.refresh_from_db()
    assert loop.status == LoopStatus.DONE
    reopened = texts(_submit(staff, page, "loop-reopen"))
    assert "“Send the Q3 numbers” is open again." in reopened
    loop.refresh_from_db()
    assert loop.status == LoopStatus.OPEN


def test_due_input_of_a_loop_without_due_date_is_empty(
    staff: Client, mail_source: Source
) -> None:
    a_loop(mail_source, "dana@example.org", "Send the Q3 numbers")
    html = texts(staff.get(reverse("admin:loops_waiting")))
    assert 'class="loop-due-input"' in html
    assert 'value="None"' not in html


def test_change_due_with_nothing_changed_says_nothing_changed(
    staff: Client, mail_source: Source
) -> None:
    loop = a_loop(mail_source, "dana@example.org", "Send the Q3 numbers")
    html = texts(
        staff.post(
            reverse("admin:console_loop_act", args=[loop.pk]),
            {"action": "due", "due": ""},
            follow=True,
        )
    )
    assert "changed from no due date to no due date" not in html
    assert "nothing changed" in html
    assert not LoopEvent.objects.filter(
        loop=loop, event_type=LoopEvent.EventType.DUE_CORRECTED
    ).exists()


def test_empty_snooze_on_an_awake_loop_is_refused(
    staff: Client, mail_source: Source
) -> None:
    loop = a_loop(mail_source, "dana@example.org", "Send the Q3 numbers")
    html = texts(
        staff.post(
            reverse("admin:console_loop_act", args=[loop.pk]),
            {"action": "snooze", "until": ""},
            follow=True,
        )
    )
    assert "is awake" not in html
    assert "pick the day to snooze it until" in html
    assert not LoopEvent.objects.filter(loop=loop, event_type="snoozed").exists()


def test_search_snippets_read_as_text_not_markdown(
    staff: Client, mail_source: Source
) -> None:
    """A result's snippet shows the words a reader sees: no ``##``, ``**`` or
    ``[[…]]`` markup, and text that looks like HTML stays text (escaped)."""
    page_write(
        source=mail_source,
        mode="create",
        actor=CALLER,
        slug="notes/budget",
        title="Budget",
        body="## Zanzibar budget\n\n**Dana** owns it, see [[people/dana]] and <b>x</b>.",
        embed=False,
    )
    html = staff.get(reverse("admin:console_search"), {"q": "Zanzibar"}).content
    results = html.decode().split('id="search-results"')[1]
    assert (
        "Zanzibar budget Dana owns it, see people/dana and &lt;b&gt;x&lt;/b&gt;."
        in results
    )
    assert "##" not in results and "**" not in results and "[[" not in results


# --- snoozed loops stay visible as snoozed (issue 47) --------------------------------


def test_waiting_says_how_many_are_snoozed_and_lists_them_with_wake_now(
    staff: Client, mail_source: Source
) -> None:
    """Regression (newcomer): a snoozed loop vanished from Waiting with no line
    saying it was parked, and nothing listed it or woke it."""
    a_loop(mail_source, "a@example.org", "Reply to Ann")
    later = a_loop(mail_source, "b@example.org", "Reply to Bob")
    day = timezone.localdate() + timedelta(days=4)
    staff.post(
        reverse("admin:console_loop_act", args=[later.pk]),
        {"action": "snooze", "until": day.isoformat()},
    )
    html = texts(staff.get(reverse("admin:loops_waiting")))
    snoozed = html.split('id="waiting-snoozed"')[1].split("</details>", 1)[0]
    assert f"1 snoozed (until {day})" in snoozed
    assert "Reply to Bob</a>" in snoozed and "loop-wake" in snoozed
    assert "Reply to Bob</a>" not in ranked(html)
    assert f"1 snoozed (until {day}) (left out until then)." in html
    # The "what I owe" filter counts only its own kind of snoozed loops.
    owed = texts(staff.get(reverse("admin:loops_waiting"), {"mine": "to_me"}))
    assert 'id="waiting-snoozed"' not in owed
    woke = staff.post(
        reverse("admin:console_loop_act", args=[later.pk]),
        {"action": "snooze", "until": "", "next": reverse("admin:loops_waiting")},
        follow=True,
    )
    html = texts(woke)
    assert "“Reply to Bob” is awake: back in waiting now." in html
    assert 'id="waiting-snoozed"' not in html
    assert "Reply to Bob</a>" in ranked(html)


def test_person_card_and_loop_page_mark_a_snoozed_loop(
    staff: Client, mail_source: Source
) -> None:
    """Regression (newcomer): the person card listed a snoozed loop unmarked,
    as if it were waiting like the others."""
    dana = person(mail_source, "Dana Reyes", "dana@example.org")
    a_loop(mail_source, "dana@example.org", "Send the Q3 numbers")
    later = a_loop(mail_source, "dana@example.org", "Review the contract")
    for lp in OpenLoop.objects.all():
        lp.counterparty = dana
        lp.save(update_fields=["counterparty"])
    until = timezone.now() + timedelta(days=6)
    loop_snooze(loop=later, until=until, actor="test")
    card = texts(
        staff.get(reverse("admin:console_person", args=[mail_source.id, dana.slug]))
    )
    loops = card.split('id="person-loops"')[1].split('id="person-facts"')[0]
    assert "Open loops (2, 1 snoozed)" in loops
    rows = loops.split("<tr")
    parked = next(r for r in rows if "Review the contract" in r)
    awake = next(r for r in rows if "Send the Q3 numbers" in r)
    assert f"snoozed until {timezone.localdate(until)}" in parked
    assert "loop-wake" in parked
    assert "snoozed" not in awake and "loop-wake" not in awake
    page = texts(staff.get(reverse("admin:loops_openloop_change", args=[later.pk])))
    triage = page.split('id="loop-triage"')[1].split("<h3>Evidence")[0]
    assert f"snoozed until {timezone.localdate(until)}" in triage
    assert "loop-wake" in triage
    # Once its date has passed the loop is awake again and no longer marked.
    OpenLoop.objects.filter(pk=later.pk).update(
        snoozed_until=timezone.now() - timedelta(minutes=1)
    )
    card = texts(
        staff.get(reverse("admin:console_person", args=[mail_source.id, dana.slug]))
    )
    assert "snoozed until" not in card and "Open loops (2)" in card


# --- console search: one row per page, filters, degraded notice (issue 47) -----------


def _searchable(source: Source, title: str, type_name: str | None = None) -> Page:
    """A page whose title and two body sections all say Zanzibar (several chunks)."""
    return page_write(
        source=source,
        mode="create",
        actor=CALLER,
        title=f"{title} Zanzibar",
        type_name=type_name,
        body=(
            f"# {title} in Zanzibar\n\nThe Zanzibar offsite agenda.\n\n"
            "## Budget\n\nZanzibar hotel and flights, per person."
        ),
        embed=False,
    ).page


def _result_slugs(html: str) -> list[str]:
    results = html.split('id="search-results"')[1].split("</ol>")[0]
    return [
        part.split('"')[0].rstrip("/").rsplit("/", 1)[-1]
        for part in results.split('<a href="')[1:]
    ]


def test_search_lists_each_page_once(staff: Client, mail_source: Source) -> None:
    """Regression (newcomer): 20 rows for 14 pages, the title chunk and a body
    chunk of one page listed as two results."""
    pages = [_searchable(mail_source, f"Trip {n}") for n in range(4)]
    html = texts(staff.get(reverse("admin:console_search"), {"q": "Zanzibar"}))
    slugs = _result_slugs(html)
    assert len(slugs) == len(set(slugs)) == len(pages), slugs
    assert "4 page(s)" in html
    assert "passages match" in html


def test_search_filters_by_source_and_by_page_type(
    staff: Client, mail_source: Source
) -> None:
    other = Source.objects.create(id="notes", name="Notes", kind="markdown")
    in_mail = _searchable(mail_source, "Mail plan")
    person_page = _searchable(other, "Dana", type_name="person")
    url = reverse("admin:console_search")
    every = _result_slugs(texts(staff.get(url, {"q": "Zanzibar"})))
    assert sorted(every) == sorted(
        [in_mail.slug.rsplit("/", 1)[-1], person_page.slug.rsplit("/", 1)[-1]]
    )
    by_source = texts(staff.get(url, {"q": "Zanzibar", "source": mail_source.id}))
    assert _result_slugs(by_source) == [in_mail.slug.rsplit("/", 1)[-1]]
    assert f'<option value="{mail_source.id}" selected>' in by_source
    by_type = texts(staff.get(url, {"q": "Zanzibar", "type": "person"}))
    assert _result_slugs(by_type) == [person_page.slug.rsplit("/", 1)[-1]]
    assert '<option value="person" selected>' in by_type
    unknown = texts(staff.get(url, {"q": "Zanzibar", "source": "nowhere"}))
    assert "There is no source &#x27;nowhere&#x27;; searching every source." in unknown
    assert len(_result_slugs(unknown)) == 2


def test_search_says_when_it_is_keyword_only(
    staff: Client, mail_source: Source, settings: Any
) -> None:
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    _searchable(mail_source, "Trip")
    html = texts(staff.get(reverse("admin:console_search"), {"q": "Zanzibar"}))
    notice = html.split('id="search-degraded"')[1].split("</p>")[0]
    assert "Search is keyword-only" in notice
    assert "vector_search_unavailable: provider none" in notice


# --- reverting a page's first revision (issue 47) -------------------------------------


def test_reverting_the_first_revision_asks_to_confirm_and_is_labelled_revert(
    staff: Client, mail_source: Source
) -> None:
    """Regression (newcomer): "Revert this change" on a page's first revision
    blanked it in one click, and the history then called the revert "replace"."""
    page = page_write(
        source=mail_source,
        mode="create",
        actor=CALLER,
        slug="notes/first",
        title="First",
        body="The only text this page ever had.",
        embed=False,
    ).page
    url = reverse("admin:console_page_revisions", args=[mail_source.id, page.slug])
    html = texts(staff.get(url))
    assert 'name="confirm" value="yes" required' in html
    assert "Revert this change (empties the page)" in html
    first = PageRevision.objects.get(page=page)
    revert = reverse("admin:console_revision_revert", args=[first.pk])
    refused = texts(staff.post(revert, follow=True))
    assert "would empty the page" in refused and "Nothing changed." in refused
    page.refresh_from_db()
    assert page.body.strip() == "The only text this page ever had."
    assert PageRevision.objects.filter(page=page).count() == 1

    done = texts(staff.post(revert, {"confirm": "yes"}, follow=True))
    assert "Reverted to the text before the create" in done
    page.refresh_from_db()
    assert page.body.strip() == ""
    labels = [
        part.split("</span>")[0]
        for part in done.split('<span class="revision-label">')[1:]
    ]
    assert labels == ["revert", "create"]
