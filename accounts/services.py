"""Writes for API keys (SPEC §8). Keys are ``gbr_<prefix>_<secret>``; only the
SHA-256 of the whole key is stored, so a key is shown exactly once."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import ApiKey, ApiKeyRateWindow, User
from brain.exceptions import Unavailable
from brain.models import AuditEvent, Source

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime

KEY_PREFIX = "gbr_"


@dataclass(frozen=True)
class IssuedKey:
    """A freshly created key: ``plaintext`` is the only copy of the secret."""

    api_key: ApiKey
    plaintext: str


def hash_key(plaintext: str) -> str:
    """Return the hex SHA-256 of a plaintext key (what the database stores)."""
    return hashlib.sha256(plaintext.encode()).hexdigest()


def apikey_validate(
    *,
    name: str,
    scopes: Iterable[str],
    write_source: Source | None,
    expires_at: datetime | None = None,
) -> None:
    """The one set of rules for a new key, shared by the admin form, the ``apikey``
    command and ``apikey_create`` (SPEC §8).

    Raises Django's ``ValidationError`` with per-field messages: a blank name, an
    unknown or empty scope set, a write-scoped (``write`` or ``admin``) key without a
    write source (it could write nothing), or an expiry in the past.
    """
    errors: dict[str, list[str]] = {}
    wanted = set(scopes)
    if not name or not name.strip():
        errors.setdefault("name", []).append("A key needs a name.")
    unknown = sorted(wanted - set(ApiKey.Scope.values))
    if unknown:
        errors.setdefault("scopes", []).append(
            f"Unknown scope(s) {', '.join(unknown)}; use read, write and/or admin."
        )
    if not wanted:
        errors.setdefault("scopes", []).append(
            "Give the key at least one scope (read, write, admin)."
        )
    if wanted & {"write", "admin"} and write_source is None:
        errors.setdefault("write_source", []).append(
            "A key with the write or admin scope needs a write source: without one "
            "it could write nothing. Pick the source its writes go to, or make the "
            "key read-only."
        )
    if expires_at is not None and expires_at <= timezone.now():
        errors.setdefault("expires_at", []).append("The expiry must be in the future.")
    if errors:
        raise ValidationError(errors)


def apikey_create(
    *,
    name: str,
    scopes: Iterable[str],
    write_source: Source | None,
    readable_sources: Iterable[Source] = (),
    trusted: bool = False,
    rate_limit_per_minute: int | None = None,
    expires_at: datetime | None = None,
    created_by: User | None = None,
) -> IssuedKey:
    """Create a key and return it with its plaintext (shown once, never stored).

    Checked by ``apikey_validate`` first (``ValidationError``). The write source is
    always added to the readable sources.
    """
    apikey_validate(
        name=name, scopes=scopes, write_source=write_source, expires_at=expires_at
    )
    prefix = secrets.token_hex(4)
    plaintext = f"{KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    with transaction.atomic():
        key = ApiKey.objects.create(
            name=name,
            prefix=prefix,
            key_hash=hash_key(plaintext),
            scopes=sorted(set(scopes)),
            write_source=write_source,
            trusted=trusted,
            rate_limit_per_minute=rate_limit_per_minute,
            expires_at=expires_at,
            created_by=created_by,
        )
        readable = {s.pk: s for s in readable_sources}
        if write_source is not None:
            readable[write_source.pk] = write_source
        key.readable_sources.set(readable.values())
        AuditEvent.objects.create(
            actor=created_by.get_username() if created_by else "system",
            action=AuditEvent.Action.KEY_CREATED,
            target_type="api_key",
            target_id=str(key.pk),
            extra_data={"name": name, "prefix": prefix, "trusted": trusted},
        )
    return IssuedKey(api_key=key, plaintext=plaintext)


def apikey_authenticate(*, plaintext: str) -> ApiKey | None:
    """Return the active key matching ``plaintext``, or None (unknown, revoked or
    expired). Touches ``last_used_at`` at most once a minute so reads do not turn
    into a write per request."""
    if not plaintext.startswith(KEY_PREFIX):
        return None
    now = timezone.now()
    key = (
        ApiKey.objects.filter(key_hash=hash_key(plaintext), revoked_at__isnull=True)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .select_related("write_source")
        .first()
    )
    if key is None:
        return None
    if key.last_used_at is None or (now - key.last_used_at).total_seconds() > 60:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return key


def apikey_revoke(*, api_key: ApiKey, actor: str) -> bool:
    """Revoke a key; returns False when it was already revoked (idempotent)."""
    changed = ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    if changed:
        AuditEvent.objects.create(
            actor=actor,
            action=AuditEvent.Action.KEY_REVOKED,
            target_type="api_key",
            target_id=str(api_key.pk),
            extra_data={"name": api_key.name},
        )
    return bool(changed)


class RateLimited(Unavailable):
    """A key went over its ``rate_limit_per_minute`` (``unavailable``, HTTP 429)."""

    http_status = 429


def apikey_rate_check(*, api_key: ApiKey, now: float | None = None) -> None:
    """Count one request against the key's per-minute limit (SPEC §8 "optional rate
    limit"): a fixed one-minute window kept in the database (``ApiKeyRateWindow``),
    so every worker process shares one budget; one statement per request (an atomic
    upsert that restarts the count when the minute changed). Raises ``RateLimited``
    over the limit; no limit set means unlimited."""
    limit = api_key.rate_limit_per_minute
    if not limit:
        return
    minute = int((now if now is not None else timezone.now().timestamp()) // 60)
    table = ApiKeyRateWindow._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {table} AS w (api_key_id, minute, count) VALUES (%s, %s, 1)
            ON CONFLICT (api_key_id) DO UPDATE SET
              count = CASE WHEN w.minute >= EXCLUDED.minute
                           THEN w.count + 1 ELSE 1 END,
              minute = GREATEST(w.minute, EXCLUDED.minute)
            RETURNING count
            """,
            [api_key.pk, minute],
        )
        (count,) = cursor.fetchone()
    if count > limit:
        raise RateLimited(
            f"This key is limited to {limit} requests per minute.",
            suggestion="Wait for the next minute, or ask an admin to raise the key's "
            "rate limit in admin → API keys.",
            detail={"limit_per_minute": limit},
        )
