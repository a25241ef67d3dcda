"""Loop tools over HTTP (SPEC §4, §5.5, §8) and the admin actions (SPEC §0, §5)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from loops.models import (
    Detector,
    LoopEvent,
    LoopStatus,
    LoopSuppression,
    LoopType,
    OpenLoop,
)
from tests.factories import PageFactory, page_type
from tests.loops.shapes import JEFF

pytestmark = pytest.mark.django_db


def make_loop(source, key="a", **kw):  # type: ignore[no-untyped-def]
    return OpenLoop.objects.create(
        source=source,
        dedup_key=key,
        loop_type=LoopType.UNANSWERED_INBOUND,
        summary=f"loop {key}",
        detector=Detector.MANUAL,
        counterparty_email=JEFF,
        thread_id="t-kuo",
        **kw,
    )


def test_loops_close_with_write_key_writes_event(mailbox, make_key, api_client):
    loop = make_loop(mailbox)
    client = api_client(make_key(mailbox, readable=(mailbox,)).plaintext)
    body = client.post(
        reverse("api:loops_close"),
        {"id": str(loop.pk), "status": "dropped", "note": "handled by phone"},
        content_type="application/json",
    ).json()
    assert (
        body["closed"] is True
        and body["status"] == "dropped"
        and body["protocol_version"] == 1
    )
    loop.refresh_from_db()
    assert (loop.status, loop.closed_by) == ("dropped", "handled by phone")
    assert loop.events.get(event_type=LoopEvent.EventType.CLOSED).actor.startswith(
        "key:"
    )


def test_loops_close_refused_outside_the_write_source(
    mailbox, source_b, make_key, api_client
):
    loop = make_loop(mailbox)
    key = make_key(
        source_b, readable=(source_b, mailbox)
    )  # may read allen, writes team-b
    response = api_client(key.plaintext).post(
        reverse("api:loops_close"),
        {"id": str(loop.pk)},
        content_type="application/json",
    )
    assert response.status_code == 403 and response.json()["error"] == "scope_denied"
    loop.refresh_from_db()
    assert loop.status == LoopStatus.OPEN


def test_loops_close_unknown_id_is_not_found(mailbox, make_key, api_client):
    response = api_client(make_key(mailbox, readable=(mailbox,)).plaintext).post(
        reverse("api:loops_close"), {"id": "999999"}, content_type="application/json"
    )
    assert response.status_code == 404 and response.json()["suggestion"]


def test_loops_mute_and_unmute(mailbox, make_key, api_client):
    client = api_client(make_key(mailbox, readable=(mailbox,)).plaintext)
    url_mute, url_unmute = reverse("api:loops_mute"), reverse("api:loops_unmute")
    body = client.post(
        url_mute,
        {"kind": "sender", "value": "JSmith@AustinTX.com"},
        content_type="application/json",
    ).json()
    assert body == {
        "kind": "sender",
        "value": JEFF,
        "source_id": "allen",
        "source_ids": ["allen"],
        "created": True,
        "removed": None,
        "open_loops": {},
        "note": f"Muted sender {JEFF} in 'allen': new mail there opens no loops "
        "for it.",
        "protocol_version": 1,
    }
    again = client.post(
        url_mute, {"kind": "sender", "value": JEFF}, content_type="application/json"
    )
    assert again.json()["created"] is False
    assert (
        client.post(
            url_unmute,
            {"kind": "sender", "value": JEFF},
            content_type="application/json",
        ).json()["removed"]
        is True
    )
    assert (
        client.post(
            url_unmute,
            {"kind": "sender", "value": JEFF},
            content_type="application/json",
        ).json()["removed"]
        is False
    )
    assert list(
        LoopEvent.objects.values_list("event_type", flat=True).order_by("id")
    ) == ["muted", "unmuted"]
    bad = client.post(
        url_mute, {"kind": "domain", "value": "x"}, content_type="application/json"
    )
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_params"


def test_loops_correct_due_records_old_value(mailbox, make_key, api_client):
    loop = make_loop(mailbox)
    client = api_client(make_key(mailbox, readable=(mailbox,), trusted=True).plaintext)
    body = client.post(
        reverse("api:loops_correct_due"),
        {"id": str(loop.pk), "due": "2001-09-10", "note": "agreed on the phone"},
        content_type="application/json",
    ).json()
    assert body["loops"][0]["due_at"].startswith("2001-09-10T23:59:59")
    event = loop.events.get(event_type="due_corrected")
    assert event.extra_data["old_due_at"] is None
    assert event.extra_data["evidence"]["note"] == "agreed on the phone"


def test_open_loops_query_count_is_constant(
    mailbox, jeff, make_key, api_client, django_assert_max_num_queries
):
    for n in range(6):
        make_loop(
            mailbox,
            f"k{n}",
            counterparty=jeff,
            page=PageFactory(source=mailbox, type=page_type("email")),
        )
    client = api_client(make_key(mailbox, readable=(mailbox,)).plaintext)
    with django_assert_max_num_queries(8):
        body = client.get(reverse("api:open_loops")).json()
    assert body["count"] == 6 and body["redacted"] is True


def test_admin_loop_actions_call_services(admin_client, mailbox):
    loop = make_loop(mailbox)
    url = reverse("admin:loops_openloop_changelist")
    assert admin_client.get(url).status_code == 200
    admin_client.post(url, {"action": "mark_done", "_selected_action": [loop.pk]})
    loop.refresh_from_db()
    assert loop.status == "done"
    admin_client.post(url, {"action": "reopen", "_selected_action": [loop.pk]})
    loop.refresh_from_db()
    assert loop.status == "open"
    admin_client.post(url, {"action": "mute_sender", "_selected_action": [loop.pk]})
    admin_client.post(url, {"action": "mute_thread", "_selected_action": [loop.pk]})
    assert set(LoopSuppression.objects.values_list("kind", "value")) == {
        ("sender", JEFF),
        ("thread", "t-kuo"),
    }
    assert list(loop.events.values_list("event_type", flat=True).order_by("id")) == [
        "closed",
        "reopened",
    ]
    for name in (
        "loopevent",
        "loopsuppression",
        "gracehold",
        "extractionrun",
        "llmusage",
    ):
        assert (
            admin_client.get(reverse(f"admin:loops_{name}_changelist")).status_code
            == 200
        )


def test_page_admin_actions_mute_and_close_from_email_and_person_pages(
    admin_client, mailbox, jeff
):
    email_page = PageFactory(
        source=mailbox,
        type=page_type("email"),
        slug="emails/kuo",
        frontmatter={"thread_id": "t-kuo", "from": f"Jeff Smith <{JEFF}>"},
    )
    loop = make_loop(mailbox, page=email_page)
    url = reverse("admin:brain_page_changelist")
    admin_client.post(
        url, {"action": "pages_mute_thread", "_selected_action": [email_page.pk]}
    )
    admin_client.post(
        url, {"action": "pages_mute_sender", "_selected_action": [jeff.pk]}
    )
    assert set(LoopSuppression.objects.values_list("kind", "value")) == {
        ("thread", "t-kuo"),
        ("sender", JEFF),
    }
    admin_client.post(
        url, {"action": "pages_drop_loops", "_selected_action": [email_page.pk]}
    )
    loop.refresh_from_db()
    assert loop.status == "dropped"


def test_cli_closes_redates_and_mutes(mailbox, capsys):
    from django.core.management import call_command

    loop = make_loop(mailbox)
    call_command("loops", "due", str(loop.pk), "2001-09-10", "--note", "phone")
    call_command("loops", "done", str(loop.pk), "--note", "answered by phone")
    call_command("loops", "mute", "sender", JEFF, "--source", mailbox.id)
    loop.refresh_from_db()
    assert (loop.status, loop.closed_by) == ("done", "answered by phone")
    assert loop.due_at.date().isoformat() == "2001-09-10"
    assert LoopSuppression.objects.filter(kind="sender", value=JEFF).exists()
    out = capsys.readouterr().out
    # Sentences, not a Python dict (newcomer: "{'closed': True, … LoopStatus.DONE}").
    assert f"loop {loop.pk}: due 2001-09-10." in out
    assert f"loop {loop.pk}: closed as done" in out
    assert "{" not in out and "muted" in out
    call_command("loops", "done", str(loop.pk))
    assert "already closed (done); nothing changed." in capsys.readouterr().out
