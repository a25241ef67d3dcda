"""The console's own pages (SPEC §0 "team admins", §2.3, §5, §10): buttons that
enqueue jobs, one-click loop triage, person cards, merges, and wiki pages with a
rendered view, an editor and revisions. Staff only (``ConsoleSite.admin_view``).

Every write calls a domain service (``loops.services``, ``brain.services.pages``,
``brain.services.merges``, ``jobs.services``); the views only read and route.
Each POST answers with a redirect and a message saying what changed.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import asdict
from datetime import date, datetime, time
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib import admin, messages
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Count, F, Q
from django.http import Http404, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme

from brain.access import Caller, local_caller
from brain.display import diff_rows, json_table
from brain.exceptions import BrainError, Conflict
from brain.links import DEFAULT_LINK_TYPE
from brain.models import (
    Alias,
    Fact,
    MergeProposal,
    Page,
    PageRevision,
    PageType,
    Relation,
    Source,
    TimelineEntry,
)
from brain.search import SearchResult, page_search
from brain.services.facts import fact_correct, fact_forget
from brain.services.merges import (
    merge_proposal_accept,
    merge_proposal_reject,
    page_merge,
)
from brain.services.pages import page_revision, page_write
from brain.text import normalize_alias
from connectors.base import ConnectorError
from connectors.imap.sync import imap_folder_role, imap_server_folders
from connectors.models import FOLDER_HELD_KIND, HeldItem, SharedMailbox
from connectors.services_shared import shared_mailbox_folder_remap
from interfaces.console.markdown import markdown_plain, render_markdown
from jobs.selectors import worker_alive
from jobs.services import job_enqueue
from loops.models import LoopStatus, LoopSuppression, LoopType, OpenLoop
from loops.services import (
    due_end_of_day,
    loop_close,
    loop_correct_due,
    loop_mute,
    loop_reopen,
    loop_snooze,
    sender_loops_close,
)
from loops.waiting import snooze_end

if TYPE_CHECKING:
    from django.http import HttpRequest, HttpResponse

#: Jobs the dashboard's buttons may start (SPEC §7 kinds).
RUNNABLE = {"sync_source", "embed_pending", "dream"}
LOOP_LABELS = dict(LoopType.choices)
THREAD_TYPE = "email"  # mail threads (connectors.mail.store)
PERSON_TYPE = "person"


def _actor(request: HttpRequest) -> str:
    return f"staff:{request.user.get_username()}"


def _caller(request: HttpRequest) -> Caller:
    """The staff user as a trusted local caller (SPEC §8), as ``brain.admin`` does."""
    return local_caller(actor=_actor(request))


def _back(request: HttpRequest, fallback: str) -> HttpResponse:
    """Redirect to the form's ``next`` when it is a local URL, else ``fallback``."""
    target = request.POST.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}
    ):
        return redirect(target)
    return redirect(fallback)


def _context(request: HttpRequest, title: str, **extra: Any) -> dict[str, Any]:
    """The admin's base context (header, user links, sidebar) plus ``extra``."""
    return {**admin.site.each_context(request), "title": title, **extra}


# --- dashboard buttons ------------------------------------------------------------


