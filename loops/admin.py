"""Admin of the loops app: the curator's console for open loops (SPEC §0, §5).

Actions call ``loops.services``; events, holds, extraction runs and usage are
read-only. The waiting dashboard is an admin view at
``admin/loops/openloop/waiting/``.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.template.response import TemplateResponse
from django.urls import path, reverse

from brain.access import local_caller
from brain.admin import PageAdmin
from brain.display import json_table
from brain.models import Source
from loops.admin_actions import PAGE_ACTIONS, _actor, muted_and_closed
from loops.models import (
    ExtractionRun,
    GraceHold,
    LlmUsage,
    LoopEvent,
    LoopStatus,
    LoopSuppression,
    LoopType,
    OpenLoop,
    SenderProfile,
)
from loops.pipeline import sender_mark
from loops.selectors import MAILBOX_WINDOW_DAYS, snoozed_loops
from loops.senders import reason_text
from loops.services import (
    loop_close,
    loop_confirm_fulfilment,
    loop_reopen,
    loops_mute_many,
)
from loops.waiting import coverage_line, snooze_end, snoozed_line, waiting_report

if TYPE_CHECKING:
    from django.db.models import QuerySet
    from django.http import HttpRequest, HttpResponse

#: Snoozed loops the Waiting page lists under its "N snoozed" line.
SNOOZED_SHOWN = 100
#: The waiting filter "I owe" and "they owe" (SPEC §5.1 loop types).
OWED_BY_ME = {LoopType.COMMITMENT_OWED_BY_ME, LoopType.UNANSWERED_INBOUND}
OWED_TO_ME = {
    LoopType.COMMITMENT_OWED_TO_ME,
    LoopType.UNANSWERED_OUTBOUND,
    LoopType.DECISION_PENDING,
}


class ReadOnlyAdmin(admin.ModelAdmin):
    """Pipeline-written, append-only rows: visible, never edited."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# SPEC §5: admins steer loops from a page (mark done, drop, mute); brain's PageAdmin
# cannot import loops, so the loops app adds its actions to it here.
PageAdmin.actions = (*PageAdmin.actions, *PAGE_ACTIONS)


