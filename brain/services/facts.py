"""Fact writes (SPEC §2.4): remember with dedup and supersession, forget, expiry.

Facts are never deleted. Forget and supersession set ``expired_at`` (and
``superseded_by``) and write an ``AuditEvent``; every reader filters on the active
condition (``brain.selectors_facts.fact_active_q``), so an expired fact never comes
back (no ghosts).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.db import connection, transaction
from django.db.models import Count, F, Max, Min, Q, QuerySet
from django.db.models.fields.json import KT
from django.db.models.functions import Lower, Trim
from django.utils import timezone
from django_q.tasks import async_task

from brain.access import Caller, ReadScope, scope_queryset
from brain.embeddings import current_model, embed_texts
from brain.exceptions import InvalidParams, NotFound, ProvenanceRequired
from brain.models import Alias, AuditEvent, Fact, Page, RawRecord, Source, Visibility
from brain.precedence import trusted_over
from brain.selectors_facts import fact_active_q
from brain.services import fact_meaning
from brain.services.entities import entity_resolve
from brain.services.fact_slots import (
    DUPLICATE,
    SUPERSEDE,
    FactSlot,
    fact_slot_derive,
    fact_slot_offline,
    normalize_subject,
    slot_decision,
)
from brain.text import slugify_title, validate_slug
from brain.timestamps import MAX_TIMESTAMP, MIN_TIMESTAMP, timestamp_in_range

# Candidates compared with a new fact: the newest active facts of its subject bucket
# (same source and entity, or same unresolved entity reference, or no entity).
DEDUP_SCAN = 500
# The nearest live facts the meaning stage compares a new fact with (SPEC §2.4).
MEANING_SCAN = 20
PROVENANCE_MAX = 500
FACT_MAX = 4000
REASON_MAX = 500

_TTL_RELATIVE = re.compile(r"^\s*(\d{1,6})\s*([dhm])\s*$", re.IGNORECASE)
_ISO_DURATION = re.compile(
    r"^P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?"
    r"(?:\d+S)?)?$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class FactWrite:
    """Result of ``fact_remember``: the stored (or matched) fact, the SPEC §4 status
    (``inserted`` | ``duplicate`` | ``superseded``), the fact it superseded, the
    entity slug it was filed under and whether dedup ran without embeddings."""

    fact: Fact
    status: str
    entity_slug: str | None
    degraded_dedup: bool
    superseded: Fact | None = None

    @property
    def status_text(self) -> str:
        """A one-line human reading of ``status``."""
        if self.status == "duplicate":
            return f"Already known as fact {self.fact.pk}; nothing was written."
        if self.status == "superseded" and self.superseded is not None:
            return (
                f"Stored as fact {self.fact.pk}; it supersedes fact "
                f"{self.superseded.pk}, which is now expired."
            )
        suffix = (
            " (dedup skipped: no embeddings available)" if self.degraded_dedup else ""
        )
        return f"Stored as new fact {self.fact.pk}.{suffix}"


def normalize_fact_text(text: str) -> str:
    """Comparison form of a fact: NFKC, lower-case, whitespace collapsed, trailing
    punctuation dropped."""
    value = unicodedata.normalize("NFKC", text or "").lower()
    return re.sub(r"\s+", " ", value).strip().rstrip(".!;,: ")


def parse_ttl(ttl: str | None, *, now: datetime | None = None) -> datetime | None:
    """Turn a ``remember`` ttl into ``valid_until`` (UTC) (SPEC §4).

    Accepts ``30d``, ``12h``, ``45m`` (relative to ``now``) or an absolute ISO 8601
    timestamp (naive means UTC) in the future. An ISO 8601 duration such as ``P30D``
    is refused with a suggestion showing ``30d``. Raises ``InvalidParams``.
    """
    if ttl is None or not str(ttl).strip():
        return None
    now = now or timezone.now()
    raw = str(ttl).strip()
    match = _TTL_RELATIVE.match(raw)
    if match:
        amount, unit = int(match.group(1)), match.group(2).lower()
        if amount <= 0:
            raise InvalidParams(
                f"ttl {raw!r} must be positive.",
                suggestion="Use e.g. '30d', '12h' or '45m'.",
                detail={"ttl": raw},
            )
        delta = {
            "d": timedelta(days=amount),
            "h": timedelta(hours=amount),
            "m": timedelta(minutes=amount),
        }[unit]
        return now + delta
    duration = _ISO_DURATION.match(raw)
    if duration and raw.upper() not in ("P", "PT"):
        raise InvalidParams(
            f"ttl {raw!r} is an ISO 8601 duration, which remember does not accept.",
            suggestion=f"Use the short form instead: ttl '{_duration_hint(duration)}' "
            "(or '12h', '45m', or an absolute ISO timestamp).",
            detail={
                "ttl": raw,
                "accepted": ["<n>d", "<n>h", "<n>m", "ISO 8601 timestamp"],
            },
        )
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidParams(
            f"ttl {raw!r} is not understood.",
            suggestion="Use '30d', '12h', '45m' or an ISO timestamp such as "
            "'2030-01-31T18:00:00Z'.",
            detail={"ttl": raw},
        ) from None
    when = timestamp_in_range(when, field="ttl")
    if when <= now:
        raise InvalidParams(
            f"ttl {raw!r} is in the past.",
            suggestion="Give a future timestamp, or forget the fact instead.",
            detail={"ttl": raw},
        )
    return when


def _duration_hint(match: re.Match[str]) -> str:
    weeks, days = int(match.group("w") or 0), int(match.group("d") or 0)
    hours, minutes = int(match.group("h") or 0), int(match.group("m") or 0)
    if weeks or days:
        return f"{weeks * 7 + days + (1 if hours or minutes else 0)}d"
    if hours:
        return f"{hours + (1 if minutes else 0)}h"
    return f"{minutes or 30}m" if minutes else "30d"


def _validate(
    *,
    text: str | None,
    provenance: str | None,
    kind: str | None,
    visibility: str | None,
    confidence: float,
) -> tuple[str, str, str, str | None]:
    if provenance is None:
        raise InvalidParams(
            "remember needs 'provenance'.",
            suggestion="Say where the fact comes from, e.g. provenance: 'user said so in "
            "chat 2026-05-01'.",
            detail={"fields": [{"field": "provenance", "problem": "missing"}]},
        )
    if not provenance.strip():
        raise ProvenanceRequired(
            "provenance is blank.",
            suggestion="Give a short non-blank provenance, e.g. 'email from Jane, "
            "2026-05-01' or 'user stated in conversation'.",
            detail={"field": "provenance"},
        )
    if len(provenance) > PROVENANCE_MAX:
        raise InvalidParams(
            f"provenance is longer than {PROVENANCE_MAX} characters.",
            suggestion="Shorten it; link to the evidence instead of quoting it.",
            detail={"field": "provenance", "max": PROVENANCE_MAX},
        )
    clean = " ".join((text or "").split())
    if not clean:
        raise InvalidParams(
            "The fact is empty.",
            suggestion="Send the fact as one short sentence in 'fact'.",
            detail={"field": "fact"},
        )
    if len(clean) > FACT_MAX:
        raise InvalidParams(
            f"The fact is longer than {FACT_MAX} characters.",
            suggestion="Split it into short facts, or write a page instead.",
            detail={"field": "fact", "max": FACT_MAX},
        )
    kind = kind or Fact.Kind.FACT
    if kind not in Fact.Kind.values:
        raise InvalidParams(
            f"Unknown fact kind {kind!r}.",
            suggestion=f"Use one of: {', '.join(Fact.Kind.values)}.",
            detail={"field": "kind", "allowed": list(Fact.Kind.values)},
        )
    if visibility is not None and visibility not in Visibility.values:
        raise InvalidParams(
            f"Unknown visibility {visibility!r}.",
            suggestion="Use 'world' or 'private'.",
            detail={"field": "visibility", "allowed": list(Visibility.values)},
        )
    if not 0.0 <= confidence <= 1.0:
        raise InvalidParams(
            "confidence must be between 0 and 1.",
            suggestion="Use a value such as 0.85.",
            detail={"field": "confidence"},
        )
    return clean, provenance.strip(), kind, visibility


def _entity_target(
    *,
    source: Source,
    caller: Caller,
    entity: str | Page | None,
    anywhere_readable: bool = False,
) -> tuple[Page | None, str | None]:
    """Resolve ``entity`` to (page, slug), or (None, fallback reference slug) when no
    page matches.

    The write source is tried first; with ``anywhere_readable`` (a caller that let
    the write source default, i.e. the ``remember`` verb) a miss there is resolved
    in every source the caller may read (``Caller.all_readable_scope``, private
    pages only for trusted callers), so a fact named after a readable person page
    of a mailbox source is filed under that page rather than a dangling reference
    (SPEC §2.4, §8: linking a fact to a page needs only read access to the page).
    A page of the write source that a remote caller created yields to a page a
    trusted writer created elsewhere (``brain.precedence.trusted_over``), so a
    planted look-alike cannot collect the facts meant for the genuine page."""
    if entity is None or (isinstance(entity, str) and not entity.strip()):
        return None, None
    if isinstance(entity, Page):
        return entity, entity.slug
    scope = ReadScope(source_ids=(source.id,), include_private=caller.trusted)
    page = entity_resolve(scope=scope, name=entity).page
    if anywhere_readable and (page is None or page.created_by_remote):
        wider = entity_resolve(scope=caller.all_readable_scope(), name=entity).page
        page = trusted_over(page, wider)
    if page is not None:
        return page, page.slug
    raw = entity.strip().lower()
    try:
        ref = validate_slug(raw)
    except InvalidParams:
        ref = slugify_title(entity) or raw[:255]
    return None, ref


def _stamped_evidence(
    caller: Caller,
    evidence: dict[str, Any] | None,
    now: datetime,
    entity_ref: str | None,
    entity: Page | str | None,
) -> dict[str, Any]:
    """A new fact's ``evidence``: the caller's own plus who wrote it and when
    (``stamped``), and, for a fact about a name without a page (``entity_ref``,
    the slug it waits on), the name as given, resolved again on attach."""
    out = {
        **(evidence or {}),
        "stamped": {
            "actor": caller.actor,
            "client": caller.client,
            "remote": caller.remote,
            "at": now.isoformat(),
        },
    }
    if entity_ref:
        out["entity_ref"] = entity_ref
        if isinstance(entity, str):
            out["entity_name"] = " ".join(entity.split())[:255]
    return out


def _slot_read(
    bucket: QuerySet[Fact],
    clean: str,
    entity_name: str | None,
    kind: str,
    slot: str | None,
    value: str | None,
    use_llm: bool,  # noqa: FBT001 - private stage of fact_remember
) -> FactSlot:
    """The new fact's slot and value (``fact_slot_derive``, knowing the bucket's
    slots), its subject read relative to the entity (SPEC §2.4)."""
    known = list(bucket.exclude(slot="").values_list("slot", flat=True)[:50])
    read = fact_slot_derive(
        text=clean,
        entity=entity_name,
        kind=kind,
        slot=slot,
        value=value,
        known_slots=known,
        use_llm=use_llm,
    )
    return replace(read, subject=_relative_subject(read.subject, entity_name))


def _remembered_audit(
    caller: Caller,
    fact: Fact,
    entity_slug: str | None,
    read: FactSlot,
    *,
    degraded: bool,
) -> None:
    """The ``fact_remembered`` audit row of a new fact."""
    AuditEvent.objects.create(
        actor=caller.actor,
        action=AuditEvent.Action.FACT_REMEMBERED,
        source=fact.source,
        target_type="fact",
        target_id=str(fact.pk),
        extra_data={
            "kind": fact.kind,
            "entity": entity_slug,
            "slot": read.slot,
            "slot_method": read.method,
            "degraded_dedup": degraded,
        },
    )


def fact_remember(
    *,
    caller: Caller,
    text: str | None,
    provenance: str | None,
    entity: str | Page | None = None,
    kind: str | None = None,
    ttl: str | None = None,
    valid_until: datetime | None = None,
    visibility: str | None = None,
    confidence: float = 1.0,
    source: Source | None = None,
    raw_record: RawRecord | None = None,
    evidence: dict[str, Any] | None = None,
    slot: str | None = None,
    value: str | None = None,
    use_llm: bool = True,
    valid_from: datetime | None = None,
) -> FactWrite:
    """Store a fact with dedup and supersession by slot (SPEC §2.4, §4 ``remember``).

    ``source`` defaults to the caller's write source (``ScopeDenied`` without the
    write scope). ``entity`` (name, slug or page) is resolved inside that source with
    the ``entity()`` precedence, then (when ``source`` was not given) in every source
    the caller may read, so the fact is filed under the readable page the caller
    named wherever it lives (the fact itself stays in the write source; a page of
    the write source a remote caller created yields to one a trusted writer
    created elsewhere, ``brain.precedence.trusted_over``); an
    unresolved name is kept as ``evidence.entity_ref`` and echoed as the slug.
    ``visibility`` defaults to the source's default (``Source.page_visibility``, as
    for pages: private in mail sources, world in harness and markdown ones, SPEC §8).
    ``ttl`` (``30d``/``12h``/``45m``/ISO timestamp) or
    ``valid_until`` sets the validity end; ``valid_from`` defaults to now.

    The fact's subject, slot and value come from ``slot``/``value`` when given, else
    the LLM when configured and ``use_llm``, else the offline reader
    (``brain.services.fact_slots``). It is compared with the active facts of the same
    subject bucket the caller may read (``slot_decision``): same slot, value, kind
    and polarity (or an identical text, or a paraphrase at cosine ≥ 0.95 when a side
    has no canonical slot) → ``duplicate`` (nothing written, the existing fact
    returned); same slot and kind, another value → ``superseded`` (every such fact
    expires with ``superseded_by`` set and an audit row). Other slots, subjects or
    kinds never interact. Where the rules leave the live facts of the subject
    undecided, the meaning stage (``brain.services.fact_meaning``, SPEC §2.4 turn
    3) compares the sentences with the embedding model: a changed amount or date,
    a leaving event or a switch close in meaning supersedes, a close paraphrase is
    a duplicate; without an embedding model the rules alone decide.
    ``degraded_dedup`` is true when there was neither an
    embedding nor a canonical slot (a plain insert unless the text is identical).

    Raises ``InvalidParams`` (missing provenance, bad kind/visibility/ttl, empty
    fact, a ``value`` without ``slot``), ``ProvenanceRequired`` (blank provenance),
    ``ScopeDenied``.
    """
    clean, prov, kind, visibility = _validate(
        text=text,
        provenance=provenance,
        kind=kind,
        visibility=visibility,
        confidence=confidence,
    )
    if value is not None and not (slot or "").strip():
        raise InvalidParams(
            "'value' was given without 'slot'.",
            suggestion="Send both, e.g. slot: 'employer', value: 'Acme', or neither.",
            detail={"fields": [{"field": "slot", "problem": "missing"}]},
        )
    now = timezone.now()
    until = (
        timestamp_in_range(valid_until, field="valid_until")
        if valid_until is not None
        else parse_ttl(ttl, now=now)
    )
    anywhere_readable = source is None
    source = source or caller.write_source()
    # The source's default, as for a page written there (SPEC §8).
    visibility = visibility or source.page_visibility
    page, entity_slug = _entity_target(
        source=source,
        caller=caller,
        entity=entity,
        anywhere_readable=anywhere_readable,
    )
    vectors, model_name = embed_texts([clean])
    vector = vectors[0] if vectors else None
    facts_evidence = _stamped_evidence(
        caller, evidence, now, entity_slug if page is None else None, entity
    )

    with transaction.atomic():
        # Serialise writers per (source, entity) so two equal facts cannot both insert.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))",
                [f"fact:{source.id}:{page.pk if page else entity_slug or ''}"],
            )
        bucket = _bucket(
            caller=caller, source=source, page=page, entity_ref=entity_slug, now=now
        )
        entity_name = _entity_name(page, entity_slug)
        read = _slot_read(bucket, clean, entity_name, kind, slot, value, use_llm)
        duplicate, stale = _slot_match(
            bucket=bucket,
            entity_name=entity_name,
            text=clean,
            kind=kind,
            read=read,
            vector=vector,
            model=model_name,
        )
        if duplicate is not None:
            return FactWrite(
                fact=duplicate,
                status="duplicate",
                entity_slug=entity_slug,
                degraded_dedup=False,
            )
        degraded = vector is None and _weak_read(read)
        facts_evidence["slot"] = {"method": read.method}
        fact = Fact.objects.create(
            source=source,
            entity=page,
            text=clean,
            kind=kind,
            visibility=visibility,
            provenance=prov,
            raw_record=raw_record,
            evidence=facts_evidence,
            confidence=confidence,
            valid_from=valid_from or now,
            valid_until=until,
            embedding=vector,
            embedding_model=model_name if vector is not None else "",
            created_by=caller.actor,
            subject=read.subject,
            slot=read.slot,
            value=read.stored_value,
        )
        _remembered_audit(caller, fact, entity_slug, read, degraded=degraded)
        for old in stale:
            _supersede(old=old, new=fact, actor=caller.actor, now=now)
    first = stale[0] if stale else None
    if first is not None:
        first.refresh_from_db()
    return FactWrite(
        fact=fact,
        status="superseded" if stale else "inserted",
        entity_slug=entity_slug,
        degraded_dedup=degraded,
        superseded=first,
    )


def _supersede(
    *,
    old: Fact,
    new: Fact,
    actor: str,
    now: datetime,
    corrected: bool | None = None,
) -> None:
    """Expire ``old`` in favour of ``new`` (``superseded_by``), with an audit row.
    A correction (``corrected``; by default: ``new`` says it corrects ``old``,
    ``evidence.corrects``, as ``fact_correct`` writes it) is expired "corrected by
    <actor>" and its audit row names the corrector."""
    if corrected is None:
        corrected = (new.evidence or {}).get("corrects") == old.pk
    Fact.objects.filter(pk=old.pk, expired_at__isnull=True).update(
        expired_at=now,
        superseded_by=new,
        expired_reason=(
            f"corrected by {actor}" if corrected else f"superseded by #{new.pk}"
        )[:REASON_MAX],
        updated_at=now,
    )
    AuditEvent.objects.create(
        actor=actor,
        action=AuditEvent.Action.FACT_SUPERSEDED,
        source_id=new.source_id,
        target_type="fact",
        target_id=str(old.pk),
        extra_data={
            "superseded_by": new.pk,
            **({"corrected_by": actor} if corrected else {}),
            "old_text": old.text,
            "new_text": new.text,
            "slot": new.slot,
            "old_value": old.value,
            "new_value": new.value,
        },
    )


