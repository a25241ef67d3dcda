"""The one write path for pages (SPEC §2.3) and the search index behind it (SPEC §3).

Every writer (HTTP API, MCP, admin, connectors, markdown import, dream) calls
``page_write`` (or its ``page_add`` / ``page_update`` shorthands), or ``pages_write``
for a batch (mail importers; ``page_write`` is ``pages_write`` with one page). One call
validates the input against the Schema, then writes the raw layer (``RawRecord``), the
wiki layer (``Page``), its ``PageRevision``, aliases, relations, the title-word lexicon
(``TitleWord``) and the keyword half of the index (chunks with their tsvector) in ONE transaction: neither layer is
ever updated without the other. A batch costs a fixed number of statements, not a
number per page (``brain.bulk``; SPEC §11 ingest rate). Embeddings are network or CPU-heavy work, so they run after the
transaction commits (STYLE rule 15), only for the page that was written and only when
its content hash changed; ``Page.indexed_hash`` records the content the index was
built from, so ``indexed_hash != content_hash`` means "index behind".

One module per stage (``inputs``, ``plan``, ``write``, ``lifecycle``, ``index``,
``revisions`` the stale-base check);
this package re-exports their public names.
"""

from brain.services.pages.index import (
    page_reindex,
    pages_embed_backlog,
    pages_embed_pending,
    pages_rechunk,
)
from brain.services.pages.inputs import (
    AGENT_INPUT_TAG,
    EMBED_BATCH,
    EPHEMERAL_KEYS,
    MODES,
    PageInput,
    RawInput,
    RelationInput,
    TimelineInput,
    WriteResult,
)
from brain.services.pages.lifecycle import (
    page_hard_delete,
    page_restore,
    page_soft_delete,
)
from brain.services.pages.links import pages_link_waiting
from brain.services.pages.revisions import (
    body_at_revision,
    check_base_revision,
    page_revision,
)
from brain.services.pages.write import (
    page_add,
    page_update,
    page_write,
    pages_write,
    raws_store,
    title_words_add,
)

__all__ = [
    "AGENT_INPUT_TAG",
    "EMBED_BATCH",
    "EPHEMERAL_KEYS",
    "MODES",
    "PageInput",
    "RawInput",
    "RelationInput",
    "TimelineInput",
    "WriteResult",
    "body_at_revision",
    "check_base_revision",
    "page_add",
    "pages_link_waiting",
    "page_hard_delete",
    "page_reindex",
    "pages_rechunk",
    "page_restore",
    "page_revision",
    "page_soft_delete",
    "page_update",
    "page_write",
    "pages_embed_backlog",
    "pages_embed_pending",
    "pages_write",
    "raws_store",
    "title_words_add",
]
