"""Writes of sender profiles (SPEC §5.1a): the one writer of ``SenderProfile``.

``sender_profiles_refresh`` recomputes the person/automated verdict of senders from
the whole source (plus messages an import is about to store); a curator's verdict
is kept. ``sender_profile_decide`` records a curator's verdict with a ``LoopEvent``.
Re-evaluating the sender's loops after a verdict is ``loops.pipeline.sender_mark``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from brain.exceptions import InvalidParams
from loops.models import LoopEvent, SenderProfile
from loops.selectors import profile_messages
from loops.senders import classify_senders

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from brain.models import Source
    from loops.message import MailMessage


def sender_profiles_refresh(
    *,
    source: Source,
    pending: Sequence[MailMessage] = (),
    addresses: Collection[str] | None = None,
) -> dict[str, Any]:
    """Recompute the computed verdict of senders of ``source`` (SPEC §5.1a).

    Reads every stored message of the source (or, with ``addresses``, those
    senders' messages and the owner's own mail, for reciprocity) plus ``pending``
    messages not yet stored (an import in progress), classifies each non-owner
    sender (``loops.senders``) and upserts its ``SenderProfile``. A curator's
    verdict (``admin_kind``) stays in force. Returns ``{profiles, created,
    changed: [addresses whose kind in force changed]}``.
    """
    wanted = {a.lower() for a in addresses} if addresses is not None else None
    stored = profile_messages(source_id=source.id, addresses=wanted)
    seen = {m.message_id for m in stored}
    messages = [*stored, *(m for m in pending if m.message_id not in seen)]
    verdicts = classify_senders(messages, owner_addresses=source.owner_addresses)
    if wanted is not None:
        verdicts = {a: v for a, v in verdicts.items() if a in wanted}
    existing = {
        p.address: p
        for p in SenderProfile.objects.filter(source=source, address__in=list(verdicts))
    }
    now = timezone.now()
    created: list[SenderProfile] = []
    updated: list[SenderProfile] = []
    changed: list[str] = []
    for address, (kind, reasons, signals) in verdicts.items():
        address = address[:320]
        row = existing.get(address)
        if row is None:
            created.append(
                SenderProfile(
                    source=source,
                    address=address,
                    kind=kind,
                    computed_kind=kind,
                    reasons=reasons,
                    signals=signals,
                    messages=signals.get("messages", 0),
                    computed_at=now,
                )
            )
            continue
        in_force = row.admin_kind or kind
        if in_force != row.kind:
            changed.append(address)
        row.kind = in_force
        row.computed_kind = kind
        row.reasons = reasons
        row.signals = signals
        row.messages = signals.get("messages", 0)
        row.computed_at = now
        updated.append(row)
    with transaction.atomic():
        SenderProfile.objects.bulk_create(created, ignore_conflicts=True)
        SenderProfile.objects.bulk_update(
            updated,
            ["kind", "computed_kind", "reasons", "signals", "messages", "computed_at"],
        )
    return {"profiles": len(verdicts), "created": len(created), "changed": changed}


def sender_profile_decide(
    *, source: Source, address: str, kind: str, actor: str
) -> tuple[SenderProfile, bool]:
    """Record a curator's verdict (``person`` or ``automated``) for ``address`` in
    ``source``, creating the profile when the sender has none yet. Writes a
    ``sender_marked`` ``LoopEvent``. Returns ``(profile, changed)`` where changed
    means the kind in force changed. Raises ``InvalidParams`` for another kind or
    an empty address."""
    if kind not in SenderProfile.Kind.values:
        raise InvalidParams(
            f"Unknown sender kind '{kind}'.",
            suggestion="Use 'person' or 'automated'.",
            detail={"allowed": SenderProfile.Kind.values},
        )
    address = (address or "").strip().lower()
    if "@" not in address or len(address) > 320:
        raise InvalidParams(
            f"'{address}' is not a sender address.",
            suggestion="Give a bare email address.",
        )
    with transaction.atomic():
        row, created = SenderProfile.objects.select_for_update().get_or_create(
            source=source,
            address=address,
            defaults={"kind": kind, "computed_kind": kind, "reasons": ["curator"]},
        )
        before = "" if created else row.kind
        row.admin_kind = kind
        row.kind = kind
        row.decided_by = actor[:200]
        row.decided_at = timezone.now()
        row.save()
        LoopEvent.objects.create(
            loop=None,
            source_id=source.id,
            event_type=LoopEvent.EventType.SENDER_MARKED,
            actor=actor[:200],
            extra_data={"address": address, "kind": kind, "before": before},
        )
    return row, before != kind
