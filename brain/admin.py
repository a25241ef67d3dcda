"""The operator console for the knowledge model (SPEC §0 "team admins", STYLE rule 21).

Curators fix pages, aliases and facts, edit the Schema, and manage sources here.
Audit rows (revisions, audit events, raw records) are read-only.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.middleware.csrf import get_token
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from brain.access import Caller, local_caller
from brain.display import diff_rows, json_table
from brain.exceptions import BrainError, Conflict
from brain.models import (
    Alias,
    AuditEvent,
    Chunk,
    DanglingLink,
    Fact,
    MergeProposal,
    Page,
    PageMerge,
    PageRevision,
    PageType,
    PushEvent,
    RawRecord,
    Relation,
    RelationType,
    SessionCursor,
    Source,
    TimelineEntry,
    TitleWord,
)
from brain.services.facts import (
    fact_edit,
    fact_forget,
    fact_remember,
    facts_out_of_range_q,
    facts_repair_timestamps,
)
from brain.services.merges import (
    merge_proposal_accept,
    merge_proposal_reject,
    page_merge_for,
    page_merge_undo,
)
from brain.services.pages import (
    page_hard_delete,
    page_reindex,
    page_restore,
    page_revision,
    page_soft_delete,
    page_write,
)
from brain.services.sources import source_set_federated


def staff_caller(request: HttpRequest) -> Caller:
    """The staff user behind an admin request, as a trusted local caller (SPEC §8)."""
    return local_caller(actor=f"staff:{request.user.get_username()}")


class ReadOnlyAdmin(admin.ModelAdmin):
    """For append-only and pipeline-only rows: viewable, never edited by hand."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# --- Sources and Schema ---------------------------------------------------------------


FEDERATION_HELP = (
    "Federated: searched whenever a caller names no source (recall, entity, search, "
    "push context, MCP tools). Unfederated: searched only by callers that name it "
    "(source=<id>) and by keys that write to it; other callers get a hint saying it "
    "has matches. Which keys may read it at all is set on each API key; private pages "
    "and facts stay hidden from untrusted keys either way. Imported mailboxes start "
    "unfederated."
)


AUTO_MERGE_HELP = (
    'Connector settings (JSON). People: {"people_auto_merge_score": 0.95} lets dream '
    "merge two person pages whose evidence scores at least that much (0..1) without "
    "a curator; absent (the default), every people merge waits as a proposal."
)


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "name",
        "kind",
        "federated",
        "page_count",
        "last_success_at",
        "has_error",
    )
    list_filter = ("kind", "federated")
    search_fields = ("id", "name", "owner_addresses")
    readonly_fields = (
        "created_at",
        "updated_at",
        "last_sync_at",
        "last_success_at",
        "last_error",
        "counts_table",
        "cursor_table",
    )
    exclude = ("counts", "cursor")
    actions: tuple[Any, ...] = ("make_federated", "make_unfederated")

    @admin.display(description="counts")
    def counts_table(self, obj: Source) -> str:
        return json_table(obj.counts)

    @admin.display(description="cursor")
    def cursor_table(self, obj: Source) -> str:
        return json_table(obj.cursor)

    def formfield_for_dbfield(
        self, db_field: Any, request: HttpRequest, **kwargs: Any
    ) -> Any:
        """Explain federation where the curator sets it (SPEC §4, §8)."""
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "federated" and field is not None:
            field.help_text = FEDERATION_HELP
        if db_field.name == "config" and field is not None:
            field.help_text = AUTO_MERGE_HELP
        return field

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # The id is immutable once created (SPEC §2.1).
        fields = tuple(super().get_readonly_fields(request, obj))
        return fields + ("id",) if obj else fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Source]:
        return super().get_queryset(request).annotate(_pages=Count("pages"))

    @admin.display(description="pages", ordering="_pages")
    def page_count(self, obj: Source) -> int:
        return obj._pages  # type: ignore[attr-defined]

    @admin.display(description="error", boolean=True)
    def has_error(self, obj: Source) -> bool:
        return bool(obj.last_error)

    @admin.action(description="Include in unqualified searches (federate)")
    def make_federated(self, request: HttpRequest, queryset: QuerySet[Source]) -> None:
        changed = source_set_federated(
            sources=list(queryset), federated=True, actor=request.user.get_username()
        )
        self.message_user(
            request,
            f"{changed} source(s) federated: unqualified searches now include them.",
            messages.SUCCESS,
        )

    @admin.action(description="Exclude from unqualified searches")
    def make_unfederated(
        self, request: HttpRequest, queryset: QuerySet[Source]
    ) -> None:
        changed = source_set_federated(
            sources=list(queryset), federated=False, actor=request.user.get_username()
        )
        self.message_user(
            request,
            f"{changed} source(s) unfederated: searched only when a caller names them.",
            messages.SUCCESS,
        )


