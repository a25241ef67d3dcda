"""Wiki-links in page bodies (SPEC §2.3, GBrain's extract pass): ``[[slug]]``,
``[[slug|label]]`` and ``[[Title]]`` become relations on every page write.

Pure text: parsing and zero-LLM link-type inference. Resolution against pages and the
relation writes live in ``brain.services.pages`` / ``brain.services.relations``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from brain.text import normalize_alias

# ``[[target]]`` or ``[[target|label]]``; no brackets or newlines inside.
_WIKILINK = re.compile(r"\[\[([^\[\]|\n]+?)(?:\|([^\[\]\n]*))?\]\]")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_SENTENCE_END = re.compile(r"[.!?;\n]\s")

# GBrain's context inference, first match wins (digest §1.6); the Schema then decides
# whether the type fits the two pages' types, else the link stays ``mentions``.
LINK_TYPE_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("founded", re.compile(r"\b(founded|founder of|co-founded|started)\b", re.I)),
    (
        "invested_in",
        re.compile(r"\b(invested in|backed|seeded|funded|wrote a check)\b", re.I),
    ),
    ("advises", re.compile(r"\b(advises|advisor|advising)\b", re.I)),
    (
        "works_at",
        re.compile(
            r"\b(works at|employed by|works for|joined|hired by|ceo of|cto of|cmo of)\b",
            re.I,
        ),
    ),
)
DEFAULT_LINK_TYPE = "mentions"


@dataclass(frozen=True)
class WikiLink:
    """One ``[[…]]`` occurrence: ``target`` as written (slug, alias or title),
    ``key`` its normalised form (``brain.text.normalize_alias``), ``label`` (``""``
    when absent), ``context`` (the sentence, ≤ 200 characters) and ``type_name``
    (inferred from the words just before the link; ``mentions`` by default)."""

    target: str
    key: str
    label: str
    context: str
    type_name: str


def infer_link_type(before: str) -> str:
    """The relation type the words before a link imply (``works at [[…]]`` →
    ``works_at``), or ``mentions``. ``before`` is the clause from the previous link
    or sentence start up to the link."""
    for name, pattern in LINK_TYPE_RULES:
        if pattern.search(before):
            return name
    return DEFAULT_LINK_TYPE


def parse_wikilinks(body: str) -> list[WikiLink]:
    """Every wiki-link of ``body`` in order, code spans and fences excluded; one per
    (key, type) (the first occurrence wins). Returns ``[]`` fast when the body has
    no ``[[``."""
    if "[[" not in (body or ""):
        return []
    text = _FENCE.sub(lambda m: " " * len(m.group(0)), body)
    text = _INLINE_CODE.sub(lambda m: " " * len(m.group(0)), text)
    links: list[WikiLink] = []
    seen: set[tuple[str, str]] = set()
    clause_start = 0
    for match in _WIKILINK.finditer(text):
        target = match.group(1).strip()
        key = normalize_alias(target)
        if not key:
            continue
        start = match.start()
        ends = list(_SENTENCE_END.finditer(text, 0, start))
        sentence_start = ends[-1].end() if ends else 0
        clause = text[max(clause_start, sentence_start) : start]
        clause_start = match.end()
        next_end = _SENTENCE_END.search(text, match.end())
        sentence = text[sentence_start : next_end.start() + 1 if next_end else None]
        type_name = infer_link_type(clause)
        if (key, type_name) in seen:
            continue
        seen.add((key, type_name))
        links.append(
            WikiLink(
                target=target,
                key=key,
                label=(match.group(2) or "").strip(),
                context=" ".join(sentence.split())[:200],
                type_name=type_name,
            )
        )
    return links
