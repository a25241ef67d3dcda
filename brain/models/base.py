"""Shared model bases and helpers: ids, timestamps, visibility, page name expressions."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Func, Value
from django.db.models.functions import Lower
from django.utils import timezone
from pgvector.django import VectorField

# SPEC §2.1: 1-32 chars, lower-case letters, digits and inner hyphens.
SOURCE_ID_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$"
# Dimension of the default local model (all-MiniLM-L6-v2), the one the migrations
# create; a model of another dimension migrates the columns through job ``reembed``
# (``brain.services.vectors``), never a silent mix of vectors (SPEC §3, issue 46).
EMBEDDING_DIMENSIONS = 384


class EmbeddingField(VectorField):
    """A ``vector(N)`` column whose stored dimension the database decides: the
    migrations create it with ``EMBEDDING_DIMENSIONS``, job ``reembed`` may alter it
    to the configured model's (issue 46). Values are cast to plain ``vector`` in
    ``bulk_update`` so the SQL never names the dimension the model was created with
    (the column checks it on write)."""

    def cast_db_type(self, connection: object) -> str:
        """``vector`` without a dimension (Django's ``Cast`` uses it)."""
        return "vector"


class TimeStampedModel(models.Model):
    """Abstract base: ``created_at`` (indexed) and ``updated_at`` (auto), both UTC."""

    created_at = models.DateTimeField(
        default=timezone.now, db_index=True, editable=False
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class Visibility(models.TextChoices):
    """Who may read a page or fact (SPEC §2.3, §2.4, §8)."""

    WORLD = "world", "World"
    PRIVATE = "private", "Private (trusted callers only)"


def page_surname() -> Func:
    """SQL expression: the lower-cased last word of a page title (a person's surname).

    Indexed as ``brain_page_surname`` for the push-context surname arm (SPEC §9);
    queries must use this exact expression to hit the index.
    """
    return Lower(
        Func(F("title"), Value(r"^.*\s"), Value(""), function="regexp_replace")
    )


def page_slug_tail() -> Func:
    """SQL expression: the last ``/`` segment of a slug (``people/jane-doe`` →
    ``jane-doe``). Indexed as ``brain_page_slug_tail`` for the slug-suffix arm."""
    return Func(F("slug"), Value("^.*/"), Value(""), function="regexp_replace")
