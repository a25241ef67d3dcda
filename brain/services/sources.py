"""Write services for sources (SPEC §2.1)."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from brain.exceptions import InvalidParams
from brain.models import AuditEvent, Source


def source_ensure(
    *,
    source_id: str,
    kind: str,
    name: str = "",
    owner_addresses: Iterable[str] = (),
    federated: bool = False,
) -> Source:
    """Return the source ``source_id``, creating it when missing (idempotent).

    New sources are unfederated unless asked (SPEC §2.1). Owner addresses are merged,
    lower-cased, never removed. Raises ``InvalidParams`` for a malformed id or when the
    existing source has another kind.
    """
    from django.core.exceptions import ValidationError

    probe = Source(id=source_id, name=name or source_id, kind=kind)
    try:
        probe.full_clean(validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        raise InvalidParams(
            f"Invalid source {source_id!r}: {'; '.join(exc.messages)}",
            suggestion="Use 1-32 characters: a-z, 0-9 and inner '-', e.g. 'acme-shared'.",
            detail={"source": source_id},
        ) from exc
    addresses = sorted({a.strip().lower() for a in owner_addresses if a.strip()})
    with transaction.atomic():
        source, created = Source.objects.select_for_update().get_or_create(
            id=source_id,
            defaults={
                "name": name or source_id,
                "kind": kind,
                "owner_addresses": addresses,
                "federated": federated,
            },
        )
        if not created:
            if source.kind != kind:
                raise InvalidParams(
                    f"Source {source_id!r} is a {source.kind!r} source, not {kind!r}.",
                    suggestion="Pick another source id for this kind of records.",
                    detail={"source": source_id, "kind": source.kind},
                )
            merged = sorted(set(source.owner_addresses) | set(addresses))
            if merged != sorted(source.owner_addresses):
                source.owner_addresses = merged
                source.save(update_fields=["owner_addresses", "updated_at"])
    return source


def source_set_federated(
    *, sources: Iterable[Source], federated: bool, actor: str
) -> int:
    """Set ``federated`` on each source; returns how many changed (audited)."""
    changed = 0
    with transaction.atomic():
        for source in sources:
            updated = (
                Source.objects.filter(pk=source.pk)
                .exclude(federated=federated)
                .update(federated=federated)
            )
            if updated:
                changed += 1
                AuditEvent.objects.create(
                    actor=actor,
                    action=AuditEvent.Action.OTHER,
                    source_id=source.pk,
                    target_type="source",
                    target_id=source.pk,
                    extra_data={"federated": federated},
                )
    return changed
