"""Gmail sync against the real google-api-python-client and ``HttpMockSequence``
(SPEC §6.1, §6): backfill, history deltas, expired historyId, retries, held items,
connecting an account and its scopes."""

from __future__ import annotations

import json

import pytest
from googleapiclient.http import HttpMockSequence

from brain.models import Page, RawRecord, Source
from connectors.base import TransientError
from connectors.google.auth import google_account_connect, google_source_id
from connectors.google.client import READONLY_SCOPES, GoogleClient
from connectors.google.sync import google_sync
from connectors.models import HeldItem, ImportedItem, SyncRun
from loops.message import MailMessage
from tests.connectors.google_fakes import (
    ALIAS,
    ME,
    ann_question,
    ann_reply,
    error,
    message,
    my_answer,
    newsletter,
    ok,
    real_message,
    rfc_date,
    sequence,
    thread,
)

pytestmark = pytest.mark.django_db

SEND_AS = {
    "sendAs": [
        {"sendAsEmail": ME, "isPrimary": True, "isDefault": True},
        {"sendAsEmail": ALIAS, "displayName": "Owner", "treatAsAlias": True},
    ]
}


@pytest.fixture
def google_source() -> Source:
    account = google_account_connect(
        email=ME,
        granted_scopes=[*READONLY_SCOPES, "openid"],
        client=GoogleClient(http=sequence(ok(SEND_AS))),
    )
    return account.source