@admin.register(OpenLoop)
class OpenLoopAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "loop_type",
        "status",
        "summary_short",
        "counterparty_email",
        "due_at",
        "opened_at",
        "last_activity_at",
        "detector",
        "fulfilment",
    )
    list_filter = (
        "status",
        "loop_type",
        "detector",
        "source",
        ("fulfilment_suspected_at", admin.EmptyFieldListFilter),
    )
    search_fields = ("summary", "counterparty_email", "thread_id", "dedup_key")
    list_select_related = ("source", "counterparty", "page")
    # Every field is read-only: a loop changes only through the loop services (the
    # triage buttons above the form, the actions, sender profiles), each of which
    # writes a LoopEvent; a form edit bypassed them and their history (newcomer).
    readonly_fields = (
        "source",
        "summary",
        "counterparty",
        "counterparty_email",
        "counterparty_name",
        "page",
        "fact",
        "dedup_key",
        "loop_type",
        "detector",
        "evidence",
        "thread_id",
        "status",
        "opened_at",
        "last_activity_at",
        "closed_at",
        "closed_by",
        "confidence",
        "fulfilment_suspected_at",
        "fulfilment_evidence",
        "due_at",
        "snoozed_until",
        "created_at",
        "updated_at",
    )
    # The form shows what a curator reads; the evidence is quoted once above it
    # and the internals (dedup key, thread id, raw JSON) sit in a closed
    # <details> under the history (issue 47: the page showed the evidence three
    # times and was wider than the window).
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "source",
                    "summary",
                    "counterparty",
                    "counterparty_email",
                    "counterparty_name",
                    "page",
                    "fact",
                    "loop_type",
                    "status",
                    "opened_at",
                    "last_activity_at",
                    "due_at",
                    "snoozed_until",
                    "closed_at",
                    "closed_by",
                    "fulfilment_suspected_at",
                )
            },
        ),
    )
    date_hierarchy = "last_activity_at"
    actions = (
        "mark_done",
        "drop",
        "reopen",
        "confirm_fulfilment",
        "mute_sender",
        "mute_sender_and_close",
        "mute_thread",
    )

    change_form_template = "loops/openloop_change_form.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # SPEC §5: loops are closed (done, dropped, stale), never deleted.

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,  # noqa: FBT001, FBT002 (Django's signature)
        change: bool = False,  # noqa: FBT001, FBT002
        form_url: str = "",
        obj: OpenLoop | None = None,
    ) -> HttpResponse:
        """The loop page: triage buttons, evidence as quotes and the event history
        above the (read-only) form."""
        if obj is not None:
            context = {
                **context,
                "loop": obj,
                "loop_label": obj.get_loop_type_display(),
                "snoozed_until": snooze_end(obj),
                "evidence_items": [
                    {
                        "quote": e.get("quote") or e.get("text") or "(no quote)",
                        "when": e.get("date") or e.get("message_date") or "",
                        "who": e.get("from") or "",
                        "link": e.get("link") or "",
                    }
                    for e in (obj.evidence or [])
                    if isinstance(e, dict)
                ],
                "events": [
                    {"event": ev, "details": _event_details(ev.extra_data)}
                    for ev in obj.events.order_by("event_time", "id")
                ],
                "internals": _internals(obj),
            }
        return super().render_change_form(request, context, add, change, form_url, obj)

    @admin.display(description="summary")
    def summary_short(self, obj: OpenLoop) -> str:
        return obj.summary[:90]

    @admin.display(description="delivered?", boolean=True)
    def fulfilment(self, obj: OpenLoop) -> bool:
        return obj.fulfilment_suspected_at is not None

    @admin.action(description="Mark done")
    def mark_done(self, request: HttpRequest, queryset: QuerySet[OpenLoop]) -> None:
        n = sum(
            loop_close(loop=lp, status=LoopStatus.DONE, actor=_actor(request))["closed"]
            for lp in queryset
        )
        self.message_user(request, f"{n} loop(s) marked done.", messages.SUCCESS)

    @admin.action(description="Drop")
    def drop(self, request: HttpRequest, queryset: QuerySet[OpenLoop]) -> None:
        n = sum(
            loop_close(loop=lp, status=LoopStatus.DROPPED, actor=_actor(request))[
                "closed"
            ]
            for lp in queryset
        )
        self.message_user(request, f"{n} loop(s) dropped.", messages.SUCCESS)

    @admin.action(description="Reopen")
    def reopen(self, request: HttpRequest, queryset: QuerySet[OpenLoop]) -> None:
        for lp in queryset:
            loop_reopen(loop=lp, actor=_actor(request))
        self.message_user(
            request, f"{queryset.count()} loop(s) open.", messages.SUCCESS
        )

    @admin.action(description="Confirm delivered (done, fulfilled)")
    def confirm_fulfilment(
        self, request: HttpRequest, queryset: QuerySet[OpenLoop]
    ) -> None:
        n = sum(
            loop_confirm_fulfilment(loop=lp, actor=_actor(request))["closed"]
            for lp in queryset
        )
        self.message_user(
            request, f"{n} loop(s) closed as fulfilled.", messages.SUCCESS
        )

    @admin.action(description="Mute the counterparty (sender); its open loops stay")
    def mute_sender(self, request: HttpRequest, queryset: QuerySet[OpenLoop]) -> None:
        n, _ = loops_mute_many(
            kind=LoopSuppression.Kind.SENDER,
            targets=(
                (lp.source, lp.counterparty_email)
                for lp in queryset.exclude(counterparty_email="")
            ),
            actor=_actor(request),
        )
        self.message_user(
            request,
            f"{n} sender(s) muted. A mute only stops new loops: their existing "
            "open loops stay open (use 'mute and close its open loops' to close "
            "them too).",
            messages.SUCCESS,
        )

    @admin.action(description="Mute the counterparty and close its open loops")
    def mute_sender_and_close(
        self, request: HttpRequest, queryset: QuerySet[OpenLoop]
    ) -> None:
        pairs = {
            (lp.source, lp.counterparty_email)
            for lp in queryset.exclude(counterparty_email="").select_related("source")
        }
        muted, closed = loops_mute_many(
            kind=LoopSuppression.Kind.SENDER,
            targets=sorted(pairs, key=lambda p: (p[0].id, p[1])),
            actor=_actor(request),
            close=True,
        )
        self.message_user(request, muted_and_closed(muted, closed), messages.SUCCESS)

    @admin.action(description="Mute the thread")
    def mute_thread(self, request: HttpRequest, queryset: QuerySet[OpenLoop]) -> None:
        n, _ = loops_mute_many(
            kind=LoopSuppression.Kind.THREAD,
            targets=(
                (lp.source, lp.thread_id) for lp in queryset.exclude(thread_id="")
            ),
            actor=_actor(request),
        )
        self.message_user(request, f"{n} thread(s) muted.", messages.SUCCESS)

    def get_urls(self) -> list[Any]:
        extra = [
            path(
                "waiting/",
                self.admin_site.admin_view(self.waiting_view),
                name="loops_waiting",
            )
        ]
        return extra + super().get_urls()

    def waiting_view(self, request: HttpRequest) -> HttpResponse:
        """The waiting dashboard (SPEC §5.5): the trusted view for staff, each loop
        with its human label and triage buttons. An unknown ``source`` is said so
        and the view falls back to every source. ``mine=by_me|to_me`` keeps the
        loops I owe or those owed to me. Snoozed loops are left out of the ranking
        but said on one "N snoozed (until …)" line that lists them (open with
        ``snoozed=1``), each with Wake now."""
        source = request.GET.get("source") or None
        caller = local_caller(actor=_actor(request))
        if source and not Source.objects.filter(pk=source).exists():
            self.message_user(
                request,
                f"There is no source '{source}'; showing every source.",
                messages.WARNING,
            )
            source = None
        mine = request.GET.get("mine", "")
        wanted = (
            OWED_BY_ME if mine == "by_me" else OWED_TO_ME if mine == "to_me" else None
        )
        report = waiting_report(
            caller=caller,
            sources=[source] if source else None,
            top=25,
            loop_types=wanted,
        )
        # Each source is read at its own clock (a mailbox file's newest message):
        # with several clocks the heading names none, each coverage line and
        # group says its own (issue 47: the heading's date was another source's).
        clocks = {c["as_of"] for c in report["coverage"]}
        for group in report["groups"]:
            for lp in group["loops"]:
                lp["label"] = LoopType(lp["loop_type"]).label
            if len(clocks) > 1:
                group["as_of_text"] = _minute(group["as_of"])
        snoozed = report["snoozed"]
        coverage = coverage_rows(report["coverage"])
        noted = {n["text"] for c in report["coverage"] for n in c["notes"]}
        context = {
            **self.admin_site.each_context(request),
            "title": "Waiting",
            "report": report,
            # Loops a curator parked (SPEC §5.5): one line, listed on demand, each
            # with Wake now (issue 47: a snoozed loop never just vanishes).
            "snoozed_text": snoozed_line(snoozed) if snoozed["loop_count"] else "",
            "snoozed_rows": [
                {"loop": lp, "label": LoopType(lp.loop_type).label}
                for lp in snoozed_loops(
                    source_ids=report["sources"], loop_types=wanted
                )[:SNOOZED_SHOWN]
            ]
            if snoozed["loop_count"]
            else [],
            "show_snoozed": request.GET.get("snoozed") == "1",
            "as_of_text": _minute(report["as_of"]) if len(clocks) <= 1 else "",
            "coverage": coverage,
            "aged_out_asks": sum(c["aged_out_asks"] for c in report["coverage"]),
            "aged_out_link": aged_out_link(report["coverage"]),
            # Mailbox notes are said on their source's coverage line instead.
            "other_warnings": [w for w in report["warnings"] if w not in noted],
            "opts": self.model._meta,
            # The per-mailbox filter (SPEC §5.5, §6.1a): every mail source.
            "mail_sources": Source.objects.filter(
                kind__in=(Source.Kind.GOOGLE, Source.Kind.MAILBOX, Source.Kind.IMAP)
            ).order_by("name", "id"),
            "selected_source": source or "",
            "mine": mine,
        }
        return TemplateResponse(request, "loops/waiting.html", context)