def _bucket(
    *,
    caller: Caller,
    source: Source,
    page: Page | None,
    entity_ref: str | None,
    now: datetime,
) -> QuerySet[Fact]:
    """The active facts a new fact of this entity is compared with: same source,
    same entity page (or the same unresolved reference, or none), visible to the
    caller."""
    qs = Fact.objects.filter(source=source).filter(fact_active_q(now=now))
    if not caller.trusted:
        qs = qs.filter(visibility=Visibility.WORLD)
    if page is not None:
        return qs.filter(entity=page)
    if entity_ref:
        return qs.filter(entity__isnull=True, evidence__entity_ref=entity_ref)
    return qs.filter(entity__isnull=True).exclude(evidence__has_key="entity_ref")


def _entity_name(page: Page | None, entity_ref: str | None) -> str | None:
    """The name the slot reader matches leading names against."""
    if page is not None:
        return page.title or page.slug
    return entity_ref or None


def _relative_subject(subject: str, entity_name: str | None) -> str:
    """Store the subject relative to the entity: ``@`` for the entity itself,
    ``@other`` for another name leading the text (``kit rowe|bo lind`` → ``@bo
    lind``), the name itself when there is no entity."""
    if not entity_name:
        return subject
    key = normalize_subject(entity_name)
    if subject == key:
        return "@"
    if subject.startswith(key + "|"):
        return "@" + subject[len(key) + 1 :]
    return "@" + subject


