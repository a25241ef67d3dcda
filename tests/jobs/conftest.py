"""Fixtures of the jobs tests: test-only kinds (the restorer for transactional
tests, ``restore_migrated_rows``, is in ``tests/conftest.py``)."""

from __future__ import annotations

import pytest

from tests.jobs.kinds import TEST_KINDS


@pytest.fixture
def test_kinds(settings):  # type: ignore[no-untyped-def]
    """Register the test-only job kinds in this process."""
    settings.BRAIN_JOB_HANDLERS = TEST_KINDS
    settings.BRAIN_JOB_HEARTBEAT_SECONDS = 1
    return TEST_KINDS
