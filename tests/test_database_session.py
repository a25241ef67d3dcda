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
