"""Session settings of the app's database connections (gbrain_site.settings)."""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def test_sequential_scans_start_at_the_first_block() -> None:
    """With synchronize_seqscans on, a scan of a big table starts where another scan
    of it is, so "the first N chunks holding a common word" (the keyword arm's bounded
    candidates) changed from run to run; the app's connections turn it off."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronize_seqscans")
        assert cursor.fetchone()[0] == "off"


def test_a_statement_run_again_and_again_is_prepared_once() -> None:
    """entity()'s resolve and card and the search arms spent longer being planned than
    run: the app's connections prepare a statement on the server after
    BRAIN_DB_PREPARE_THRESHOLD runs of the same text (psycopg's prepare_threshold),
    where Django's default never does."""
    sql = "SELECT count(*) FROM brain_page WHERE id = %s"

    def prepared() -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_prepared_statements"
                " WHERE statement LIKE 'SELECT count(*) FROM brain_page WHERE id = $1%%'"
            )
            return int(cursor.fetchone()[0])

    with connection.cursor() as cursor:
        for run in range(8):
            cursor.execute(sql, [run])
    assert prepared() == 1
