"""The knowledge model (SPEC §2): sources, the Schema, raw and wiki layers, aliases,
relations, timeline, facts, search chunks and the append-only audit.

Models hold data and local invariants only; every write goes through
``brain.services`` (one write function for pages, SPEC §2.3). Uniqueness rules are
database constraints, never check-then-insert.

One module per area (``base``, ``sources``, ``schema``, ``pages``, ``facts``,
``search``, ``audit``, ``curation``); this package re-exports every model, so
``from brain.models import Page`` is the import path.
"""

from brain.models.audit import AuditEvent, PushEvent, SessionCursor
from brain.models.base import (
    EMBEDDING_DIMENSIONS,
    SOURCE_ID_PATTERN,
    TimeStampedModel,
    Visibility,
    page_slug_tail,
    page_surname,
)
from brain.models.curation import MergeProposal, PageMerge
from brain.models.facts import Fact
from brain.models.pages import (
    Alias,
    DanglingLink,
    Page,
    PageRevision,
    RawRecord,
    Relation,
    TimelineEntry,
    TitleWord,
)
from brain.models.schema import PageType, RelationType
from brain.models.search import Chunk
from brain.models.sources import Source

__all__ = [
    "Alias",
    "AuditEvent",
    "Chunk",
    "DanglingLink",
    "EMBEDDING_DIMENSIONS",
    "Fact",
    "MergeProposal",
    "Page",
    "PageMerge",
    "PageRevision",
    "PageType",
    "PushEvent",
    "RawRecord",
    "Relation",
    "RelationType",
    "SOURCE_ID_PATTERN",
    "SessionCursor",
    "Source",
    "TimeStampedModel",
    "TimelineEntry",
    "TitleWord",
    "Visibility",
    "page_slug_tail",
    "page_surname",
]
