"""Sources (SPEC §2.1)."""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q

from brain.models.base import SOURCE_ID_PATTERN, TimeStampedModel, Visibility

# --- Sources (SPEC §2.1) ------------------------------------------------------------


class Source(TimeStampedModel):
    """One stream of records: a Google account, a mailbox, a markdown folder, or the
    harness-written notes (``default``). Every read is scoped to a set of sources."""

    class Kind(models.TextChoices):
        GOOGLE = "google", "Google account"
        MAILBOX = "mailbox", "Mailbox files"
        IMAP = "imap", "IMAP mailbox"
        MARKDOWN = "markdown", "Markdown folder"
        MANUAL = "manual", "Manual / harness notes"

    id = models.CharField(
        primary_key=True,
        max_length=32,
        validators=[RegexValidator(SOURCE_ID_PATTERN, "1-32 chars: a-z, 0-9 and -")],
        help_text="Immutable id, e.g. 'default' or 'acme-shared'.",
    )
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.MANUAL)
    owner_addresses = ArrayField(
        models.CharField(max_length=320),
        default=list,
        blank=True,
        help_text="Addresses that count as 'me' (account address plus send-as aliases).",
    )
    federated = models.BooleanField(
        default=False, help_text="Included in searches that name no source."
    )
    config = models.JSONField(default=dict, blank=True)
    # Sync state (SPEC §2.1): historyId, syncTokens, backfill floor, file offsets.
    cursor = models.JSONField(default=dict, blank=True)
    last_sync_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    counts = models.JSONField(default=dict, blank=True)
    default_visibility = models.CharField(
        max_length=8,
        choices=Visibility.choices,
        blank=True,
        default="",
        help_text="Visibility of pages written here without an explicit one (SPEC "
        "§8). Empty: by kind (mailbox, IMAP and Google private; markdown and "
        "harness notes world). Remote keys read world pages only.",
    )

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(id__regex=SOURCE_ID_PATTERN),
                name="%(app_label)s_%(class)s_id_format",
            ),
        ]

    def __str__(self) -> str:
        return self.id

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Store the kind's default visibility when none was chosen."""
        if not self.default_visibility:
            self.default_visibility = visibility_default_for_kind(self.kind)
        super().save(*args, **kwargs)

    @property
    def page_visibility(self) -> str:
        """The visibility a page or a fact written here gets when the write names
        none (SPEC §8: one default per source for both)."""
        return self.default_visibility or visibility_default_for_kind(self.kind)


# Mail is private until an admin makes it world-visible (SPEC §8).
PRIVATE_SOURCE_KINDS = frozenset({"mailbox", "imap", "google"})


def visibility_default_for_kind(kind: str) -> str:
    """``private`` for mailbox, IMAP and Google sources, ``world`` otherwise."""
    return Visibility.PRIVATE if kind in PRIVATE_SOURCE_KINDS else Visibility.WORLD
