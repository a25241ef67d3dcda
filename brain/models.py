"""The knowledge model (SPEC §2): sources, the Schema, raw and wiki layers, aliases,
relations, timeline, facts, search chunks and the append-only audit.

Models hold data and local invariants only; every write goes through
``brain.services`` (one write function for pages, SPEC §2.3). Uniqueness rules are
database constraints, never check-then-insert.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.core.validators import MaxLengthValidator, RegexValidator
from django.db import models
from django.db.models import F, Func, Q, Value
from django.db.models.functions import Lower
from django.utils import timezone
from pgvector.django import HnswIndex, VectorField

# SPEC §2.1: 1-32 chars, lower-case letters, digits and inner hyphens.
SOURCE_ID_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$"
# Dimension of the default local model (all-MiniLM-L6-v2); a different dimension is a
# managed re-embed with a migration, never a silent mix of vectors (SPEC §3).
EMBEDDING_DIMENSIONS = 384


class TimeStampedModel(models.Model):
    """Abstract base: ``created_at`` (indexed) and ``updated_at`` (auto), both UTC."""

    created_at = models.DateTimeField(
        default=timezone.now, db_index=True, editable=False
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class Visibility(models.TextChoices):
    """Who may read a page or fact (SPEC §2.3, §2.4, §8)."""

    WORLD = "world", "World"
    PRIVATE = "private", "Private (trusted callers only)"


def page_surname() -> Func:
    """SQL expression: the lower-cased last word of a page title (a person's surname).

    Indexed as ``brain_page_surname`` for the push-context surname arm (SPEC §9);
    queries must use this exact expression to hit the index.
    """
    return Lower(
        Func(F("title"), Value(r"^.*\s"), Value(""), function="regexp_replace")
    )


def page_slug_tail() -> Func:
    """SQL expression: the last ``/`` segment of a slug (``people/jane-doe`` →
    ``jane-doe``). Indexed as ``brain_page_slug_tail`` for the slug-suffix arm."""
    return Func(F("slug"), Value("^.*/"), Value(""), function="regexp_replace")


# --- Sources (SPEC §2.1) ------------------------------------------------------------


class Source(TimeStampedModel):
    """One stream of records: a Google account, a mailbox, a markdown folder, or the
    harness-written notes (``default``). Every read is scoped to a set of sources."""

    class Kind(models.TextChoices):
        GOOGLE = "google", "Google account"
        MAILBOX = "mailbox", "Mailbox files"
        IMAP = "imap", "IMAP mailbox"
        MARKDOWN = "markdown", "Markdown folder"
        MANUAL = "manual", "Manual / harness notes"

    id = models.CharField(
        primary_key=True,
        max_length=32,
        validators=[RegexValidator(SOURCE_ID_PATTERN, "1-32 chars: a-z, 0-9 and -")],
        help_text="Immutable id, e.g. 'default' or 'acme-shared'.",
    )
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.MANUAL)
    owner_addresses = ArrayField(
        models.CharField(max_length=320),
        default=list,
        blank=True,
        help_text="Addresses that count as 'me' (account address plus send-as aliases).",
    )
    federated = models.BooleanField(
        default=False, help_text="Included in searches that name no source."
    )
    config = models.JSONField(default=dict, blank=True)
    # Sync state (SPEC §2.1): historyId, syncTokens, backfill floor, file offsets.
    cursor = models.JSONField(default=dict, blank=True)
    last_sync_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    counts = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(id__regex=SOURCE_ID_PATTERN),
                name="%(app_label)s_%(class)s_id_format",
            ),
        ]

    def __str__(self) -> str:
        return self.id


# --- Schema (SPEC §2.2) -------------------------------------------------------------


class PageType(TimeStampedModel):
    """A Schema page type such as ``person``; governs every page write."""

    class Primitive(models.TextChoices):
        ENTITY = "entity", "Entity"
        MEDIA = "media", "Media"
        TEMPORAL = "temporal", "Temporal"
        ANNOTATION = "annotation", "Annotation"
        CONCEPT = "concept", "Concept"

    name = models.CharField(
        max_length=64,
        unique=True,
        validators=[RegexValidator(r"^[a-z][a-z0-9_]*$", "snake_case")],
    )
    primitive = models.CharField(max_length=16, choices=Primitive.choices)
    path_prefixes = ArrayField(
        models.CharField(max_length=100),
        default=list,
        blank=True,
        help_text="Slug prefixes that imply this type, e.g. 'people/'.",
    )
    required_fields = ArrayField(
        models.CharField(max_length=100),
        default=list,
        blank=True,
        help_text="Frontmatter keys every page of this type must carry.",
    )
    extractable = models.BooleanField(
        default=False, help_text="Commitments and facts may be extracted from it."
    )
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class RelationType(TimeStampedModel):
    """A Schema relation type such as ``works_at``; empty endpoint sets allow any."""

    name = models.CharField(
        max_length=64,
        unique=True,
        validators=[RegexValidator(r"^[a-z][a-z0-9_]*$", "snake_case")],
    )
    inverse_name = models.CharField(max_length=64, blank=True)
    source_types = models.ManyToManyField(
        PageType,
        blank=True,
        related_name="outgoing_relation_types",
        help_text="Allowed page types at the 'from' end (empty: any).",
    )
    target_types = models.ManyToManyField(
        PageType,
        blank=True,
        related_name="incoming_relation_types",
        help_text="Allowed page types at the 'to' end (empty: any).",
    )
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


# --- Raw and wiki layers (SPEC §2.3) -------------------------------------------------


class RawRecord(models.Model):
    """An immutable captured item: a Gmail message JSON, an RFC 822 message, a calendar
    event, the exact text a harness submitted. Facts and loops point here as evidence.
    """

    class Kind(models.TextChoices):
        GMAIL_MESSAGE = "gmail_message", "Gmail message (API JSON)"
        RFC822 = "rfc822", "RFC 822 message"
        CALENDAR_EVENT = "calendar_event", "Calendar event (API JSON)"
        CONTACT = "contact", "Contact (People API JSON)"
        MARKDOWN = "markdown", "Markdown file"
        AGENT_INPUT = "agent_input", "Text submitted by a harness or person"

    source = models.ForeignKey(
        Source, on_delete=models.CASCADE, related_name="raw_records"
    )
    external_id = models.CharField(max_length=512)
    kind = models.CharField(max_length=24, choices=Kind.choices)
    content = models.TextField(blank=True, help_text="The original bytes as text.")
    payload = models.JSONField(null=True, blank=True, help_text="The original JSON.")
    metadata = models.JSONField(default=dict, blank=True)
    content_hash = models.CharField(max_length=64)
    page = models.ForeignKey(
        "Page",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="raw_records",
    )
    captured_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "external_id"],
                name="%(app_label)s_%(class)s_unique_external_id",
            ),
        ]
        indexes = [models.Index(fields=["source", "content_hash"])]

    def __str__(self) -> str:
        return f"{self.source_id}:{self.external_id}"


class Page(TimeStampedModel):
    """The curated wiki page: the compiled truth in markdown plus frontmatter.

    ``slug`` is unique per source; ``deleted_at`` marks a soft delete (purged by dream
    after 72 h, SPEC §10). Write only through ``brain.services.pages``.
    """

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="pages")
    slug = models.CharField(max_length=255)
    type = models.ForeignKey(PageType, on_delete=models.PROTECT, related_name="pages")
    title = models.CharField(max_length=500)
    frontmatter = models.JSONField(default=dict, blank=True)
    body = models.TextField(blank=True)
    summary = models.TextField(blank=True)
    tags = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    visibility = models.CharField(
        max_length=8, choices=Visibility.choices, default=Visibility.WORLD
    )
    effective_date = models.DateField(null=True, blank=True)
    content_hash = models.CharField(max_length=64, blank=True)
    # The hash of the content the chunks and embeddings were built from; differs from
    # ``content_hash`` while the index is behind (SPEC §2.3 "whether the index is current").
    indexed_hash = models.CharField(max_length=64, blank=True)
    last_retrieved_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "slug"], name="%(app_label)s_%(class)s_unique_slug"
            ),
        ]
        indexes = [
            models.Index(fields=["source", "type"]),
            models.Index(fields=["updated_at", "slug"], name="brain_page_delta_keyset"),
            # Trigram lookups for entity near-miss suggestions and push-context titles.
            GinIndex(
                fields=["title"],
                name="brain_page_title_trgm",
                opclasses=["gin_trgm_ops"],
            ),
            # Push context (SPEC §9): exact-title, surname and slug-suffix arms look up
            # every candidate mention of a turn at once with these expressions.
            models.Index(Lower("title"), name="brain_page_title_lower"),
            models.Index(page_surname(), name="brain_page_surname"),
            models.Index(page_slug_tail(), name="brain_page_slug_tail"),
        ]

    def __str__(self) -> str:
        return f"{self.source_id}:{self.slug}"

    @property
    def is_deleted(self) -> bool:
        """True when the page is soft-deleted."""
        return self.deleted_at is not None


class PageRevision(models.Model):
    """Append-only history of a page: who changed it, with what provenance, and what
    the body and frontmatter were before, so any edit can be inspected and reverted."""

    page = models.ForeignKey(Page, on_delete=models.CASCADE, related_name="revisions")
    actor = models.CharField(max_length=200, editable=False)
    provenance = models.JSONField(default=dict, editable=False)
    operation = models.CharField(max_length=32, editable=False)
    previous_title = models.CharField(max_length=500, blank=True, editable=False)
    previous_body = models.TextField(blank=True, editable=False)
    previous_frontmatter = models.JSONField(default=dict, editable=False)
    content_hash = models.CharField(max_length=64, editable=False)
    raw_record = models.ForeignKey(
        RawRecord, null=True, blank=True, on_delete=models.SET_NULL, editable=False
    )
    created_at = models.DateTimeField(
        default=timezone.now, db_index=True, editable=False
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.page_id}@{self.created_at:%Y-%m-%d %H:%M}"


class Alias(models.Model):
    """Normalised text that names a page within a source (SPEC §2.3).

    Collisions across pages are allowed and resolved at read time (ambiguous means no
    pick); the same (source, alias, page) triple is stored once.
    """

    class Kind(models.TextChoices):
        NAME = "name", "Name"
        EMAIL = "email", "Email address"
        HANDLE = "handle", "@handle"
        MANUAL = "manual", "Added by a curator"

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="aliases")
    page = models.ForeignKey(Page, on_delete=models.CASCADE, related_name="aliases")
    alias = models.CharField(max_length=320)
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.NAME)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        verbose_name_plural = "aliases"
        constraints = [
            models.UniqueConstraint(
                fields=["source", "alias", "page"],
                name="%(app_label)s_%(class)s_unique_triple",
            ),
        ]
        indexes = [models.Index(fields=["source", "alias"])]

    def __str__(self) -> str:
        return self.alias


class Relation(TimeStampedModel):
    """A typed edge between two pages of one source (SPEC §2.3).

    Backlink counts exclude ``mentions``.
    """

    source = models.ForeignKey(
        Source, on_delete=models.CASCADE, related_name="relations"
    )
    from_page = models.ForeignKey(
        Page, on_delete=models.CASCADE, related_name="outgoing_relations"
    )
    to_page = models.ForeignKey(
        Page, on_delete=models.CASCADE, related_name="incoming_relations"
    )
    relation_type = models.ForeignKey(
        RelationType, on_delete=models.PROTECT, related_name="relations"
    )
    context = models.CharField(max_length=200, blank=True)
    provenance = models.JSONField(default=dict, blank=True)
    created_by = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["from_page", "to_page", "relation_type"],
                name="%(app_label)s_%(class)s_unique_triple",
            ),
        ]
        indexes = [models.Index(fields=["to_page", "relation_type"])]

    def __str__(self) -> str:
        return f"{self.from_page_id} -{self.relation_type_id}-> {self.to_page_id}"


class TimelineEntry(models.Model):
    """A dated line in a page's timeline, deduplicated on (page, date, summary hash,
    source reference) (SPEC §2.3)."""

    page = models.ForeignKey(Page, on_delete=models.CASCADE, related_name="timeline")
    date = models.DateField()
    summary = models.TextField()
    summary_hash = models.CharField(max_length=64)
    source_ref = models.CharField(
        max_length=500, blank=True, help_text="Where the entry came from (evidence)."
    )
    raw_record = models.ForeignKey(
        RawRecord, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        verbose_name_plural = "timeline entries"
        ordering = ["-date", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["page", "date", "summary_hash", "source_ref"],
                name="%(app_label)s_%(class)s_dedup",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.date}: {self.summary[:60]}"


# --- Facts (SPEC §2.4) ---------------------------------------------------------------


class Fact(TimeStampedModel):
    """Hot memory: a short statement with provenance, confidence and a validity window.

    Active means ``expired_at IS NULL`` and ``valid_until`` null or in the future.
    Forget and supersession expire a fact; nothing is ever deleted.
    """

    class Kind(models.TextChoices):
        EVENT = "event", "Event"
        PREFERENCE = "preference", "Preference"
        COMMITMENT = "commitment", "Commitment"
        BELIEF = "belief", "Belief"
        FACT = "fact", "Fact"

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="facts")
    entity = models.ForeignKey(
        Page, null=True, blank=True, on_delete=models.SET_NULL, related_name="facts"
    )
    text = models.TextField()
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.FACT)
    visibility = models.CharField(
        max_length=8, choices=Visibility.choices, default=Visibility.WORLD
    )
    provenance = models.TextField(validators=[MaxLengthValidator(500)])
    # Structured evidence: raw record, page, quote, message id, extractor and model.
    raw_record = models.ForeignKey(
        RawRecord,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="facts",
    )
    evidence = models.JSONField(default=dict, blank=True)
    confidence = models.FloatField(default=1.0)
    valid_from = models.DateTimeField(default=timezone.now)
    valid_until = models.DateTimeField(null=True, blank=True)
    expired_at = models.DateTimeField(null=True, blank=True)
    expired_reason = models.CharField(max_length=500, blank=True)
    superseded_by = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="supersedes",
    )
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True)
    created_by = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(confidence__gte=0) & Q(confidence__lte=1),
                name="%(app_label)s_%(class)s_confidence_range",
            ),
            models.CheckConstraint(
                condition=Q(provenance__regex=r"\S"),
                name="%(app_label)s_%(class)s_provenance_required",
            ),
        ]
        indexes = [
            # recall by entity and the entity card's active-fact count.
            models.Index(
                fields=["entity", "kind"],
                condition=Q(expired_at__isnull=True),
                name="brain_fact_active_entity",
            ),
            models.Index(fields=["source", "created_at"]),
            HnswIndex(
                name="brain_fact_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self) -> str:
        return self.text[:80]

    @property
    def is_active(self) -> bool:
        """True while not expired and inside its validity window (SPEC §2.4)."""
        if self.expired_at is not None:
            return False
        return self.valid_until is None or self.valid_until > timezone.now()


# --- Search index (SPEC §3) ----------------------------------------------------------


class Chunk(models.Model):
    """A searchable piece of a page body (about 300 tokens), with its tsvector and
    embedding. ``source`` and ``visibility`` are copied from the page so both search
    arms filter without a join."""

    page = models.ForeignKey(Page, on_delete=models.CASCADE, related_name="chunks")
    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="+")
    visibility = models.CharField(max_length=8, choices=Visibility.choices)
    ordinal = models.PositiveIntegerField()
    text = models.TextField()
    token_count = models.PositiveIntegerField(default=0)
    tsv = SearchVectorField(null=True)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True)
    content_hash = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["page", "ordinal"],
                name="%(app_label)s_%(class)s_unique_ordinal",
            ),
        ]
        indexes = [
            GinIndex(fields=["tsv"], name="brain_chunk_tsv_gin"),
            HnswIndex(
                name="brain_chunk_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            models.Index(fields=["source", "visibility"]),
        ]

    def __str__(self) -> str:
        return f"{self.page_id}#{self.ordinal}"


# --- Audit, sessions, push log -------------------------------------------------------


class AuditEvent(models.Model):
    """Append-only record of a significant change (fact forgotten or superseded, page
    deleted or merged, Schema edited, sync run). Nobody edits these rows."""

    class Action(models.TextChoices):
        PAGE_CREATED = "page_created", "Page created"
        PAGE_UPDATED = "page_updated", "Page updated"
        PAGE_DELETED = "page_deleted", "Page deleted"
        PAGE_RESTORED = "page_restored", "Page restored"
        PAGE_MERGED = "page_merged", "Page merged"
        FACT_REMEMBERED = "fact_remembered", "Fact remembered"
        FACT_SUPERSEDED = "fact_superseded", "Fact superseded"
        FACT_FORGOTTEN = "fact_forgotten", "Fact forgotten"
        FACT_EXPIRED = "fact_expired", "Fact expired"
        RELATION_ADDED = "relation_added", "Relation added"
        RELATION_REMOVED = "relation_removed", "Relation removed"
        SCHEMA_CHANGED = "schema_changed", "Schema changed"
        SOURCE_SYNCED = "source_synced", "Source synced"
        KEY_CREATED = "key_created", "API key created"
        KEY_REVOKED = "key_revoked", "API key revoked"
        OTHER = "other", "Other"

    event_time = models.DateTimeField(
        default=timezone.now, db_index=True, editable=False
    )
    actor = models.CharField(max_length=200, editable=False)
    action = models.CharField(max_length=32, choices=Action.choices, editable=False)
    source = models.ForeignKey(
        Source, null=True, blank=True, on_delete=models.SET_NULL, editable=False
    )
    target_type = models.CharField(max_length=64, editable=False)
    target_id = models.CharField(max_length=255, editable=False)
    extra_data = models.JSONField(default=dict, editable=False)

    class Meta:
        ordering = ["-event_time", "-id"]
        indexes = [models.Index(fields=["target_type", "target_id"])]

    def __str__(self) -> str:
        return f"{self.action} {self.target_type}:{self.target_id}"


class SessionCursor(models.Model):
    """A delta session cursor keyed by (source, client, session) (SPEC §4 ``delta``).

    ``position`` holds the keyset ``{since, slug}`` of the newest delivered item;
    cursors idle for 7 days expire.
    """

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="+")
    client = models.CharField(max_length=200)
    session_id = models.CharField(max_length=200)
    position = models.JSONField(default=dict)
    touched_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "client", "session_id"],
                name="%(app_label)s_%(class)s_unique_session",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.client}/{self.session_id}"


class PushEvent(models.Model):
    """What push context offered in a session, for suppression of repeats and later
    precision measurement (SPEC §9)."""

    session_id = models.CharField(max_length=200, db_index=True)
    client = models.CharField(max_length=200, blank=True)
    page = models.ForeignKey(Page, on_delete=models.CASCADE, related_name="push_events")
    mention = models.CharField(max_length=300)
    arm = models.CharField(max_length=32)
    confidence = models.FloatField()
    pushed_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session_id", "client", "page"],
                name="%(app_label)s_%(class)s_once_per_session",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}: {self.page_id}"


# --- Curation queue written by dream (SPEC §10) ------------------------------------------


class MergeProposal(models.Model):
    """Dream's suggestion that two pages of one source name the same entity (same
    email alias, or near-identical titles by pg_trgm similarity). A curator accepts
    (merge: ``merge_page`` into ``keep_page``, keeping aliases and a redirect) or
    rejects it in the admin. One proposal per unordered page pair, ever, so a
    rejected pair is not proposed again. Dream-generated (``created_by="dream"``)."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        MERGED = "merged", "Merged"
        REJECTED = "rejected", "Rejected"

    class Reason(models.TextChoices):
        SAME_EMAIL = "same_email", "Same email alias"
        SIMILAR_NAME = "similar_name", "Near-identical name"

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="+")
    keep_page = models.ForeignKey(
        Page, on_delete=models.CASCADE, related_name="merge_proposals_kept"
    )
    merge_page = models.ForeignKey(
        Page, on_delete=models.CASCADE, related_name="merge_proposals_merged"
    )
    reason = models.CharField(max_length=16, choices=Reason.choices)
    score = models.FloatField(default=1.0, help_text="Title similarity (0..1).")
    evidence = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    created_by = models.CharField(max_length=200, default="dream", editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    decided_at = models.DateTimeField(null=True, blank=True, editable=False)
    decided_by = models.CharField(max_length=200, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                models.functions.Least("keep_page", "merge_page"),
                models.functions.Greatest("keep_page", "merge_page"),
                name="%(app_label)s_%(class)s_unique_pair",
            ),
            models.CheckConstraint(
                condition=~Q(keep_page=models.F("merge_page")),
                name="%(app_label)s_%(class)s_distinct_pages",
            ),
        ]

    def __str__(self) -> str:
        return f"merge {self.merge_page_id} into {self.keep_page_id} ({self.reason})"
