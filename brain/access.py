"""Who is calling, and what they may read and write: the one authorisation place
(SPEC §8).

A ``Caller`` is built once per request (from an API key, a staff session, or the local
CLI / MCP-over-stdio) and passed to every service, whatever the transport.
``Caller.may(action, source_id=, visibility=)`` is the predicate every decision rests
on; ``Caller.read_scope`` turns "the sources a request asked for" into the sources it
may read (for queries), ``Caller.write_source`` names the source a write may go to,
and ``Caller.check_existing_write`` refuses a write to a page the caller cannot read
with the answer a read gives (``page_not_found``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.db.models import Q

from brain.exceptions import NotFound, ScopeDenied
from brain.models import Source, Visibility

if TYPE_CHECKING:
    from django.db.models import QuerySet

DEFAULT_SOURCE_ID = "default"
#: ``Caller.may(..., source_id=EVERY_SOURCE)``: an action that touches every source at
#: once (dream, purges): only callers that read every source (local and staff) may.
EVERY_SOURCE = "*"


@dataclass(frozen=True)
class ReadScope:
    """The resolved read scope of one request: source ids and whether private rows
    (pages, facts, loop quotes) may be returned."""

    source_ids: tuple[str, ...]
    include_private: bool

    @property
    def visibilities(self) -> tuple[str, ...]:
        """Visibility values this scope may read."""
        if self.include_private:
            return (Visibility.WORLD, Visibility.PRIVATE)
        return (Visibility.WORLD,)


@dataclass(frozen=True)
class Caller:
    """The identity behind a request.

    ``readable_source_ids`` None means every source (local trusted callers and staff).
    ``remote`` callers are HTTP/MCP-over-HTTP keys that are not trusted (SPEC §8):
    world-visibility only, redacted loops, server-stamped provenance, no relations
    auto-created from their free text.
    """

    actor: str
    client: str = ""
    trusted: bool = False
    scopes: frozenset[str] = frozenset({"read"})
    write_source_id: str | None = DEFAULT_SOURCE_ID
    readable_source_ids: frozenset[str] | None = None
    api_key_id: int | None = None
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def remote(self) -> bool:
        """True for untrusted HTTP/MCP callers (SPEC §8)."""
        return not self.trusted

    def can(self, scope: str) -> bool:
        """True when the caller holds ``scope`` (``admin`` implies all)."""
        return scope in self.scopes or "admin" in self.scopes

    def require(self, scope: str) -> None:
        """Raise ``ScopeDenied`` unless the caller holds ``scope``."""
        if not self.can(scope):
            raise ScopeDenied(
                f"This key lacks the '{scope}' scope.",
                suggestion=f"Ask an admin to add '{scope}' to the key in admin → API keys.",
                detail={"required_scope": scope},
            )

    def read_scope(
        self,
        requested: Iterable[str] | None = None,
        *,
        include_private: bool | None = None,
    ) -> ReadScope:
        """Resolve the sources a read covers; the one scoping function (SPEC §8).

        ``requested`` (explicit source ids) must all be readable, else ``ScopeDenied``
        (for a caller without a key that reads every source, an unknown id raises
        ``NotFound`` naming the sources that exist);
        none requested means the federated sources the caller may read plus the
        caller's own write source (a caller always reads back what it wrote). Private
        rows only for trusted callers, and only if ``include_private`` is not False.
        """
        self.require("read")
        wanted = [s for s in (requested or []) if s]
        if wanted:
            unknown = set(wanted) - set(
                Source.objects.filter(id__in=wanted).values_list("id", flat=True)
            )
            denied = (
                set()
                if self.readable_source_ids is None
                else set(wanted) - self.readable_source_ids
            )
            if unknown and self.api_key_id is None and self.readable_source_ids is None:
                # No key (CLI, MCP over stdio, staff): nothing to probe, say it.
                existing = Source.objects.order_by("id").values_list("id", flat=True)
                raise NotFound(
                    f"Source(s) {sorted(unknown)} do not exist.",
                    suggestion="Name an existing source: "
                    + (", ".join(existing[:20]) or "there are none yet")
                    + ".",
                    detail={"sources": sorted(unknown)},
                )
            if unknown or denied:
                # One message for both, so a key cannot probe which sources exist.
                raise ScopeDenied(
                    f"Source(s) {sorted(unknown | denied)} are not readable with this key.",
                    suggestion="Ask for a source this key may read, or omit 'source'.",
                    detail={"sources": sorted(unknown | denied)},
                )
            ids = tuple(sorted(set(wanted)))
        else:
            own = self.write_source_id if self.can("write") else None
            qs = Source.objects.filter(Q(federated=True) | Q(id=own))
            if self.readable_source_ids is not None:
                qs = qs.filter(id__in=self.readable_source_ids)
            ids = tuple(qs.order_by("id").values_list("id", flat=True))
        private = self.trusted and include_private is not False
        return ReadScope(source_ids=ids, include_private=private)

    def all_readable_scope(self) -> ReadScope:
        """Every source the caller may read, federated or not (waiting, loops)."""
        self.require("read")
        qs = Source.objects.all()
        if self.readable_source_ids is not None:
            qs = qs.filter(id__in=self.readable_source_ids)
        ids = tuple(qs.order_by("id").values_list("id", flat=True))
        return ReadScope(source_ids=ids, include_private=self.trusted)

    def may(
        self, action: str, *, source_id: str = EVERY_SOURCE, visibility: str = "world"
    ) -> bool:
        """The one authorisation predicate (SPEC §8): may this caller ``read`` or
        ``write`` a row of ``source_id`` with ``visibility``, or act ``local``-ly?

        Read: the read scope, a readable source (None = every source), and a world
        row unless the caller is trusted. Write: the write scope, a write source
        (none = no writes at all), the row's source is the write source (callers
        with every source readable, i.e. local and staff, may write any source), and
        the row is readable (an update never touches what a read would not show).
        ``source_id=EVERY_SOURCE`` asks about an action on every source at once
        (a key never may). Local: name a path on the server (a folder to import or
        back up into) or run a local-only operation: only callers without a key
        (CLI, MCP over stdio, staff), never an API key, whatever its scopes (issue 46).
        """
        if action == "local":
            return self.api_key_id is None
        if action == "read":
            return (
                self.can("read")
                and (
                    self.readable_source_ids is None
                    or source_id in self.readable_source_ids
                )
                and (self.trusted or visibility == Visibility.WORLD)
            )
        if action == "write":
            return (
                self.can("write")
                and self.write_source_id is not None
                and (
                    self.readable_source_ids is None
                    or source_id == self.write_source_id
                )
                and (self.trusted or visibility == Visibility.WORLD)
            )
        raise ValueError(f"Unknown action {action!r}")

    def write_source(
        self, requested: str | None = None, *, item: str | None = None
    ) -> Source:
        """Return the source a write goes to: ``requested`` or the caller's write
        source, when ``may("write")`` allows it (SPEC §8).

        ``item`` names what is written when ``requested`` is the source of an
        existing object rather than one the caller sent ("Fact 4", "Loop 21"): the
        refusal then says where that object lives and how to get a key for it,
        instead of "omit 'source'".

        Raises ``ScopeDenied`` without the write scope, without a write source (a
        key without one writes nothing), or for a source the caller may not write.
        """
        self.require("write")
        if self.write_source_id is None:
            raise ScopeDenied(
                "This key has no write source, so it may not write.",
                suggestion="Ask an admin to set a write source on the key in "
                "admin → API keys (or use a read-only key for reads).",
                detail={"write_source": None},
            )
        target = requested or self.write_source_id
        if item is not None and not self.may("write", source_id=target):
            raise ScopeDenied(
                f"{item} is in source '{target}'; this key writes only to source "
                f"'{self.write_source_id}'.",
                suggestion=(
                    f"Use a key whose write source is '{target}': an admin sets it "
                    "in admin → API keys, or creates one with `manage.py apikey "
                    f"create --name NAME --scopes read,write --write-source "
                    f"{target}`. Staff can also change it in the console."
                ),
                detail={"item_source": target, "write_source": self.write_source_id},
            )
        if not self.may("write", source_id=target):
            raise ScopeDenied(
                f"This key writes only to source '{self.write_source_id}'.",
                suggestion=f"Omit 'source' or use '{self.write_source_id}'.",
                detail={"write_source": self.write_source_id},
            )
        source = Source.objects.filter(id=target).first()
        if source is None:
            raise ScopeDenied(
                f"Source '{target}' is not writable.",
                suggestion="Create the source in admin → Sources first.",
            )
        return source

    def check_existing_write(
        self, *, source_id: str, visibility: str, slug: str
    ) -> None:
        """Refuse a write to an existing page the caller cannot read with exactly the
        answer a read of that slug gives (``NotFound``): nothing written, nothing
        revealed (SPEC §8). Call after ``write_source``."""
        if not self.may("read", source_id=source_id, visibility=visibility):
            raise page_not_found(slug)


def page_not_found(slug: str, source: str | None = None) -> NotFound:
    """The one ``not_found`` answer for a page slug, shared by reads and writes, so a
    refused write cannot be told apart from a missing page (SPEC §8)."""
    return NotFound(
        f"No page {slug!r} in the sources you can read.",
        suggestion="Use search to find the right slug, or add_page to create it.",
        detail={"slug": slug, "source": source},
    )


def scope_queryset(
    qs: QuerySet,
    scope: ReadScope,
    *,
    source_field: str = "source_id",
    visibility_field: str | None = "visibility",
) -> QuerySet:
    """Filter any queryset to a read scope: its sources and allowed visibilities."""
    qs = qs.filter(**{f"{source_field}__in": scope.source_ids})
    if visibility_field and not scope.include_private:
        qs = qs.filter(**{visibility_field: Visibility.WORLD})
    return qs


def local_caller(*, actor: str = "cli", sources: Sequence[str] | None = None) -> Caller:
    """A trusted local caller (CLI, MCP over stdio): all scopes, every source unless
    ``sources`` narrows it."""
    return Caller(
        actor=actor,
        client=actor,
        trusted=True,
        scopes=frozenset({"read", "write", "admin"}),
        write_source_id=DEFAULT_SOURCE_ID,
        readable_source_ids=frozenset(sources) if sources else None,
    )
