"""Fixtures of the jobs tests: test-only kinds, a restorer for transactional tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.jobs.kinds import TEST_KINDS

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def test_kinds(settings):  # type: ignore[no-untyped-def]
    """Register the test-only job kinds in this process."""
    settings.BRAIN_JOB_HANDLERS = TEST_KINDS
    settings.BRAIN_JOB_HEARTBEAT_SECONDS = 1
    return TEST_KINDS


@pytest.fixture
def restore_migrated_rows(django_db_setup, django_db_blocker) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Put the rows data migrations installed back after a transactional test.

    A transactional test ends with a flush of every table, which would also remove
    the ``default`` source and the Schema installed by migrations from the reused
    test database. Request this fixture *before* ``transactional_db``.
    """
    from django.apps import apps
    from django.core.management import call_command
    from django.core.management.color import no_style
    from django.db import connection

    with django_db_blocker.unblock():
        snapshot = connection.creation.serialize_db_to_string()
    yield
    with django_db_blocker.unblock():
        # The test's own flush re-created content types and permissions with new ids;
        # empty everything again so the snapshot goes back exactly as it was.
        call_command("flush", interactive=False, inhibit_post_migrate=True, verbosity=0)
        connection.creation.deserialize_db_from_string(snapshot)
        # Rows came back with their ids; move every sequence past them.
        statements = connection.ops.sequence_reset_sql(no_style(), apps.get_models())
        with connection.cursor() as cursor:
            for sql in statements:
                cursor.execute(sql)
