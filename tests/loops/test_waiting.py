"""SPEC §5.5 waiting: ranking, grouping, freshness refusal, completeness, trusted vs
redacted views, ``--as-of`` replay; the CLI, the API endpoint and the dashboard."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from brain.access import local_caller
from brain.models import RawRecord, Source
from interfaces.operations import op_waiting
from loops.models import CLOSED_BY_STALENESS, Detector, LoopStatus, LoopType, OpenLoop
from loops.pipeline import process_threads
from loops.waiting import coverage_line, due_bonus, waiting_report
from tests.factories import (
    AliasFactory,
    PageFactory,
    RelationFactory,
    SourceFactory,
    relation_type,
)
from tests.loops.shapes import JEFF, OWNER, T0, msg

pytestmark = pytest.mark.django_db

AS_OF = datetime(2001, 10, 1, 12, tzinfo=UTC)


def make_loop(
    source,
    key,
    *,
    email="",
    page=None,
    due=None,
    opened_days=1,
    type_=LoopType.UNANSWERED_INBOUND,
):  # type: ignore[no-untyped-def]
    return OpenLoop.objects.create(
        source=source,
        dedup_key=key,
        loop_type=type_,
        summary=f"loop {key}",
        detector=Detector.MANUAL,
        counterparty_email=email,
        counterparty=page,
        due_at=due,
        opened_at=AS_OF - timedelta(days=opened_days),
        last_activity_at=AS_OF - timedelta(days=opened_days),
        evidence=[
            {
                "message_id": f"<{key}@x>",
                "quote": f"quote {key}",
                "link": f"https://mail/{key}",
            }
        ],
    )


def dated_mail(source, key: str, when: datetime, *, mine: bool = False) -> RawRecord:  # type: ignore[no-untyped-def]
    """A stored message of ``source`` dated ``when`` (all the clock rules read);
    ``mine``: sent by the owner."""
    metadata = {"date": when.isoformat()}
    if mine:
        metadata.update(from_addr=OWNER, is_mine=True)
    return RawRecord.objects.create(
        source=source,
        external_id=f"<{key}@x>",
        kind=RawRecord.Kind.RFC822,
        content="x",
        content_hash=key.ljust(64, "0"),
        metadata=metadata,
    )


def test_due_bonus_steps():
    assert [
        due_bonus(AS_OF + timedelta(days=d), AS_OF) for d in (-1, 0, 2, 3, 6, 30)
    ] == [50, 50, 30, 30, 15, 5]
    assert due_bonus(None, AS_OF) == 0


def test_ranking_is_exactly_the_group_score(mailbox, jeff):
    # Jeff (person page, 3 backlinks): 2 loops, nearest due in 2 days, oldest 25 days.
    for _n in range(3):
        RelationFactory(
            from_page=PageFactory(source=mailbox),
            to_page=jeff,
            relation_type=relation_type("related_to"),
            source=mailbox,
        )
    RelationFactory(
        from_page=PageFactory(source=mailbox),
        to_page=jeff,
        relation_type=relation_type("mentions"),
        source=mailbox,
    )  # not a backlink
    make_loop(
        mailbox,
        "a",
        email=JEFF,
        page=jeff,
        due=AS_OF + timedelta(days=2),
        opened_days=25,
    )
    make_loop(mailbox, "b", email=JEFF, page=jeff, opened_days=3)
    # An email-only counterparty: 1 loop, overdue, 4 days old.
    make_loop(
        mailbox,
        "c",
        email="jsmith@example.org",
        due=AS_OF - timedelta(days=1),
        opened_days=4,
    )
    make_loop(mailbox, "d")  # no counterparty
    # The learned decision's confidence (SPEC §5.1b); the best of a group counts.
    for summary, confidence in (("loop a", 0.7), ("loop b", 0.4), ("loop c", 0.5)):
        OpenLoop.objects.filter(summary=summary).update(confidence=confidence)
    report = waiting_report(caller=local_caller(), as_of=AS_OF)
    scores = {g["counterparty"]: g["score"] for g in report["groups"]}
    # 100 × best confidence + due bonus / 5 (due in 2 days: 30; overdue: 50);
    # volume, age and backlinks add nothing.
    assert scores == {
        "allen:people/jeff-smith": 70 + 30 // 5,
        "jsmith@example.org": 50 + 50 // 5,
    }
    assert [g["counterparty"] for g in report["groups"]][0] == "allen:people/jeff-smith"
    assert report["no_counterparty"]["loop_count"] == 1
    assert all(g["counterparty"] != "" for g in report["groups"])
    jeff_group = report["groups"][0]
    assert [lp["summary"] for lp in jeff_group["loops"]] == [
        "loop a",
        "loop b",
    ]  # due first


def test_group_shows_at_most_five_loops(mailbox):
    for n in range(7):
        make_loop(mailbox, f"k{n}", email=JEFF, opened_days=n + 1)
    group = waiting_report(caller=local_caller(), as_of=AS_OF)["groups"][0]
    assert (
        group["loop_count"] == 7
        and len(group["loops"]) == 5
        and group["loops_omitted"] == 2
    )


def test_one_person_with_two_addresses_is_one_group_by_display_name(mailbox):
    home = make_loop(mailbox, "h", email="dana.lee@home.example", opened_days=3)
    work = make_loop(mailbox, "w", email="dlee@works.example", opened_days=2)
    other = make_loop(mailbox, "o", email="dana.lee@elsewhere.example")
    OpenLoop.objects.filter(pk=home.pk).update(counterparty_name="Dana Lee")
    OpenLoop.objects.filter(pk=work.pk).update(counterparty_name="Lee, Dana")
    OpenLoop.objects.filter(pk=other.pk).update(counterparty_name="Dana")
    groups = waiting_report(caller=local_caller(), as_of=AS_OF)["groups"]
    sizes = sorted((g["counterparty"], g["loop_count"]) for g in groups)
    # A first name alone is not a person: that address keeps its own group.
    assert sizes == [("dana.lee@elsewhere.example", 1), ("dana.lee@home.example", 2)]


def test_one_person_with_two_addresses_on_one_page_is_one_group(mailbox, jeff):
    # The people resolution filed Jeff's personal address on his page after the
    # loops were opened: the loops carry no page, the page joins them.
    AliasFactory(page=jeff, source=mailbox, alias="jeff.s@home.example", kind="email")
    make_loop(mailbox, "p", email=JEFF, opened_days=3)
    make_loop(mailbox, "q", email="jeff.s@home.example", opened_days=2)
    groups = waiting_report(caller=local_caller(), as_of=AS_OF)["groups"]
    assert [(g["counterparty"], g["loop_count"]) for g in groups] == [
        ("allen:people/jeff-smith", 2)
    ]
    assert groups[0]["counterparty_name"] == "Jeff Smith"


def test_trusted_view_has_quotes_links_and_digest_remote_is_redacted(
    mailbox, make_key, api_client
):
    make_loop(mailbox, "a", email=JEFF)
    trusted = waiting_report(caller=local_caller(), as_of=AS_OF)
    loop = trusted["groups"][0]["loops"][0]
    assert loop["quote"] == "quote a" and loop["link"] == "https://mail/a"
    assert "quote a" in trusted["text"]
    key = make_key(mailbox, readable=(mailbox,))
    body = (
        api_client(key.plaintext)
        .get(reverse("api:waiting"), {"as_of": AS_OF.isoformat()})
        .json()
    )
    assert body["redacted"] is True and body.get("text") is None
    remote_loop = body["groups"][0]["loops"][0]
    # Counts are not redacted: ``repeats`` says how many loops an entry stands for;
    # nor is a snooze (issue 47: no caller offers parked work as open).
    assert set(remote_loop) == {
        "id",
        "loop_type",
        "summary",
        "due_at",
        "snoozed_until",
        "repeats",
    }
    assert "quote a" not in json.dumps(body)


def test_remote_caller_sees_only_readable_sources(
    mailbox, source_b, make_key, api_client
):
    make_loop(mailbox, "a", email=JEFF)
    make_loop(source_b, "secret", email="boss@example.org")
    key = make_key(source_b, readable=(source_b,))
    body = api_client(key.plaintext).get(reverse("api:waiting")).json()
    assert body["sources"] == ["team-b"] and body["count"] == 1
    listed = api_client(key.plaintext).get(reverse("api:open_loops")).json()
    assert [lp["summary"] for lp in listed["loops"]] == ["loop secret"]
    denied = api_client(key.plaintext).get(
        reverse("api:open_loops"), {"source": "allen"}
    )
    assert denied.status_code == 403 and denied.json()["error"] == "scope_denied"


def test_never_says_clean_without_mail_sources_or_complete_coverage(db, google):
    no_mail = waiting_report(caller=local_caller(sources=["default"]))
    assert no_mail["count"] == 0 and no_mail["clean"] is False
    fresh = waiting_report(caller=local_caller(sources=[google.id]))
    assert fresh["clean"] is True and "You are clean" in fresh["text"]
    # A clean digest is not also "not a clean bill" (an if/elif split by the
    # aged-out line once said both).
    assert "not a clean bill" not in fresh["text"]
    google.last_success_at = datetime(2001, 1, 1, tzinfo=UTC)
    google.save(update_fields=["last_success_at"])
    stale = waiting_report(caller=local_caller(sources=[google.id]))
    assert (
        stale["clean"] is False
        and stale["stale"] is True
        and stale["completeness"] == "partial"
    )
    assert "You are clean" not in stale["text"]


def test_a_mailbox_without_the_owners_own_mail_is_no_clean_bill(mailbox):
    # A list archive or an inbox without its sent folder: nothing is listed, but
    # what the owner asked or promised cannot be seen.
    for n in range(3):
        RawRecord.objects.create(
            source=mailbox, external_id=f"<in{n}@x>", kind=RawRecord.Kind.RFC822,
            content="x", content_hash=f"in{n}".ljust(64, "0"),
            metadata={"date": (AS_OF - timedelta(days=n)).isoformat(),
                      "from_addr": "list@example.org", "is_mine": False},
        )  # fmt: skip
    report = waiting_report(caller=local_caller(sources=[mailbox.id]))
    assert report["count"] == 0 and report["clean"] is False
    assert any("is the owner's own" in w for w in report["warnings"])
    RawRecord.objects.create(
        source=mailbox, external_id="<mine@x>", kind=RawRecord.Kind.RFC822,
        content="x", content_hash="mine".ljust(64, "0"),
        metadata={"date": (AS_OF - timedelta(days=1)).isoformat(),
                  "from_addr": OWNER, "is_mine": True},
    )  # fmt: skip
    assert waiting_report(caller=local_caller(sources=[mailbox.id]))["clean"] is True


def test_cli_refuses_when_every_mail_source_is_stale_unless_stale_ok(
    db, google, capsys
):
    google.last_success_at = None
    google.save(update_fields=["last_success_at"])
    with pytest.raises(CommandError, match="manage.py sync_source allen-g"):
        call_command("waiting", "--source", google.id)
    call_command("waiting", "--source", google.id, "--stale-ok")
    assert "0 open loop(s)" in capsys.readouterr().out


def test_cli_waiting_json_top(mailbox, capsys):
    make_loop(mailbox, "a", email=JEFF)
    make_loop(mailbox, "b", email="x@example.org")
    call_command("waiting", "--json", "--top", "1", "--as-of", AS_OF.isoformat())
    report = json.loads(capsys.readouterr().out)
    assert len(report["groups"]) == 1 and report["count"] == 2


def test_cli_as_of_accepts_a_bare_date_as_that_day_end(mailbox, capsys):
    """``--as-of 2001-10-01`` is the date form the error message offers: the end of
    that day in UTC; a time without an offset is UTC; other text is refused with
    the forms it takes."""
    make_loop(mailbox, "a", email=JEFF)
    call_command("waiting", "--json", "--as-of", "2001-10-01")
    report = json.loads(capsys.readouterr().out)
    assert report["as_of"] == "2001-10-01T23:59:59+00:00"
    call_command("waiting", "--json", "--as-of", "2001-10-01T12:00:00")
    assert json.loads(capsys.readouterr().out)["as_of"] == "2001-10-01T12:00:00+00:00"
    with pytest.raises(CommandError, match="or a date 2001-05-15"):
        call_command("waiting", "--as-of", "last tuesday")


def test_as_of_means_the_same_time_on_the_cli_and_over_http(
    mailbox, capsys, make_key, api_client
):
    """A bare date is the end of that day, UTC, on every transport (SPEC §5.5): the
    API read ``as_of=2001-10-01`` as midnight while the CLI read the end of the
    day, so the two replayed different days from the same words."""
    make_loop(mailbox, "a", email=JEFF)
    key = make_key(mailbox, readable=(mailbox,))
    client = api_client(key.plaintext)
    body = client.get(reverse("api:waiting"), {"as_of": "2001-10-01"}).json()
    call_command("waiting", "--json", "--as-of", "2001-10-01")
    assert body["as_of"] == json.loads(capsys.readouterr().out)["as_of"]
    assert body["as_of"] == "2001-10-01T23:59:59+00:00"
    refused = client.get(reverse("api:waiting"), {"as_of": "soon"})
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_params"


def test_as_of_replay_for_a_mailbox_source(mailbox, store):
    store(mailbox, [msg(1), msg(2, frm=OWNER, to=(JEFF,), hours=48, body="Will do.")])
    process_threads(source_id=mailbox.id, thread_ids=["t-kuo"])
    assert (
        waiting_report(caller=local_caller())["count"] == 0
    )  # answered by the last day
    day_after = waiting_report(caller=local_caller(), as_of=T0 + timedelta(hours=30))
    assert day_after["count"] == 1
    group = day_after["groups"][0]
    assert (
        group["counterparty"] == JEFF
        and group["loops"][0]["loop_type"] == "unanswered_inbound"
    )
    assert (
        waiting_report(caller=local_caller(), as_of=T0 + timedelta(hours=10))["count"]
        == 0
    )


def test_admin_waiting_dashboard_renders(admin_client, mailbox, jeff):
    make_loop(mailbox, "a", email=JEFF, page=jeff)
    response = admin_client.get(reverse("admin:loops_waiting"))
    assert response.status_code == 200
    assert b"loop a" in response.content and b"Paste-ready digest" in response.content


def test_waiting_shows_the_sentence_that_asks_over_the_opening_lines(
    admin_client, mailbox, jeff
):
    loop = make_loop(mailbox, "a", email=JEFF, page=jeff)
    loop.evidence = [{**loop.evidence[0], "ask": "Have you gathered the title work?"}]
    loop.save(update_fields=["evidence"])
    html = admin_client.get(reverse("admin:loops_waiting")).content.decode()
    assert "Have you gathered the title work?" in html and "quote a" not in html
    [group] = waiting_report(caller=local_caller(), as_of=AS_OF)["groups"]
    assert group["loops"][0]["ask"] == "Have you gathered the title work?"
    report = waiting_report(caller=local_caller(), as_of=AS_OF)
    assert "> Have you gathered the title work?" in report["text"]


def test_the_digest_ages_a_loop_from_its_ask_not_from_my_later_chaser(mailbox):
    loop = make_loop(mailbox, "a", email="dana@example.org", opened_days=31)
    loop.last_activity_at = AS_OF - timedelta(days=8)
    loop.save(update_fields=["last_activity_at"])
    text = waiting_report(caller=local_caller(), as_of=AS_OF)["text"]
    assert "(31 d ago, last activity 8 d ago)" in text


def test_due_dates_are_shown_in_the_owners_timezone(mailbox, settings):
    from datetime import date

    from loops.services import due_end_of_day

    settings.BRAIN_TIME_ZONE = "America/Chicago"
    make_loop(mailbox, "a", email=JEFF, due=due_end_of_day(date(2001, 10, 5)))
    loop = waiting_report(caller=local_caller(), as_of=AS_OF)["groups"][0]["loops"][0]
    assert loop["due_at"] == "2001-10-05T23:59:59-05:00"


def test_a_future_dated_message_does_not_move_the_waiting_clock(mailbox):
    """One message with a wrong future date (seen in real mailboxes: a client
    clock years ahead) is not "now" for waiting: the report's as_of and the
    groups' ages come from the newest message not dated after the wall clock
    (SPEC §5.2 reference time), the same rule detection uses."""
    dated_mail(mailbox, "normal", AS_OF)
    dated_mail(mailbox, "future", datetime(2099, 10, 4, 16, 5, tzinfo=UTC))
    make_loop(mailbox, "a", email="dana@example.org", opened_days=3)

    report = waiting_report(caller=local_caller(actor="test"))

    assert report["as_of"] == AS_OF.isoformat()
    assert report["groups"][0]["as_of"] == AS_OF.isoformat()
    assert "(3 d ago)" in report["text"]


def test_each_mailbox_source_is_aged_against_its_own_clock(mailbox):
    """Two replayed mailboxes a year apart: a loop of the older one is 2 days old
    at its own mailbox's newest message, not a year old at the other's."""
    later = SourceFactory(id="later-box", kind=Source.Kind.MAILBOX, federated=False)
    for source, when, key in (
        (mailbox, AS_OF, "m1"),
        (later, AS_OF + timedelta(days=365), "m2"),
    ):
        dated_mail(source, key, when)
    make_loop(mailbox, "old", email="dana@example.org", opened_days=2)

    report = waiting_report(caller=local_caller(actor="test"))

    group = report["groups"][0]
    assert group["as_of"] == AS_OF.isoformat()
    assert report["as_of"] == (AS_OF + timedelta(days=365)).isoformat()
    assert "(2 d ago)" in report["text"]


def test_dashboard_shows_the_clock_of_a_group_on_another_mailboxs_time(
    admin_client, mailbox
):
    """Each source's coverage line names its clock in a readable form, and a
    group whose mailbox replays at another time says its own clock (it showed
    one source's ISO time above loops aged against another's)."""
    later = SourceFactory(id="later-box", kind=Source.Kind.MAILBOX, federated=False)
    dated_mail(mailbox, "m1", AS_OF)
    dated_mail(later, "m2", AS_OF + timedelta(days=365))
    make_loop(mailbox, "old", email="dana@example.org", opened_days=2)

    page = admin_client.get(reverse("admin:loops_waiting")).content.decode()

    later_clock = f"{AS_OF + timedelta(days=365):%Y-%m-%d %H:%M} UTC"
    # Issue 47: the heading no longer borrows the newest source's clock.
    assert 'id="waiting-heading">As of' not in page
    assert f"<li>As of {later_clock}" in page
    assert f"(its mailbox as of {AS_OF:%Y-%m-%d %H:%M} UTC)" in page


def test_a_mailbox_whose_window_holds_little_of_its_mail_says_so(mailbox):
    """SPEC §5.2 examines a mailbox's last 90 days only; when they hold a handful of
    its messages (a mailbox quiet before its last message), waiting says how many
    were examined and how to replay an earlier day instead of a bare "clean"."""
    # Two messages at the end: one alone would be an outlier date (SPEC §5.2).
    dates = [AS_OF - timedelta(days=200 + n) for n in range(60)]
    dates += [AS_OF - timedelta(days=1), AS_OF]
    for n, when in enumerate(dates):
        dated_mail(mailbox, f"w{n}", when)

    report = waiting_report(caller=local_caller(actor="test"))

    assert any(
        "only 2 of its 62 messages" in w and "--as-of" in w for w in report["warnings"]
    ), report["warnings"]
    # Nothing open is not "clean" here: detection saw a sliver of the mailbox (it
    # said "coverage: complete" and "You are clean" beside that warning).
    assert report["completeness"] == "partial" and report["clean"] is False
    assert "You are clean" not in report["text"]


def test_a_mailbox_with_recent_mail_gets_no_window_warning(mailbox):
    """Years of older mail are normal: no warning while the window holds enough."""
    for n in range(120):
        when = AS_OF - timedelta(days=n if n < 60 else 400 + n)
        dated_mail(mailbox, f"r{n}", when, mine=n % 2 == 0)

    report = waiting_report(caller=local_caller(actor="test"))

    assert not any("window" in w for w in report["warnings"]), report["warnings"]
    assert report["completeness"] == "complete"


def _aged_out_ask(source, key: str) -> OpenLoop:  # type: ignore[no-untyped-def]
    """An unanswered ask the 90-day window aged out (``loops_window_sweep``)."""
    loop = make_loop(source, key, email="dana@example.org", opened_days=200)
    OpenLoop.objects.filter(pk=loop.pk).update(
        status=LoopStatus.STALE, closed_by=CLOSED_BY_STALENESS, closed_at=AS_OF
    )
    return loop


def test_an_archive_whose_asks_aged_out_says_how_many_beside_clean(
    admin_client, mailbox
):
    """Issue 47: an archive whose unanswered asks all aged past the 90-day window
    said "You are clean" alone; it now says how many aged out, with a link to the
    loop list filtered to them, and the digest says so too."""
    dated_mail(mailbox, "m1", AS_OF - timedelta(days=1))
    dated_mail(mailbox, "m2", AS_OF, mine=True)
    _aged_out_ask(mailbox, "old-ask")
    make_loop(mailbox, "newer-stale", email="x@example.org", opened_days=10)
    OpenLoop.objects.filter(dedup_key="newer-stale").update(
        status=LoopStatus.STALE, closed_at=AS_OF
    )

    report = waiting_report(caller=local_caller(actor="test"))
    page = admin_client.get(reverse("admin:loops_waiting")).content.decode()

    assert report["clean"] is True
    assert report["coverage"][0]["aged_out_asks"] == 1
    assert "1 unanswered ask(s) aged past the 90-day window" in report["text"]
    assert "nothing is waiting on you in the 90-day window, but 1 unanswered" in page
    link = (
        reverse("admin:loops_openloop_changelist")
        + "?status__exact=stale&amp;loop_type__exact=unanswered_inbound"
        + "&amp;source__id__exact=allen&amp;last_activity_at__lt=2001-07-03T12"
        + "%3A00%3A00%2B00%3A00"
    )
    assert f'href="{link}"' in page
    listed = admin_client.get(link.replace("&amp;", "&")).content.decode()
    assert "loop old-ask" in listed and "loop newer-stale" not in listed


def test_waiting_shows_one_coverage_line_per_mailbox_at_its_own_date(
    admin_client, mailbox
):
    """Issue 47: each mailbox gets one collapsible coverage line at its own clock
    (messages, newest date, what is missing) instead of a grey note with CLI
    advice; the heading borrows no source's date when the clocks differ."""
    later = SourceFactory(
        id="later-box", name="Later box", kind=Source.Kind.MAILBOX, federated=False
    )
    for n in range(3):
        dated_mail(later, f"l{n}", AS_OF + timedelta(days=365 - n))
    dated_mail(mailbox, "m1", AS_OF)
    dated_mail(mailbox, "m2", AS_OF - timedelta(days=1), mine=True)

    report = waiting_report(caller=local_caller(actor="test"))
    page = admin_client.get(reverse("admin:loops_waiting")).content.decode()

    lines = {c["source_id"]: coverage_line(c) for c in report["coverage"]}
    assert lines["later-box"] == (
        "mailbox Later box: 3 messages to 2002-10-01; none of the owner's own "
        "mail in the window"
    )
    assert lines["allen"].endswith("2 messages to 2001-10-01")
    assert page.count('<details class="waiting-coverage"') == 2
    assert "<summary>mailbox Later box: 3 messages to 2002-10-01;" in page
    assert 'class="warning">Source later-box' not in page
    assert "--as-of" not in page.split("Paste-ready")[0]
    assert 'id="waiting-heading">As of' not in page
    assert "each at its own date" in page


def test_waiting_coverage_is_the_same_over_http_and_mcp(mailbox, make_key, api_client):
    """The coverage entries (issue 47) are part of the contract on both transports."""
    dated_mail(mailbox, "m1", AS_OF)
    _aged_out_ask(mailbox, "old-ask")
    key = make_key(mailbox, readable=(mailbox,))
    body = api_client(key.plaintext).get(reverse("api:waiting")).json()
    mcp = op_waiting(local_caller(sources=[mailbox.id]))
    assert body["coverage"] == mcp["coverage"]
    assert body["coverage"][0]["aged_out_asks"] == 1
    assert body["coverage"][0]["notes"][0]["code"] == "no_own_mail"
