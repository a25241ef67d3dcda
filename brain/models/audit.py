"""Audit events, delta session cursors and the push log (SPEC §4, §8, §9)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from brain.models.pages import Page
from brain.models.sources import Source

# --- Audit, sessions, push log -------------------------------------------------------


class AuditEvent(models.Model):
    """Append-only record of a significant change (fact forgotten or superseded, page
    deleted or merged, Schema edited, sync run). Nobody edits these rows."""

    class Action(models.TextChoices):
        PAGE_CREATED = "page_created", "Page created"
        PAGE_UPDATED = "page_updated", "Page updated"
        PAGE_DELETED = "page_deleted", "Page deleted"
        PAGE_RESTORED = "page_restored", "Page restored"
        PAGE_MERGED = "page_merged", "Page merged"
        PAGE_MERGE_UNDONE = "page_merge_undone", "Page merge undone"
        FACT_REMEMBERED = "fact_remembered", "Fact remembered"
        FACT_SUPERSEDED = "fact_superseded", "Fact superseded"
        FACT_FORGOTTEN = "fact_forgotten", "Fact forgotten"
        FACT_EXPIRED = "fact_expired", "Fact expired"
        FACT_EDITED = "fact_edited", "Fact edited"
        RELATION_ADDED = "relation_added", "Relation added"
        RELATION_REMOVED = "relation_removed", "Relation removed"
        SCHEMA_CHANGED = "schema_changed", "Schema changed"
        SOURCE_SYNCED = "source_synced", "Source synced"
        KEY_CREATED = "key_created", "API key created"
        KEY_REVOKED = "key_revoked", "API key revoked"
        OTHER = "other", "Other"

    event_time = models.DateTimeField(
        default=timezone.now, db_index=True, editable=False
    )
    actor = models.CharField(max_length=200, editable=False)
    action = models.CharField(max_length=32, choices=Action.choices, editable=False)
    source = models.ForeignKey(
        Source, null=True, blank=True, on_delete=models.SET_NULL, editable=False
    )
    target_type = models.CharField(max_length=64, editable=False)
    target_id = models.CharField(max_length=255, editable=False)
    extra_data = models.JSONField(default=dict, editable=False)

    class Meta:
        ordering = ["-event_time", "-id"]
        indexes = [models.Index(fields=["target_type", "target_id"])]

    def __str__(self) -> str:
        return f"{self.action} {self.target_type}:{self.target_id}"


class SessionCursor(models.Model):
    """A delta session cursor keyed by (source, client, session) (SPEC §4 ``delta``).

    ``position`` holds the keyset ``{since, slug}`` of the newest delivered item;
    cursors idle for 7 days expire.
    """

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="+")
    client = models.CharField(max_length=200)
    session_id = models.CharField(max_length=200)
    position = models.JSONField(default=dict)
    touched_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "client", "session_id"],
                name="%(app_label)s_%(class)s_unique_session",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.client}/{self.session_id}"


class PushEvent(models.Model):
    """What push context offered in a session, for suppression of repeats and later
    precision measurement (SPEC §9)."""

    session_id = models.CharField(max_length=200, db_index=True)
    client = models.CharField(max_length=200, blank=True)
    page = models.ForeignKey(Page, on_delete=models.CASCADE, related_name="push_events")
    mention = models.CharField(max_length=300)
    arm = models.CharField(max_length=32)
    confidence = models.FloatField()
    pushed_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session_id", "client", "page"],
                name="%(app_label)s_%(class)s_once_per_session",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}: {self.page_id}"
