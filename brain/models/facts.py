"""Facts with provenance (SPEC §2.4)."""

from __future__ import annotations

from django.contrib.postgres.fields import DateTimeRangeField
from django.contrib.postgres.indexes import GistIndex
from django.core.validators import MaxLengthValidator
from django.db import models
from django.db.models import F, Func, Q
from django.db.models.functions import Greatest
from django.utils import timezone
from pgvector.django import HnswIndex

from brain.models.base import (
    EMBEDDING_DIMENSIONS,
    EmbeddingField,
    TimeStampedModel,
    Visibility,
)
from brain.models.pages import Page, RawRecord
from brain.models.sources import Source

# --- Facts (SPEC §2.4) ---------------------------------------------------------------


def fact_lifetime() -> Func:
    """The SQL expression ``tstzrange(created_at, GREATEST(created_at, expired_at))``:
    the half-open interval in which a fact was live (recorded, not yet expired).
    ``GREATEST`` keeps a fact that expired before it was recorded (imported already
    lapsed) a valid, empty range instead of an error. The ``brain_fact_lifetime`` GiST
    index is built on exactly this expression, so a filter on it (``delta``'s
    ``forgotten``: facts live across an interval) is an index scan."""
    return Func(
        F("created_at"),
        Greatest(F("created_at"), F("expired_at")),
        function="tstzrange",
        output_field=DateTimeRangeField(),
    )


class Fact(TimeStampedModel):
    """Hot memory: a short statement with provenance, confidence and a validity window.

    Active means ``expired_at IS NULL`` and ``valid_until`` null or in the future.
    Forget and supersession expire a fact; nothing is ever deleted.
    """

    class Kind(models.TextChoices):
        EVENT = "event", "Event"
        PREFERENCE = "preference", "Preference"
        COMMITMENT = "commitment", "Commitment"
        BELIEF = "belief", "Belief"
        FACT = "fact", "Fact"

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="facts")
    entity = models.ForeignKey(
        Page, null=True, blank=True, on_delete=models.SET_NULL, related_name="facts"
    )
    text = models.TextField()
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.FACT)
    visibility = models.CharField(
        max_length=8, choices=Visibility.choices, default=Visibility.WORLD
    )
    provenance = models.TextField(validators=[MaxLengthValidator(500)])
    # Structured evidence: raw record, page, quote, message id, extractor and model.
    raw_record = models.ForeignKey(
        RawRecord,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="facts",
    )
    evidence = models.JSONField(default=dict, blank=True)
    confidence = models.FloatField(default=1.0)
    valid_from = models.DateTimeField(default=timezone.now)
    valid_until = models.DateTimeField(null=True, blank=True)
    expired_at = models.DateTimeField(null=True, blank=True)
    expired_reason = models.CharField(max_length=500, blank=True)
    superseded_by = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="supersedes",
    )
    embedding = EmbeddingField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True)
    created_by = models.CharField(max_length=200, blank=True)
    # SPEC §2.4 (revised): what the fact says, derived at write time by
    # brain.services.fact_slots. ``subject`` is "@" for the entity itself, "@name"
    # for another name leading the text, or the name read from the text when there
    # is no entity; ``slot`` the attribute ("employer", "status[invoice inv-4711]");
    # ``value`` its value, prefixed "not:" (negated) or "was:" (past). Empty slot:
    # not derived yet (read again from the text when compared).
    subject = models.CharField(max_length=255, blank=True)
    slot = models.CharField(max_length=200, blank=True)
    value = models.CharField(max_length=500, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(confidence__gte=0) & Q(confidence__lte=1),
                name="%(app_label)s_%(class)s_confidence_range",
            ),
            models.CheckConstraint(
                condition=Q(provenance__regex=r"\S"),
                name="%(app_label)s_%(class)s_provenance_required",
            ),
        ]
        indexes = [
            # recall by entity and the entity card's active-fact count.
            models.Index(
                fields=["entity", "kind"],
                condition=Q(expired_at__isnull=True),
                name="brain_fact_active_entity",
            ),
            models.Index(fields=["source", "created_at"]),
            # delta's ``forgotten`` (selectors_facts.fact_list_forgotten): the expired
            # facts whose lifetime spans a reader's interval.
            GistIndex(
                fact_lifetime(),
                condition=Q(expired_at__isnull=False),
                name="brain_fact_lifetime",
            ),
            HnswIndex(
                name="brain_fact_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self) -> str:
        return self.text[:80]

    @property
    def is_active(self) -> bool:
        """True while not expired and inside its validity window (SPEC §2.4)."""
        if self.expired_at is not None:
            return False
        return self.valid_until is None or self.valid_until > timezone.now()