@admin.register(PageType)
class PageTypeAdmin(admin.ModelAdmin):
    list_display = ("name", "primitive", "path_prefixes", "extractable", "page_count")
    list_filter = ("primitive", "extractable")
    search_fields = ("name", "description")
    readonly_fields = ("created_at", "updated_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[PageType]:
        return super().get_queryset(request).annotate(_pages=Count("pages"))

    @admin.display(description="pages", ordering="_pages")
    def page_count(self, obj: PageType) -> int:
        return obj._pages  # type: ignore[attr-defined]


@admin.register(RelationType)
class RelationTypeAdmin(admin.ModelAdmin):
    list_display = ("name", "inverse_name", "from_types", "to_types")
    search_fields = ("name", "inverse_name", "description")
    filter_horizontal = ("source_types", "target_types")
    readonly_fields = ("created_at", "updated_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[RelationType]:
        return (
            super()
            .get_queryset(request)
            .prefetch_related("source_types", "target_types")
        )

    @admin.display(description="from")
    def from_types(self, obj: RelationType) -> str:
        return ", ".join(t.name for t in obj.source_types.all()) or "any"

    @admin.display(description="to")
    def to_types(self, obj: RelationType) -> str:
        return ", ".join(t.name for t in obj.target_types.all()) or "any"


# --- Pages and what hangs off them ----------------------------------------------------


class AliasInline(admin.TabularInline):
    model = Alias
    extra = 0
    fields = ("alias", "kind", "created_at")
    readonly_fields = ("created_at",)


class OutgoingRelationInline(admin.TabularInline):
    model = Relation
    fk_name = "from_page"
    extra = 0
    fields = ("relation_type", "to_page", "context", "created_by", "created_at")
    readonly_fields = ("created_by", "created_at")
    autocomplete_fields = ("to_page", "relation_type")
    verbose_name_plural = "outgoing relations"


class IncomingRelationInline(admin.TabularInline):
    model = Relation
    fk_name = "to_page"
    extra = 0
    fields = ("from_page", "relation_type", "context", "created_at")
    readonly_fields = ("from_page", "relation_type", "context", "created_at")
    verbose_name_plural = "backlinks"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class FactInline(admin.TabularInline):
    model = Fact
    fk_name = "entity"
    extra = 0
    fields = ("text", "kind", "visibility", "confidence", "valid_until", "expired_at")
    readonly_fields = (
        "text",
        "kind",
        "visibility",
        "confidence",
        "valid_until",
        "expired_at",
    )
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # SPEC §2.4: facts are forgotten (expired), never deleted.

    def get_queryset(self, request: HttpRequest) -> QuerySet[Fact]:
        return super().get_queryset(request).defer("embedding")


class TimelineInline(admin.TabularInline):
    model = TimelineEntry
    extra = 0
    fields = ("date", "summary", "source_ref")


class RevisionInline(admin.TabularInline):
    model = PageRevision
    extra = 0
    fields = ("created_at", "actor", "operation", "content_hash")
    readonly_fields = fields
    show_change_link = True
    max_num = 0

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class PageAdminForm(forms.ModelForm):
    """The page change form plus ``base_revision``: the revision the form showed
    (hidden, always sent), so a save over a page changed meanwhile is refused
    (SPEC §4 ``conflict``) instead of overwriting the other writer's change."""

    base_revision = forms.CharField(widget=forms.HiddenInput, required=False)

    class Meta:
        model = Page
        fields = (
            "source",
            "slug",
            "type",
            "title",
            "frontmatter",
            "body",
            "summary",
            "tags",
            "visibility",
            "effective_date",
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["base_revision"].initial = page_revision(self.instance)


@admin.register(Page)
class PageAdmin(admin.ModelAdmin):
    form = PageAdminForm
    list_display = (
        "slug",
        "title",
        "type",
        "source",
        "visibility",
        "updated_at",
        "is_live",
    )
    list_filter = (
        "source",
        "type",
        "visibility",
        "created_by_remote",
        ("deleted_at", admin.EmptyFieldListFilter),
    )
    search_fields = ("slug", "title", "aliases__alias")
    list_select_related = ("type", "source")
    autocomplete_fields = ("type",)
    readonly_fields = (
        "created_at",
        "updated_at",
        "content_hash",
        "indexed_hash",
        "last_retrieved_at",
        "deleted_at",
        "created_by_remote",
    )
    date_hierarchy = "updated_at"
    inlines = (
        AliasInline,
        OutgoingRelationInline,
        IncomingRelationInline,
        FactInline,
        TimelineInline,
        RevisionInline,
    )

    # The loops app adds its page actions (mark loops done, mute…) in loops/admin.py.
    actions: tuple[Any, ...] = ("soft_delete_pages", "restore_pages", "reembed_pages")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Page]:
        return super().get_queryset(request).defer("body", "frontmatter")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # Source and slug identify the page; renaming is not an edit (SPEC §2.3).
        fields = tuple(super().get_readonly_fields(request, obj))
        return fields + ("source", "slug") if obj else fields

    def save_model(
        self,
        request: HttpRequest,
        obj: Page,
        form: Any,
        change: bool,  # noqa: FBT001 (Django's signature)
    ) -> None:
        """Save through the one write path (SPEC §2.3), never ``obj.save()``: the
        derived fields (summary, chunks, aliases, links) follow the body as in every
        other write. The summary is passed only when the curator changed it, so an
        untouched one that was the old body's first line follows the new body.
        ``base_revision`` (the form's hidden field) makes a save over a page changed
        since the form was opened raise ``Conflict`` (``changeform_view`` shows it)."""
        edited = set(form.changed_data) if form is not None else {"summary"}
        result = page_write(
            source=obj.source,
            mode="replace" if change else "create",
            actor=staff_caller(request),
            slug=obj.slug,
            title=obj.title,
            body=obj.body,
            type_name=obj.type.name,
            summary=obj.summary if not change or "summary" in edited else None,
            tags=list(obj.tags),
            frontmatter=dict(obj.frontmatter or {}),
            replace_frontmatter=True,
            visibility=obj.visibility,
            effective_date=obj.effective_date,
            allow_empty=True,
            base_revision=(
                (form.cleaned_data.get("base_revision") or None)
                if change and form is not None
                else None
            ),
        )
        obj.pk = result.page.pk
        obj.refresh_from_db()

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """The admin's change form; a stale save (``Conflict``: the page changed
        since the form was opened, SPEC §4) is rolled back and answered with the
        console editor's conflict view (status 409): the current version, the
        diff since the form's revision, and the curator's title and body in the
        editor, ready to save over the current version."""
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except Conflict as exc:
            if object_id is None:  # an add has no base revision: never here
                raise
            page = Page.objects.get(pk=object_id)
            context = {
                **self.admin_site.each_context(request),
                "title": f"Edit {page.title or page.slug}",
                "page": page,
                "form_title": request.POST.get("title", page.title),
                "form_body": request.POST.get("body", "").replace("\r\n", "\n"),
                "mode": "replace",
                "base_revision": page_revision(page),
                "conflict": {
                    "message": exc.message,
                    "diff": diff_rows(str((exc.detail or {}).get("diff", ""))),
                    "current": page.body,
                },
            }
            return TemplateResponse(
                request, "console/page_edit.html", context, status=409
            )

    def delete_model(self, request: HttpRequest, obj: Page) -> None:
        """Hard delete through the service: the page's facts expire first."""
        page_hard_delete(page=obj, actor=staff_caller(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Page]) -> None:
        caller = staff_caller(request)
        for page in queryset:
            page_hard_delete(page=page, actor=caller)

    @admin.display(description="live", boolean=True)
    def is_live(self, obj: Page) -> bool:
        return obj.deleted_at is None

    @admin.action(description="Soft delete (purged after 72 h)")
    def soft_delete_pages(self, request: HttpRequest, queryset: QuerySet[Page]) -> None:
        caller = staff_caller(request)
        done = sum(
            page_soft_delete(page=p, actor=caller, reason="admin") for p in queryset
        )
        self.message_user(request, f"{done} page(s) deleted.", messages.SUCCESS)

    @admin.action(description="Restore deleted pages (a merged page: undo the merge)")
    def restore_pages(self, request: HttpRequest, queryset: QuerySet[Page]) -> None:
        """Restore each page; a page a merge soft-deleted gets the merge undone, so
        its aliases, addresses, facts and loops come back with it (issue 46)."""
        caller = staff_caller(request)
        done = 0
        for page in queryset:
            merged = page_merge_for(page)
            if merged is not None:
                page_merge_undo(merge_id=merged.pk, actor=caller.actor)
                done += 1
            else:
                done += page_restore(page=page, actor=caller)
        self.message_user(request, f"{done} page(s) restored.", messages.SUCCESS)

    @admin.action(description="Re-chunk and re-embed")
    def reembed_pages(self, request: HttpRequest, queryset: QuerySet[Page]) -> None:
        pages = list(queryset.filter(deleted_at__isnull=True))
        current = sum(page_reindex(page=p) for p in pages)
        self.message_user(
            request,
            f"{len(pages)} page(s) re-chunked; {current} fully embedded now.",
            messages.SUCCESS,
        )


@admin.register(PageRevision)
class PageRevisionAdmin(ReadOnlyAdmin):
    list_display = ("page", "operation", "actor", "created_at", "diff_link")
    list_filter = ("operation",)
    search_fields = ("page__slug", "actor")
    list_select_related = ("page",)
    raw_id_fields = ("page", "raw_record")
    fields = (
        "page",
        "operation",
        "actor",
        "created_at",
        "diff_link",
        "previous_title",
        "previous_body",
        "provenance_table",
        "content_hash",
        "raw_record",
    )
    readonly_fields = fields

    @admin.display(description="diff and revert")
    def diff_link(self, obj: PageRevision) -> str:
        """The console's revisions page of this revision's page (SPEC §2.3)."""
        if obj.page.deleted_at is not None:
            return "page deleted"
        return format_html(
            '<a href="{}#revision-{}">Show the change / revert</a>',
            reverse(
                "admin:console_page_revisions", args=[obj.page.source_id, obj.page.slug]
            ),
            obj.pk,
        )

    @admin.display(description="provenance")
    def provenance_table(self, obj: PageRevision) -> str:
        return json_table(obj.provenance)


@admin.register(RawRecord)
class RawRecordAdmin(ReadOnlyAdmin):
    list_display = ("external_id", "kind", "source", "page", "captured_at")
    list_filter = ("kind", "source")
    search_fields = ("external_id", "content_hash")
    list_select_related = ("source", "page")
    raw_id_fields = ("page",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[RawRecord]:
        # Deferred columns still load lazily on the change form.
        return super().get_queryset(request).defer("content", "payload")


@admin.register(Alias)
class AliasAdmin(admin.ModelAdmin):
    list_display = ("alias", "kind", "page", "source")
    list_filter = ("kind", "source")
    search_fields = ("alias", "page__slug", "page__title")
    list_select_related = ("page", "source")
    autocomplete_fields = ("page",)
    readonly_fields = ("created_at",)


@admin.register(DanglingLink)
class DanglingLinkAdmin(admin.ModelAdmin):
    """Wiki-links whose target page does not exist yet (SPEC §2.3): read-only; a row
    turns into a relation by itself when a page with that slug, title or alias is
    written, and goes away when its link is removed from the body."""

    list_display = ("target", "type_name", "from_page", "source", "created_at")
    list_filter = ("source", "type_name")
    search_fields = ("target", "key", "from_page__slug", "context")
    list_select_related = ("from_page", "source")
    readonly_fields = (
        "source",
        "from_page",
        "target",
        "key",
        "type_name",
        "context",
        "created_at",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: DanglingLink | None = None
    ) -> bool:
        return False


@admin.register(TitleWord)
class TitleWordAdmin(admin.ModelAdmin):
    """The title-word lexicon of entity near-miss suggestions: read-only, kept by the
    page write path."""

    list_display = ("word", "source")
    list_filter = ("source",)
    search_fields = ("word",)
    list_select_related = ("source",)
    readonly_fields = ("source", "word")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: TitleWord | None = None
    ) -> bool:
        return False


@admin.register(Relation)
class RelationAdmin(admin.ModelAdmin):
    list_display = (
        "from_page",
        "relation_type",
        "to_page",
        "source",
        "created_by",
        "created_at",
    )
    list_filter = ("relation_type", "source")
    search_fields = ("from_page__slug", "to_page__slug", "context")
    list_select_related = ("from_page", "to_page", "relation_type", "source")
    autocomplete_fields = ("from_page", "to_page", "relation_type")
    readonly_fields = ("created_at", "updated_at", "created_by", "provenance")


@admin.register(TimelineEntry)
class TimelineEntryAdmin(admin.ModelAdmin):
    list_display = ("date", "page", "summary", "source_ref")
    search_fields = ("summary", "page__slug")
    list_select_related = ("page",)
    autocomplete_fields = ("page",)
    raw_id_fields = ("raw_record",)
    readonly_fields = ("summary_hash", "created_at")
    date_hierarchy = "date"


class ActiveFactFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("active", "Active"), ("expired", "Expired or superseded")]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[Fact]
    ) -> QuerySet[Fact]:
        if self.value() == "active":
            return queryset.filter(expired_at__isnull=True)
        if self.value() == "expired":
            return queryset.filter(expired_at__isnull=False)
        return queryset


