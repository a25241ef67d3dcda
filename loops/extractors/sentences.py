"""Sentence splitting for the loop extractors (SPEC §5.3), by pysbd.

Mail text is split in two steps: blocks first (blank lines, bullet and numbered list
items, lines that stand alone such as a greeting or a signature), then pysbd inside
each block with hard-wrapped lines joined, so "Mr.", "Dr.", "Inc.", "p.m." and
initials ("J. R. Ewing") never end a sentence.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from loops.definitions import collapse

# A line that starts a new block: a bullet or a numbered item.
_ITEM_RE = re.compile(r"^\s*(?:[-*•+]|\(?\d{1,2}[.)]|\(?[ivx]{1,4}\))\s+", re.I)
# A short line that is a block of its own (greeting, sign-off, name).
_SHORT_LINE = 40
# Where pysbd can end a sentence inside a block: sentence marks, a list item's
# closing bracket ("1) … 2) …"), a colon or semicolon before an item, a closing
# quote. A block with none of them before its last character is one sentence, and
# pysbd (about 0.4 ms a block) is not asked: on 40,854 blocks of real mail
# (SpamAssassin ham, Enron) the 18,033 without one all came back whole from pysbd.
_SPLIT_MARK = re.compile(r"[.!?。．！？…;:)\"”»]")


@lru_cache(maxsize=1)
def _segmenter() -> Any:
    import pysbd
    from pysbd.utils import TextSpan

    class Segmenter(pysbd.Segmenter):
        """pysbd's segmenter with its last step, finding each sentence back in
        the text, done by ``str.find`` instead of a regular expression compiled
        per sentence (the escaped sentence, then optional whitespace): every
        sentence is a new pattern, so Python's pattern cache misses each time
        and compiling was about a third of pysbd's time in the loop-heavy ingest
        profile (SPEC §11). Same spans: the first occurrence, searched left to
        right without overlap, that ends after the previous sentence, with the
        whitespace after it."""

        def sentences_with_char_spans(self, sentences: list[str]) -> list[Any]:
            if not all(sentences):
                return super().sentences_with_char_spans(sentences)
            text = self.original_text
            spans = []
            prior_end = 0
            for sent in sentences:
                position = 0
                while (start := text.find(sent, position)) >= 0:
                    end = start + len(sent)
                    while end < len(text) and text[end].isspace():
                        end += 1
                    if end > prior_end:
                        spans.append(TextSpan(text[start:end], start, end))
                        prior_end = end
                        break
                    position = end
            return spans

    return Segmenter(language="en", clean=False)


def blocks(text: str) -> list[str]:
    """Split mail text into blocks: paragraphs separated by blank lines, list items,
    and short stand-alone lines; wrapped lines inside a block are joined."""
    out: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text or ""):
        current: list[str] = []
        for line in paragraph.splitlines():
            stripped = line.strip()
            if not stripped:
                continue
            starts_item = bool(_ITEM_RE.match(line))
            short_prev = bool(current) and len(current[-1]) < _SHORT_LINE
            if current and (
                starts_item or (short_prev and not current[-1].endswith(","))
            ):
                out.append(" ".join(current))
                current = []
            current.append(stripped)
        if current:
            out.append(" ".join(current))
    return out


def split_sentences(text: str) -> list[str]:
    """Split a message's newest text into collapsed sentences (pysbd per block).

    Returns the sentences in order, whitespace collapsed, empty ones dropped.
    """
    sentences: list[str] = []
    for block in blocks(text):
        if _SPLIT_MARK.search(block, 0, len(block) - 1) is None:
            parts = [block]  # one sentence whatever pysbd says (see _SPLIT_MARK)
        else:
            parts = _segmenter().segment(block)
        for sentence in parts:
            cleaned = collapse(sentence)
            if cleaned:
                sentences.append(cleaned)
    return sentences
