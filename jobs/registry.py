"""Which handler runs which job kind (SPEC §7).

A handler is ``callable(job, ctx) -> JSON-safe result`` where ``job`` is the claimed
``Job`` row and ``ctx`` a ``jobs.runner.JobContext`` (heartbeat, checkpoint, progress,
cancel check). Handlers are named by dotted path and imported when a job runs, so a
kind whose service is absent fails that job clearly instead of breaking start-up.

``settings.BRAIN_JOB_HANDLERS`` (``{kind: "dotted.path"}``, or ``{kind: {"handler":
…, "reach": …}}`` with ``KindSpec``'s fields) adds or replaces kinds;
tests use it to register test-only kinds in the test process and in worker
subprocesses alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils.module_loading import import_string

from brain.exceptions import InvalidParams
from jobs.exceptions import PermanentJobError

if TYPE_CHECKING:
    from collections.abc import Callable


#: What a kind's params say about the sources it writes (``KindSpec.reach``).
ONE_SOURCE = "source"  # params.source_id, required: that one source
SOURCE_LIST = "sources"  # params.source_ids, optional: those sources, absent = all
EVERY = "every"  # every source at once (dream, purges)
NO_SOURCE = "none"  # no source's rows (backup writes an archive, test kinds)


@dataclass(frozen=True)
class KindSpec:
    """A job kind: handler path, django-q2 timeout (seconds), default attempts, and
    what it may touch (SPEC §8, issue 46): ``reach`` (which sources it writes, one
    of the constants above; a kind registered without one counts as ``EVERY``),
    ``local_only`` (reads a server path: only the CLI and staff may start it) and
    ``local_params`` (params naming a path or pruning files: refused from a key)."""

    handler: str
    timeout: int = 600
    max_attempts: int = 3
    reach: str = EVERY
    local_only: bool = False
    local_params: tuple[str, ...] = ()


BUILTIN_KINDS: dict[str, KindSpec] = {
    "sync_source": KindSpec(
        "jobs.handlers.sync_source", timeout=1800, reach=ONE_SOURCE
    ),
    "extract_loops": KindSpec(
        "jobs.handlers.extract_loops", timeout=900, reach=ONE_SOURCE
    ),
    "extract_commitments": KindSpec(
        "jobs.handlers.extract_commitments",
        timeout=600,
        max_attempts=3,
        reach=ONE_SOURCE,
    ),
    "loops_sweep": KindSpec(
        "jobs.handlers.loops_sweep", timeout=900, reach=SOURCE_LIST
    ),
    "embed_pending": KindSpec(
        "jobs.handlers.embed_pending", timeout=1800, reach=SOURCE_LIST
    ),
    "reembed": KindSpec("jobs.handlers.reembed", timeout=3600, max_attempts=5),
    "session_cursor_purge": KindSpec("jobs.handlers.session_cursor_purge", timeout=600),
    "dream": KindSpec("jobs.handlers.dream", timeout=3000, max_attempts=2),
    "backup": KindSpec(
        "jobs.handlers.backup",
        timeout=3000,
        max_attempts=2,
        reach=NO_SOURCE,
        local_params=("directory", "keep"),
    ),
    "import_mail": KindSpec(
        "jobs.handlers.import_mail", timeout=3000, reach=ONE_SOURCE, local_only=True
    ),
    "import_markdown": KindSpec(
        "jobs.handlers.import_markdown",
        timeout=1800,
        reach=ONE_SOURCE,
        local_only=True,
    ),
}


def job_kinds() -> dict[str, KindSpec]:
    """Every registered kind: the built-ins plus ``settings.BRAIN_JOB_HANDLERS`` (a
    kind given as a bare path touches every source: only the CLI and staff start it
    from the API)."""
    kinds = dict(BUILTIN_KINDS)
    for kind, spec in getattr(settings, "BRAIN_JOB_HANDLERS", {}).items():
        if isinstance(spec, dict):
            spec = KindSpec(**spec)
        kinds[kind] = spec if isinstance(spec, KindSpec) else KindSpec(str(spec))
    return kinds


def kind_spec(kind: str) -> KindSpec:
    """Return the spec of ``kind``; unknown kinds raise ``InvalidParams`` listing the
    allowed ones."""
    kinds = job_kinds()
    if kind not in kinds:
        raise InvalidParams(
            f"Unknown job kind {kind!r}.",
            suggestion=f"Use one of: {', '.join(sorted(kinds))}.",
            detail={"allowed": sorted(kinds)},
        )
    return kinds[kind]


def handler_for(kind: str) -> Callable[..., Any]:
    """Import and return the handler of ``kind``.

    Raises ``InvalidParams`` for an unknown kind and ``PermanentJobError`` when the
    handler cannot be imported (retrying would not help)."""
    path = kind_spec(kind).handler
    try:
        return import_string(path)
    except ImportError as exc:
        raise PermanentJobError(f"handler {path} of kind {kind!r}: {exc}") from exc
