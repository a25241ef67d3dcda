"""Models of the connectors app: the import ledger, held items, sync runs and the
Google account link (SPEC §6).

Rows are written only by ``connectors.services`` and the connector ``sync`` modules;
uniqueness is enforced by the database (STYLE rules 5, 14).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from brain.models import Page, RawRecord, Source


class ImportedItem(models.Model):
    """One captured item a connector has already imported (the ledger, SPEC §6).

    ``external_id`` is the connector's stable key: a mail message key
    (``<message-id>`` or ``sha256:<hex>`` when the message has none), a Gmail message
    id, ``event:<id>``, ``contact:<resourceName>``. A re-run that meets the same key
    with the same ``content_hash`` does nothing. Unique per (source, external_id).
    """

    class Kind(models.TextChoices):
        MESSAGE = "message", "Mail message"
        DUPLICATE = "duplicate", "Duplicate copy of a message"
        EVENT = "event", "Calendar event"
        CONTACT = "contact", "Contact"

    class Outcome(models.TextChoices):
        STORED = "stored", "Stored (raw record and page)"
        SKIPPED = "skipped", "Skipped (see reason)"

    source = models.ForeignKey(
        Source, on_delete=models.CASCADE, related_name="imported_items"
    )
    external_id = models.CharField(max_length=512)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.MESSAGE)
    content_hash = models.CharField(max_length=64)
    thread_id = models.CharField(max_length=128, blank=True)
    # Normalised subject ("Re:"/"Fw:" stripped, lower-cased) and participants: how a
    # later import attaches a header-less reply to a thread of an earlier one.
    subject_key = models.CharField(max_length=300, blank=True)
    participants = models.JSONField(default=list, blank=True)
    outcome = models.CharField(
        max_length=8, choices=Outcome.choices, default=Outcome.STORED
    )
    reason = models.CharField(max_length=200, blank=True)
    raw_record = models.ForeignKey(
        RawRecord, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    page = models.ForeignKey(
        Page, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    imported_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "external_id"],
                name="%(app_label)s_%(class)s_unique_external_id",
            ),
        ]
        indexes = [
            # Dedup of copies without a shared Message-ID (Enron folders).
            models.Index(
                fields=["source", "content_hash"], name="connectors_item_hash"
            ),
            # Header-less threading across imports (mailbox_import).
            models.Index(
                fields=["source", "subject_key"], name="connectors_item_subject"
            ),
            models.Index(fields=["source", "thread_id"], name="connectors_item_thread"),
        ]

    def __str__(self) -> str:
        return f"{self.source_id}:{self.external_id}"


# ``HeldItem.kind`` of a configured IMAP folder the server no longer lists (issue
# 46): ``external_id`` is the folder's name; released once it is back or re-mapped.
FOLDER_HELD_KIND = "imap_folder"


class HeldItem(models.Model):
    """An item an importer could not store: held with a typed reason and its raw
    bytes, reported, and the rest of the import continues (SPEC §6 "Every
    importer"). ``raw`` is exactly what was read (b'' when there was nothing to
    read: a FIFO, a link outside the root). Released (``released_at``) when a later
    run or the admin's "retry" stores it."""

    class Reason(models.TextChoices):
        # Mail (mailbox files, IMAP, Gmail)
        NOT_MAIL = "not_mail", "Not a mail message"
        EMPTY = "empty", "Empty file"
        PARSE_ERROR = "parse_error", "The parser failed on it"
        STORAGE_REFUSED = "storage_refused", "The write was refused"
        STORAGE_ERROR = "storage_error", "The database rejected it"
        MAILDIR_TMP = "maildir_tmp", "Unfinished maildir delivery (tmp/)"
        # Folder walk
        SYMLINK_OUTSIDE_ROOT = "symlink_outside_root", "Link outside the import folder"
        SYMLINK_LOOP = "symlink_loop", "Link loop or folder read twice"
        NOT_REGULAR_FILE = "not_regular_file", "FIFO, socket or device"
        UNREADABLE = "unreadable", "Unreadable file"
        # Markdown
        INVALID_FRONTMATTER = "invalid_frontmatter", "Invalid frontmatter value"
        SLUG_COLLISION = "slug_collision", "Two files map to one slug"
        # Google and anything else a connector reports
        API_ERROR = "api_error", "The API refused the item"
        OTHER = "other", "Other permanent error"

    source = models.ForeignKey(
        Source, on_delete=models.CASCADE, related_name="held_items"
    )
    external_id = models.CharField(max_length=512)
    kind = models.CharField(max_length=32)
    error_code = models.CharField(max_length=64)
    message = models.TextField(blank=True)
    location = models.CharField(
        max_length=1000, blank=True, help_text="Where the item was read (file, line)."
    )
    folder = models.CharField(max_length=300, blank=True)
    raw = models.BinaryField(
        null=True, blank=True, help_text="The item's bytes exactly as read."
    )
    attempts = models.PositiveIntegerField(default=1)
    first_failed_at = models.DateTimeField(default=timezone.now, editable=False)
    last_failed_at = models.DateTimeField(default=timezone.now)
    released_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "kind", "external_id"],
                name="%(app_label)s_%(class)s_unique_item",
            ),
        ]
        indexes = [
            models.Index(fields=["source", "released_at"], name="connectors_held_open"),
        ]

    def __str__(self) -> str:
        return f"{self.source_id}:{self.kind}:{self.external_id}"