def _weak_read(read: FactSlot) -> bool:
    return not read.slot or read.slot.startswith(("do:", "is:"))


def fact_slot_of(fact: Fact, *, entity_name: str | None = None) -> FactSlot:
    """The slot of a stored fact: its ``subject/slot/value`` columns, or, for a fact
    stored before slots existed (empty ``slot``), read offline from its text."""
    if fact.slot:
        return FactSlot.from_stored(
            subject=fact.subject, slot=fact.slot, value=fact.value, text=fact.text
        )
    read = fact_slot_offline(fact.text, entity=entity_name, kind=fact.kind)
    return replace(read, subject=_relative_subject(read.subject, entity_name))


def _slot_match(
    *,
    bucket: QuerySet[Fact],
    entity_name: str | None,
    text: str,
    kind: str,
    read: FactSlot,
    vector: list[float] | None,
    model: str = "",
) -> tuple[Fact | None, list[Fact]]:
    """(the fact ``text`` duplicates, or None; the facts it supersedes, nearest
    first) among the newest 500 facts of ``bucket`` (SPEC §2.4). ``model`` made
    ``vector``: only facts embedded by it are compared by cosine (issue 46)."""
    if vector is None and _weak_read(read):
        return None, []  # SPEC §2.4: no embedding and no slot → plain insert.
    rows = list(
        bucket.only(
            "pk",
            "text",
            "kind",
            "embedding",
            "embedding_model",
            "created_at",
            "subject",
            "slot",
            "value",
        ).order_by("-created_at", "-pk")[:DEDUP_SCAN]
    )
    if not rows:
        return None, []
    cosines = _cosines(rows, vector, model)
    norm = normalize_fact_text(text)
    order = sorted(range(len(rows)), key=lambda i: -(cosines[i] or 0.0))
    stale: list[Fact] = []
    for i in order:
        row = rows[i]
        decision = slot_decision(
            old=fact_slot_of(row, entity_name=entity_name),
            new=read,
            old_kind=row.kind,
            new_kind=kind,
            cosine=cosines[i],
            same_text=normalize_fact_text(row.text) == norm,
        )
        if decision == DUPLICATE:
            return row, []
        if decision == SUPERSEDE:
            stale.append(row)
    if stale or vector is None:
        return None, stale
    return _meaning_match(
        rows=[rows[i] for i in order[:MEANING_SCAN]],
        entity_name=entity_name,
        text=text,
        kind=kind,
        read=read,
    )


