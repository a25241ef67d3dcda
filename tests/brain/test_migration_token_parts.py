"""Migration ``brain.0017_chunk_token_parts`` (issue 26): chunks indexed before the
index held token parts get them once, so an upgraded brain finds "26 November
2001" in "West VaR - 11/26/2001" as a fresh one does."""

from __future__ import annotations

from importlib import import_module
from types import SimpleNamespace

from django.db import connection

from brain.access import local_caller
from brain.models import Chunk, Source
from brain.services.pages import page_add

migration = import_module("brain.migrations.0017_chunk_token_parts")


def _lexemes(chunk_id: int) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tsvector_to_array(tsv) FROM brain_chunk WHERE id = %s", [chunk_id]
        )
        return set(cursor.fetchone()[0])


def test_migration_appends_token_parts_to_chunks_indexed_without_them(
    default_source: Source, django_capture_on_commit_callbacks, settings
) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    with django_capture_on_commit_callbacks(execute=True):
        page_add(
            source=default_source,
            slug="notes/var-26",
            title="West VaR - 11/26/2001",
            body="The report is on the risk site.",
            actor=local_caller(),
        )
        page_add(
            source=default_source,
            slug="notes/plain",
            title="Plain",
            body="Nothing joined here at all.",
            actor=local_caller(),
        )
    dated = Chunk.objects.get(page__slug="notes/var-26")
    plain = Chunk.objects.get(page__slug="notes/plain")
    fresh = _lexemes(dated.pk)
    assert {"26", "2001"} <= fresh
    # As the index wrote chunks before issue 26: title and text only.
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE brain_chunk c SET tsv =
                setweight(to_tsvector(%s::regconfig, p.title), 'A')
                || setweight(to_tsvector(%s::regconfig, c.text), 'D')
            FROM brain_page p WHERE p.id = c.page_id
            """,
            [settings.BRAIN_FTS_LANGUAGE, settings.BRAIN_FTS_LANGUAGE],
        )
    assert not {"26", "2001"} & _lexemes(dated.pk)
    before_plain = _lexemes(plain.pk)
    migration.append_token_parts(None, SimpleNamespace(connection=connection))
    assert _lexemes(dated.pk) == fresh
    assert _lexemes(plain.pk) == before_plain
