"""Admin of the jobs app: what ran, what failed and why (SPEC §7, STYLE rule 21).

Job rows are written only by the runner and services; the admin reads them and
offers cancel and retry, which call ``jobs.services``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.utils.html import format_html

from brain.display import json_table
from brain.exceptions import BrainError
from jobs.models import Job
from jobs.selectors import job_outcome, worker_alive
from jobs.services import job_cancel, job_retry

if TYPE_CHECKING:
    from django.db.models import QuerySet
    from django.http import HttpRequest, HttpResponse

NO_WORKER = (
    "No worker is running: queued jobs wait until one starts "
    "(`manage.py worker`, or `systemctl start brain-worker`)."
)


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "kind",
        "outcome",
        "progress_column",
        "attempts_column",
        "short_error",
        "created_at",
        "started_at",
        "finished_at",
    )
    list_filter = ("status", "kind", "created_by")
    search_fields = ("kind", "idempotency_key", "error", "worker")
    list_select_related = ("parent",)
    raw_id_fields = ("parent",)
    date_hierarchy = "created_at"
    actions = ("cancel_jobs", "retry_jobs")
    fields = (
        "kind",
        "outcome",
        "params_table",
        "idempotency_key",
        "attempts",
        "max_attempts",
        "progress_table",
        "checkpoint_table",
        "result_table",
        "error",
        "history_table",
        "run_after",
        "dispatched_at",
        "started_at",
        "heartbeat_at",
        "finished_at",
        "worker",
        "parent",
        "created_by",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        self._warn_no_worker(request)
        return super().changelist_view(request, extra_context)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        self._warn_no_worker(request, object_id=object_id)
        return super().change_view(request, object_id, form_url, extra_context)

    def _warn_no_worker(self, request: HttpRequest, object_id: str = "") -> None:
        """Warn on GET when queued jobs (or this queued job) have no live worker."""
        if request.method != "GET":
            return
        queued = Job.objects.filter(status=Job.Status.QUEUED)
        if object_id:
            queued = (
                queued.filter(pk=object_id) if object_id.isdigit() else queued.none()
            )
        if queued.exists() and not worker_alive():
            self.message_user(request, NO_WORKER, messages.WARNING)

    @admin.display(description="status", ordering="status")
    def outcome(self, obj: Job) -> str:
        return job_outcome(obj)

    @admin.display(description="params")
    def params_table(self, obj: Job) -> str:
        return json_table(obj.params)

    @admin.display(description="progress")
    def progress_table(self, obj: Job) -> str:
        return json_table(obj.progress)

    @admin.display(description="checkpoint")
    def checkpoint_table(self, obj: Job) -> str:
        return json_table(obj.checkpoint)

    @admin.display(description="result")
    def result_table(self, obj: Job) -> str:
        return json_table(obj.result)

    @admin.display(description="history")
    def history_table(self, obj: Job) -> str:
        return json_table(obj.history)

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Jobs come from schedules, the API and the CLI, never from a blank form.
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Job rows are the run history; cancel instead.
        return False

    @admin.display(description="progress")
    def progress_column(self, obj: Job) -> str:
        progress = obj.progress or {}
        if not progress:
            return "—"
        pct = obj.progress_percent
        step, total = progress.get("step", 0), progress.get("total")
        text = f"{step}/{total}" if total else str(step)
        if pct is not None:
            text += f" ({pct}%)"
        message = progress.get("message") or ""
        return format_html("{} <small>{}</small>", text, message[:60])

    @admin.display(description="attempts", ordering="attempts")
    def attempts_column(self, obj: Job) -> str:
        return f"{obj.attempts}/{obj.max_attempts}"

    @admin.display(description="error")
    def short_error(self, obj: Job) -> str:
        return (obj.error or "").splitlines()[0][:120] if obj.error else ""

    def _apply(
        self,
        request: HttpRequest,
        queryset: QuerySet[Job],
        action: Any,
        verb: str,
    ) -> None:
        done, refused = [], []
        actor = f"admin:{request.user.get_username()}"
        for job_id in queryset.values_list("id", flat=True):
            try:
                action(job_id=job_id, actor=actor)
                done.append(job_id)
            except BrainError as exc:
                refused.append(f"#{job_id}: {exc.message}")
        if done:
            self.message_user(
                request, f"{verb} {len(done)} job(s): {done}", messages.SUCCESS
            )
        for line in refused:
            self.message_user(request, line, messages.WARNING)

    @admin.action(description="Cancel selected jobs")
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._apply(request, queryset, job_cancel, "Cancelled")

    @admin.action(description="Retry selected jobs")
    def retry_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._apply(request, queryset, job_retry, "Queued again")