def meaning_subject_words(entity_name: str | None, subject: str) -> frozenset[str]:
    """The words of the subject's name that the meaning stage leaves out of a
    sentence: the entity's name and the subject the reader found."""
    names = f"{normalize_subject(entity_name)} {subject.lstrip('@').replace('|', ' ')}"
    return frozenset(w for w in names.lower().split() if w)


def _meaning_match(
    *,
    rows: list[Fact],
    entity_name: str | None,
    text: str,
    kind: str,
    read: FactSlot,
) -> tuple[Fact | None, list[Fact]]:
    """The meaning stage (SPEC §2.4, turn 3; ``brain.services.fact_meaning``) over
    the live facts of the same subject and kind that the rules left undecided,
    nearest first: (duplicate or None, facts superseded). Without an embedding
    model, (None, []) (the rules alone decided)."""
    if not read.subject:
        return None, []
    # Under an entity every live fact of the bucket is about it (the reader may
    # take "Milk from Acme" for another subject); without one, the subjects the
    # reader found must agree.
    same = [
        row
        for row in rows
        if row.kind == kind
        and (
            entity_name
            or fact_slot_of(row, entity_name=entity_name).subject == read.subject
        )
    ]
    if not same:
        return None, []
    words = meaning_subject_words(entity_name, read.subject)
    pairs = fact_meaning.pairs_for(text, [row.text for row in same], words)
    if pairs is None:
        return None, []
    stale: list[Fact] = []
    for row, pair in zip(same, pairs, strict=True):
        decision = fact_meaning.decide(pair, kind=kind)
        if decision == DUPLICATE and not stale:
            return row, []
        if decision == SUPERSEDE:
            stale.append(row)
    return None, stale


def _cosines(
    rows: list[Fact], vector: list[float] | None, model: str = ""
) -> list[float | None]:
    """Cosine of each row's embedding with ``vector`` (None where either is
    missing, or the row was embedded by another model than ``model``: vectors of
    two models are not comparable, issue 46); exact, in numpy, over at most 500
    rows of one entity."""
    if vector is None:
        return [None] * len(rows)
    query = np.asarray(vector, dtype=np.float32)
    qnorm = float(np.linalg.norm(query)) or 1.0
    out: list[float | None] = []
    for row in rows:
        if row.embedding is None or (model and row.embedding_model != model):
            out.append(None)
            continue
        emb = np.asarray(row.embedding, dtype=np.float32)
        denom = (float(np.linalg.norm(emb)) or 1.0) * qnorm
        out.append(float(emb @ query) / denom)
    return out


def fact_get_readable(*, caller: Caller, fact_id: str | int) -> Fact:
    """The fact ``fact_id`` if the caller may read it (any readable source, visibility
    by trust), else ``NotFound`` (the same answer for absent and invisible ids)."""
    try:
        pk = int(str(fact_id).strip())
    except (TypeError, ValueError):
        pk = None
    fact = None
    if pk is not None and pk > 0:
        scope = caller.all_readable_scope()
        fact = scope_queryset(Fact.objects.all(), scope).filter(pk=pk).first()
    if fact is None:
        raise NotFound(
            f"No fact with id {fact_id!r} is visible to this caller.",
            suggestion="Use the 'fact_id' values that recall returns.",
            detail={"id": str(fact_id)},
        )
    return fact


def fact_forget(
    *, caller: Caller, fact_id: str | int, reason: str | None = None
) -> tuple[Fact, bool]:
    """Expire a fact with a reason and an audit row; never deletes (SPEC §2.4, §4).

    Returns ``(fact, expired)``: ``expired`` is False when the fact was already
    expired (forget is idempotent). Raises ``NotFound`` for ids the caller cannot read
    and ``ScopeDenied`` without write access to the fact's source.
    """
    fact = fact_get_readable(caller=caller, fact_id=fact_id)
    caller.write_source(fact.source_id, item=f"Fact {fact.pk}")
    why = " ".join((reason or "").split())[:REASON_MAX] or "forgotten"
    now = timezone.now()
    with transaction.atomic():
        changed = Fact.objects.filter(pk=fact.pk, expired_at__isnull=True).update(
            expired_at=now, expired_reason=f"forgotten: {why}", updated_at=now
        )
        if changed:
            AuditEvent.objects.create(
                actor=caller.actor,
                action=AuditEvent.Action.FACT_FORGOTTEN,
                source_id=fact.source_id,
                target_type="fact",
                target_id=str(fact.pk),
                extra_data={"reason": why, "text": fact.text},
            )
    fact.refresh_from_db()
    return fact, bool(changed)


def fact_correct(*, caller: Caller, fact_id: str | int, text: str) -> Fact:
    """Correct a live fact by supersession, never in place (SPEC §2.4, §4): a new
    fact with ``text`` is remembered (same source, entity, kind and visibility;
    provenance "correction of fact #N"), and the old one is expired with
    ``superseded_by`` the new fact and ``expired_reason`` "corrected by <actor>",
    with a ``fact_superseded`` audit row naming the corrector. When an active fact
    already says ``text`` (``fact_remember``'s ``duplicate``), the old one is
    superseded by that fact. Returns the fact now in force.

    Raises ``NotFound`` (unreadable id), ``ScopeDenied`` (no write access to the
    fact's source) and ``InvalidParams`` (the fact is no longer live, or ``text``
    is empty or says the same thing)."""
    old = fact_get_readable(caller=caller, fact_id=fact_id)
    caller.write_source(old.source_id, item=f"Fact {old.pk}")
    if old.expired_at is not None:
        raise InvalidParams(
            f"Fact {old.pk} is no longer live ({old.expired_reason or 'expired'}).",
            suggestion="Correct the fact that replaced it.",
            detail={"id": str(old.pk)},
        )
    if normalize_fact_text(text or "") == normalize_fact_text(old.text):
        raise InvalidParams(
            "The correction says the same as the fact.",
            suggestion="Write the corrected fact, or forget it instead.",
            detail={"id": str(old.pk)},
        )
    with transaction.atomic():
        Fact.objects.select_for_update().filter(pk=old.pk).first()
        new = fact_remember(
            caller=caller,
            text=text,
            provenance=f"correction of fact #{old.pk}",
            entity=old.entity,
            kind=old.kind,
            visibility=old.visibility,
            source=old.source,
            evidence={**(old.evidence or {}), "corrects": old.pk},
            use_llm=False,
        ).fact
        if new.pk == old.pk:
            raise InvalidParams(
                "The correction says the same as the fact.",
                suggestion="Write the corrected fact, or forget it instead.",
                detail={"id": str(old.pk)},
            )
        # fact_remember may have superseded it already (same slot, other value, or
        # the meaning stage): its row then says "corrected by" already.
        if not Fact.objects.filter(pk=old.pk, superseded_by=new).exists():
            _supersede(
                old=old, new=new, actor=caller.actor, now=timezone.now(), corrected=True
            )
    return new


