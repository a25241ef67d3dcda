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
    """brain.W001: the vector columns are 384-d; another dimension needs a re-embed
    migration (SPEC §3: never a silent mix of vectors)."""
    from brain.models import EMBEDDING_DIMENSIONS

    if (
        settings.BRAIN_EMBEDDING_PROVIDER != "none"
        and settings.BRAIN_EMBEDDING_DIMENSIONS != EMBEDDING_DIMENSIONS
    ):
        return [
            Warning(
                f"BRAIN_EMBEDDING_DIMENSIONS={settings.BRAIN_EMBEDDING_DIMENSIONS} but "
                f"the vector columns hold {EMBEDDING_DIMENSIONS} dimensions.",
                hint="Use a 384-d model, or migrate the columns and re-embed.",
                id="brain.W001",
            )
        ]
    return []
