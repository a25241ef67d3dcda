"""The curation queue written by dream (SPEC §10)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from brain.models.pages import Page
from brain.models.sources import Source

# --- Curation queue written by dream (SPEC §10) ------------------------------------------


class MergeProposal(models.Model):
    """Dream's suggestion that two pages of one source name the same entity (same
    email alias; for people, evidence scored by ``brain.services.people``, listed in
    ``evidence``; for other entities, near-identical titles by pg_trgm similarity). A curator accepts
    (merge: ``merge_page`` into ``keep_page``, keeping aliases and a redirect) or
    rejects it in the admin. One proposal per unordered page pair, ever, so a
    rejected pair is not proposed again. Dream-generated (``created_by="dream"``)."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        MERGED = "merged", "Merged"
        REJECTED = "rejected", "Rejected"

    class Reason(models.TextChoices):
        SAME_EMAIL = "same_email", "Same email alias"
        SIMILAR_NAME = "similar_name", "Near-identical name"
        PEOPLE_EVIDENCE = "people_evidence", "Evidence that two people are one"

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="+")
    keep_page = models.ForeignKey(
        Page, on_delete=models.CASCADE, related_name="merge_proposals_kept"
    )
    merge_page = models.ForeignKey(
        Page, on_delete=models.CASCADE, related_name="merge_proposals_merged"
    )
    reason = models.CharField(max_length=16, choices=Reason.choices)
    score = models.FloatField(
        default=1.0, help_text="Confidence (0..1): title similarity or people evidence."
    )
    evidence = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    created_by = models.CharField(max_length=200, default="dream", editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    decided_at = models.DateTimeField(null=True, blank=True, editable=False)
    decided_by = models.CharField(max_length=200, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                models.functions.Least("keep_page", "merge_page"),
                models.functions.Greatest("keep_page", "merge_page"),
                name="%(app_label)s_%(class)s_unique_pair",
            ),
            models.CheckConstraint(
                condition=~Q(keep_page=models.F("merge_page")),
                name="%(app_label)s_%(class)s_distinct_pages",
            ),
        ]

    def __str__(self) -> str:
        return f"merge {self.merge_page_id} into {self.keep_page_id} ({self.reason})"


class PageMerge(models.Model):
    """One merge of ``merge_page`` into ``keep_page`` and exactly what moved, so it can
    be undone (SPEC §10; issue 46). Written by ``brain.services.merges`` only.

    ``moved`` holds row ids per kind: ``aliases`` (moved), ``aliases_added`` (the
    merged title and slug added to the kept page), ``aliases_dropped`` (``[alias,
    kind]`` pairs the kept page already had), ``relations_from`` / ``relations_to``
    (repointed ends), ``relations_dropped`` (``[from, to, type, context]``),
    ``facts``, ``raw_records``, ``timeline`` and one list per registered mover
    (``loops_counterparty``, ``loops_page``). ``undone_at`` is set once by undo."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="+")
    keep_page = models.ForeignKey(Page, on_delete=models.CASCADE, related_name="+")
    merge_page = models.ForeignKey(Page, on_delete=models.CASCADE, related_name="+")
    proposal = models.ForeignKey(
        MergeProposal,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    moved = models.JSONField(default=dict, editable=False)
    merged_by = models.CharField(max_length=200, editable=False)
    merged_at = models.DateTimeField(default=timezone.now, editable=False)
    undone_at = models.DateTimeField(null=True, blank=True, editable=False)
    undone_by = models.CharField(max_length=200, blank=True, editable=False)

    class Meta:
        ordering = ["-merged_at", "-id"]

    def __str__(self) -> str:
        return f"{self.merge_page_id} merged into {self.keep_page_id}"
