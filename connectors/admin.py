"""Admin of the connectors app: the ledger, held items, sync runs, Google accounts,
and the "sync now" action on sources (STYLE rule 21)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.db.models.functions import Length

from brain.admin import SourceAdmin
from brain.display import json_table
from brain.exceptions import BrainError
from connectors.base import ConnectorError
from connectors.dispatch import held_items_retry, source_sync
from connectors.models import GoogleAccount, HeldItem, ImportedItem, SyncRun

if TYPE_CHECKING:
    from django.db.models import QuerySet
    from django.http import HttpRequest

    from brain.models import Source


@admin.action(
    description="Sync now (Google: contacts, calendar, gmail; mailbox: re-import)"
)
def sync_now(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Source]
) -> None:
    """Run ``source_sync`` for each selected source and report the outcome."""
    for source in queryset:
        try:
            report = source_sync(source_id=source.id, actor=f"admin:{request.user}")
        except (BrainError, ConnectorError) as exc:
            modeladmin.message_user(
                request, f"{source.id}: {exc}", level=messages.ERROR
            )
            continue
        counts = (
            ", ".join(f"{v} {k}" for k, v in sorted(report.counts.items()) if v)
            or "nothing new"
        )
        level = messages.WARNING if report.held or report.warnings else messages.SUCCESS
        modeladmin.message_user(
            request, f"{source.id} ({report.status}): {counts}.", level=level
        )


SourceAdmin.actions = (*SourceAdmin.actions, sync_now)


class _ReadOnly(admin.ModelAdmin):
    """Pipeline-written rows: nobody adds or edits them in the admin."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ImportedItem)
class ImportedItemAdmin(_ReadOnly):
    list_display = (
        "external_id",
        "source",
        "kind",
        "outcome",
        "thread_id",
        "imported_at",
    )
    list_filter = ("kind", "outcome", "source")
    search_fields = ("external_id", "thread_id", "subject_key")
    list_select_related = ("source",)
    raw_id_fields = ("raw_record", "page")
    readonly_fields = ("external_id", "content_hash", "imported_at")


@admin.action(description="Retry: re-import the held raw bytes")
def retry_held(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[HeldItem]
) -> None:
    """Re-import the selected held items from their kept bytes (SPEC §6 "Every
    importer"): stored or duplicate → released; still failing → held again."""
    try:
        counts = held_items_retry(
            held_ids=list(queryset.values_list("pk", flat=True)),
            actor=f"admin:{request.user}",
        )
    except (BrainError, ConnectorError) as exc:
        modeladmin.message_user(request, f"Retry failed: {exc}", level=messages.ERROR)
        return
    level = messages.SUCCESS if not counts["still_held"] else messages.WARNING
    modeladmin.message_user(
        request,
        f"Retried {counts['retried']}: {counts['released']} stored and released, "
        f"{counts['still_held']} still held (see their reason), "
        f"{counts['no_bytes']} without bytes to retry.",
        level=level,
    )


@admin.register(HeldItem)
class HeldItemAdmin(admin.ModelAdmin):
    """Held items: what an importer could not store, with the typed reason, where
    it was read and its raw bytes; "retry" re-imports them."""

    list_display = (
        "location_or_id",
        "source",
        "kind",
        "reason",
        "message_short",
        "size",
        "attempts",
        "last_failed_at",
        "released_at",
    )
    list_filter = (
        ("released_at", admin.EmptyFieldListFilter),
        "error_code",
        "kind",
        "source",
    )
    search_fields = ("external_id", "message", "location")
    list_select_related = ("source",)
    actions = (retry_held,)
    readonly_fields = (
        "source",
        "external_id",
        "kind",
        "error_code",
        "message",
        "location",
        "folder",
        "size",
        "preview",
        "attempts",
        "first_failed_at",
        "last_failed_at",
        "released_at",
    )
    exclude = ("raw",)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[HeldItem]:
        # The list never loads the bytes (the preview on the change page does).
        return (
            super().get_queryset(request).defer("raw").annotate(raw_size=Length("raw"))
        )

    @admin.display(description="item", ordering="location")
    def location_or_id(self, obj: HeldItem) -> str:
        return obj.location or obj.external_id

    @admin.display(description="reason", ordering="error_code")
    def reason(self, obj: HeldItem) -> str:
        labels = dict(HeldItem.Reason.choices)
        return labels.get(obj.error_code, obj.error_code)

    @admin.display(description="message")
    def message_short(self, obj: HeldItem) -> str:
        return obj.message[:120]

    @admin.display(description="bytes")
    def size(self, obj: HeldItem) -> int:
        return int(getattr(obj, "raw_size", 0) or 0)

    @admin.display(description="raw bytes (first 2,000, as text)")
    def preview(self, obj: HeldItem) -> str:
        return bytes(obj.raw or b"")[:2000].decode("utf-8", errors="replace")


@admin.register(SyncRun)
class SyncRunAdmin(_ReadOnly):
    list_display = ("source", "kind", "status", "started_at", "finished_at", "actor")
    list_filter = ("status", "kind", "source")
    search_fields = ("source__id", "error", "actor")
    list_select_related = ("source",)
    readonly_fields = (
        "source",
        "kind",
        "actor",
        "status",
        "started_at",
        "finished_at",
        "counts_table",
        "error",
    )
    fields = readonly_fields

    @admin.display(description="counts")
    def counts_table(self, obj: SyncRun) -> str:
        return json_table(obj.counts)


@admin.register(GoogleAccount)
class GoogleAccountAdmin(admin.ModelAdmin):
    list_display = ("email", "source", "scopes_ok", "connected_at", "updated_at")
    search_fields = ("email", "source__id")
    list_select_related = ("source",)
    raw_id_fields = ("source", "social_auth", "user")
    readonly_fields = (
        "granted_scopes",
        "missing_scopes",
        "send_as",
        "connected_at",
        "updated_at",
    )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Accounts are connected through the Google sign-in (social-auth).
        return False

    @admin.display(description="all scopes", boolean=True)
    def scopes_ok(self, obj: GoogleAccount) -> bool:
        return obj.scopes_complete


# Shared mailboxes and Workspace keys (SPEC §6.1, §6.1a) live in their own module.
from connectors import admin_shared  # noqa: E402, F401
