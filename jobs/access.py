"""What a caller may do with jobs (SPEC §7, §8; issue 46): every key held to its
grants, jobs included.

A job runs with the worker's rights, so the caller's rights are checked when the job
is asked for, through the one predicate ``brain.access.Caller.may``:

- a kind that writes one source (``params.source_id``) or a list of them
  (``params.source_ids``) is allowed only on sources the caller may write; an API
  key's job therefore runs only on the key's write source (an omitted source means
  that source; an omitted list, which means "every source", is narrowed to it);
- a kind that touches every source at once (``dream``, ``session_cursor_purge``,
  kinds registered without a reach) is for callers that read every source: the CLI,
  MCP over stdio and staff, never a key;
- a local-only kind (``import_mail``, ``import_markdown``: they read a server path)
  and a local param (``backup``'s ``directory`` and ``keep``) are refused from a key,
  so a key never picks a filesystem path (``backup`` writes to ``BRAIN_BACKUP_DIR``).

A key sees, cancels and retries only the jobs it could have asked for
(``job_visible``): another source's jobs answer ``not_found`` as a missing one does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db.models import Q

from brain.access import EVERY_SOURCE
from brain.exceptions import InvalidParams, ScopeDenied
from jobs.registry import (
    EVERY,
    NO_SOURCE,
    ONE_SOURCE,
    SOURCE_LIST,
    job_kinds,
    kind_spec,
)

if TYPE_CHECKING:
    from brain.access import Caller

LOCAL_HINT = (
    "Run it on the server (`manage.py run_job {kind} …`, or the command of the same "
    "name) or from the console as staff."
)


def job_authorise(
    *, caller: Caller, kind: str, params: dict[str, Any]
) -> dict[str, Any]:
    """Check that ``caller`` may have a ``kind`` job run with ``params`` and return
    the params to store: those given, with a key's omitted source filled in (its
    write source) and a ``source_ids`` string made a list.

    Raises ``InvalidParams`` for an unknown kind or a source param of the wrong
    shape, ``ScopeDenied`` (HTTP 403 ``scope_denied``) for a source the caller may
    not write, an every-source or local-only kind, or a local param from a key.
    Nothing is stored before this passes (SPEC §8).
    """
    spec = kind_spec(kind)
    params = dict(params or {})
    local = caller.may("local")
    if spec.local_only and not local:
        raise ScopeDenied(
            f"A {kind} job reads a folder on the server; an API key may not start one.",
            suggestion=LOCAL_HINT.format(kind=kind),
            detail={"kind": kind, "local_only": True},
        )
    named = sorted(p for p in spec.local_params if params.get(p) not in (None, ""))
    if named and not local:
        raise ScopeDenied(
            f"A {kind} job started with an API key takes no {', '.join(named)}: it "
            "uses the server's configured folder and retention.",
            suggestion=f"Omit {', '.join(named)}, or " + LOCAL_HINT.format(kind=kind),
            detail={"kind": kind, "refused_params": named},
        )
    if spec.reach == ONE_SOURCE:
        _one_source(caller, kind, params, local=local)
    elif spec.reach == SOURCE_LIST:
        _source_list(caller, kind, params)
    elif spec.reach == EVERY and not caller.may("write", source_id=EVERY_SOURCE):
        raise ScopeDenied(
            f"A {kind} job touches every source; this key writes only to source "
            f"'{caller.write_source_id}'.",
            suggestion=LOCAL_HINT.format(kind=kind),
            detail={"kind": kind, "write_source": caller.write_source_id},
        )
    return params


def _one_source(
    caller: Caller, kind: str, params: dict[str, Any], *, local: bool
) -> None:
    """``params.source_id`` must be a source the caller may write (a key's omitted
    one is its write source; a local caller's stays missing and the job says so)."""
    value = params.get("source_id")
    if value in (None, ""):
        if local:
            return
        value = caller.write_source().id
    if not isinstance(value, str):
        raise _bad_shape(kind, "source_id", "a source id")
    params["source_id"] = caller.write_source(value, item=f"The {kind} job").id


def _source_list(caller: Caller, kind: str, params: dict[str, Any]) -> None:
    """``params.source_ids`` must all be writable; omitted means every source, which
    only a caller that writes every source gets (a key gets its write source)."""
    value = params.get("source_ids")
    if value in (None, "", []):
        if not caller.may("write", source_id=EVERY_SOURCE):
            params["source_ids"] = [caller.write_source().id]
        return
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad_shape(kind, "source_ids", "a list of source ids")
    params["source_ids"] = [
        caller.write_source(sid, item=f"The {kind} job").id for sid in value
    ]


def _bad_shape(kind: str, name: str, shape: str) -> InvalidParams:
    return InvalidParams(
        f"Job kind {kind!r}: the parameter {name!r} must be {shape}.",
        suggestion=f"Pass {name} as {shape}, or omit it for the key's write source.",
        detail={"kind": kind, "field": name},
    )


def job_visible(caller: Caller) -> Q:
    """The jobs ``caller`` may see, cancel and retry, as a filter on ``Job``: every
    job for a caller that writes every source; for a key, the jobs on its write
    source (``source_id`` equal to it, or ``source_ids`` exactly it) and the jobs of
    kinds that touch no source (backups). Never another source's jobs."""
    if caller.may("write", source_id=EVERY_SOURCE):
        return Q()
    kinds = job_kinds()

    def of(reach: str) -> list[str]:
        return [name for name, spec in kinds.items() if spec.reach == reach]

    visible = Q(kind__in=of(NO_SOURCE))
    own = caller.write_source_id
    if own is not None and caller.may("write", source_id=own):
        visible |= Q(kind__in=of(ONE_SOURCE), params__source_id=own)
        visible |= Q(kind__in=of(SOURCE_LIST), params__source_ids=[own])
    return visible
