"""``manage.py apikey create|list|revoke``: API keys from the shell (SPEC §8), so a
scripted or harness setup needs no admin clicks.

- ``apikey create --name N --scopes read,write --write-source S --readable S1,S2
  [--trusted] [--expires DAYS] [--rate-limit N]`` prints the key once (the only copy;
  the database keeps its hash). The rules are the admin form's (``apikey_validate``):
  a write- or admin-scoped key needs a write source.
- ``apikey list [--all]`` shows active keys (``--all``: revoked and expired too).
- ``apikey revoke PREFIX`` revokes a key by the prefix shown in ``list``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from accounts.models import ApiKey
from accounts.services import apikey_create, apikey_revoke
from brain.models import Source


def _csv(raw: str | None) -> list[str]:
    return [part.strip() for part in (raw or "").split(",") if part.strip()]


class Command(BaseCommand):
    help = "Create, list and revoke API keys (the key is printed once on create)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="Create a key and print it once.")
        create.add_argument("--name", required=True)
        create.add_argument(
            "--scopes", default="read", help="Comma list of read, write, admin."
        )
        create.add_argument(
            "--write-source", default=None, help="The source the key writes to."
        )
        create.add_argument(
            "--readable", default="", help="Comma list of sources the key may read."
        )
        create.add_argument(
            "--trusted",
            action="store_true",
            help="May read private pages and facts, loop quotes and links.",
        )
        create.add_argument(
            "--expires", type=int, default=None, help="Expire after DAYS days."
        )
        create.add_argument(
            "--rate-limit", type=int, default=None, help="Requests per minute."
        )
        listing = sub.add_parser("list", help="List keys (never their secrets).")
        listing.add_argument(
            "--all", action="store_true", help="Include revoked and expired keys."
        )
        revoke = sub.add_parser("revoke", help="Revoke a key by its prefix.")
        revoke.add_argument("prefix")

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, f"_{options['action']}")(options)

    def _sources(self, ids: list[str]) -> list[Source]:
        found = {s.id: s for s in Source.objects.filter(id__in=ids)}
        missing = [i for i in ids if i not in found]
        if missing:
            raise CommandError(
                f"Unknown source(s): {', '.join(missing)}. Existing: "
                f"{', '.join(Source.objects.values_list('id', flat=True))}."
            )
        return [found[i] for i in ids]

    def _create(self, options: dict[str, Any]) -> None:
        write = options["write_source"]
        write_source = self._sources([write])[0] if write else None
        if options["expires"] is not None and options["expires"] < 1:
            raise CommandError("--expires takes a number of days, at least 1.")
        expires_at = (
            timezone.now() + timedelta(days=options["expires"])
            if options["expires"]
            else None
        )
        try:
            issued = apikey_create(
                name=options["name"],
                scopes=_csv(options["scopes"]),
                write_source=write_source,
                readable_sources=self._sources(_csv(options["readable"])),
                trusted=options["trusted"],
                rate_limit_per_minute=options["rate_limit"],
                expires_at=expires_at,
            )
        except ValidationError as exc:
            problems = "; ".join(
                f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items()
            )
            raise CommandError(f"Key not created. {problems}") from None
        key = issued.api_key
        readable = ", ".join(
            key.readable_sources.order_by("id").values_list("id", flat=True)
        )
        self.stderr.write(
            f"Created key '{key.name}' (prefix {key.prefix}): scopes "
            f"{','.join(key.scopes)}, writes to {key.write_source_id or 'nothing'}, "
            f"reads {readable or 'nothing'}, "
            f"{'trusted' if key.trusted else 'remote (world-visible data only)'}"
            + (
                f", expires {key.expires_at:%Y-%m-%d %H:%M} UTC"
                if key.expires_at
                else ""
            )
            + ". Copy the key now; it is not shown again:"
        )
        self.stdout.write(issued.plaintext)

    def _list(self, options: dict[str, Any]) -> None:
        keys = ApiKey.objects.select_related("write_source").order_by("created_at")
        shown = 0
        for key in keys.prefetch_related("readable_sources"):
            if not options["all"] and not key.is_active:
                continue
            shown += 1
            state = (
                "active"
                if key.is_active
                else ("revoked" if key.revoked_at else "expired")
            )
            readable = ",".join(sorted(s.id for s in key.readable_sources.all()))
            self.stdout.write(
                f"{key.prefix}  {key.name}  scopes={','.join(key.scopes)}  "
                f"write={key.write_source_id or '-'}  read={readable or '-'}  "
                f"{'trusted' if key.trusted else 'remote'}  {state}"
                + (f"  expires={key.expires_at:%Y-%m-%d}" if key.expires_at else "")
            )
        self.stderr.write(f"{shown} key(s).")

    def _revoke(self, options: dict[str, Any]) -> None:
        key = ApiKey.objects.filter(prefix=options["prefix"]).first()
        if key is None:
            raise CommandError(
                f"No key with prefix {options['prefix']!r}; see 'apikey list --all'."
            )
        if apikey_revoke(api_key=key, actor="cli"):
            self.stdout.write(f"Revoked key '{key.name}' ({key.prefix}).")
        else:
            self.stdout.write(f"Key '{key.name}' ({key.prefix}) was already revoked.")
