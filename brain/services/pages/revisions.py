"""A page's revision and the stale-base check of the write path (SPEC §4 ``conflict``).

A page's revision is its content hash (``Page.content_hash``: title, type, body and
frontmatter): every change of content changes it, a no-op write keeps it, and two
readers who saw the same content hold the same revision. A writer that read the
page sends it back as ``base_revision``; ``check_base_revision`` refuses the write
when the page changed since (``Conflict``, HTTP 409). ``page_write`` calls it on the
row it locked, inside its transaction, for every transport (HTTP, MCP, console
editor, admin form): the one home of the rule.
"""

from __future__ import annotations

import difflib

from brain.exceptions import Conflict
from brain.models import Page, PageRevision

#: The longest diff a conflict carries (characters); a longer one is cut with a note.
MAX_DIFF_CHARS = 20_000


def page_revision(page: Page) -> str:
    """The page's current revision (an opaque string: its content hash), as
    ``get_page`` returns it and ``base_revision`` takes it back (SPEC §4)."""
    return page.content_hash


def body_at_revision(page: Page, revision: str) -> str | None:
    """The body ``page`` had at ``revision``, rebuilt from its ``PageRevision`` rows
    (each stores the body before its write and the hash after it): the newest
    revision row with that hash, then the body the next write found (or the current
    body when none followed). None when the page never had that revision. Two
    queries at most; read only on a conflict."""
    if revision == page.content_hash:
        return page.body
    at = (
        PageRevision.objects.filter(page=page, content_hash=revision)
        .order_by("-created_at", "-id")
        .values_list("created_at", "id")
        .first()
    )
    if at is None:
        return None
    created_at, pk = at
    following = (
        PageRevision.objects.filter(page=page, created_at__gte=created_at)
        .exclude(created_at=created_at, id__lte=pk)
        .order_by("created_at", "id")
        .values_list("previous_body", flat=True)
        .first()
    )
    return page.body if following is None else following


def revision_diff(before: str, after: str, *, base: str, current: str) -> str:
    """The unified diff (text, ``\\n``-joined, 3 lines of context) from ``before``
    (the body at revision ``base``) to ``after`` (at ``current``), cut at
    ``MAX_DIFF_CHARS``."""
    diff = "\n".join(
        difflib.unified_diff(
            before.splitlines(),
            after.splitlines(),
            fromfile=f"base_revision {base[:12]}",
            tofile=f"current_revision {current[:12]}",
            lineterm="",
        )
    )
    if len(diff) > MAX_DIFF_CHARS:
        diff = diff[:MAX_DIFF_CHARS] + "\n… (diff cut; read the page for the rest)"
    return diff


def check_base_revision(page: Page, base_revision: str | None) -> None:
    """Refuse a write based on a stale read (SPEC §4): raise ``Conflict`` when
    ``base_revision`` is given and is not ``page``'s current revision. ``detail``:
    ``slug``, ``source``, ``base_revision``, ``current_revision``, ``base_known``
    (False when the page never had that revision: the diff is then from an empty
    body) and ``diff`` (``revision_diff`` from the base's body to the current one).
    No ``base_revision`` (None) never conflicts: appends without one commute.
    ``page`` is the live row the caller locked."""
    current = page_revision(page)
    if base_revision is None or base_revision == current:
        return
    before = body_at_revision(page, base_revision)
    raise Conflict(
        f"Page {page.slug!r} changed since revision {base_revision[:12]!r} was read: "
        f"its current revision is {current!r}.",
        suggestion=(
            "Read the page again (get_page), merge your change into the current "
            "body, and write it with base_revision set to the current revision."
        ),
        detail={
            "slug": page.slug,
            "source": page.source_id,
            "base_revision": base_revision,
            "current_revision": current,
            "base_known": before is not None,
            "diff": revision_diff(
                before or "", page.body, base=base_revision, current=current
            ),
        },
    )
