"""Fact writes (SPEC §2.4): remember with dedup and supersession, forget, expiry.

Facts are never deleted. Forget and supersession set ``expired_at`` (and
``superseded_by``) and write an ``AuditEvent``; every reader filters on the active
condition (``brain.selectors_facts.fact_active_q``), so an expired fact never comes
back (no ghosts).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
from django.db import connection, transaction
from django.db.models import Count, F, Min, Q, QuerySet
from django.db.models.functions import Lower, Trim
from django.utils import timezone

from brain.access import Caller, ReadScope, scope_queryset
from brain.embeddings import embed_texts
from brain.exceptions import InvalidParams, NotFound, ProvenanceRequired
from brain.models import AuditEvent, Fact, Page, RawRecord, Source, Visibility
from brain.selectors_facts import fact_active_q
from brain.services.entities import entity_resolve
from brain.text import slugify_title, validate_slug

if TYPE_CHECKING:
    from collections.abc import Iterable

# SPEC §2.4: cosine at or above this between facts of one entity is the same claim.
DEDUP_COSINE = 0.95
DEDUP_CANDIDATES = 5
DEDUP_SCAN = 500
# Beyond the reference: an explicit change statement ("left Acme, now at Beta")
# supersedes an older same-kind fact of the same entity that it names, when their
# cosine is at least this (the plain 0.95 rule cannot see such updates; MiniLM
# puts 'works at Acme' and 'left Acme, now at Beta' at about 0.47).
CHANGE_COSINE = 0.3
PROVENANCE_MAX = 500
FACT_MAX = 4000
REASON_MAX = 500

_TTL_RELATIVE = re.compile(r"^\s*(\d{1,6})\s*([dhm])\s*$", re.IGNORECASE)
_ISO_DURATION = re.compile(
    r"^P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?"
    r"(?:\d+S)?)?$",
    re.IGNORECASE,
)
# A change statement names what stopped being true right after the cue:
# "left Acme", "no longer in Paris", "moved away from Berlin", "quit the band".
_CHANGE_CUES = re.compile(
    r"\b(left|leaves|leaving|quit|quits|resigned from|departed|no longer(?: \w+)?|"
    r"not \w+ any ?more|moved (?:away )?from|switched from|changed from|"
    r"formerly(?: \w+)?|used to(?: \w+)?|replaced|instead of|stopped(?: \w+)?)\b",
    re.IGNORECASE,
)
CUE_WINDOW_WORDS = 4
_WORD = re.compile(r"[^\W\d_][\w'-]{2,}", re.UNICODE)
_STOPWORDS = frozenset(
    """the and for with from that this than then they them their there these those
    was were are been being has have had not but his her hers him she he its our
    ours you your yours who whom what when where which while will would can could
    should shall may might must also into onto over under about after before at
    now left moved works work working lives live living is as an a of to in on by
    no longer more any anymore instead formerly former used changed switched""".split()
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
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
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


def _changed_words(text: str, *, exclude: Iterable[str] = ()) -> set[str]:
    """Content words within 4 words after each change cue of ``text``."""
    found: set[str] = set()
    for cue in _CHANGE_CUES.finditer(text or ""):
        tail = " ".join((text[cue.end() :]).split()[:CUE_WINDOW_WORDS])
        found |= _content_words(tail, exclude=exclude)
    return found


def _content_words(text: str, *, exclude: Iterable[str] = ()) -> set[str]:
    skip = _STOPWORDS | {w.lower() for w in exclude}
    return {w.lower() for w in _WORD.findall(text or "")} - skip


def _validate(
    *,
    text: str | None,
    provenance: str | None,
    kind: str | None,
    visibility: str | None,
    confidence: float,
) -> tuple[str, str, str, str]:
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
    visibility = visibility or Visibility.WORLD
    if visibility not in Visibility.values:
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
    *, source: Source, caller: Caller, entity: str | Page | None
) -> tuple[Page | None, str | None]:
    """Resolve ``entity`` inside the write source: (page, slug) or (None, fallback
    reference slug) when no page matches."""
    if entity is None or (isinstance(entity, str) and not entity.strip()):
        return None, None
    if isinstance(entity, Page):
        return entity, entity.slug
    scope = ReadScope(source_ids=(source.id,), include_private=caller.trusted)
    resolution = entity_resolve(scope=scope, name=entity)
    if resolution.page is not None:
        return resolution.page, resolution.page.slug
    raw = entity.strip().lower()
    try:
        ref = validate_slug(raw)
    except InvalidParams:
        ref = slugify_title(entity) or raw[:255]
    return None, ref


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
) -> FactWrite:
    """Store a fact with dedup and supersession (SPEC §2.4, §4 ``remember``).

    ``source`` defaults to the caller's write source (``ScopeDenied`` without the
    write scope). ``entity`` (name, slug or page) is resolved inside that source with
    the ``entity()`` precedence; an unresolved name is kept as ``evidence.entity_ref``
    and echoed as the slug. ``ttl`` (``30d``/``12h``/``45m``/ISO timestamp) or
    ``valid_until`` sets the validity end.

    Among the 5 nearest active facts of the same entity the caller may read: cosine
    ≥ 0.95 and the same normalised text (or a different kind) → ``duplicate`` (nothing
    written, the existing fact returned); cosine ≥ 0.95 and the same kind →
    ``superseded``; an explicit change statement ("left Acme", "no longer in Paris")
    whose changed words appear in an older same-kind fact (cosine ≥ 0.3) →
    ``superseded``. The older fact expires with ``superseded_by`` set and an
    audit row. Without embeddings: plain insert, ``degraded_dedup``.

    Raises ``InvalidParams`` (missing provenance, bad kind/visibility/ttl, empty
    fact), ``ProvenanceRequired`` (blank provenance), ``ScopeDenied``.
    """
    clean, prov, kind, visibility = _validate(
        text=text,
        provenance=provenance,
        kind=kind,
        visibility=visibility,
        confidence=confidence,
    )
    now = timezone.now()
    until = valid_until if valid_until is not None else parse_ttl(ttl, now=now)
    source = source or caller.write_source()
    page, entity_slug = _entity_target(source=source, caller=caller, entity=entity)
    vectors, model_name = embed_texts([clean])
    vector = vectors[0] if vectors else None
    stamped = {
        "actor": caller.actor,
        "client": caller.client,
        "remote": caller.remote,
        "at": now.isoformat(),
    }
    facts_evidence = {**(evidence or {}), "stamped": stamped}
    if page is None and entity_slug:
        facts_evidence["entity_ref"] = entity_slug

    with transaction.atomic():
        # Serialise writers per (source, entity) so two equal facts cannot both insert.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))",
                [f"fact:{source.id}:{page.pk if page else entity_slug or ''}"],
            )
        old: Fact | None = None
        if vector is not None:
            match = _dedup_match(
                caller=caller,
                source=source,
                page=page,
                entity_ref=entity_slug,
                text=clean,
                kind=kind,
                vector=vector,
                now=now,
            )
            if match is not None:
                decision, old = match
                if decision == "duplicate":
                    return FactWrite(
                        fact=old,
                        status="duplicate",
                        entity_slug=entity_slug,
                        degraded_dedup=False,
                    )
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
            valid_from=now,
            valid_until=until,
            embedding=vector,
            embedding_model=model_name if vector is not None else "",
            created_by=caller.actor,
        )
        AuditEvent.objects.create(
            actor=caller.actor,
            action=AuditEvent.Action.FACT_REMEMBERED,
            source=source,
            target_type="fact",
            target_id=str(fact.pk),
            extra_data={
                "kind": kind,
                "entity": entity_slug,
                "degraded_dedup": vector is None,
            },
        )
        if old is not None:
            Fact.objects.filter(pk=old.pk).update(
                expired_at=now,
                superseded_by=fact,
                expired_reason=f"superseded by #{fact.pk}",
                updated_at=now,
            )
            AuditEvent.objects.create(
                actor=caller.actor,
                action=AuditEvent.Action.FACT_SUPERSEDED,
                source=source,
                target_type="fact",
                target_id=str(old.pk),
                extra_data={"superseded_by": fact.pk, "old_text": old.text},
            )
            old.refresh_from_db()
    return FactWrite(
        fact=fact,
        status="superseded" if old is not None else "inserted",
        entity_slug=entity_slug,
        degraded_dedup=vector is None,
        superseded=old,
    )


def _dedup_match(
    *,
    caller: Caller,
    source: Source,
    page: Page | None,
    entity_ref: str | None,
    text: str,
    kind: str,
    vector: list[float],
    now: datetime,
) -> tuple[str, Fact] | None:
    """Return ``("duplicate" | "supersede", fact)`` or None (plain insert)."""
    qs = Fact.objects.filter(source=source).filter(fact_active_q(now=now))
    if not caller.trusted:
        qs = qs.filter(visibility=Visibility.WORLD)
    if page is not None:
        qs = qs.filter(entity=page)
    elif entity_ref:
        qs = qs.filter(entity__isnull=True, evidence__entity_ref=entity_ref)
    else:
        qs = qs.filter(entity__isnull=True).exclude(evidence__has_key="entity_ref")
    candidates = _nearest(qs, vector)
    if not candidates:
        return None
    top_cosine, top = candidates[0]
    norm = normalize_fact_text(text)
    if top_cosine >= DEDUP_COSINE:
        if normalize_fact_text(top.text) == norm or top.kind != kind:
            return "duplicate", top
        return "supersede", top
    named = _changed_words(text, exclude=page.title.split() if page else ())
    if named:
        for cosine, cand in candidates:
            if cand.kind != kind or cosine < CHANGE_COSINE:
                continue
            if named & _content_words(cand.text):
                return "supersede", cand
    return None


def _nearest(qs: QuerySet[Fact], vector: list[float]) -> list[tuple[float, Fact]]:
    """The 5 facts of ``qs`` nearest to ``vector`` by cosine, best first.

    Exact cosine in numpy over the newest 500 embedded candidates of one entity: the
    set is small, and the database's vector operators are not needed for it.
    """
    rows = list(
        qs.exclude(embedding__isnull=True)
        .only("pk", "text", "kind", "embedding", "created_at")
        .order_by("-created_at", "-pk")[:DEDUP_SCAN]
    )
    if not rows:
        return []
    matrix = np.asarray([np.asarray(r.embedding, dtype=np.float32) for r in rows])
    query = np.asarray(vector, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(query) or 1.0)
    cosines = (matrix @ query) / np.where(norms == 0, 1.0, norms)
    order = np.argsort(-cosines, kind="stable")[:DEDUP_CANDIDATES]
    return [(float(cosines[i]), rows[i]) for i in order]


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
    caller.write_source(fact.source_id)
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
