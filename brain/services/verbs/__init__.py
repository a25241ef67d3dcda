"""The seven memory verbs v1 (SPEC §4): recall, remember, entity, synthesize, forget,
context_pack and delta.

Each verb is a plain function ``verb_<name>(*, caller, ...) -> dict`` that returns the
exact wire dict (``protocol_version: 1`` on every response, omitted optional inputs
echoed as ``null``, ids as strings). The HTTP API (``interfaces.http.verbs``) and the MCP
server call these functions and add nothing. Errors are ``brain.exceptions`` classes,
mapped to the SPEC §4 envelope by the transport.

One module per verb (``recall``, ``remember``, ``forget``, ``entity``,
``context_pack``, ``delta``, ``synthesize``) plus ``common``; this package re-exports
their public names.
"""

from brain.services.verbs.common import (
    DELTA_PAGE_LIMIT,
    EPOCH,
    FACT_FETCH_CAP,
    PACK_ENTITIES_MAX,
    PACK_FACTS_PER_ENTITY,
    PACK_PREAMBLE,
    RECALL_LIMIT_DEFAULT,
    RECALL_LIMIT_MAX,
    SESSION_IDLE,
    SYNTH_FACTS,
    SYNTH_MAX_TOKENS,
    SYNTH_PAGES,
    fact_wire,
    parse_since,
    search_pages,
)
from brain.services.verbs.context_pack import verb_context_pack
from brain.services.verbs.delta import (
    after_keyed,
    key_for,
    session_cursor_purge,
    verb_delta,
)
from brain.services.verbs.entity import verb_entity
from brain.services.verbs.forget import verb_forget
from brain.services.verbs.recall import verb_recall
from brain.services.verbs.remember import verb_remember
from brain.services.verbs.synthesize import SYNTH_SYSTEM, verb_synthesize

__all__ = [
    "DELTA_PAGE_LIMIT",
    "EPOCH",
    "FACT_FETCH_CAP",
    "PACK_ENTITIES_MAX",
    "PACK_FACTS_PER_ENTITY",
    "PACK_PREAMBLE",
    "RECALL_LIMIT_DEFAULT",
    "RECALL_LIMIT_MAX",
    "SESSION_IDLE",
    "SYNTH_FACTS",
    "SYNTH_MAX_TOKENS",
    "SYNTH_PAGES",
    "SYNTH_SYSTEM",
    "after_keyed",
    "fact_wire",
    "key_for",
    "parse_since",
    "search_pages",
    "session_cursor_purge",
    "verb_context_pack",
    "verb_delta",
    "verb_entity",
    "verb_forget",
    "verb_recall",
    "verb_remember",
    "verb_synthesize",
]