def run_job(request: HttpRequest) -> HttpResponse:
    """POST ``kind`` (sync_source needs ``source_id``): enqueue the job (coalesced
    with a queued or running one of the same kind and params) and say so, warning
    when no worker is alive to run it."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    kind = request.POST.get("kind", "")
    if kind not in RUNNABLE:
        messages.error(request, f"Unknown job kind '{kind}'.")
        return redirect("admin:index")
    params: dict[str, Any] = {}
    if kind == "sync_source":
        params["source_id"] = request.POST.get("source_id", "")
    try:
        job, created = job_enqueue(
            kind=kind, params=params, created_by=_actor(request), coalesce=True
        )
    except BrainError as exc:
        messages.error(request, exc.message)
        return redirect("admin:index")
    verb = "Queued" if created else "Already queued or running:"
    messages.success(request, f"{verb} job #{job.pk} ({kind}).")
    if job.status == job.Status.QUEUED and not worker_alive():
        messages.warning(
            request,
            "No worker is running, so it waits until one starts (`manage.py worker`).",
        )
    return redirect("admin:index")


# --- loop triage ------------------------------------------------------------------


def _loop_name(loop: OpenLoop) -> str:
    summary = loop.summary if len(loop.summary) <= 80 else loop.summary[:79] + "…"
    return f"“{summary}”"


def loop_act(request: HttpRequest, loop_id: int) -> HttpResponse:
    """POST ``action`` on one loop (SPEC §5): ``done`` | ``drop`` | ``reopen`` |
    ``due`` (``due`` = YYYY-MM-DD, empty clears it; the same date again changes
    nothing and says so) | ``snooze`` (``until`` = YYYY-MM-DD after today, from
    midnight local time; empty wakes a snoozed loop and is refused on one that is
    not snoozed) | ``mute_close`` (mute the
    counterparty and close all their open loops in the source). Redirects to
    ``next`` (the waiting view, a person card) with a message saying what changed."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    loop = get_object_or_404(OpenLoop, pk=loop_id)
    fallback = reverse("admin:loops_openloop_change", args=[loop.pk])
    action = request.POST.get("action", "")
    actor = _actor(request)
    name = _loop_name(loop)
    try:
        if action in ("done", "drop"):
            status = LoopStatus.DONE if action == "done" else LoopStatus.DROPPED
            result = loop_close(loop=loop, status=status, actor=actor)
            if result["closed"]:
                messages.success(request, f"{name} closed as {status}.")
            else:
                messages.info(request, f"{name} was already {result['status']}.")
        elif action == "reopen":
            loop_reopen(loop=loop, actor=actor)
            messages.success(request, f"{name} is open again.")
        elif action == "due":
            raw = request.POST.get("due", "").strip()
            try:
                new = due_end_of_day(date.fromisoformat(raw)) if raw else None
            except ValueError:
                messages.error(request, f"'{raw}' is not a date (use YYYY-MM-DD).")
                return _back(request, fallback)
            old = loop.due_at
            before = old.date().isoformat() if old else "no due date"
            after = new.date().isoformat() if new else "no due date"
            if before == after:
                messages.info(
                    request,
                    f"{name}: nothing changed, the due date is still {after} "
                    "(pick a date to set one).",
                )
                return _back(request, fallback)
            loop_correct_due(loop=loop, due_at=new, actor=actor)
            messages.success(
                request, f"{name}: due date changed from {before} to {after}."
            )
        elif action == "snooze":
            raw = request.POST.get("until", "").strip()
            try:
                day = date.fromisoformat(raw) if raw else None
            except ValueError:
                messages.error(request, f"'{raw}' is not a date (use YYYY-MM-DD).")
                return _back(request, fallback)
            if day is None and loop.snoozed_until is None:
                messages.error(
                    request,
                    f"{name} is not snoozed and no date was chosen: pick the day "
                    "to snooze it until. Nothing changed.",
                )
                return _back(request, fallback)
            until = (
                datetime.combine(
                    day, time(0, 0), tzinfo=ZoneInfo(settings.BRAIN_TIME_ZONE)
                )
                if day
                else None
            )
            if until is not None and until <= timezone.now():
                # A replayed mailbox shows its own date; snoozing follows the wall
                # clock (waiting hides a loop while ``snoozed_until`` is ahead of
                # now), so the message names today instead of leaving it implied.
                messages.error(
                    request,
                    f"Snooze until a day after today ({timezone.localdate()}): "
                    "snoozing follows the real calendar, even for a mailbox shown "
                    "at its own date. Nothing changed.",
                )
                return _back(request, fallback)
            loop_snooze(loop=loop, until=until, actor=actor)
            if until is None:
                messages.success(request, f"{name} is awake: back in waiting now.")
            else:
                messages.success(
                    request,
                    f"{name} snoozed until {day}: it stays open and comes back to "
                    "waiting that day.",
                )
        elif action == "mute_close":
            if not loop.counterparty_email:
                messages.error(request, f"{name} has no sender address to mute.")
                return _back(request, fallback)
            with transaction.atomic():
                row, created = loop_mute(
                    source=loop.source,
                    kind=LoopSuppression.Kind.SENDER,
                    value=loop.counterparty_email,
                    actor=actor,
                )
                closed = sender_loops_close(
                    source=loop.source, address=row.value, actor=actor
                )
            muted = "Muted" if created else "Already muted:"
            messages.success(
                request,
                f"{muted} {row.value} in {loop.source_id}: new mail from them opens "
                f"no loops. Closed {closed} open loop(s) with them (dropped).",
            )
        else:
            messages.error(request, f"Unknown action '{action}'.")
    except BrainError as exc:
        messages.error(request, exc.message)
    return _back(request, fallback)


