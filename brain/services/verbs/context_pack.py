"""The ``context_pack`` verb (SPEC §4)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from brain.access import Caller, ReadScope
from brain.exceptions import PROTOCOL_VERSION
from brain.hints import unsearched_sources_hint
from brain.selectors_facts import fact_rank
from brain.services.entities import (
    entity_facts,
    entity_resolve,
    entity_threads,
    iso_ms,
    page_synopsis,
    page_type_name,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
from brain.services.verbs.common import (
    PACK_ENTITIES_MAX,
    PACK_FACTS_PER_ENTITY,
    PACK_PREAMBLE,
    _budget,
    _names,
    _pack,
    _sources,
    fact_wire,
    parse_since,
)

logger = logging.getLogger(__name__)

# --- context_pack ------------------------------------------------------------------


def verb_context_pack(
    *,
    caller: Caller,
    entities: str | Sequence[str] | None,
    budget_tokens: int | None = None,
    since: str | None = None,
    include_private: bool | None = None,
    source: str | Sequence[str] | None = None,
) -> dict[str, Any]:
    """context_pack (SPEC §4): cards, open threads and hot facts for up to 8 entities
    (comma list), plus a pre-rendered ``text`` block wrapped as data, not instructions.

    World-only unless a trusted caller sends ``include_private: true``. Unknown names
    are listed in ``missing`` (not an error), with a warning when the name is a
    private page (send ``include_private``) or lives in a readable source the pack
    did not cover. With ``budget_tokens`` whole items are
    packed in order cards → threads → facts. Zero LLM.
    """
    names = _names(entities)
    warnings: list[str] = []
    if len(names) > PACK_ENTITIES_MAX:
        warnings.append(
            f"{len(names)} entities asked; only the first {PACK_ENTITIES_MAX} are packed."
        )
        names = names[:PACK_ENTITIES_MAX]
    budget = _budget(budget_tokens)
    since_at = parse_since(since)
    if include_private and not caller.trusted:
        warnings.append("include_private ignored: this key is not trusted.")
    scope = caller.read_scope(_sources(source), include_private=bool(include_private))

    now = timezone.now()
    items: list[tuple[str, dict[str, Any]]] = []
    threads: list[tuple[str, dict[str, Any]]] = []
    fact_items: list[tuple[str, dict[str, Any]]] = []
    missing: list[str] = []
    seen_pages: set[int] = set()
    for name in names:
        resolution = entity_resolve(scope=scope, name=name)
        page = resolution.page
        if page is None:
            missing.append(name)
            continue
        if page.pk in seen_pages:
            continue
        seen_pages.add(page.pk)
        facts = entity_facts(scope=scope, page=page, now=now)
        threads_of = entity_threads(scope=scope, page=page, facts=facts, now=now).items
        items.append(
            (
                "card",
                {
                    "slug": page.slug,
                    "title": page.title,
                    "type": page_type_name(page),
                    "summary": page_synopsis(page),
                    "active_fact_count": len(facts),
                    "open_threads": threads_of,
                },
            )
        )
        threads += [("thread", {"entity_slug": page.slug, **t}) for t in threads_of]
        recent = [f for f in facts if since_at is None or f.created_at >= since_at]
        hot = fact_rank(recent, now=now)[:PACK_FACTS_PER_ENTITY]
        fact_items += [("fact", fact_wire(f, caller=caller)) for f in hot]

    warnings += _missing_hints(
        caller=caller, scope=scope, missing=missing, requested=_sources(source)
    )
    packed, used, dropped = _pack(items + threads + fact_items, budget)
    cards = [i for k, i in packed if k == "card"]
    out_threads = [i for k, i in packed if k == "thread"]
    out_facts = [i for k, i in packed if k == "fact"]
    return {
        "protocol_version": PROTOCOL_VERSION,
        "entities": names,
        "budget_tokens": budget,
        "since": iso_ms(since_at) if since_at else None,
        "include_private": include_private,
        "cards": cards,
        "open_threads": out_threads,
        "facts": out_facts,
        "missing": missing,
        "text": _render_pack(cards, out_threads, out_facts),
        "budget_used": used,
        "dropped_count": dropped,
        "private_included": scope.include_private,
        "warnings": warnings,
    }


def _missing_hints(
    *,
    caller: Caller,
    scope: ReadScope,
    missing: list[str],
    requested: list[str] | None,
) -> list[str]:
    """Why a name ``entity()`` would find is in ``missing``: a private page (a
    trusted caller that did not send ``include_private``; ``entity()`` resolves
    private pages for trusted callers) or a page in a readable source the pack did
    not cover (``brain.hints``). One warning per such name."""
    out: list[str] = []
    private = ReadScope(source_ids=scope.source_ids, include_private=True)
    for name in missing:
        if caller.trusted and not scope.include_private:
            found = entity_resolve(scope=private, name=name).page
            if found is not None:
                out.append(
                    f"'{name}' is the private page {found.slug}: send "
                    "include_private: true to pack it."
                )
                continue
        hint = unsearched_sources_hint(caller=caller, requested=requested, entity=name)
        if hint:
            out.append(f"'{name}': {hint['text']}")
    return out


def _data(text: str | None) -> str:
    """One line of pack content: whitespace collapsed (no forged headings or lines)
    and angle brackets neutralised (no closing the data fence from inside)."""
    return " ".join((text or "").split()).replace("<", "‹").replace(">", "›")


def _render_pack(
    cards: list[dict[str, Any]],
    threads: list[dict[str, Any]],
    facts: list[dict[str, Any]],
) -> str:
    """Render the pack as a fenced data block (never instructions)."""
    if not cards and not facts and not threads:
        return ""
    lines = [PACK_PREAMBLE, "<brain_context_data>"]
    for card in cards:
        lines.append(f"## {_data(card['title'])} ({card['slug']}, {card['type']})")
        if card["summary"]:
            lines.append(_data(card["summary"]))
        shown: set[str] = set()
        for thread in (t for t in threads if t["entity_slug"] == card["slug"]):
            due = f" (due {thread['due'][:10]})" if thread.get("due") else ""
            lines.append(f"- open: {_data(thread['text'])}{due}")
            shown.add(thread.get("fact_id") or "")
        for fact in (f for f in facts if f["entity_slug"] == card["slug"]):
            if fact["fact_id"] in shown:  # already an open line above
                continue
            lines.append(f"- fact [{fact['kind']}]: {_data(fact['fact'])}")
    lines.append("</brain_context_data>")
    return "\n".join(lines)
