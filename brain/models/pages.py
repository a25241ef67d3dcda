"""Raw and wiki layers: raw records, pages, revisions, aliases, relations, timeline (SPEC §2.3)."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone

from brain.models.base import TimeStampedModel, Visibility, page_slug_tail, page_surname
from brain.models.schema import PageType, RelationType
from brain.models.sources import Source

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
    content = models.TextField(
        blank=True, help_text="The original as text (derived: NULs removed)."
    )
    data = models.BinaryField(
        null=True,
        blank=True,
        editable=False,
        help_text="The original bytes exactly (RFC 822 messages, markdown files).",
    )
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
    # Set once by the write path when a remote (untrusted) caller created the page,
    # or revived it from a soft delete; never cleared. Read by the precedence rule
    # (``brain.precedence``): a remote-created page never takes an unqualified slug
    # or name from a page a trusted writer created (SPEC §8, §2.1, §4).
    created_by_remote = models.BooleanField(
        default=False,
        db_default=False,
        editable=False,
        help_text="Created by an untrusted API key (HTTP or MCP over HTTP).",
    )

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
            # The words of each title (``to_tsvector('simple', title)``): entity
            # near-miss candidates are the pages holding the name's words
            # (brain.services.entities.entity_suggestions; TitleWord is the lexicon).
            GinIndex(
                SearchVector("title", config="simple"), name="brain_page_title_words"
            ),
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


class TitleWord(models.Model):
    """A distinct word of a source's page titles: the lexicon that entity near-miss
    suggestions match a mistyped word against (SPEC §4 ``entity``), the pattern the
    pg_trgm documentation gives for spelling suggestions (trigram-match a table of
    unique words, far smaller than the texts they come from).

    Words are the lexemes of ``to_tsvector('simple', title)``, the ones
    ``brain_page_title_words`` indexes. Written only by the page write path
    (``brain.services.pages``) when a page is created or renamed; a word whose last
    title was renamed or deleted stays (it then names no page: one wasted candidate)
    until its source is deleted.
    """

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="+")
    word = models.TextField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "word"], name="%(app_label)s_%(class)s_unique_word"
            ),
        ]
        indexes = [
            # ``word % token`` for entity near-miss suggestions.
            GinIndex(
                fields=["word"], name="brain_titleword_trgm", opclasses=["gin_trgm_ops"]
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_id}:{self.word}"


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


class DanglingLink(TimeStampedModel):
    """A ``[[wiki-link]]`` whose target matched no page of the source when its page
    was written (SPEC §2.3). ``key`` is the target normalised as an alias; when a
    page with that slug, title or alias is written later, ``pages_write`` turns the
    row into a relation of type ``type_name`` and deletes it. Rewriting the from
    page replaces its rows. Listed in the admin for curators."""

    source = models.ForeignKey(
        Source, on_delete=models.CASCADE, related_name="dangling_links"
    )
    from_page = models.ForeignKey(
        Page, on_delete=models.CASCADE, related_name="dangling_links"
    )
    target = models.CharField(max_length=320)
    key = models.CharField(max_length=320)
    type_name = models.CharField(max_length=64, default="mentions")
    context = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["from_page", "key", "type_name"],
                name="%(app_label)s_%(class)s_unique_link",
            ),
        ]
        indexes = [models.Index(fields=["source", "key"])]

    def __str__(self) -> str:
        return f"{self.from_page_id} -> [[{self.target}]]"


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