@admin.register(Fact)
class FactAdmin(admin.ModelAdmin):
    list_display = (
        "text",
        "kind",
        "entity",
        "visibility",
        "confidence",
        "valid_until",
        "expired_at",
        "source",
    )
    list_filter = (ActiveFactFilter, "kind", "visibility", "source")
    search_fields = ("text", "provenance", "entity__slug")
    list_select_related = ("entity", "source")
    autocomplete_fields = ("entity",)
    raw_id_fields = ("raw_record", "superseded_by")
    readonly_fields = (
        "created_at",
        "updated_at",
        "embedding_model",
        "expired_at",
        "expired_reason",
        "superseded_by",
        "created_by",
        "subject",
        "slot",
        "value",
    )
    exclude = ("embedding",)
    actions = ("forget_facts",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Fact]:
        # Rows with an out-of-range valid_until cannot be loaded; they are counted
        # and repaired from the changelist instead (SPEC §8).
        return (
            super()
            .get_queryset(request)
            .defer("embedding")
            .exclude(facts_out_of_range_q())
        )

    def get_urls(self) -> list[Any]:
        return [
            path(
                "repair-timestamps/",
                self.admin_site.admin_view(self.repair_timestamps_view),
                name="brain_fact_repair_timestamps",
            ),
            *super().get_urls(),
        ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        broken = Fact.objects.filter(facts_out_of_range_q()).count()
        if broken and request.method == "GET":
            self.message_user(
                request,
                format_html(
                    "{} fact(s) have a valid_until outside years 1..9999 and are "
                    'hidden from this list. <form method="post" action="{}" '
                    'style="display:inline"><input type="hidden" '
                    'name="csrfmiddlewaretoken" value="{}"><button type="submit">'
                    "Repair them</button></form>",
                    broken,
                    reverse("admin:brain_fact_repair_timestamps"),
                    get_token(request),
                ),
                messages.WARNING,
            )
        return super().changelist_view(request, extra_context)

    def repair_timestamps_view(self, request: HttpRequest) -> HttpResponse:
        """POST: clamp out-of-range ``valid_until`` values into range."""
        if request.method != "POST" or not self.has_change_permission(request):
            return HttpResponseNotAllowed(["POST"])
        repaired = facts_repair_timestamps(actor=f"user:{request.user.get_username()}")
        self.message_user(
            request,
            f"{repaired} fact(s) repaired: valid_until clamped into range.",
            messages.SUCCESS,
        )
        return redirect("admin:brain_fact_changelist")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # SPEC §2.4: facts are forgotten (expired), never deleted.

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # An edit corrects what the fact says; where it came from stays as stored.
        fields = tuple(super().get_readonly_fields(request, obj))
        if obj is None:
            return fields
        return (
            *fields,
            "source",
            "entity",
            "provenance",
            "raw_record",
            "evidence",
            "valid_from",
        )

    def save_model(
        self,
        request: HttpRequest,
        obj: Fact,
        form: Any,
        change: bool,  # noqa: FBT001 (Django's signature)
    ) -> None:
        """Save through the fact service: a new fact is remembered (dedup and
        supersession by slot); an edit is re-read, re-embedded after commit and
        re-checked (SPEC §2.4), never ``obj.save()``."""
        caller = staff_caller(request)
        if change:
            fact_edit(
                caller=caller,
                fact=obj,
                text=obj.text,
                kind=obj.kind,
                visibility=obj.visibility,
                confidence=obj.confidence,
                valid_until=obj.valid_until,
            )
            obj.refresh_from_db()
            return
        written = fact_remember(
            caller=caller,
            source=obj.source,
            text=obj.text,
            provenance=obj.provenance or f"admin: {caller.actor}",
            entity=obj.entity,
            kind=obj.kind,
            visibility=obj.visibility,
            confidence=obj.confidence,
            valid_until=obj.valid_until,
        )
        obj.pk = written.fact.pk
        obj.refresh_from_db()

    @admin.action(description="Forget selected facts")
    def forget_facts(self, request: HttpRequest, queryset: QuerySet[Fact]) -> None:
        caller = local_caller(actor=f"user:{request.user.get_username()}")
        forgotten = sum(
            fact_forget(caller=caller, fact_id=pk, reason="forgotten in the admin")[1]
            for pk in queryset.values_list("pk", flat=True)
        )
        self.message_user(request, f"{forgotten} fact(s) forgotten.", messages.SUCCESS)


@admin.register(Chunk)
class ChunkAdmin(ReadOnlyAdmin):
    list_display = ("page", "ordinal", "token_count", "embedding_model", "source")
    list_filter = ("source", "embedding_model")
    search_fields = ("page__slug",)
    list_select_related = ("page", "source")
    exclude = ("embedding", "tsv")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Chunk]:
        return super().get_queryset(request).defer("embedding", "tsv")


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = (
        "event_time",
        "action",
        "actor",
        "target_type",
        "target_id",
        "source",
    )
    list_filter = ("action", "target_type", "source")
    search_fields = ("actor", "target_id")
    list_select_related = ("source",)
    date_hierarchy = "event_time"
    fields = (
        "event_time",
        "action",
        "actor",
        "source",
        "target_type",
        "target_id",
        "extra_table",
    )
    readonly_fields = fields

    @admin.display(description="details")
    def extra_table(self, obj: AuditEvent) -> str:
        return json_table(obj.extra_data)


