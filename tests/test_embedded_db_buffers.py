"""The embedded server's buffer cache (gbrain_site.embedded_db.shared_buffers_mb):
initdb's 128 MB could not hold a 100,000-page brain's HNSW index."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.db import connection

from gbrain_site import embedded_db
from gbrain_site.embedded_db import shared_buffers_mb


def test_shared_buffers_are_a_quarter_of_memory_capped_at_2_gb(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("BRAIN_EMBEDDED_SHARED_BUFFERS_MB", raising=False)
    limit = tmp_path / "memory.max"
    monkeypatch.setattr(embedded_db, "CGROUP_MEMORY_MAX", limit)
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    limit.write_text("max\n")
    assert shared_buffers_mb() == max(128, min(physical // 4, 2048))
    # A container's memory limit counts, not the host's memory.
    limit.write_text(f"{1024 * 2**20}\n")
    assert shared_buffers_mb() == max(128, min(physical, 1024) // 4)
    limit.write_text(f"{256 * 2**20}\n")
    assert shared_buffers_mb() == 128
    monkeypatch.setenv("BRAIN_EMBEDDED_SHARED_BUFFERS_MB", "512")
    assert shared_buffers_mb() == 512
    monkeypatch.setenv("BRAIN_EMBEDDED_SHARED_BUFFERS_MB", "lots")
    with pytest.raises(ValueError):
        shared_buffers_mb()


@pytest.mark.django_db
def test_the_embedded_server_runs_with_that_cache_or_has_it_pending(settings) -> None:  # type: ignore[no-untyped-def]
    """A new data directory's first start runs with initdb's 128 MB and the value
    pending (ALTER SYSTEM applies at the next start); from then on it runs with it.
    With ``DATABASE_URL`` (an external server) the site starts no embedded server,
    so it never sizes (or alters) the external server's cache."""
    if not settings.BRAIN_EMBEDDED_DB:
        assert embedded_db._server is None, "no embedded server beside DATABASE_URL"
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setting::bigint * 8 / 1024, pending_restart FROM pg_settings"
            " WHERE name = 'shared_buffers'"
        )
        running, pending = cursor.fetchone()
        cursor.execute(
            "SELECT setting FROM pg_file_settings WHERE name = 'shared_buffers'"
            " ORDER BY seqno DESC LIMIT 1"
        )
        configured = cursor.fetchone()
    wanted = shared_buffers_mb()
    assert configured == (f"{wanted}MB",)
    assert running == wanted or pending
