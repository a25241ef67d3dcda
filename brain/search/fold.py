"""Stage 5 of page search (SPEC §3): near-duplicate results (a message sent
twice, a forward, a whole quote) fold into the result ranked above them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

from brain.search.results import SearchResult

# Near-duplicate results (``fold_near_duplicates``, ``near_copy``): a result whose
# words all sit in one ranked above it (or hold all of its words), with a word-set
# Jaccard above NEAR_DUPLICATE (the reference's dedup threshold), is a copy of it; a
# text of fewer than COPY_MIN_WORDS distinct words only when the words are equal.
NEAR_DUPLICATE = 0.85
COPY_MIN_WORDS = 30


class FoldCandidate(NamedTuple):
    """One page offered to ``fold_near_duplicates``, in fused order: its slug, the
    title and text of its evidence chunk, whether that chunk is secondary (quoted
    history, a signature or a list footer), and ``build``, which makes its
    ``SearchResult`` (None when neither arm vouches for the page: score 0). Built
    lazily, so a page past the limit costs only its word set (SPEC §3 dedup)."""

    slug: str
    title: str
    text: str
    secondary: bool
    build: Callable[[], SearchResult | None]


def fold_near_duplicates(
    candidates: Iterable[FoldCandidate], *, limit: int
) -> list[SearchResult]:
    """The first ``limit`` results of ``candidates`` (``FoldCandidate``, in fused
    order; one whose ``build`` gives None is left out) with near-duplicate copies
    folded together (SPEC §3 dedup, issue 26; the reference's search dedup drops
    chunks over 0.85 Jaccard-similar to a kept one; here stricter). Only pages of
    ``candidates`` are ever listed, so ``duplicates`` names no page outside the
    caller's ``ReadScope``. A result whose title and chunk words
    (``copy_words``) hold all of a kept result's words or sit all in them, with a
    Jaccard similarity over ``NEAR_DUPLICATE`` (``near_copy``; a short text only
    when its words are the same), is a copy: a message sent twice, forwarded with a
    forward line, or quoted whole by a reply. A copy is
    not shown; its slug is listed in the kept result's ``duplicates``, and it does
    not use up the limit, so the next page takes its place. When the kept result's
    chunk is secondary and the copy's is the page's own words (a reply quoting a
    message ranked above the message itself), the copy takes the kept result's
    place and the reply becomes the duplicate. ``candidates`` is read to its end
    (the fused candidate pages, at most a few hundred), so a copy ranked below the
    ``limit``-th result is still listed in ``duplicates``, whatever ``limit``.

    On the retrieval dev set (``benchmarks/retrieval_quality.py``, which counts a
    near-copy of an answer page as an answer for every ranker), where a reply
    quoting a film scene whole ranked above the message that posted it and a
    message sent twice took two places: SpamAssassin hybrid R@1 0.882 → 0.886
    (BM25 0.833), R@5 0.985 unchanged; with the Enron pages in one index, all 343
    questions R@1 0.883 → 0.886 and keyword-only 0.860 → 0.863; no question's
    answer moved down; thread pages (``--pages-from mail``) unchanged. Jaccard
    alone (the reference's rule) also folded the Enron set's weekly notices that
    differ by their date and access requests that differ by the person, each the
    answer to a different question: hence the containment test of ``near_copy``.
    """
    kept: list[tuple[SearchResult, bool, frozenset[str]]] = []
    for candidate in candidates:
        words = copy_words(candidate.title, candidate.text)
        copy_of = next(
            (i for i, (_r, _s, held) in enumerate(kept) if near_copy(words, held)),
            None,
        )
        if copy_of is None:
            if len(kept) < limit and (item := candidate.build()) is not None:
                kept.append((item, candidate.secondary, words))
            continue
        held_item, held_secondary, _held_words = kept[copy_of]
        if (
            held_secondary
            and not candidate.secondary
            and (item := candidate.build()) is not None
        ):
            item.duplicates = [*held_item.duplicates, held_item.slug]
            kept[copy_of] = (item, candidate.secondary, words)
        else:
            held_item.duplicates.append(candidate.slug)
    return [item for item, _secondary, _words in kept]


def copy_words(title: str, text: str) -> frozenset[str]:
    """The distinct lower-cased whitespace-separated words of a title and a text:
    what ``near_copy`` compares (``fold_near_duplicates``; the retrieval benchmark
    reads pages with it too). The title keeps two short messages of different
    threads that say the same few words ("Thanks, will do.") apart. Split on
    whitespace, not parsed: copies are split alike, and it costs a fraction of a
    regular expression over every candidate's chunk (SPEC §3 dedup)."""
    return frozenset(f"{title}\n{text}".lower().split())


def near_copy(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two word sets (``copy_words``: a result's title and chunk words) are
    copies of one text: every word of the smaller is in the larger (the larger adds
    at most a forward line, a reply's header or a few words of its own), and the
    smaller holds over ``NEAR_DUPLICATE`` (0.85) of the larger's words (their Jaccard
    similarity, the reference's dedup threshold); when either has fewer than
    ``COPY_MIN_WORDS`` (30) distinct words, they must be equal. Two texts that each
    hold a word the other lacks are two messages, however alike: a weekly notice
    dated the 19th and the same notice dated the 26th, an access request for one
    person and the same request for another (SPEC §3 dedup)."""
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    if len(small) < COPY_MIN_WORDS:
        return a == b and bool(a)
    # The size test first: it is O(1) and rejects most pairs.
    return len(small) > NEAR_DUPLICATE * len(large) and small <= large
