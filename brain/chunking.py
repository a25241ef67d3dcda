"""Heading- and paragraph-aware chunking of page bodies (SPEC §3).

Pure functions, no database access. A body is cut into blocks at blank lines; a
markdown heading always starts a new chunk; blocks are packed into chunks of about
``CHUNK_TOKENS`` tokens (chars/4 estimate); a chunk cut for size starts with a short
overlap (the tail of the previous chunk, cut at a word boundary). Blocks longer than a
chunk are split at sentence ends, then at spaces.
"""

from __future__ import annotations

import re

from brain.mailtext import split_secondary
from brain.text import estimate_tokens

CHUNK_TOKENS = 300
OVERLAP_CHARS = 200  # about 50 tokens
_CHUNK_CHARS = CHUNK_TOKENS * 4

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _split_long(block: str) -> list[str]:
    """Split one over-long block at sentence ends, then spaces, into ≤ chunk pieces."""
    pieces: list[str] = []
    current = ""
    for sentence in _SENTENCE_END.split(block):
        while len(sentence) > _CHUNK_CHARS:
            cut = sentence.rfind(" ", 0, _CHUNK_CHARS)
            cut = cut if cut > _CHUNK_CHARS // 2 else _CHUNK_CHARS
            head, sentence = sentence[:cut], sentence[cut:].lstrip()
            if current:
                pieces.append(current)
                current = ""
            pieces.append(head)
        if current and len(current) + 1 + len(sentence) > _CHUNK_CHARS:
            pieces.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}" if current else sentence
    if current:
        pieces.append(current)
    return pieces


def _tail(text: str) -> str:
    """The last ~``OVERLAP_CHARS`` characters of ``text``, starting at a word."""
    if len(text) <= OVERLAP_CHARS:
        return text
    tail = text[-OVERLAP_CHARS:]
    space = tail.find(" ")
    return tail[space + 1 :] if 0 <= space < len(tail) - 1 else tail


def chunk_body(body: str) -> list[str]:
    """Cut a markdown body into chunk texts of about 300 tokens (SPEC §3).

    Returns a list of non-empty strings in body order; ``[]`` for a blank body.
    Headings start a new chunk; size cuts carry a ~50-token overlap.
    """
    blocks: list[str] = []
    for raw in re.split(r"\n\s*\n", body or ""):
        block = raw.strip()
        if not block:
            continue
        if len(block) > _CHUNK_CHARS:
            blocks.extend(_split_long(block))
        else:
            blocks.append(block)

    chunks: list[str] = []
    current = ""
    for block in blocks:
        if not current:
            current = block
            continue
        if _HEADING.match(block):
            chunks.append(current)
            current = block
        elif len(current) + 2 + len(block) > _CHUNK_CHARS:
            chunks.append(current)
            overlap = _tail(current)
            current = (
                f"{overlap}\n\n{block}"
                if len(overlap) + len(block) < _CHUNK_CHARS
                else block
            )
        else:
            current = f"{current}\n\n{block}"
    if current:
        chunks.append(current)
    return chunks


def chunk_segments(body: str) -> list[tuple[str, bool]]:
    """``chunk_body`` that keeps what the page says apart from what it repeats
    (issue 26): ``[(chunk text, secondary)]`` in body order, where ``secondary``
    chunks hold only quoted history, a signature or a list footer
    (``brain.mailtext.split_secondary``) and no chunk mixes the two, so the page's
    own words are embedded and ranked on their own. ``[]`` for a blank body."""
    out: list[tuple[str, bool]] = []
    for text, secondary in split_secondary(body):
        out.extend((chunk, secondary) for chunk in chunk_body(text))
    return out


def chunk_tokens(text: str) -> int:
    """Token estimate of one chunk (chars/4, SPEC §3)."""
    return estimate_tokens(text)