#: Event details already quoted in the loop page's Evidence section.
EVIDENCE_KEYS = ("evidence",)


def _event_details(extra: Any) -> Any:
    """A loop event's ``extra_data`` for the history table, without the evidence
    the page quotes once above it (kept whole in the internals)."""
    if not isinstance(extra, dict):
        return extra
    return {k: v for k, v in extra.items() if k not in EVIDENCE_KEYS}


def _internals(loop: OpenLoop) -> list[tuple[str, str]]:
    """The loop's internals as ``(label, text)`` for the closed "Internals" box of
    its page: ids, detector, confidence and the raw evidence JSON."""
    return [
        ("dedup key", loop.dedup_key),
        ("thread id", loop.thread_id or "—"),
        ("detector", loop.detector),
        ("confidence", f"{loop.confidence}"),
        (
            "created / updated",
            f"{loop.created_at:%Y-%m-%d %H:%M} / {loop.updated_at:%Y-%m-%d %H:%M}",
        ),
        ("evidence (JSON)", json.dumps(loop.evidence, indent=2, ensure_ascii=False)),
        (
            "fulfilment evidence (JSON)",
            json.dumps(loop.fulfilment_evidence, indent=2, ensure_ascii=False)
            if loop.fulfilment_evidence
            else "—",
        ),
    ]


