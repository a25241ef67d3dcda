"""The Schema: page types and relation types (SPEC §2.2)."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.core.validators import RegexValidator
from django.db import models

from brain.models.base import TimeStampedModel

# --- Schema (SPEC §2.2) -------------------------------------------------------------


class PageType(TimeStampedModel):
    """A Schema page type such as ``person``; governs every page write."""

    class Primitive(models.TextChoices):
        ENTITY = "entity", "Entity"
        MEDIA = "media", "Media"
        TEMPORAL = "temporal", "Temporal"
        ANNOTATION = "annotation", "Annotation"
        CONCEPT = "concept", "Concept"

    name = models.CharField(
        max_length=64,
        unique=True,
        validators=[RegexValidator(r"^[a-z][a-z0-9_]*$", "snake_case")],
    )
    primitive = models.CharField(max_length=16, choices=Primitive.choices)
    path_prefixes = ArrayField(
        models.CharField(max_length=100),
        default=list,
        blank=True,
        help_text="Slug prefixes that imply this type, e.g. 'people/'.",
    )
    required_fields = ArrayField(
        models.CharField(max_length=100),
        default=list,
        blank=True,
        help_text="Frontmatter keys every page of this type must carry.",
    )
    extractable = models.BooleanField(
        default=False, help_text="Commitments and facts may be extracted from it."
    )
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class RelationType(TimeStampedModel):
    """A Schema relation type such as ``works_at``; empty endpoint sets allow any."""

    name = models.CharField(
        max_length=64,
        unique=True,
        validators=[RegexValidator(r"^[a-z][a-z0-9_]*$", "snake_case")],
    )
    inverse_name = models.CharField(max_length=64, blank=True)
    source_types = models.ManyToManyField(
        PageType,
        blank=True,
        related_name="outgoing_relation_types",
        help_text="Allowed page types at the 'from' end (empty: any).",
    )
    target_types = models.ManyToManyField(
        PageType,
        blank=True,
        related_name="incoming_relation_types",
        help_text="Allowed page types at the 'to' end (empty: any).",
    )
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