def _fact_audit(
    *, actor: str, action: str, fact_id: int, source_id: str, extra: dict[str, Any]
) -> AuditEvent:
    return AuditEvent(
        actor=actor,
        action=action,
        source_id=source_id,
        target_type="fact",
        target_id=str(fact_id),
        extra_data={"dream_generated": actor == "dream", **extra},
    )


def fact_supersede_duplicates(
    *, now: datetime | None = None, limit: int | None = None, actor: str = "dream"
) -> int:
    """Supersede exact duplicate active facts (same source, entity, kind, visibility
    and text, ignoring case and outer spaces) by the oldest of each group: the others
    get ``expired_at`` = ``now``, ``superseded_by`` the oldest and one
    ``fact_superseded`` audit row each (SPEC §2.4, §10). At most ``limit`` groups.
    Returns how many facts were superseded; nothing is deleted."""
    now = now or timezone.now()
    active = Fact.objects.filter(expired_at__isnull=True).filter(
        Q(valid_until__isnull=True) | Q(valid_until__gt=now)
    )
    groups = (
        active.annotate(norm=Lower(Trim("text")))
        .values("source_id", "entity_id", "kind", "visibility", "norm")
        .annotate(n=Count("id"), keep=Min("id"))
        .filter(n__gt=1)
        .order_by("keep")
    )
    audits: list[AuditEvent] = []
    duplicates = 0
    for group in groups[:limit] if limit else groups:
        dupes = list(
            active.annotate(norm=Lower(Trim("text")))
            .filter(
                source_id=group["source_id"],
                entity_id=group["entity_id"],
                kind=group["kind"],
                visibility=group["visibility"],
                norm=group["norm"],
            )
            .exclude(pk=group["keep"])
            .values_list("id", "source_id")
        )
        Fact.objects.filter(pk__in=[d for d, _ in dupes]).update(
            expired_at=now,
            superseded_by_id=group["keep"],
            expired_reason=f"{actor}: exact duplicate of fact #{group['keep']}",
            updated_at=now,
        )
        duplicates += len(dupes)
        audits.extend(
            _fact_audit(
                actor=actor,
                action=AuditEvent.Action.FACT_SUPERSEDED,
                fact_id=fact_id,
                source_id=source_id,
                extra={"superseded_by": group["keep"], "reason": "exact duplicate"},
            )
            for fact_id, source_id in dupes
        )
    AuditEvent.objects.bulk_create(audits)
    return duplicates


def fact_expire(
    *, now: datetime | None = None, limit: int | None = None, actor: str = "dream"
) -> int:
    """Mark facts whose ``valid_until`` has passed as expired (``expired_at`` =
    ``valid_until``, reason ``<actor>: valid_until passed``), one ``fact_expired``
    audit row each, at most ``limit`` facts. Readers already treat them as inactive;
    this makes it explicit (SPEC §10 consolidation). Returns how many facts were
    expired; running it twice changes nothing."""
    now = now or timezone.now()
    lapsed_qs = (
        Fact.objects.filter(expired_at__isnull=True, valid_until__lte=now)
        .order_by("id")
        .values_list("id", "source_id")
    )
    lapsed = list(lapsed_qs[:limit] if limit else lapsed_qs)
    Fact.objects.filter(pk__in=[f for f, _ in lapsed]).update(
        expired_at=F("valid_until"),
        expired_reason=f"{actor}: valid_until passed",
        updated_at=now,
    )
    AuditEvent.objects.bulk_create(
        _fact_audit(
            actor=actor,
            action=AuditEvent.Action.FACT_EXPIRED,
            fact_id=fact_id,
            source_id=source_id,
            extra={"reason": "valid_until passed"},
        )
        for fact_id, source_id in lapsed
    )
    return len(lapsed)


# --- facts that find their page later (SPEC §2.4) -------------------------------------


def facts_attach_waiting(
    *,
    actor: str,
    pages: Sequence[Page] | None = None,
    limit: int | None = None,
    now: datetime | None = None,
) -> int:
    """Attach facts kept under a name with no page (``entity`` null,
    ``evidence.entity_ref`` the slug of the name, ``evidence.entity_name`` the name
    as given) to the page that name now resolves to (SPEC §2.4 "a fact remembered
    for a name with no page attaches when a page for that name appears").

    ``pages`` (the page write path, ``brain.services.pages.write``): only the
    references that could name one of these pages (their slugs and slug suffixes,
    slugified titles and aliases) are tried, in those pages' sources. None (dream,
    SPEC §10): every waiting reference, most recently touched first, at most
    ``limit`` distinct references. Each reference is resolved with ``entity()``'s
    precedence (``entity_resolve``) inside the fact's own source, private pages
    only for facts a trusted writer stored (the scope ``remember`` used). Every
    attached fact gets ``entity`` = the page and one ``fact_edited`` audit row
    ``{attached_to, page_id, entity_ref}``; ``evidence`` is kept. Returns how many
    facts were attached; running it again attaches nothing new."""
    waiting = Fact.objects.filter(entity__isnull=True, evidence__has_key="entity_ref")
    if pages is not None:
        keys = _page_ref_keys(pages) if pages else set()
        if not keys:
            return 0
        waiting = waiting.filter(
            source_id__in={p.source_id for p in pages},
            evidence__entity_ref__in=sorted(keys),
        )
    waiting = waiting.annotate(
        ref=KT("evidence__entity_ref"),
        name=KT("evidence__entity_name"),
        remote=KT("evidence__stamped__remote"),
    )
    groups = (
        waiting.values("source_id", "ref", "name", "remote")
        .annotate(latest=Max("updated_at"))
        .order_by("-latest", "ref")
    )
    now = now or timezone.now()
    attached = 0
    for group in groups[:limit] if limit else groups:
        page = _waiting_page(group)
        if page is None:
            continue
        same: dict[str, Any] = {}
        for key in ("source_id", "ref", "name", "remote"):
            # An absent key is SQL NULL, which ``=`` never matches.
            if group[key] is None:
                same[f"{key}__isnull"] = True
            else:
                same[key] = group[key]
        ids = list(waiting.filter(**same).values_list("pk", flat=True))
        Fact.objects.filter(pk__in=ids, entity__isnull=True).update(
            entity=page, updated_at=now
        )
        AuditEvent.objects.bulk_create(
            _fact_audit(
                actor=actor,
                action=AuditEvent.Action.FACT_EDITED,
                fact_id=pk,
                source_id=group["source_id"],
                extra={
                    "attached_to": page.slug,
                    "page_id": page.pk,
                    "entity_ref": group["ref"],
                },
            )
            for pk in ids
        )
        attached += len(ids)
    return attached


