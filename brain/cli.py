"""Helpers for management commands (SPEC §0 "long jobs show progress").

``progress_stream(command.stderr)`` is the stream progress bars write to: the
command's stderr without Django's error style, so a bar on a terminal is drawn in
the terminal's own colours instead of the red Django gives error messages.
``resumable_on_database_failure(what)`` turns a database failure in an import into
one line saying to run the same command again (issue 46), not a traceback.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, TextIO, cast

from django.core.management.base import CommandError
from django.db import DatabaseError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from django.core.management.base import OutputWrapper


@contextlib.contextmanager
def resumable_on_database_failure(what: str) -> Iterator[None]:
    """Re-raise a ``DatabaseError`` (server gone, connection lost, disk full…)
    raised inside the block as a one-line ``CommandError``: ``what`` stopped, the
    database's first message line, that what was written is kept, and "run the
    same command again to resume" (imports are idempotent and resumable, SPEC §6).
    Django prints a ``CommandError`` without a traceback (exit status 1)."""
    try:
        yield
    except DatabaseError as exc:
        lines = str(exc).strip().splitlines()
        first = (lines[0] if lines else "")[:300]
        raise CommandError(
            f"{what} stopped: the database failed ({type(exc).__name__}: {first}). "
            "What was written so far is kept; run the same command again to resume."
        ) from exc


def progress_stream(stderr: OutputWrapper) -> TextIO:
    """The raw stream under a command's ``stderr`` ``OutputWrapper`` (what
    ``call_command(stderr=…)`` or the terminal gave it). Django styles every
    ``OutputWrapper.write`` on a terminal with ``style.ERROR``; tqdm writes through
    ``write``, so a bar given the wrapper would be red."""
    # Django keeps the wrapped stream in ``_out`` (its stubs do not declare it).
    return cast("TextIO", stderr._out)  # noqa: SLF001
