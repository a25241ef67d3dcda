"""Sentence splitting (loops.extractors.sentences): blocks without a mark where pysbd
could end a sentence skip pysbd and must come back as pysbd would split them."""

from __future__ import annotations

import pytest

from loops.definitions import collapse
from loops.extractors import sentences
from loops.extractors.sentences import blocks, split_sentences

TEXTS = [
    "Hi Sam,\n\nCould you send me the budget numbers by Friday? We need them.\n\n"
    "Thanks\nRobin",
    "Best regards\nDana Reyes\nQuill Inc",
    "I would like to know (a) the cost and (b) the date\nthat works for you",
    "it is interesting that 1) they used a panel and 2) they paid for it",
    '"THE SECRET LIFE OF ZOEY" PREMIERE!',
    "Mr. Abel met Dr. Brandt of Quill Inc. at 5 p.m. and J. R. Tamsin agreed",
    "see the attached — numbers below\n- revenue up\n- costs flat\n- margin ok",
    "Regarding the plan: we go ahead; the rest waits",
    "no punctuation at all in this rather long line of text that goes on and on",
]


def _pysbd_split(text: str) -> list[str]:
    """The oracle: pysbd on every block."""
    out = []
    for block in blocks(text):
        out += [c for c in map(collapse, sentences._segmenter().segment(block)) if c]
    return out


@pytest.mark.parametrize("text", TEXTS)
def test_blocks_without_a_split_mark_split_as_pysbd_splits_them(text: str) -> None:
    assert split_sentences(text) == _pysbd_split(text)


def test_a_block_without_a_split_mark_does_not_ask_pysbd(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse() -> None:
        raise AssertionError("pysbd asked about a block without a split mark")

    monkeypatch.setattr(sentences, "_segmenter", refuse)
    assert split_sentences("Hi Sam,\n\nThanks for the numbers\n\nRobin") == [
        "Hi Sam,",
        "Thanks for the numbers",
        "Robin",
    ]


SPAN_TEXTS = [
    "Call me. Call me. Then call me again.",
    "Done.  Next one?\n\nYes!   ",
    "Mr. Abel met Dr. Brandt.\u00a0He agreed.\x1cShe left.",
    "Is it 5 p.m.? It is. It is.",
    "See (a) the cost. (b) the date. Thanks.",
]


@pytest.mark.parametrize("text", SPAN_TEXTS)
def test_sentences_are_found_back_where_pysbd_finds_them(text: str) -> None:
    """The segmenter finds each sentence in the text by ``str.find`` instead of
    pysbd's regular expression per sentence: the same texts and spans, repeated
    sentences and odd whitespace included."""
    import pysbd

    ours = sentences._segmenter()
    theirs = pysbd.Segmenter(language="en", clean=False)
    assert ours.segment(text) == theirs.segment(text)
    ours.char_span = theirs.char_span = True
    try:
        assert [(s.sent, s.start, s.end) for s in ours.segment(text)] == [
            (s.sent, s.start, s.end) for s in theirs.segment(text)
        ]
    finally:
        ours.char_span = False