def _waiting_page(group: Mapping[str, Any]) -> Page | None:
    """The page a waiting reference ``{source_id, ref, name, remote}`` resolves to
    in its fact's source, by the name as given, else by its slug; None when none."""
    scope = ReadScope(
        source_ids=(group["source_id"],), include_private=group["remote"] != "true"
    )
    for text in dict.fromkeys(t for t in (group["name"], group["ref"]) if t):
        page = entity_resolve(scope=scope, name=text).page
        if page is not None:
            return page
    return None


def _page_ref_keys(pages: Sequence[Page]) -> set[str]:
    """The ``entity_ref`` values that could name one of ``pages``: each slug and its
    ``/``-suffixes, and the slug form (``_entity_target``'s) of each title and
    alias. A superset: ``_waiting_page`` decides."""
    aliases = Alias.objects.filter(page__in=[p.pk for p in pages]).values_list(
        "alias", flat=True
    )
    keys: set[str] = set()
    for page in pages:
        parts = page.slug.split("/")
        keys.update("/".join(parts[i:]) for i in range(len(parts)))
        keys.update(_ref_forms(page.title))
    for alias in aliases:
        keys.update(_ref_forms(alias))
    keys.discard("")
    return keys


def _ref_forms(text: str) -> set[str]:
    """The reference slugs ``_entity_target`` may derive from a name ``text``."""
    raw = (text or "").strip().lower()
    forms = {slugify_title(text or "")}
    try:
        forms.add(validate_slug(raw))
    except InvalidParams:
        forms.add(raw[:255])
    return forms


# --- writes for apps above brain (loops' commitment facts, imported notes) ------------


def fact_record(
    *,
    source_id: str,
    entity: Page | None,
    text: str,
    kind: str,
    visibility: str,
    provenance: str,
    created_by: str,
    actor: str,
    raw_record_id: int | None = None,
    evidence: dict[str, Any] | None = None,
    confidence: float = 1.0,
    valid_from: datetime | None = None,
    valid_until: datetime | None = None,
    expired_at: datetime | None = None,
    expired_reason: str = "",
    audit_extra: dict[str, Any] | None = None,
) -> Fact:
    """Store one fact as given (no dedupe or supersede: the caller decided it is
    new) with a ``fact_remembered`` audit row carrying ``audit_extra``. Text is cut
    to 1,000 characters, provenance and ``expired_reason`` to 500 (SPEC §2.4); a fact
    stored already expired (a struck line of an imported note) passes
    ``expired_at``. Returns the fact."""
    fields: dict[str, Any] = {
        "source_id": source_id,
        "entity": entity,
        "text": text[:1000],
        "kind": kind,
        "visibility": visibility,
        "provenance": provenance[:500],
        "raw_record_id": raw_record_id,
        "evidence": evidence or {},
        "confidence": confidence,
        "valid_until": valid_until,
        "expired_at": expired_at,
        "expired_reason": expired_reason[:500],
        "created_by": created_by[:200],
    }
    if valid_from is not None:
        fields["valid_from"] = valid_from
    # SPEC §2.4: every stored fact carries its slot (read offline: no model call).
    name = _entity_name(entity, None)
    read = fact_slot_offline(fields["text"], entity=name, kind=kind)
    fields.update(
        subject=_relative_subject(read.subject, name),
        slot=read.slot,
        value=read.stored_value,
    )
    fact = Fact.objects.create(**fields)
    AuditEvent.objects.create(
        actor=actor,
        action=AuditEvent.Action.FACT_REMEMBERED,
        source_id=source_id,
        target_type="fact",
        target_id=str(fact.pk),
        extra_data=audit_extra or {},
    )
    return fact


def fact_expire_one(
    *, fact_id: int, source_id: str, actor: str, reason: str, audit_extra: dict
) -> bool:
    """Expire one active fact now (``expired_reason`` = ``reason``, cut to 500) with
    a ``fact_expired`` audit row; False when it was already expired or is gone."""
    now = timezone.now()
    updated = Fact.objects.filter(pk=fact_id, expired_at__isnull=True).update(
        expired_at=now, expired_reason=reason[:500], updated_at=now
    )
    if updated:
        AuditEvent.objects.create(
            actor=actor,
            action=AuditEvent.Action.FACT_EXPIRED,
            source_id=source_id,
            target_type="fact",
            target_id=str(fact_id),
            extra_data={**audit_extra, "reason": reason},
        )
    return bool(updated)


def fact_supersede_with(
    *,
    old: Fact,
    actor: str,
    reason: str,
    valid_until: datetime | None,
    evidence: dict[str, Any],
    audit_extra: dict[str, Any],
) -> Fact:
    """Replace the active fact ``old`` by a copy carrying ``valid_until`` and
    ``evidence``: ``old`` gets ``expired_at`` now, ``superseded_by`` the copy and
    ``expired_reason`` = ``reason``, with a ``fact_superseded`` audit row (SPEC §2.4:
    nothing is deleted). Call inside a transaction holding ``old``'s row lock.
    Returns the new fact."""
    now = timezone.now()
    new_fact = Fact.objects.create(
        source_id=old.source_id,
        entity=old.entity,
        text=old.text,
        kind=old.kind,
        visibility=old.visibility,
        provenance=old.provenance,
        raw_record=old.raw_record,
        evidence=evidence,
        confidence=old.confidence,
        valid_until=valid_until,
        created_by=actor,
        subject=old.subject,
        slot=old.slot,
        value=old.value,
    )
    Fact.objects.filter(pk=old.pk).update(
        expired_at=now,
        superseded_by=new_fact,
        updated_at=now,
        expired_reason=reason,
    )
    AuditEvent.objects.create(
        actor=actor,
        action=AuditEvent.Action.FACT_SUPERSEDED,
        source_id=old.source_id,
        target_type="fact",
        target_id=str(old.pk),
        extra_data={"superseded_by": new_fact.pk, **audit_extra},
    )
    return new_fact


# --- derived data that follows its source: edits, page deletes, embeddings ------------

PAGE_DELETED_REASON = "page_deleted"


