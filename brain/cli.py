"""Helpers for management commands (SPEC §0 "long jobs show progress").

``progress_stream(command.stderr)`` is the stream progress bars write to: the
command's stderr without Django's error style, so a bar on a terminal is drawn in
the terminal's own colours instead of the red Django gives error messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO, cast

if TYPE_CHECKING:
    from django.core.management.base import OutputWrapper


def progress_stream(stderr: OutputWrapper) -> TextIO:
    """The raw stream under a command's ``stderr`` ``OutputWrapper`` (what
    ``call_command(stderr=…)`` or the terminal gave it). Django styles every
    ``OutputWrapper.write`` on a terminal with ``style.ERROR``; tqdm writes through
    ``write``, so a bar given the wrapper would be red."""
    # Django keeps the wrapped stream in ``_out`` (its stubs do not declare it).
    return cast("TextIO", stderr._out)  # noqa: SLF001