def aged_out_link(coverage: list[dict[str, Any]]) -> str:
    """The loop list filtered to the unanswered asks the 90-day window aged out
    (``loops.waiting.aged_out_asks``): stale ``unanswered_inbound`` loops; when
    only one source has any, that source's, last active before its window."""
    url = reverse("admin:loops_openloop_changelist")
    query = {
        "status__exact": str(LoopStatus.STALE),
        "loop_type__exact": str(LoopType.UNANSWERED_INBOUND),
    }
    having = [c for c in coverage if c["aged_out_asks"]]
    if len(having) == 1:
        floor = datetime.fromisoformat(having[0]["as_of"]) - timedelta(
            days=MAILBOX_WINDOW_DAYS
        )
        query["source__id__exact"] = having[0]["source_id"]
        query["last_activity_at__lt"] = floor.isoformat()
    return f"{url}?{urlencode(query)}"


def coverage_rows(coverage: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``source_coverage`` entries as the Waiting page's collapsible lines: each
    entry plus ``line`` (``coverage_line``), ``as_of_text`` and, when the window
    aged out some of its asks, ``aged_out_link``."""
    return [
        {
            **entry,
            "line": coverage_line(entry),
            "as_of_text": _minute(entry["as_of"]),
            "details": [COVERAGE_DETAIL[n["code"]] for n in entry["notes"]],
            "aged_out_link": aged_out_link([entry]) if entry["aged_out_asks"] else "",
        }
        for entry in coverage
    ]


#: What each coverage note means, in the console's words (the CLI's notes advise
#: ``--as-of``, which the console cannot act on).
COVERAGE_DETAIL = {
    "no_own_mail": (
        "None of the messages in its 90-day window is the owner's own: what the "
        "owner asked or promised cannot be seen. Check the owner addresses of the "
        "source, or import the sent folder."
    ),
    "sent_missing": (
        "Its 90-day window holds others' mail but hardly any sent mail: whether the "
        "owner answered cannot be seen, so its reply-owed loops are held back. "
        "Import the sent folder, or check the owner addresses."
    ),
    "sliver": (
        "Only a few of its messages fall in the 90 days before its newest message, "
        "the window loops are detected in; older mail opens no loops."
    ),
}


def _minute(iso: str) -> str:
    """An ISO 8601 time as the CLI shows it: ``2002-01-02 01:19 UTC``."""
    return f"{datetime.fromisoformat(iso):%Y-%m-%d %H:%M %Z}"


@admin.register(SenderProfile)
class SenderProfileAdmin(admin.ModelAdmin):
    """Who expects a reply (SPEC §5.1a): the computed verdict per sender, and the
    curator's "person" / "automated" actions, which re-evaluate the sender's
    loops."""

    list_display = (
        "address",
        "kind",
        "computed_kind",
        "admin_kind",
        "messages",
        "why",
        "decided_by",
        "source",
    )
    list_filter = ("kind", "computed_kind", "admin_kind", "source")
    search_fields = ("address",)
    list_select_related = ("source",)
    readonly_fields = (
        "source",
        "address",
        "kind",
        "computed_kind",
        "admin_kind",
        "why",
        "signals_table",
        "messages",
        "decided_by",
        "decided_at",
        "computed_at",
    )
    # Shown in words and as a table (``why``, ``signals_table``), not as JSON.
    exclude = ("reasons", "signals")
    actions = ("mark_person", "mark_automated")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # profiles are computed from the mail; curators mark them

    @admin.display(description="why")
    def why(self, obj: SenderProfile) -> str:
        """The computed verdict's reasons in words (``loops.senders.reason_text``)."""
        return reason_text(obj.reasons) or "—"

    @admin.display(description="signals")
    def signals_table(self, obj: SenderProfile) -> str:
        """The counts the verdict was computed from, as a table."""
        return json_table(obj.signals)

    def _mark(
        self, request: HttpRequest, queryset: QuerySet[SenderProfile], kind: str
    ) -> None:
        totals = {"senders": 0, "closed": 0, "opened": 0, "reopened": 0}
        unranked = 0
        for profile in queryset.select_related("source"):
            out = sender_mark(
                source=profile.source,
                address=profile.address,
                kind=kind,
                actor=_actor(request),
            )
            totals["senders"] += 1
            for key in ("closed", "opened", "reopened"):
                totals[key] += out[key]
            if kind == SenderProfile.Kind.AUTOMATED:
                unranked += OpenLoop.objects.filter(
                    source=profile.source,
                    counterparty_email__iexact=profile.address,
                    status=LoopStatus.OPEN,
                ).count()
        text = (
            f"{totals['senders']} sender(s) marked {kind}; their loops were "
            f"re-evaluated: {totals['closed']} closed, {totals['opened']} opened, "
            f"{totals['reopened']} reopened."
        )
        if unranked:
            # Promises and asks stay open: an automated sender is only not ranked.
            text += (
                f" {unranked} other open loop(s) with them stay open and leave the "
                "Waiting ranking (listed there under 'Automated senders')."
            )
        self.message_user(request, text, messages.SUCCESS)

    @admin.action(description="Mark as a person (expects replies)")
    def mark_person(
        self, request: HttpRequest, queryset: QuerySet[SenderProfile]
    ) -> None:
        self._mark(request, queryset, SenderProfile.Kind.PERSON)

    @admin.action(description="Mark as automated (close its reply-owed loops)")
    def mark_automated(
        self, request: HttpRequest, queryset: QuerySet[SenderProfile]
    ) -> None:
        self._mark(request, queryset, SenderProfile.Kind.AUTOMATED)


@admin.register(LoopSuppression)
class LoopSuppressionAdmin(admin.ModelAdmin):
    list_display = ("source", "kind", "value", "created_by", "created_at")
    list_filter = ("kind", "source")
    search_fields = ("value",)
    list_select_related = ("source",)
    readonly_fields = ("source", "kind", "value", "created_by", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # mutes are added through loop/page actions or the API


@admin.register(LoopEvent)
class LoopEventAdmin(ReadOnlyAdmin):
    list_display = ("event_time", "event_type", "loop", "source", "actor")
    list_filter = ("event_type", "source")
    search_fields = ("actor", "loop__summary")
    list_select_related = ("loop", "source")
    raw_id_fields = ("loop",)
    fields = ("event_time", "event_type", "actor", "loop", "source", "extra_table")
    readonly_fields = fields

    @admin.display(description="details")
    def extra_table(self, obj: LoopEvent) -> str:
        return json_table(obj.extra_data)


@admin.register(GraceHold)
class GraceHoldAdmin(ReadOnlyAdmin):
    list_display = ("source", "thread_id", "recheck_at")
    list_filter = ("source",)
    search_fields = ("thread_id",)
    list_select_related = ("source",)


@admin.register(ExtractionRun)
class ExtractionRunAdmin(ReadOnlyAdmin):
    list_display = (
        "idempotency_key",
        "extractor",
        "status",
        "reason",
        "attempts",
        "updated_at",
    )
    list_filter = ("extractor", "status", "reason", "source")
    search_fields = ("idempotency_key", "thread_id")
    list_select_related = ("source",)


@admin.register(LlmUsage)
class LlmUsageAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at",
        "model",
        "input_tokens",
        "output_tokens",
        "usd_estimate",
        "outcome",
    )
    list_filter = ("model", "outcome", "source")
    search_fields = ("thread_id",)
    list_select_related = ("source",)