def loop_rows(loops: list[OpenLoop]) -> list[dict[str, Any]]:
    """Loops as the console's triage rows: ``{loop, label, snoozed_until, quote,
    link}`` (``snoozed_until``: when a curator's snooze ends while it is ahead, else
    None; SPEC §5.5)."""
    rows = []
    now = timezone.now()
    for loop in loops:
        last = loop.evidence[-1] if loop.evidence else {}
        rows.append(
            {
                "loop": loop,
                "label": LOOP_LABELS.get(loop.loop_type, loop.loop_type),
                "snoozed_until": snooze_end(loop, now),
                "quote": last.get("quote", ""),
                "link": last.get("link", ""),
            }
        )
    return rows


# --- facts on a card ----------------------------------------------------------------


def fact_act(request: HttpRequest, fact_id: int) -> HttpResponse:
    """POST ``action`` on one fact of a card (SPEC §2.4, §4): ``correct`` (``text``:
    the corrected fact; ``brain.services.facts.fact_correct`` remembers it and
    supersedes the old one, naming the curator) | ``forget`` (``reason``, required:
    ``fact_forget`` expires it with that reason). Facts are never edited in place
    or deleted. Redirects to ``next`` (the card) with a message saying what
    changed."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    fact = get_object_or_404(Fact.objects.defer("embedding"), pk=fact_id)
    fallback = reverse("admin:brain_fact_change", args=[fact.pk])
    action = request.POST.get("action", "")
    name = f"“{fact.text if len(fact.text) <= 80 else fact.text[:79] + '…'}”"
    try:
        if action == "correct":
            new = fact_correct(
                caller=_caller(request),
                fact_id=fact.pk,
                text=request.POST.get("text", ""),
            )
            messages.success(
                request,
                f"Corrected: {name} is superseded by “{new.text}” (fact {new.pk}); "
                "the old fact stays in the history.",
            )
        elif action == "forget":
            reason = " ".join(request.POST.get("reason", "").split())
            if not reason:
                messages.error(
                    request, f"Say why {name} is forgotten. Nothing changed."
                )
                return _back(request, fallback)
            _, expired = fact_forget(
                caller=_caller(request), fact_id=fact.pk, reason=reason
            )
            if expired:
                messages.success(request, f"Forgotten: {name} ({reason}).")
            else:
                messages.info(request, f"{name} was already expired.")
        else:
            messages.error(request, f"Unknown action '{action}'.")
    except BrainError as exc:
        messages.error(request, exc.message)
    return _back(request, fallback)


# --- person cards -----------------------------------------------------------------


def _live_page(source_id: str, slug: str) -> Page:
    page = (
        Page.objects.select_related("type", "source")
        .filter(source_id=source_id, slug=slug, deleted_at__isnull=True)
        .first()
    )
    if page is None:
        raise Http404(f"No live page {source_id}:{slug}")
    return page


#: How many "merged into" hops a merged-away URL follows to a live page.
MERGE_HOPS = 5


def _merged_into(source_id: str, slug: str) -> Page | None:
    """The live page a merged-away page now lives in (``brain.services.merges``
    stamps ``merged_into`` on the page it soft-deletes), following a chain of
    merges; None when ``slug`` was not merged away or leads nowhere live."""
    for _ in range(MERGE_HOPS):
        gone = (
            Page.objects.filter(
                source_id=source_id,
                slug=slug,
                deleted_at__isnull=False,
                frontmatter__has_key="merged_into",
            )
            .order_by("-deleted_at")
            .values_list("frontmatter", flat=True)
            .first()
        )
        if not gone or not isinstance(gone.get("merged_into"), str):
            return None
        slug = gone["merged_into"]
        live = Page.objects.filter(
            source_id=source_id, slug=slug, deleted_at__isnull=True
        ).first()
        if live is not None:
            return live
    return None


def _to_kept_page(
    request: HttpRequest, source_id: str, slug: str, view: str
) -> HttpResponse:
    """A merged-away page's console URL answers a redirect (302) to the same view
    of the page it was merged into, with a message saying so; any other missing
    page is a 404."""
    kept = _merged_into(source_id, slug)
    if kept is None:
        raise Http404(f"No live page {source_id}:{slug}")
    messages.info(
        request, f"{slug} was merged into {kept.title or kept.slug}: showing that page."
    )
    return redirect(view, kept.source_id, kept.slug)


def _aliases_shown(page: Page) -> list[Alias]:
    """A card's "Also known as": the page's aliases except the slugs of pages
    merged into it (``page_merge`` keeps them as aliases so old references still
    resolve; they are not names)."""
    merged = {
        normalize_alias(slug)
        for slug in Page.objects.filter(
            source_id=page.source_id,
            deleted_at__isnull=False,
            frontmatter__merged_into=page.slug,
        ).values_list("slug", flat=True)
    }
    return [
        a
        for a in Alias.objects.filter(page=page).order_by("alias")
        if a.alias not in merged
    ]


def _thread_mention(end: str) -> Q:
    """Relations a card leaves out: a mail thread's mentions (the thread list
    shows those). Every other edge shows, as the API card's ``edges`` do (SPEC §4;
    the card said "None" beside an API card with an edge from a thread page)."""
    return Q(**{f"{end}__type__name": THREAD_TYPE}) & Q(
        relation_type__name=DEFAULT_LINK_TYPE
    )


def person_card(request: HttpRequest, source_id: str, slug: str) -> HttpResponse:
    """A person's card (SPEC §4 entity, §5): aliases, open loops both ways with
    their actions (a snoozed one marked "snoozed until …", with Wake now), recent
    threads and timeline, live and superseded facts with their evidence, relations
    by name, and "Merge with…" (``q`` searches other pages). A merged-away
    page's card redirects to the kept page's (``_to_kept_page``)."""
    try:
        page = _live_page(source_id, slug)
    except Http404:
        return _to_kept_page(request, source_id, slug, "admin:console_person")
    loops = list(
        OpenLoop.objects.filter(counterparty=page, status=LoopStatus.OPEN)
        .select_related("page")
        .order_by("due_at", "-last_activity_at")[:100]
    )
    facts = list(
        Fact.objects.filter(entity=page)
        .defer("embedding")
        .select_related("superseded_by")
        .order_by("expired_at", "-created_at")[:200]
    )
    relations = Relation.objects.select_related(
        "relation_type", "from_page", "to_page", "from_page__type"
    )
    outgoing = list(
        relations.filter(from_page=page, to_page__deleted_at__isnull=True)
        .exclude(_thread_mention("to_page"))
        .order_by("relation_type__name", "to_page__title")[:50]
    )
    incoming_all = relations.filter(
        to_page=page, from_page__deleted_at__isnull=True
    ).order_by("-from_page__updated_at")
    aliases = _aliases_shown(page)
    threads = _recent_threads(page, [a.alias for a in aliases if "@" in a.alias])
    incoming = list(incoming_all.exclude(_thread_mention("from_page"))[:50])
    query = request.GET.get("q", "").strip()
    candidates: list[Page] = []
    if query:
        candidates = list(
            Page.objects.filter(source_id=page.source_id, deleted_at__isnull=True)
            .filter(
                Q(title__icontains=query)
                | Q(slug__icontains=query)
                | Q(aliases__alias__icontains=query)
            )
            .exclude(pk=page.pk)
            .select_related("type")
            .distinct()
            .order_by("title")[:20]
        )
    rows = loop_rows(loops)
    context = _context(
        request,
        page.title or page.slug,
        page=page,
        aliases=aliases,
        loops=rows,
        snoozed_count=sum(1 for r in rows if r["snoozed_until"]),
        owed_by_me=[r for r in rows if r["loop"].loop_type in _BY_ME],
        facts=facts,
        live_facts=[f for f in facts if f.expired_at is None],
        old_facts=[f for f in facts if f.expired_at is not None],
        outgoing=outgoing,
        incoming=incoming,
        threads=threads,
        timeline=list(
            TimelineEntry.objects.filter(page=page).order_by("-date", "-id")[:15]
        ),
        query=query,
        candidates=candidates,
    )
    return TemplateResponse(request, "console/person.html", context)


RECENT_THREADS = 10


def _recent_threads(page: Page, addresses: list[str]) -> list[Page]:
    """Thread pages of ``page``'s source, newest first: those its loops point at,
    those linking to it, and mail threads with one of ``addresses`` among the
    participants (``connectors.mail.render`` frontmatter)."""
    threads = Page.objects.filter(
        source_id=page.source_id, type__name=THREAD_TYPE, deleted_at__isnull=True
    )
    ids = set(
        OpenLoop.objects.filter(counterparty=page, page__isnull=False).values_list(
            "page_id", flat=True
        )
    )
    ids |= set(
        Relation.objects.filter(to_page=page).values_list("from_page_id", flat=True)
    )
    if addresses:
        mentioned = Q()
        for address in addresses:
            mentioned |= Q(frontmatter__participants__contains=[address])
        ids |= set(threads.filter(mentioned).values_list("id", flat=True))
    return list(
        threads.filter(id__in=ids)
        .only("id", "slug", "title", "source_id", "updated_at", "effective_date")
        .order_by(F("effective_date").desc(nulls_last=True), "-updated_at")[
            :RECENT_THREADS
        ]
    )


_BY_ME = {LoopType.COMMITMENT_OWED_BY_ME, LoopType.UNANSWERED_INBOUND}


def _page_side(page: Page) -> dict[str, Any]:
    return {
        "page": page,
        "aliases": list(
            Alias.objects.filter(page=page).values_list("alias", flat=True)[:30]
        ),
        "facts": Fact.objects.filter(entity=page, expired_at__isnull=True).count(),
        "loops": OpenLoop.objects.filter(
            counterparty=page, status=LoopStatus.OPEN
        ).count(),
        "relations": Relation.objects.filter(
            Q(from_page=page) | Q(to_page=page)
        ).count(),
        "timeline": TimelineEntry.objects.filter(page=page).count(),
    }


def merge_preview(request: HttpRequest) -> HttpResponse:
    """Two pages side by side (GET ``keep``, ``merge`` page ids, or ``proposal``),
    then POST ``decision`` = ``merge`` (``page_merge``, or the proposal's accept) or
    ``reject`` (proposals only). The merged page's aliases, relations, facts and
    timeline move to the kept one (SPEC §10); the merge is audited."""
    data = request.POST if request.method == "POST" else request.GET
    proposal = None
    if data.get("proposal"):
        proposal = get_object_or_404(MergeProposal, pk=data["proposal"])
        keep, merge = proposal.keep_page, proposal.merge_page
    else:
        keep = get_object_or_404(Page, pk=data.get("keep") or 0)
        merge = get_object_or_404(Page, pk=data.get("merge") or 0)
    if request.method == "POST":
        decision = data.get("decision")
        actor = _actor(request)
        try:
            if decision == "reject" and proposal is not None:
                merge_proposal_reject(proposal_id=proposal.pk, actor=actor)
                messages.success(
                    request,
                    f"Rejected: {merge.title} and {keep.title} stay separate and will "
                    "not be proposed again.",
                )
                return redirect("admin:brain_mergeproposal_changelist")
            if decision == "merge":
                if proposal is not None:
                    counts = merge_proposal_accept(proposal_id=proposal.pk, actor=actor)
                else:
                    counts = page_merge(keep=keep, merge=merge, actor=actor)
                moved = ", ".join(
                    f"{v} {k}" for k, v in counts.items() if k != "merge_id"
                )
                messages.success(
                    request, f"Merged {merge.title} into {keep.title} (moved {moved})."
                )
                return redirect("admin:console_person", keep.source_id, keep.slug)
            messages.error(request, f"Unknown decision '{decision}'.")
        except BrainError as exc:
            messages.error(request, exc.message)
    context = _context(
        request,
        f"Merge {merge.title} into {keep.title}?",
        keep=_page_side(keep),
        merge=_page_side(merge),
        proposal=proposal,
    )
    return TemplateResponse(request, "console/merge.html", context)


# --- wiki pages -------------------------------------------------------------------

_SECTION = re.compile(r"^## (.+)$", re.MULTILINE)
TO_SHOWN = 3


def _conversation(body: str) -> list[dict[str, Any]]:
    """A thread page body (``connectors.mail.render``) split into messages:
    ``{header, meta, body}``; long To/Cc lines are shortened."""
    parts = _SECTION.split(body)
    messages_: list[dict[str, Any]] = []
    for i in range(1, len(parts) - 1, 2):
        header, text = parts[i], parts[i + 1].strip("\n")
        first, _, rest = text.partition("\n")
        meta = ""
        if first.startswith(("[message](", "To: ", "Cc: ")):
            meta, text = first, rest
        shortened = []
        for piece in meta.split(" · ") if meta else []:
            label, sep, names = piece.partition(": ")
            people = names.split(", ") if sep else []
            if sep and len(people) > TO_SHOWN:
                piece = f"{label}: {', '.join(people[:TO_SHOWN])} and {len(people) - TO_SHOWN} more"
            shortened.append(piece)
        messages_.append(
            {
                "header": header,
                "mine": header.startswith("→ "),
                "meta": render_markdown(" · ".join(shortened)),
                "body": render_markdown(text.strip()),
            }
        )
    return messages_


def page_view(request: HttpRequest, source_id: str, slug: str) -> HttpResponse:
    """Any page rendered (markdown to sanitised HTML); a thread as a conversation;
    frontmatter as a table; links to edit, revisions and the person card. A
    merged-away page's URL redirects to the kept page (``_to_kept_page``)."""
    try:
        page = _live_page(source_id, slug)
    except Http404:
        return _to_kept_page(request, source_id, slug, "admin:console_page")
    type_name = page.type.name if page.type_id else ""
    conversation = _conversation(page.body) if type_name == THREAD_TYPE else []
    context = _context(
        request,
        page.title or page.slug,
        page=page,
        type_name=type_name,
        is_person=type_name == PERSON_TYPE,
        conversation=conversation,
        html=None if conversation else render_markdown(page.body, source_id=source_id),
        frontmatter=json_table(page.frontmatter),
        revision_count=PageRevision.objects.filter(page=page).count(),
    )
    return TemplateResponse(request, "console/page.html", context)


def page_edit(request: HttpRequest, source_id: str, slug: str) -> HttpResponse:
    """The page editor (SPEC §2.3): POST ``title``, ``body``, ``mode`` (replace |
    append) and ``base_revision`` (the revision the form showed, always sent) go
    through ``page_write``, the one write function (frontmatter kept, title
    sanitised, a revision recorded). A page changed since the form was opened is
    not saved: the editor comes back with status 409 showing the current version,
    what changed since, and the curator's text still in the box (``_conflict``).
    Chunks are rebuilt in the write; the embedding runs after commit in an
    ``embed_pending`` job, not in this request."""
    page = _live_page(source_id, slug)
    if request.method == "POST":
        mode = request.POST.get("mode", "replace")
        body = request.POST.get("body", "").replace("\r\n", "\n")
        title = request.POST.get("title", "").strip() or page.title
        try:
            if mode not in ("replace", "append"):
                messages.error(request, f"Unknown mode '{mode}'.")
            else:
                result = page_write(
                    source=page.source,
                    mode=mode,
                    actor=_caller(request),
                    slug=page.slug,
                    title=title,
                    body=body,
                    base_revision=request.POST.get("base_revision") or None,
                    embed=False,
                )
                _saved(request, page, mode=mode, changed=result.changed)
                return redirect("admin:console_page", page.source_id, page.slug)
        except Conflict as exc:
            page.refresh_from_db()
            return _conflict(request, page, exc, title=title, body=body, mode=mode)
        except BrainError as exc:
            messages.error(request, exc.message)
    context = _context(
        request,
        f"Edit {page.title or page.slug}",
        page=page,
        form_title=page.title,
        form_body=page.body,
        mode="replace",
        base_revision=page_revision(page),
    )
    return TemplateResponse(request, "console/page_edit.html", context)


def _saved(request: HttpRequest, page: Page, *, mode: str, changed: bool) -> None:
    """After an editor save: queue the page's embedding and say what happened."""
    job_enqueue(
        kind="embed_pending",
        params={"source_ids": [page.source_id]},
        created_by=_actor(request),
        coalesce=True,
    )
    verb = "appended to" if mode == "append" else "saved"
    if not changed:
        messages.info(request, "Nothing changed.")
    else:
        messages.success(
            request,
            f"Page {verb}; a revision was recorded. Search finds the new "
            "words now; its embedding is refreshed in the background.",
        )


def _conflict(
    request: HttpRequest,
    page: Page,
    exc: Conflict,
    *,
    title: str,
    body: str,
    mode: str,
) -> HttpResponse:
    """The editor again (status 409) after a stale save (``Conflict``, SPEC §4):
    the current version, the diff from the version the form showed to it, and the
    curator's title and text kept in the form, whose ``base_revision`` is now the
    current one (saving again puts this text over the current version). ``page``
    is the page as it is now."""
    detail = exc.detail or {}
    diff = diff_rows(str(detail.get("diff", "")))
    context = _context(
        request,
        f"Edit {page.title or page.slug}",
        page=page,
        form_title=title,
        form_body=body,
        mode=mode,
        base_revision=page_revision(page),
        conflict={"message": exc.message, "diff": diff, "current": page.body},
    )
    return TemplateResponse(request, "console/page_edit.html", context, status=409)


#: A console revert's provenance ``action`` (its revision is labelled so).
REVERT = "revert"


def _diff(before: str, after: str) -> list[tuple[str, str]]:
    """Unified diff lines as ``(kind, text)``: kind add | del | hunk | same."""
    out = []
    for line in difflib.unified_diff(
        before.splitlines(), after.splitlines(), lineterm="", n=2
    ):
        if line.startswith(("---", "+++")):
            continue
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same")
        out.append((kind, line))
    return out


def _revision_label(rev: PageRevision) -> str:
    """What a revision did, as the history names it: ``revert`` for a console revert
    (``revision_revert`` stamps it in the provenance), else its write operation."""
    provenance = rev.provenance if isinstance(rev.provenance, dict) else {}
    return "revert" if provenance.get("action") == REVERT else rev.operation


def page_revisions(request: HttpRequest, source_id: str, slug: str) -> HttpResponse:
    """Revisions newest first, each labelled (``_revision_label``) with the diff of
    its write (title and body) and a Revert button (to the text before that write);
    reverting a change that created the text (``blanks``) asks to confirm."""
    page = _live_page(source_id, slug)
    revisions = list(
        PageRevision.objects.filter(page=page).order_by("-created_at", "-id")[:50]
    )
    after_title, after_body = page.title, page.body
    rows = []
    for rev in revisions:
        rows.append(
            {
                "rev": rev,
                "label": _revision_label(rev),
                "blanks": not rev.previous_body.strip(),
                "title_changed": rev.previous_title != after_title,
                "after_title": after_title,
                "diff": _diff(rev.previous_body, after_body),
            }
        )
        after_title, after_body = rev.previous_title, rev.previous_body
    context = _context(
        request, f"Revisions of {page.title or page.slug}", page=page, rows=rows
    )
    return TemplateResponse(request, "console/revisions.html", context)


def revision_revert(request: HttpRequest, revision_id: int) -> HttpResponse:
    """POST: put back the title, body and frontmatter a page had before this
    revision's write, through ``page_write``: the revert is itself a revision,
    labelled ``revert`` (provenance ``{action: revert, reverts_revision}``). A
    revert that would empty the page (the change created its text) needs
    ``confirm=yes``; without it nothing changes and the message says so."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    rev = get_object_or_404(PageRevision.objects.select_related("page"), pk=revision_id)
    page = rev.page
    if not rev.previous_body.strip() and request.POST.get("confirm") != "yes":
        messages.warning(
            request,
            f"Reverting the {rev.operation} of {rev.created_at:%Y-%m-%d %H:%M} would "
            "empty the page (it wrote all of its text): tick “Empty the page” to "
            "confirm. Nothing changed.",
        )
        return redirect("admin:console_page_revisions", page.source_id, page.slug)
    try:
        page_write(
            source=page.source,
            mode="replace",
            actor=_caller(request),
            slug=page.slug,
            title=rev.previous_title or page.title,
            body=rev.previous_body,
            frontmatter=dict(rev.previous_frontmatter or page.frontmatter),
            replace_frontmatter=True,
            allow_empty=True,
            provenance={"action": REVERT, "reverts_revision": rev.pk},
            embed=False,
        )
        job_enqueue(
            kind="embed_pending",
            params={"source_ids": [page.source_id]},
            created_by=_actor(request),
            coalesce=True,
        )
        messages.success(
            request,
            f"Reverted to the text before the {rev.operation} of "
            f"{rev.created_at:%Y-%m-%d %H:%M} (recorded as a new revision).",
        )
    except BrainError as exc:
        messages.error(request, exc.message)
    return redirect("admin:console_page_revisions", page.source_id, page.slug)


# --- search -----------------------------------------------------------------------


SEARCH_PAGES = 20


def search(request: HttpRequest) -> HttpResponse:
    """GET ``q``: hybrid page search (SPEC §3) over every source, one row per page
    (``search_rows``) linking to the console page view. ``source`` and ``type``
    narrow it to one source and one page type (an unknown one is said and
    ignored); a degraded search (keyword-only, embeddings pending) says so above
    the results (``degraded_note``)."""
    query = request.GET.get("q", "").strip()
    sources = list(Source.objects.order_by("name", "id").only("id", "name"))
    types = list(PageType.objects.order_by("name").values_list("name", flat=True))
    source = _known(request, "source", {s.id for s in sources}, "source")
    type_name = _known(request, "type", set(types), "page type")
    rows: list[dict[str, Any]] = []
    error = degraded = ""
    if query:
        caller = _caller(request)
        try:
            response = page_search(
                scope=caller.read_scope([source])
                if source
                else caller.all_readable_scope(),
                query=query,
                limit=SEARCH_PAGES,
                types=[type_name] if type_name else None,
            )
            rows = search_rows(response.results)
            degraded = degraded_note(response.search_degraded)
        except BrainError as exc:
            error = exc.message
    context = _context(
        request,
        "Search",
        query=query,
        results=rows,
        error=error,
        degraded=degraded,
        sources=sources,
        types=types,
        selected_source=source,
        selected_type=type_name,
    )
    return TemplateResponse(request, "console/search.html", context)


def _known(request: HttpRequest, param: str, allowed: set[str], what: str) -> str:
    """The GET ``param`` when it is one of ``allowed``, else "" (a warning says an
    unknown value was ignored)."""
    value = request.GET.get(param, "").strip()
    if value and value not in allowed:
        messages.warning(
            request, f"There is no {what} '{value[:80]}'; searching every {what}."
        )
        return ""
    return value


def search_rows(results: list[SearchResult]) -> list[dict[str, Any]]:
    """One row per page, best first (SPEC §3 returns up to 2 chunks of a page, e.g.
    its title chunk and a body chunk): the page's first result's fields plus
    ``snippet`` (its chunk as plain text) and ``passages`` (how many of its chunks
    matched)."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for r in results:
        key = (r.source_id, r.slug)
        if key in rows:
            rows[key]["passages"] += 1
            continue
        rows[key] = {**asdict(r), "snippet": markdown_plain(r.chunk), "passages": 1}
    return list(rows.values())


def degraded_note(reason: str | None) -> str:
    """A curator's sentence for ``search_degraded`` (SPEC §3), or "" when search is
    whole: keyword-only (no embedding model) or some passages not embedded yet."""
    if not reason:
        return ""
    if reason.startswith("vector_search_unavailable"):
        return (
            "Search is keyword-only: results match the words you typed, not their "
            f"meaning ({reason})."
        )
    if reason.startswith(("embeddings_pending", "embeddings_stale")):
        return (
            "Some passages are not embedded yet, so they match by keyword only "
            f"({reason}); Embed now on the home page finishes them."
        )
    return f"Search is degraded: {reason}."


PEOPLE_SHOWN = 100


def people(request: HttpRequest) -> HttpResponse:
    """Person pages (``q`` filters by title, slug or alias), those with the most open
    loops first, then by title (people still titled by their address included),
    ``PEOPLE_SHOWN`` a page (``page`` = 1, 2, …; Django's ``Paginator``), each
    linking to its card."""
    query = request.GET.get("q", "").strip()
    qs = Page.objects.filter(type__name=PERSON_TYPE, deleted_at__isnull=True)
    if query:
        qs = qs.filter(
            Q(title__icontains=query)
            | Q(slug__icontains=query)
            | Q(aliases__alias__icontains=query)
        ).distinct()
    ordered = (
        qs.annotate(
            open_loops=Count(
                "loops_as_counterparty",
                filter=Q(loops_as_counterparty__status=LoopStatus.OPEN),
                distinct=True,
            )
        )
        .only("id", "slug", "title", "source_id", "updated_at")
        .order_by("-open_loops", "title", "id")
    )
    listing = Paginator(ordered, PEOPLE_SHOWN).get_page(request.GET.get("page"))
    context = _context(
        request,
        "People",
        rows=list(listing.object_list),
        listing=listing,
        query=query,
    )
    return TemplateResponse(request, "console/people.html", context)


# --- IMAP folders: re-map a configured folder the server no longer lists ----------


def source_folders(request: HttpRequest, source_id: str) -> HttpResponse:
    """The folders of an ``imap`` source (issue 46): the configured ones, those the
    server no longer lists (held by the last sync), and the server's folders now
    (LIST). POST ``old`` and ``new``: re-map the configured folder ``old`` to the
    server's folder ``new`` (``shared_mailbox_folder_remap``)."""
    mailbox = get_object_or_404(SharedMailbox, source_id=source_id)
    here = reverse("admin:console_source_folders", args=[source_id])
    if request.method == "POST":
        old, new = request.POST.get("old", ""), request.POST.get("new", "")
        try:
            shared_mailbox_folder_remap(mailbox=mailbox, old=old, new=new)
        except BrainError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(
                request,
                f"Folder {old!r} re-mapped to {new!r}; the next sync reads it.",
            )
        return redirect(here)
    error, server = "", []
    try:
        server = imap_server_folders(source=mailbox.source)
    except ConnectorError as exc:
        error = exc.message
    missing = list(
        HeldItem.objects.filter(
            source_id=source_id, kind=FOLDER_HELD_KIND, released_at__isnull=True
        )
        .order_by("external_id")
        .values_list("external_id", flat=True)
    )
    return TemplateResponse(
        request,
        "console/source_folders.html",
        _context(
            request,
            f"Folders of {source_id}",
            mailbox=mailbox,
            configured=list(mailbox.imap_folders or []),
            missing=missing,
            server=[
                {"name": f.name, "role": imap_folder_role(f)}
                for f in server
                if "\\Noselect" not in f.flags
            ],
            error=error,
        ),
    )