def fact_edit(
    *,
    caller: Caller,
    fact: Fact,
    text: str,
    kind: str | None = None,
    visibility: str | None = None,
    confidence: float | None = None,
    valid_until: datetime | None = None,
    slot: str | None = None,
    value: str | None = None,
) -> list[Fact]:
    """Correct an active fact in place (admin edits, SPEC §2.4): text, kind,
    visibility, confidence, ``valid_until``. The slot is read again (``slot``/
    ``value`` when given), the old embedding is dropped at once (a stale vector is
    never compared) and the new one is computed after commit by a queued task
    (``fact_embed_refresh``). The edited fact is then re-checked like a new one:
    active facts of its subject bucket in the same slot and kind with another value,
    or the same value, are superseded by it. An expired fact is edited without the
    re-check. Returns the facts it superseded. Raises ``InvalidParams`` (empty
    text, bad kind/visibility/confidence) and ``ScopeDenied``."""
    caller.write_source(fact.source_id, item=f"Fact {fact.pk}")
    # Entity and evidence as stored (the caller's object may carry form edits).
    fact = Fact.objects.select_related("entity").get(pk=fact.pk)
    clean, _, kind, visibility = _validate(
        text=text,
        provenance=fact.provenance or "admin",
        kind=kind or fact.kind,
        visibility=visibility or fact.visibility,
        confidence=fact.confidence if confidence is None else confidence,
    )
    page = fact.entity
    entity_ref = (fact.evidence or {}).get("entity_ref")
    entity_name = _entity_name(page, entity_ref)
    read = fact_slot_derive(
        text=clean, entity=entity_name, kind=kind, slot=slot, value=value
    )
    read = replace(read, subject=_relative_subject(read.subject, entity_name))
    now = timezone.now()
    stale: list[Fact] = []
    with transaction.atomic():
        locked = Fact.objects.select_for_update().get(pk=fact.pk)
        changed_text = normalize_fact_text(locked.text) != normalize_fact_text(clean)
        updates: dict[str, Any] = {
            "text": clean,
            "kind": kind,
            "visibility": visibility,
            "confidence": locked.confidence if confidence is None else confidence,
            "valid_until": valid_until,
            "subject": read.subject,
            "slot": read.slot,
            "value": read.stored_value,
            "updated_at": now,
        }
        if changed_text or locked.text != clean:
            updates.update(embedding=None, embedding_model="")
        Fact.objects.filter(pk=locked.pk).update(**updates)
        AuditEvent.objects.create(
            actor=caller.actor,
            action=AuditEvent.Action.FACT_EDITED,
            source_id=locked.source_id,
            target_type="fact",
            target_id=str(locked.pk),
            extra_data={
                "old_text": locked.text,
                "new_text": clean,
                "old_kind": locked.kind,
                "kind": kind,
                "slot": read.slot,
            },
        )
        locked.refresh_from_db()
        if locked.expired_at is None:
            bucket = _bucket(
                caller=caller,
                source=locked.source,
                page=page,
                entity_ref=entity_ref,
                now=now,
            ).exclude(pk=locked.pk)
            for row in bucket.order_by("-created_at", "-pk")[:DEDUP_SCAN]:
                decision = slot_decision(
                    old=fact_slot_of(row, entity_name=entity_name),
                    new=read,
                    old_kind=row.kind,
                    new_kind=kind,
                    same_text=normalize_fact_text(row.text)
                    == normalize_fact_text(clean),
                )
                if decision in (DUPLICATE, SUPERSEDE):
                    _supersede(old=row, new=locked, actor=caller.actor, now=now)
                    stale.append(row)
        if "embedding" in updates:
            fact_embed_queue(fact_id=locked.pk)
    return stale


def fact_embed_queue(*, fact_id: int) -> None:
    """After the current transaction commits, queue ``fact_embed_refresh`` for the
    fact on the django-q2 broker (run inline where the cluster is synchronous, as in
    tests); never embeds inside the caller's request."""

    def enqueue() -> None:
        async_task(
            "brain.services.facts.fact_embed_refresh",
            fact_id,
            task_name=f"fact-embed-{fact_id}",
        )

    transaction.on_commit(enqueue)


def fact_embed_refresh(fact_id: int) -> bool:
    """Embed the current text of one fact and store the vector, unless the text
    changed again meanwhile (then that edit's own task does it). Returns True when a
    vector was stored; False when the fact is gone, already embedded by the
    configured model, or the provider is ``none`` or failing
    (``facts_embed_pending`` retries later)."""
    pending = _embedding_pending_q()
    fact = Fact.objects.filter(pending, pk=fact_id).first()
    if fact is None:
        return False
    vectors, model_name = embed_texts([fact.text])
    if not vectors:
        return False
    return bool(
        Fact.objects.filter(pending, pk=fact_id, text=fact.text).update(
            embedding=vectors[0], embedding_model=model_name
        )
    )


def _embedding_pending_q() -> Q:
    """Facts whose vector is to (re)make: none stored, or one of another model
    than the configured one (a model change, SPEC §3 / issue 46: vectors of two
    models are never compared)."""
    model = current_model()
    if not model:
        return Q(embedding__isnull=True)
    return Q(embedding__isnull=True) | ~Q(embedding_model=model)


def facts_embed_pending(*, limit: int = 1000) -> int:
    """Embed active facts that have no vector (edited facts whose queued task did
    not run, facts stored while the provider was down) or one of another model
    than the configured one (``job reembed`` after a model change), at most
    ``limit``; returns how many were embedded. Idempotent."""
    ids = list(
        Fact.objects.filter(fact_active_q(), _embedding_pending_q())
        .order_by("pk")
        .values_list("pk", flat=True)[:limit]
    )
    return sum(fact_embed_refresh(pk) for pk in ids)


def facts_expire_for_page(*, page: Page, actor: str, now: datetime) -> int:
    """Expire the active facts whose entity is ``page`` (it was soft-deleted or is
    about to be deleted): ``expired_at`` = ``now``, reason ``page_deleted``, one
    audit row. Returns how many; ``facts_revive_for_page`` undoes it."""
    ids = list(
        Fact.objects.filter(entity=page, expired_at__isnull=True).values_list(
            "pk", flat=True
        )
    )
    if not ids:
        return 0
    count = Fact.objects.filter(pk__in=ids, expired_at__isnull=True).update(
        expired_at=now, expired_reason=PAGE_DELETED_REASON, updated_at=now
    )
    AuditEvent.objects.create(
        actor=actor,
        action=AuditEvent.Action.FACT_EXPIRED,
        source_id=page.source_id,
        target_type="page",
        target_id=f"{page.source_id}:{page.slug}",
        extra_data={"reason": PAGE_DELETED_REASON, "fact_ids": ids[:1000]},
    )
    return count


def facts_revive_for_page(*, page: Page, actor: str) -> int:
    """Bring back the facts a soft delete of ``page`` expired (reason
    ``page_deleted``); facts forgotten or superseded for other reasons stay expired.
    Returns how many, with one audit row."""
    now = timezone.now()
    ids = list(
        Fact.objects.filter(
            entity=page, expired_reason=PAGE_DELETED_REASON, superseded_by__isnull=True
        ).values_list("pk", flat=True)
    )
    if not ids:
        return 0
    count = Fact.objects.filter(pk__in=ids).update(
        expired_at=None, expired_reason="", updated_at=now
    )
    AuditEvent.objects.create(
        actor=actor,
        action=AuditEvent.Action.FACT_REMEMBERED,
        source_id=page.source_id,
        target_type="page",
        target_id=f"{page.source_id}:{page.slug}",
        extra_data={"reason": "page_restored", "fact_ids": ids[:1000]},
    )
    return count


@dataclass(frozen=True)
class FactRowInput:
    """One row of a page's facts table as a file states it (markdown import):
    ``struck`` rows (``~~…~~``) are facts that stopped being true."""

    text: str
    kind: str = "fact"
    confidence: float = 1.0
    visibility: str = "world"
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    provenance: str = ""
    context: str = ""
    struck: bool = False


@dataclass
class FactRowsReport:
    """Counts of ``facts_apply_rows``: rows inserted, duplicates of live facts,
    facts superseded or expired by struck rows, facts expired because their row was
    removed, struck rows stored as history."""

    added: int = 0
    duplicate: int = 0
    superseded: int = 0
    expired: int = 0
    removed: int = 0
    history: int = 0


