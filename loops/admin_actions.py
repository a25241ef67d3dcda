"""Admin actions on brain pages that steer loops (SPEC §5: "admins mute from the
admin, on a loop, an email page or a person"). ``loops.admin`` adds
these to ``brain.admin.PageAdmin``; each one calls a loops service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin, messages
from django.db.models import Q, QuerySet

from loops.models import LoopStatus, LoopSuppression, OpenLoop
from loops.services import loop_close, loops_mute_many

if TYPE_CHECKING:
    from collections.abc import Iterator

    from django.http import HttpRequest

    from brain.models import Page, Source


def _actor(request: HttpRequest) -> str:
    return f"admin:{getattr(request.user, 'username', '') or 'staff'}"


def _page_loops(pages: QuerySet[Page]) -> QuerySet[OpenLoop]:
    """Open loops whose thread page or counterparty is one of ``pages``."""
    ids = list(pages.values_list("pk", flat=True))
    return OpenLoop.objects.filter(
        Q(page_id__in=ids) | Q(counterparty_id__in=ids), status=LoopStatus.OPEN
    )


def _page_senders(page: Page) -> list[str]:
    """Addresses to mute for a page: a person's email aliases, an email page's
    non-owner senders (frontmatter ``senders`` or ``from``)."""
    if page.type.name == "person":
        return list(page.aliases.filter(kind="email").values_list("alias", flat=True))
    owners = {a.lower() for a in page.source.owner_addresses}
    fm = page.frontmatter or {}
    raw = (
        fm.get("senders") or [fm.get("from")]
        if fm.get("from") or fm.get("senders")
        else []
    )
    found = []
    for value in raw if isinstance(raw, list) else [raw]:
        text = str(value or "")
        addr = text[text.find("<") + 1 : text.find(">")] if "<" in text else text
        addr = addr.strip().lower()
        if "@" in addr and addr not in owners:
            found.append(addr)
    return found


@admin.action(description="Loops: mark this page's open loops done")
def pages_mark_loops_done(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Page]
) -> None:
    n = sum(
        loop_close(loop=lp, status=LoopStatus.DONE, actor=_actor(request))["closed"]
        for lp in _page_loops(queryset)
    )
    modeladmin.message_user(request, f"{n} loop(s) marked done.", messages.SUCCESS)


@admin.action(description="Loops: drop this page's open loops")
def pages_drop_loops(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Page]
) -> None:
    n = sum(
        loop_close(loop=lp, status=LoopStatus.DROPPED, actor=_actor(request))["closed"]
        for lp in _page_loops(queryset)
    )
    modeladmin.message_user(request, f"{n} loop(s) dropped.", messages.SUCCESS)


def muted_and_closed(muted: int, closed: int) -> str:
    """The admin's message after "mute and close its open loops"."""
    return (
        f"{muted} sender(s) muted and {closed} of their open loop(s) closed "
        "(dropped, closed by 'muted')."
    )


def _page_sender_targets(queryset: QuerySet[Page]) -> Iterator[tuple[Source, str]]:
    """``(source, address)`` of each sender of the pages (``_page_senders``)."""
    for page in queryset.select_related("type", "source"):
        for address in _page_senders(page):
            yield page.source, address


@admin.action(
    description="Loops: mute sender (person's addresses / email's sender); "
    "existing loops stay"
)
def pages_mute_sender(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Page]
) -> None:
    n, _ = loops_mute_many(
        kind=LoopSuppression.Kind.SENDER,
        targets=_page_sender_targets(queryset),
        actor=_actor(request),
    )
    modeladmin.message_user(
        request,
        f"{n} sender(s) muted. A mute only stops new loops: existing open loops "
        "stay open.",
        messages.SUCCESS,
    )


@admin.action(description="Loops: mute sender and close its open loops")
def pages_mute_sender_and_close(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Page]
) -> None:
    muted, closed = loops_mute_many(
        kind=LoopSuppression.Kind.SENDER,
        targets=_page_sender_targets(queryset),
        actor=_actor(request),
        close=True,
    )
    modeladmin.message_user(request, muted_and_closed(muted, closed), messages.SUCCESS)


@admin.action(description="Loops: mute thread (email pages)")
def pages_mute_thread(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Page]
) -> None:
    n, _ = loops_mute_many(
        kind=LoopSuppression.Kind.THREAD,
        targets=(
            (page.source, str(thread_id))
            for page in queryset.select_related("source")
            if (thread_id := (page.frontmatter or {}).get("thread_id"))
        ),
        actor=_actor(request),
    )
    modeladmin.message_user(request, f"{n} thread(s) muted.", messages.SUCCESS)


PAGE_ACTIONS = (
    pages_mark_loops_done,
    pages_drop_loops,
    pages_mute_sender,
    pages_mute_sender_and_close,
    pages_mute_thread,
)