class Sleeps(list[float]):
    """Records the waits instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def _gmail(source: Source, http, sleep=None):  # type: ignore[no-untyped-def]
    return google_sync(
        source=source,
        http=http,
        sleep=sleep if sleep is not None else Sleeps(),
        services=("gmail",),
    )


def _backfill(source: Source):  # type: ignore[no-untyped-def]
    http = sequence(
        ok(
            {
                "emailAddress": ME,
                "messagesTotal": 3,
                "threadsTotal": 2,
                "historyId": "5000",
            }
        ),
        ok(
            {
                "messages": [
                    {"id": "m2", "threadId": "t1"},
                    {"id": "m1", "threadId": "t1"},
                    {"id": "m3", "threadId": "t2"},
                ],
                "resultSizeEstimate": 3,
            }
        ),
        ok(thread("t1", ann_question(), my_answer())),
        ok(thread("t2", newsletter())),
    )
    return _gmail(source, http)


def test_connecting_creates_a_google_source_with_send_as_aliases(
    google_source: Source,
) -> None:
    assert google_source.id == google_source_id(ME) == "gmail-owner"
    assert google_source.kind == "google"
    assert set(google_source.owner_addresses) == {ME, ALIAS}
    assert google_source.google_account.missing_scopes == []


def test_a_narrower_grant_is_reported_with_a_reconnect_fix() -> None:
    account = google_account_connect(
        email="narrow@example.com",
        granted_scopes=["openid", "email", READONLY_SCOPES[0]],
        client=None,
    )
    assert account.missing_scopes == list(READONLY_SCOPES[1:])
    report = google_sync(
        source=account.source,
        http=sequence(
            ok({"emailAddress": "narrow@example.com", "historyId": "1"}),
            ok({"resultSizeEstimate": 0}),
        ),
        sleep=Sleeps(),
    )
    assert any("re-connect" in w for w in report.warnings)
    assert report.skipped["contacts: scope not granted"] == 1
    assert report.skipped["calendar: scope not granted"] == 1


def test_backfill_writes_thread_pages_raw_records_and_anchors_history(
    google_source: Source,
) -> None:
    report = _backfill(google_source)
    assert report.counts["threads"] == 1  # the newsletter is noise-only: not rendered
    assert report.skipped["noise-only thread"] == 1
    page = Page.objects.get(source=google_source, type__name="email")
    assert page.slug.startswith("emails/2026/11/2026-11-02-budget-for-q3-")
    assert page.frontmatter["message_ids"] == ["m1", "m2"]
    assert page.frontmatter["account"] == ME
    assert page.body.count("## → ") == 1  # my answer, sent from the alias
    assert "mail.google.com" in page.body
    raws = RawRecord.objects.filter(
        source=google_source, kind="gmail_message", page__isnull=False
    ).order_by("external_id")
    assert [r.external_id for r in raws] == ["m1", "m2"]
    # The noise-only thread is stored (raw layer, SPEC §6 "Every importer"), not
    # rendered.
    noise = RawRecord.objects.get(source=google_source, external_id="m3")
    assert noise.page_id is None
    assert raws[0].payload["id"] == "m1"  # the Gmail JSON is the raw record
    mine = [MailMessage.from_metadata(r.metadata).is_mine for r in raws]
    assert mine == [False, True]
    cursor = Source.objects.get(pk=google_source.pk).cursor["google"]["gmail"]
    assert cursor["history_id"] == "5000" and cursor["backfill_done"] is True


def test_incremental_history_sync_adds_a_reply_to_the_existing_thread(
    google_source: Source,
) -> None:
    _backfill(google_source)
    slug = Page.objects.get(source=google_source, type__name="email").slug
    http = sequence(
        ok(
            {
                "history": [
                    {
                        "id": "5001",
                        "messages": [{"id": "m4", "threadId": "t1"}],
                        "messagesAdded": [
                            {
                                "message": {
                                    "id": "m4",
                                    "threadId": "t1",
                                    "labelIds": ["INBOX"],
                                }
                            }
                        ],
                    }
                ],
                "historyId": "5002",
            }
        ),
        ok(thread("t1", ann_question(), my_answer(), ann_reply())),
    )
    report = _gmail(google_source, http)
    assert report.counts["messages"] == 1
    page = Page.objects.get(source=google_source, type__name="email")
    assert page.slug == slug  # keyed on the first message: it never moves
    assert page.frontmatter["message_count"] == 3
    assert page.frontmatter["from"] == "ann@example.net"
    assert "Thanks, Thursday works." in page.body
    assert (
        RawRecord.objects.filter(
            source=google_source, kind="gmail_message", page=page
        ).count()
        == 3
    )
    assert (
        Source.objects.get(pk=google_source.pk).cursor["google"]["gmail"]["history_id"]
        == "5002"
    )


def test_an_unchanged_thread_in_history_is_a_noop(google_source: Source) -> None:
    _backfill(google_source)
    revisions = Page.objects.get(
        source=google_source, type__name="email"
    ).revisions.count()
    http = sequence(
        ok(
            {
                "history": [
                    {"id": "5001", "messages": [{"id": "m2", "threadId": "t1"}]}
                ],
                "historyId": "5001",
            }
        ),
        ok(thread("t1", ann_question(), my_answer())),
    )
    report = _gmail(google_source, http)
    assert report.skipped["thread unchanged"] == 1
    assert (
        Page.objects.get(source=google_source, type__name="email").revisions.count()
        == revisions
    )


def test_an_expired_history_id_relists_the_window_and_reanchors(
    google_source: Source,
) -> None:
    _backfill(google_source)
    http = sequence(
        error(404, "notFound"),
        ok({"emailAddress": ME, "historyId": "9000"}),
        ok({"messages": [{"id": "m4", "threadId": "t1"}], "resultSizeEstimate": 1}),
        ok(thread("t1", ann_question(), my_answer(), ann_reply())),
    )
    report = _gmail(google_source, http)
    assert report.counts["history_expired"] == 1
    assert any("expired" in w for w in report.warnings)
    assert (
        Page.objects.get(source=google_source, type__name="email").frontmatter[
            "message_count"
        ]
        == 3
    )
    assert (
        Source.objects.get(pk=google_source.pk).cursor["google"]["gmail"]["history_id"]
        == "9000"
    )


def test_a_429_is_retried_after_retry_after_then_succeeds(
    google_source: Source,
) -> None:
    sleeps = Sleeps()
    http = sequence(
        ok({"emailAddress": ME, "historyId": "5000"}),
        error(429, "rateLimitExceeded", {"retry-after": "7"}),
        ok({"messages": [{"id": "m1", "threadId": "t1"}], "resultSizeEstimate": 1}),
        ok(thread("t1", ann_question())),
    )
    report = _gmail(google_source, http, sleeps)
    assert sleeps == [7.0]
    assert report.counts["threads"] == 1
    assert SyncRun.objects.get(source=google_source).status == "succeeded"


def test_five_hundreds_give_up_after_six_attempts_as_a_transient_error(
    google_source: Source,
) -> None:
    sleeps = Sleeps()
    http = sequence(
        ok({"emailAddress": ME, "historyId": "5000"}),
        *[error(503, "backendError") for _ in range(6)],
    )
    with pytest.raises(TransientError) as excinfo:
        _gmail(google_source, http, sleeps)
    assert excinfo.value.permanent is False
    assert len(sleeps) == 5 and all(0 < s <= 60 for s in sleeps)
    run = SyncRun.objects.get(source=google_source)
    assert run.status == "failed" and "upstream_unavailable" in run.error
    assert Source.objects.get(pk=google_source.pk).last_error


def test_a_permanently_failing_message_is_held_while_the_rest_imports(
    google_source: Source,
) -> None:
    broken = {
        "id": "mbad",
        "threadId": "t3",
        "labelIds": ["INBOX"],
        "payload": {"mimeType": "text/plain"},
    }
    http = sequence(
        ok({"emailAddress": ME, "historyId": "5000"}),
        ok(
            {
                "messages": [
                    {"id": "mbad", "threadId": "t3"},
                    {"id": "mreal", "threadId": "t3"},
                    {"id": "m9", "threadId": "t9"},
                    {"id": "m1", "threadId": "t1"},
                ],
                "resultSizeEstimate": 4,
            }
        ),
        ok(
            thread(
                "t3",
                real_message(
                    "multipartAlternativeMessage.json", gmail_id="mreal", thread_id="t3"
                ),
                broken,
            )
        ),
        error(400, "failedPrecondition"),
        ok(thread("t1", ann_question())),
    )
    report = _gmail(google_source, http)
    held = {
        (h.kind, h.external_id): h
        for h in HeldItem.objects.filter(source=google_source)
    }
    assert set(held) == {("gmail_message", "mbad"), ("gmail_thread", "t9")}
    assert held[("gmail_message", "mbad")].error_code == "unparseable_message"
    # The API's JSON of the held message is kept as its raw bytes.
    assert json.loads(bytes(held[("gmail_message", "mbad")].raw))["id"] == "mbad"
    assert report.counts["held"] == 2
    assert report.counts["threads"] == 2
    pages = Page.objects.filter(source=google_source, type__name="email")
    assert sorted(p.frontmatter["thread_id"] for p in pages) == ["t1", "t3"]
    assert SyncRun.objects.get(source=google_source).status == "succeeded_with_holds"
    assert not ImportedItem.objects.filter(
        source=google_source, external_id="mbad"
    ).exists()


def test_backfill_resumes_from_the_saved_page_token(google_source: Source) -> None:
    """A sync killed after the first list page resumes at the second page."""
    first = sequence(
        ok({"emailAddress": ME, "historyId": "5000"}),
        ok(
            {
                "messages": [{"id": "m1", "threadId": "t1"}],
                "nextPageToken": "p2",
                "resultSizeEstimate": 2,
            }
        ),
        ok(thread("t1", ann_question())),
        # The next list request fails for good: the sync stops with page 1 saved.
        error(403, "forbidden"),
    )
    with pytest.raises(Exception, match="403"):
        _gmail(google_source, first)
    cursor = Source.objects.get(pk=google_source.pk).cursor["google"]["gmail"]
    assert (
        cursor["backfill_page_token"] == "p2" and cursor["anchor_history_id"] == "5000"
    )
    second = sequence(
        ok({"messages": [{"id": "m3", "threadId": "t5"}], "resultSizeEstimate": 1}),
        ok(
            thread(
                "t5",
                real_message("plainTextMessage.json", gmail_id="m3", thread_id="t5"),
            )
        ),
    )
    report = _gmail(google_source, second)
    assert report.counts["threads"] == 1
    cursor = Source.objects.get(pk=google_source.pk).cursor["google"]["gmail"]
    assert cursor["backfill_done"] is True and cursor["history_id"] == "5000"
    assert Page.objects.filter(source=google_source, type__name="email").count() == 2


class _Recording(HttpMockSequence):
    """An HttpMockSequence that remembers the URIs it was asked for."""

    def __init__(self, iterable):  # type: ignore[no-untyped-def]
        super().__init__(iterable)
        self.uris: list[str] = []

    def request(self, uri, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.uris.append(uri)
        return super().request(uri, *args, **kwargs)


def test_backfill_lists_the_default_90_day_window_newest_first(
    google_source: Source,
) -> None:
    http = _Recording(
        [
            ok({"emailAddress": ME, "historyId": "5000"}),
            ok({"resultSizeEstimate": 0}),
        ]
    )
    _gmail(google_source, http)
    assert "q=newer_than%3A90d" in http.uris[1]
    Source.objects.filter(pk=google_source.pk).update(
        config={"gmail_window_days": 30}, cursor={}
    )
    http = _Recording(
        [
            ok({"emailAddress": ME, "historyId": "5000"}),
            ok({"resultSizeEstimate": 0}),
        ]
    )
    _gmail(Source.objects.get(pk=google_source.pk), http)
    assert "q=newer_than%3A30d" in http.uris[1]


def test_later_mail_from_them_in_another_thread_settles_my_waiting_ask(
    google_source: Source,
) -> None:
    # A live source: my ask to Bea waits; a later sync brings Bea's mail on
    # another matter, weeks after my ask, in a thread of its own. The ask's
    # thread is not touched again, yet we were in touch: it waits no longer
    # (SPEC §5.1a), because the sync refreshed Bea's profile (when we were last
    # in touch) and the cross-thread pass re-judged the open ask.
    from loops.models import LoopStatus, LoopType, OpenLoop
    from tests.connectors.google_fakes import message, rfc_date

    bea = "Bea Park <bea.park@example.net>"
    earlier = message(
        gmail_id="b1", thread_id="t4", sender=bea, to=ME, subject="Parking",
        date=rfc_date(40), body="The passes are at the desk.\n\nBea",
        labels=["INBOX"], message_id="b1@example.net",
    )  # fmt: skip
    ask = message(
        gmail_id="b2", thread_id="t5", sender=f"Owner <{ME}>", to=bea,
        subject="Lease", date=rfc_date(20),
        body="Bea, what financing do you think we could get for the lease?",
        labels=["SENT"], message_id="b2@example.com",
    )  # fmt: skip
    backfill = sequence(
        ok({"emailAddress": ME, "historyId": "6000"}),
        ok(
            {
                "messages": [
                    {"id": "b2", "threadId": "t5"},
                    {"id": "b1", "threadId": "t4"},
                ]
            }
        ),
        ok(thread("t5", ask)),
        ok(thread("t4", earlier)),
    )
    _gmail(google_source, backfill)
    loop = OpenLoop.objects.get(
        source=google_source, loop_type=LoopType.UNANSWERED_OUTBOUND
    )
    assert loop.status == LoopStatus.OPEN
    later = message(
        gmail_id="b3", thread_id="t6", sender=bea, to=ME, subject="Holiday party",
        date=rfc_date(5), body="Robin, the party is on the 12th.\n\nBea",
        labels=["INBOX"], message_id="b3@example.net",
    )  # fmt: skip
    history = sequence(
        ok(
            {
                "history": [
                    {
                        "id": "6001",
                        "messagesAdded": [{"message": {"id": "b3", "threadId": "t6"}}],
                    }
                ],
                "historyId": "6002",
            }
        ),
        ok(thread("t6", later)),
    )
    _gmail(google_source, history)
    loop.refresh_from_db()
    assert (loop.status, loop.closed_by) == (
        LoopStatus.DROPPED,
        "not_expected: superseded",
    )


# --- a history gap re-lists the whole window (issue 46, "Syncs finish or say so") ---


def _window_message(n: int) -> dict[str, object]:
    """Message ``m-n`` alone in thread ``t-n``, from someone new each time."""
    return message(
        gmail_id=f"m-{n}",
        thread_id=f"t-{n}",
        sender=f"Sender {n} <sender{n}@example.net>",
        to=ME,
        subject=f"Window message {n}",
        date=rfc_date(n),
        body=f"Message number {n} of the window.",
        labels=["INBOX"],
        message_id=f"window-{n}@example.net",
    )


def _relist_page(n: int, *, last: int, estimate: int) -> list:  # type: ignore[type-arg]
    """``messages.list`` page ``n`` (one id per page) and the thread it names."""
    page: dict[str, object] = {
        "messages": [{"id": f"m-{n}", "threadId": f"t-{n}"}],
        "resultSizeEstimate": estimate,
    }
    if n < last:
        page["nextPageToken"] = f"page-{n + 1}"
    return [ok(page), ok(thread(f"t-{n}", _window_message(n)))]


def _gmail_cursor(source: Source) -> dict[str, object]:
    return Source.objects.get(pk=source.pk).cursor["google"]["gmail"]  # type: ignore[no-any-return]


def test_a_history_gap_relists_the_whole_window_paged_to_the_end(
    google_source: Source,
) -> None:
    """Seven pages: more than the five the old bounded re-list read."""
    _backfill(google_source)
    pages = 7
    http = sequence(
        error(404, "notFound"),
        ok({"emailAddress": ME, "historyId": "9000"}),
        *[
            r
            for n in range(1, pages + 1)
            for r in _relist_page(n, last=pages, estimate=7)
        ],
    )
    report = _gmail(google_source, http)
    threads = {
        p.frontmatter["thread_id"]
        for p in Page.objects.filter(source=google_source, type__name="email")
    }
    assert {f"t-{n}" for n in range(1, pages + 1)} <= threads
    assert report.counts["relist_pages"] == pages
    assert _gmail_cursor(google_source)["history_id"] == "9000"
    assert not _gmail_cursor(google_source).get("relist")
    assert SyncRun.objects.filter(source=google_source).first().status == "succeeded"  # type: ignore[union-attr]


def test_an_interrupted_relist_resumes_from_its_saved_page_token(
    google_source: Source,
) -> None:
    """Page 2 fails for good: the history cursor stays at the expired id and the
    re-list's page token is saved; the next run reads page 2 and only then moves
    the cursor."""
    _backfill(google_source)
    first = sequence(
        error(404, "notFound"),
        ok({"emailAddress": ME, "historyId": "9000"}),
        *_relist_page(1, last=2, estimate=2),
        error(403, "forbidden"),
    )
    with pytest.raises(Exception, match="403"):
        _gmail(google_source, first)
    cursor = _gmail_cursor(google_source)
    assert cursor["history_id"] == "5000"
    assert cursor["relist"]["page_token"] == "page-2"  # type: ignore[index]
    assert cursor["relist"]["anchor"] == "9000"  # type: ignore[index]
    # No history.list call and no new anchor: the re-list goes on at page 2.
    second = sequence(*_relist_page(2, last=2, estimate=2))
    report = _gmail(google_source, second)
    assert report.status == "succeeded"
    assert _gmail_cursor(google_source)["history_id"] == "9000"
    assert not _gmail_cursor(google_source).get("relist")
    assert (
        Page.objects.filter(
            source=google_source, frontmatter__thread_id__in=["t-1", "t-2"]
        ).count()
        == 2
    )


def test_a_relist_longer_than_a_run_is_partial_with_progress_until_covered(
    google_source: Source,
) -> None:
    """One page per run: the first run ends ``partial`` naming the re-list, shows
    its progress on the Job row, and leaves the history cursor where it was."""
    from jobs.handlers import ConnectorProgress
    from jobs.models import Job
    from jobs.runner import JobContext
    from jobs.services import job_claim, job_enqueue

    _backfill(google_source)
    Source.objects.filter(pk=google_source.pk).update(
        config={"gmail_relist_pages_per_run": 1}
    )
    google_source.refresh_from_db()
    job, _created = job_enqueue(
        kind="sync_source", params={"source_id": google_source.pk}, dispatch=False
    )
    claimed = job_claim(job_id=job.pk)
    assert claimed is not None
    progress = ConnectorProgress(JobContext(claimed))
    first = sequence(
        error(404, "notFound"),
        ok({"emailAddress": ME, "historyId": "9000"}),
        *_relist_page(1, last=2, estimate=2),
    )
    report = google_sync(
        source=google_source,
        http=first,
        sleep=Sleeps(),
        services=("gmail",),
        progress=progress,
    )
    progress.flush()
    assert report.status == "partial"
    assert report.unfinished and "re-list" in report.unfinished[0]
    assert SyncRun.objects.filter(source=google_source).first().status == "partial"  # type: ignore[union-attr]
    assert _gmail_cursor(google_source)["history_id"] == "5000"
    shown = Job.objects.get(pk=job.pk).progress
    assert shown["message"].startswith("gmail re-list")
    assert (shown["step"], shown["total"]) == (1, 2)
    report = _gmail(google_source, sequence(*_relist_page(2, last=2, estimate=2)))
    assert report.status == "succeeded"
    assert _gmail_cursor(google_source)["history_id"] == "9000"