def facts_apply_rows(
    *,
    caller: Caller,
    source: Source,
    entity: Page | None,
    rows: list[FactRowInput],
    use_llm: bool = True,
) -> FactRowsReport:
    """Make the active facts of ``entity`` follow its facts table (SPEC §2.4, §6.3):
    a page's facts fence, or, with ``entity`` None, the source's page-less facts
    file (``.facts.md``; the same rules, one code path).

    Live rows go through ``fact_remember`` (dedup and supersession by slot; a row
    whose text is already live is left alone). A struck row expires the live fact
    with its text: superseded by the live row of the same slot and kind when the
    table has one (``superseded_by`` set), else expired with the row's context as
    reason; a struck row never stored is kept as expired history. A fact this
    writer (``caller.actor``) stored earlier whose row is gone from the table
    expires (reason ``removed from markdown``). Facts from other writers are never
    touched by a missing row. ``use_llm`` is passed to ``fact_remember``.
    Idempotent. Raises what ``fact_remember`` raises."""
    report = FactRowsReport()
    now = timezone.now()
    live_by_text = {
        normalize_fact_text(f.text): f
        for f in Fact.objects.filter(entity=entity, source=source).filter(
            fact_active_q(now=now)
        )
    }
    kept: list[Fact] = []
    for row in rows:
        if row.struck or not row.text.strip():
            continue
        existing = live_by_text.get(normalize_fact_text(row.text))
        if existing is not None:
            kept.append(existing)
            continue
        written = fact_remember(
            caller=caller,
            source=source,
            entity=entity,
            text=row.text,
            provenance=_row_provenance(row, entity),
            kind=row.kind if row.kind in Fact.Kind.values else Fact.Kind.FACT,
            visibility=row.visibility,
            confidence=row.confidence,
            valid_until=row.valid_until,
            valid_from=row.valid_from,
            use_llm=use_llm,
        )
        kept.append(written.fact)
        if written.status == "duplicate":
            report.duplicate += 1
        else:
            report.added += 1
            report.superseded += 1 if written.status == "superseded" else 0
            live_by_text[normalize_fact_text(written.fact.text)] = written.fact
    entity_name = _entity_name(entity, None)
    kept_slots = [(f, fact_slot_of(f, entity_name=entity_name)) for f in kept]
    stated = {normalize_fact_text(r.text) for r in rows}
    with transaction.atomic():
        for row in rows:
            if not row.struck or not row.text.strip():
                continue
            norm = normalize_fact_text(row.text)
            live = live_by_text.pop(norm, None)
            if live is None or live.expired_at is not None:
                if not Fact.objects.filter(
                    entity=entity, source=source, text=row.text
                ).exists():
                    _store_history(
                        caller=caller, source=source, entity=entity, row=row, now=now
                    )
                    report.history += 1
                continue
            old_slot = fact_slot_of(live, entity_name=entity_name)
            newer = next(
                (
                    f
                    for f, s in kept_slots
                    if f.pk != live.pk
                    and f.kind == live.kind
                    and s.slot
                    and s.slot == old_slot.slot
                    and s.subject == old_slot.subject
                ),
                None,
            )
            if newer is not None:
                _supersede(old=live, new=newer, actor=caller.actor, now=now)
                report.superseded += 1
            else:
                _expire(
                    fact=live,
                    actor=caller.actor,
                    now=now,
                    reason=f"struck in markdown: {row.context}".strip(": ")[
                        :REASON_MAX
                    ],
                )
                report.expired += 1
        for norm, fact in live_by_text.items():
            if norm not in stated and fact.created_by == caller.actor:
                _expire(
                    fact=fact,
                    actor=caller.actor,
                    now=now,
                    reason="removed from markdown",
                )
                report.removed += 1
    return report


def _expire(*, fact: Fact, actor: str, now: datetime, reason: str) -> bool:
    """Expire one active fact now with ``reason`` and a ``fact_expired`` audit row."""
    changed = Fact.objects.filter(pk=fact.pk, expired_at__isnull=True).update(
        expired_at=now, expired_reason=reason[:REASON_MAX], updated_at=now
    )
    if changed:
        AuditEvent.objects.create(
            actor=actor,
            action=AuditEvent.Action.FACT_EXPIRED,
            source_id=fact.source_id,
            target_type="fact",
            target_id=str(fact.pk),
            extra_data={"reason": reason, "text": fact.text},
        )
    return bool(changed)


def _row_provenance(row: FactRowInput, entity: Page | None) -> str:
    """A facts-table row's provenance, else where it was read from."""
    where = entity.slug if entity is not None else "facts file"
    return (row.provenance or f"markdown:{where}")[:PROVENANCE_MAX]


def _store_history(
    *,
    caller: Caller,
    source: Source,
    entity: Page | None,
    row: FactRowInput,
    now: datetime,
) -> Fact:
    """A struck row never stored: kept as an expired fact (the page's history)."""
    read = fact_slot_offline(row.text, entity=_entity_name(entity, None), kind=row.kind)
    fact = Fact.objects.create(
        source=source,
        entity=entity,
        text=" ".join(row.text.split())[:FACT_MAX],
        kind=row.kind if row.kind in Fact.Kind.values else Fact.Kind.FACT,
        visibility=row.visibility if row.visibility in Visibility.values else "private",
        provenance=_row_provenance(row, entity),
        confidence=row.confidence,
        valid_from=row.valid_from or now,
        valid_until=row.valid_until,
        expired_at=now,
        expired_reason=(row.context or "struck in markdown")[:REASON_MAX],
        created_by=caller.actor,
        subject=_relative_subject(read.subject, _entity_name(entity, None)),
        slot=read.slot,
        value=read.stored_value,
    )
    AuditEvent.objects.create(
        actor=caller.actor,
        action=AuditEvent.Action.FACT_REMEMBERED,
        source=source,
        target_type="fact",
        target_id=str(fact.pk),
        extra_data={"struck": True, "entity": entity.slug if entity else None},
    )
    return fact


def facts_out_of_range_q() -> Q:
    """Facts whose ``valid_until`` lies outside ``brain.timestamps`` range (rows
    stored before inputs were range-checked; loading them breaks every read)."""
    return Q(valid_until__lt=MIN_TIMESTAMP) | Q(valid_until__gt=MAX_TIMESTAMP)


def facts_repair_timestamps(*, actor: str) -> int:
    """Clamp out-of-range ``valid_until`` values into range, in SQL (the rows cannot
    be loaded into Python as they are), with one audit row. Returns how many facts
    were repaired (SPEC §8)."""
    with transaction.atomic():
        late = Fact.objects.filter(valid_until__gt=MAX_TIMESTAMP).update(
            valid_until=MAX_TIMESTAMP
        )
        early = Fact.objects.filter(valid_until__lt=MIN_TIMESTAMP).update(
            valid_until=MIN_TIMESTAMP
        )
        if late or early:
            AuditEvent.objects.create(
                actor=actor,
                action=AuditEvent.Action.OTHER,
                target_type="fact",
                target_id="*",
                extra_data={"repaired_valid_until": late + early},
            )
    return late + early
