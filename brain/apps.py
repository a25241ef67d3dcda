from __future__ import annotations

import sys
from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate

# Migrations after which stored pages are re-cut by the current chunker.
RECHUNK_AFTER = frozenset({("brain", "0013_chunk_secondary")})


def rechunk_after_migrate(
    plan: list[tuple[Any, bool]] | None = None,
    verbosity: int = 1,
    stdout: Any = None,
    **kwargs: Any,
) -> tuple[int, int] | None:
    """``post_migrate`` handler: when this ``migrate`` applied a migration of
    ``RECHUNK_AFTER`` (``brain.0013``, issue 26's split of a page's own words from its
    quoted history, signature and list footer), bring the pages stored before it to
    the current chunker with ``pages_rechunk`` (idempotent; unchanged chunks keep
    their embeddings, new ones wait for ``embed_pending``). It runs here, after every
    migration, because the schema then matches the code that re-cuts. Returns
    ``(pages seen, pages rebuilt)``, or None when no such migration was applied."""
    applied = {
        (migration.app_label, migration.name)
        for migration, backwards in plan or ()
        if not backwards
    }
    if not applied & RECHUNK_AFTER:
        return None
    from brain.services.pages import pages_rechunk

    seen, rebuilt = pages_rechunk()
    if verbosity and rebuilt:
        print(
            f"  Re-chunked {rebuilt} of {seen} pages (the embed_pending job embeds "
            "the new chunks).",
            file=stdout or sys.stdout,
        )
    return seen, rebuilt


class BrainConfig(AppConfig):
    """Pages, Schema, sources, relations, facts, search and the memory verbs."""

    name = "brain"
    verbose_name = "Brain"

    def ready(self) -> None:
        from brain import checks  # noqa: F401 - registers the system checks

        post_migrate.connect(
            rechunk_after_migrate, sender=self, dispatch_uid="brain-rechunk"
        )
