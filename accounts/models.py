"""Users and API keys (SPEC §8).

The brain is a shared team brain: staff users curate it in the admin (optionally
signing in with Google), and harnesses call it with API keys. Keys are stored as a
SHA-256 hash and shown once.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.utils import timezone


class User(AbstractUser):
    """A person who signs in to the admin. Custom from migration 0001 so it can grow
    without a painful swap later (STYLE rule 7)."""

    class Meta(AbstractUser.Meta):
        swappable = "AUTH_USER_MODEL"


class ApiKey(models.Model):
    """A bearer key for the HTTP API and MCP over HTTP (SPEC §8).

    ``scopes`` ⊆ {read, write, admin}. ``write_source`` receives everything the key
    writes; ``readable_sources`` bounds what it reads (the write source is always
    readable). Only ``trusted`` keys see private facts and pages, loop quotes and links.
    """

    class Scope(models.TextChoices):
        READ = "read", "Read"
        WRITE = "write", "Write"
        ADMIN = "admin", "Admin"

    name = models.CharField(max_length=200)
    prefix = models.CharField(
        max_length=16,
        unique=True,
        editable=False,
        help_text="Shown to identify the key.",
    )
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    scopes = ArrayField(
        models.CharField(max_length=8, choices=Scope.choices),
        default=list,
        help_text="read, write and/or admin.",
    )
    write_source = models.ForeignKey(
        "brain.Source",
        on_delete=models.PROTECT,
        related_name="writing_keys",
        null=True,
        blank=True,
    )
    readable_sources = models.ManyToManyField(
        "brain.Source", related_name="reading_keys", blank=True
    )
    trusted = models.BooleanField(
        default=False, help_text="May read private facts and pages, quotes and links."
    )
    rate_limit_per_minute = models.PositiveIntegerField(null=True, blank=True)
    created_by = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Optional: the key stops working at this time (UTC).",
    )

    class Meta:
        verbose_name = "API key"
        constraints = [
            models.CheckConstraint(
                condition=Q(scopes__contained_by=["read", "write", "admin"]),
                name="%(app_label)s_%(class)s_known_scopes",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        """False once revoked or expired."""
        return self.revoked_at is None and (
            self.expires_at is None or self.expires_at > timezone.now()
        )


class ApiKeyRateWindow(models.Model):
    """The current one-minute rate window of a key with a limit (SPEC §8 "optional
    rate limit"): ``minute`` (Unix time // 60) and the requests counted in it. One row
    per key, shared by every worker process; written only by
    ``accounts.services.apikey_rate_check`` in one atomic upsert."""

    api_key = models.OneToOneField(
        ApiKey, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    minute = models.BigIntegerField()
    count = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.api_key_id}@{self.minute}: {self.count}"