@admin.register(SessionCursor)
class SessionCursorAdmin(ReadOnlyAdmin):
    list_display = ("client", "session_id", "source", "touched_at")
    list_filter = ("source",)
    search_fields = ("client", "session_id")


@admin.register(PushEvent)
class PushEventAdmin(ReadOnlyAdmin):
    list_display = ("session_id", "client", "page", "arm", "confidence", "pushed_at")
    list_filter = ("arm",)
    search_fields = ("session_id", "client", "page__slug", "mention")
    list_select_related = ("page",)


@admin.register(MergeProposal)
class MergeProposalAdmin(admin.ModelAdmin):
    """Dream's duplicate-entity proposals; curators merge or reject them (SPEC §10)."""

    list_display = (
        "id",
        "merge_page",
        "keep_page",
        "reason",
        "score",
        "status",
        "review",
        "source",
        "created_at",
    )
    list_filter = ("status", "reason", "source")
    search_fields = ("keep_page__slug", "merge_page__slug", "keep_page__title")
    list_select_related = ("keep_page", "merge_page", "source")
    raw_id_fields = ("keep_page", "merge_page")
    readonly_fields = (
        "review",
        "source",
        "keep_page",
        "merge_page",
        "reason",
        "score",
        "evidence",
        "status",
        "created_by",
        "created_at",
        "decided_at",
        "decided_by",
    )
    actions = ("merge_selected", "reject_selected")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # decided proposals are kept so they are not proposed again

    @admin.display(description="review")
    def review(self, obj: MergeProposal) -> str:
        """A link to the console's side-by-side preview with Merge / Reject."""
        if obj.pk is None or obj.status != MergeProposal.Status.PENDING:
            return obj.get_status_display() if obj.pk else "—"
        return format_html(
            '<a href="{}?proposal={}">Compare side by side</a>',
            reverse("admin:console_merge"),
            obj.pk,
        )

    @admin.action(description="Merge: fold each 'merge page' into its 'keep page'")
    def merge_selected(
        self, request: HttpRequest, queryset: QuerySet[MergeProposal]
    ) -> None:
        actor = f"admin:{request.user.get_username()}"
        for proposal_id in queryset.values_list("id", flat=True):
            try:
                counts = merge_proposal_accept(proposal_id=proposal_id, actor=actor)
            except BrainError as exc:
                self.message_user(
                    request, f"#{proposal_id}: {exc.message}", messages.WARNING
                )
            else:
                moved = ", ".join(
                    f"{v} {k}" for k, v in counts.items() if k != "merge_id"
                )
                self.message_user(
                    request, f"#{proposal_id} merged ({moved}).", messages.SUCCESS
                )

    @admin.action(description="Reject: these are different entities")
    def reject_selected(
        self, request: HttpRequest, queryset: QuerySet[MergeProposal]
    ) -> None:
        actor = f"admin:{request.user.get_username()}"
        for proposal_id in queryset.values_list("id", flat=True):
            try:
                merge_proposal_reject(proposal_id=proposal_id, actor=actor)
            except BrainError as exc:
                self.message_user(
                    request, f"#{proposal_id}: {exc.message}", messages.WARNING
                )
        self.message_user(request, "Rejected proposals will not be proposed again.")


@admin.register(PageMerge)
class PageMergeAdmin(admin.ModelAdmin):
    """Merges done, with what moved; "Undo" puts exactly that back (SPEC §10)."""

    list_display = (
        "id",
        "merge_page",
        "keep_page",
        "merged_by",
        "merged_at",
        "undone_at",
    )
    list_filter = ("source",)
    list_select_related = ("keep_page", "merge_page")
    readonly_fields = (
        "source",
        "keep_page",
        "merge_page",
        "proposal",
        "moved",
        "merged_by",
        "merged_at",
        "undone_at",
        "undone_by",
    )
    actions = ("undo_selected",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Undo: give the merged page back everything that moved")
    def undo_selected(
        self, request: HttpRequest, queryset: QuerySet[PageMerge]
    ) -> None:
        actor = f"admin:{request.user.get_username()}"
        for merge_id in queryset.values_list("id", flat=True):
            try:
                page_merge_undo(merge_id=merge_id, actor=actor)
            except BrainError as exc:
                self.message_user(
                    request, f"#{merge_id}: {exc.message}", messages.WARNING
                )
            else:
                self.message_user(request, f"#{merge_id} undone.", messages.SUCCESS)
