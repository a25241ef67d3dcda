"""Shared model bases and helpers: ids, timestamps, visibility, page name expressions."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Func, Value
from django.db.models.functions import Lower
from django.utils import timezone

# SPEC §2.1: 1-32 chars, lower-case letters, digits and inner hyphens.
SOURCE_ID_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$"
# Dimension of the default local model (all-MiniLM-L6-v2); a different dimension is a
# managed re-embed with a migration, never a silent mix of vectors (SPEC §3).
EMBEDDING_DIMENSIONS = 384


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
