"""Errors of the job runner (SPEC §7).

Handlers signal "do not retry" by raising an exception with ``permanent = True``
(the connectors' typed errors carry the same attribute, STYLE rule 2) or a
``brain.exceptions.InvalidParams``; every other exception is retried with backoff.
"""

from __future__ import annotations


class JobInterrupted(Exception):
    """The running attempt no longer owns its job: it was cancelled, or the reaper
    handed it to another worker. The handler must stop; nothing is recorded."""


class PermanentJobError(Exception):
    """A handler error that retrying cannot fix (bad params, missing service)."""

    permanent = True
