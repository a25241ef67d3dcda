"""Deployment invariants as Django system checks (STYLE rule 20)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register


@register(Tags.security, deploy=True)
def check_secret_key(app_configs: Any, **kwargs: Any) -> list[Error]:
    """brain.E001: the development secret key must not run a real deployment."""
    if not settings.DEBUG and settings.SECRET_KEY == settings.INSECURE_DEV_SECRET:
        return [
            Error(
                "DJANGO_SECRET_KEY is the development default.",
                hint="Set DJANGO_SECRET_KEY (or DJANGO_SECRET_KEY_FILE) to a random value.",
                id="brain.E001",
            )
        ]
    return []


@register()
def check_embedding_dimensions(app_configs: Any, **kwargs: Any) -> list[Warning]:
    """brain.W001: the migrations create 384-d vector columns; another dimension is
    migrated by job ``reembed`` (SPEC §3, issue 46: never a silent mix of vectors;
    search answers keyword-only with ``embeddings_stale`` until it finishes)."""
    from brain.models import EMBEDDING_DIMENSIONS

    if (
        settings.BRAIN_EMBEDDING_PROVIDER != "none"
        and settings.BRAIN_EMBEDDING_DIMENSIONS != EMBEDDING_DIMENSIONS
    ):
        return [
            Warning(
                f"BRAIN_EMBEDDING_DIMENSIONS={settings.BRAIN_EMBEDDING_DIMENSIONS} but "
                f"the vector columns hold {EMBEDDING_DIMENSIONS} dimensions.",
                hint="Use a 384-d model, or run `manage.py run_job reembed` once "
                "(it migrates the columns and re-embeds; `manage.py doctor` tells).",
                id="brain.W001",
            )
        ]
    return []