class SyncRun(models.Model):
    """Append-only audit row of one sync or import (STYLE rule 22)."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        SUCCEEDED_WITH_HOLDS = "succeeded_with_holds", "Succeeded, items held"
        # Ended without error but did not cover everything (SPEC §6: a Gmail
        # re-list still going, a configured IMAP folder gone); the next run goes on.
        PARTIAL = "partial", "Partial (not finished)"
        FAILED = "failed", "Failed"

    source = models.ForeignKey(
        Source, on_delete=models.CASCADE, related_name="sync_runs"
    )
    kind = models.CharField(max_length=32, editable=False)
    actor = models.CharField(max_length=200, editable=False)
    status = models.CharField(
        max_length=24, choices=Status.choices, default=Status.RUNNING, editable=False
    )
    started_at = models.DateTimeField(
        default=timezone.now, editable=False, db_index=True
    )
    finished_at = models.DateTimeField(null=True, blank=True, editable=False)
    counts = models.JSONField(default=dict, editable=False)
    error = models.TextField(blank=True, editable=False)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"{self.source_id} {self.kind} {self.started_at:%Y-%m-%d %H:%M}"


class GoogleAccount(models.Model):
    """The link between a ``google`` Source and the social-auth grant holding its
    tokens (SPEC §6.1). Tokens stay in ``UserSocialAuth.extra_data`` (server-side,
    never logged); this row records the account address and the scopes granted."""

    source = models.OneToOneField(
        Source, on_delete=models.CASCADE, related_name="google_account"
    )
    social_auth = models.ForeignKey(
        "social_django.UserSocialAuth",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    email = models.EmailField(max_length=320, unique=True)
    granted_scopes = models.JSONField(default=list, blank=True)
    missing_scopes = models.JSONField(default=list, blank=True)
    send_as = models.JSONField(default=list, blank=True)
    connected_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["email"]

    def __str__(self) -> str:
        return self.email

    @property
    def scopes_complete(self) -> bool:
        """True when every read-only scope the brain asks for was granted."""
        return not self.missing_scopes


class SharedMailbox(models.Model):
    """A team mailbox synced on its own schedule with no person signing in
    (SPEC §6.1 shared mailboxes, §6.1a IMAP).

    ``provider`` ``workspace``: a ``google`` source whose address a Workspace service
    account impersonates (domain-wide delegation); ``imap``: an ``imap`` source read
    from any IMAP server. The owner addresses of the source are the shared address
    plus every member's address, so a reply by any member counts as "mine" (§5.1).
    Members are the staff users who see the mailbox in the admin. Credentials: the
    name of an environment variable (``secret_env``) or an encrypted value
    (``secret_encrypted``, see ``connectors.secrets``); never shown again.
    """

    class Provider(models.TextChoices):
        WORKSPACE = "workspace", "Google Workspace (domain-wide delegation)"
        IMAP = "imap", "IMAP server"

    class Security(models.TextChoices):
        SSL = "ssl", "SSL/TLS (port 993)"
        STARTTLS = "starttls", "STARTTLS (port 143)"
        PLAIN = "plain", "None (loopback or tests only)"

    class Auth(models.TextChoices):
        PASSWORD = "password", "Password (LOGIN)"
        XOAUTH2 = "xoauth2", "OAuth 2.0 access token (XOAUTH2)"

    SYNC_EVERY_CHOICES = [(m, f"every {m} minutes") for m in (5, 10, 15, 20, 30)] + [
        (60, "every hour")
    ]

    source = models.OneToOneField(
        Source, on_delete=models.CASCADE, related_name="shared_mailbox"
    )
    provider = models.CharField(max_length=16, choices=Provider.choices)
    address = models.EmailField(
        max_length=320, unique=True, help_text="The shared address, e.g. support@…"
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="shared_mailboxes",
        help_text="Staff users who see this mailbox in the admin; their addresses "
        "count as the mailbox's own (a reply by a member is 'mine').",
    )
    sync_every_minutes = models.PositiveSmallIntegerField(
        choices=SYNC_EVERY_CHOICES, default=10
    )
    imap_host = models.CharField(max_length=255, blank=True)
    imap_port = models.PositiveIntegerField(
        null=True, blank=True, help_text="Empty: 993 for SSL, 143 otherwise."
    )
    imap_security = models.CharField(
        max_length=16, choices=Security.choices, default=Security.SSL
    )
    imap_username = models.CharField(
        max_length=320, blank=True, help_text="Empty: the shared address."
    )
    imap_auth = models.CharField(
        max_length=16, choices=Auth.choices, default=Auth.PASSWORD
    )
    imap_folders = models.JSONField(
        default=list,
        blank=True,
        help_text="Folders to sync; empty: INBOX and the \\Sent folder (SPECIAL-USE).",
    )
    secret_env = models.CharField(
        max_length=100,
        blank=True,
        help_text="Name of the environment variable holding the password or token.",
    )
    secret_encrypted = models.TextField(blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["address"]
        verbose_name_plural = "shared mailboxes"

    def __str__(self) -> str:
        return self.address

    @property
    def has_secret(self) -> bool:
        """True when a credential is configured (environment or encrypted)."""
        return bool(self.secret_env or self.secret_encrypted)


class WorkspaceServiceAccount(models.Model):
    """A Google Workspace service-account key uploaded in the admin (SPEC §6.1
    shared mailboxes). The JSON key is stored encrypted (``key_encrypted``) and
    never shown again; ``client_email`` and ``client_id`` are what an admin needs
    to grant domain-wide delegation. The newest row is the one in use; a key file
    named by ``BRAIN_GOOGLE_SERVICE_ACCOUNT_FILE`` takes precedence."""

    client_email = models.EmailField(max_length=320, editable=False)
    client_id = models.CharField(max_length=64, editable=False)
    private_key_id = models.CharField(max_length=64, editable=False)
    key_encrypted = models.TextField(editable=False)
    uploaded_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-uploaded_at", "-id"]

    def __str__(self) -> str:
        return self.client_email
