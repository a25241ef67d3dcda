"""Retrieval that answers questions (issue 26; SPEC §3): the keyword arm ORs the
meaningful terms of a question, fusion is per page, ``score`` is calibrated and each
result names its ``matched_terms``. Real PostgreSQL, the real local model."""

from __future__ import annotations

import pytest

from brain import embeddings
from brain import search as search_module
from brain.access import local_caller
from brain.models import Chunk, Source
from brain.search import (
    FoldCandidate,
    SearchResult,
    calibrated_score,
    fold_near_duplicates,
    keep_keyword_hits,
    keyword_lead,
    page_search,
)
from brain.search import terms as search_terms
from brain.search.keyword import _KeywordHit
from brain.services.pages import page_add
from tests.brain.embedding_counter import CachingProvider
from tests.brain.search_corpus import load_corpus

pytestmark = pytest.mark.django_db

POTTERY = "notes/dana-thursdays"
# A page whose words are about Dana's clay hobby but that never says "pottery" or
# "class": the vector arm's natural neighbour of the question.
NEIGHBOUR_BODY = (
    "Dana loves ceramics. She spends weekends at the studio throwing bowls on the "
    "wheel, glazing mugs and firing them in the kiln with her friends."
)


@pytest.fixture(autouse=True)
def _real_model_memoised(settings, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "local"
    cached = CachingProvider(embeddings.get_provider())

    def provider():  # type: ignore[no-untyped-def]
        return cached if settings.BRAIN_EMBEDDING_PROVIDER == "local" else None

    monkeypatch.setattr(embeddings, "get_provider", provider)


@pytest.fixture
def dana(default_source: Source, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    """The mail corpus of test_page_search plus Dana's pages: the pottery page is a
    long page whose pottery line sits in a later chunk than its opening."""
    opening = "\n\n".join(
        f"## Week {i}\n\nDana reviewed the quarterly shipping invoices with the "
        f"finance team and filed the receipts for batch {i} before the audit."
        for i in range(1, 9)
    )
    with django_capture_on_commit_callbacks(execute=True):
        load_corpus(default_source)
        page_add(
            source=default_source,
            slug=POTTERY,
            title="Dana weekly notes",
            body=opening
            + "\n\n## Hobbies\n\nDana: I signed up for the pottery class on Thursdays.",
            actor=local_caller(),
        )
        for i in range(3):
            page_add(
                source=default_source,
                slug=f"notes/dana-studio-{i}",
                title=f"Studio weekend {i}",
                body=NEIGHBOUR_BODY,
                actor=local_caller(),
            )


def scope():  # type: ignore[no-untyped-def]
    return local_caller().read_scope(["default"])


def test_a_question_with_a_missing_word_still_finds_the_page_keyword_only(
    dana: None, settings
) -> None:  # type: ignore[no-untyped-def]
    """Reproducer 1 of issue 26: "go" is not on the page and "When", "did", "to",
    "the" are question words and stopwords; the arm used to require every word."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    response = page_search(
        scope=scope(), query="When did Dana go to the pottery class?"
    )
    assert response.results, "keyword-only search answered nothing"
    top = response.results[0]
    assert top.slug == POTTERY
    assert top.matched_terms == ["dana", "pottery", "class"]


def test_hybrid_ranks_the_page_the_keyword_arm_ranks_first_over_vector_neighbours(
    dana: None, settings
) -> None:  # type: ignore[no-untyped-def]
    """Reproducer 2 of issue 26: fusion per page, ties to the keyword arm."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    keyword = page_search(scope=scope(), query="Dana pottery class").results
    assert keyword[0].slug == POTTERY
    settings.BRAIN_EMBEDDING_PROVIDER = "local"
    hybrid = page_search(scope=scope(), query="Dana pottery class").results
    assert hybrid[0].slug == POTTERY
    assert "pottery" in hybrid[0].chunk and hybrid[0].keyword_hit


def test_stems_match_inflected_words(dana: None, settings) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    top = page_search(scope=scope(), query="pottery classes").results[0]
    assert top.slug == POTTERY
    assert top.matched_terms == ["pottery", "classes"]


def test_score_separates_the_answer_from_unrelated_pages(dana: None) -> None:
    """Calibrated ``score``: the page holding every term scores at least 0.5 and
    far above a page that merely shares the topic; every score is in 0..1."""
    results = page_search(scope=scope(), query="Dana pottery class", limit=10).results
    by_slug: dict[str, float] = {}
    for r in results:  # a page's first result is its best chunk
        by_slug.setdefault(r.slug, r.score)
    assert by_slug[POTTERY] >= 0.5
    unrelated = [s for slug, s in by_slug.items() if slug != POTTERY]
    assert unrelated and max(unrelated) < by_slug[POTTERY] - 0.2
    assert all(0.0 <= r.score <= 1.0 for r in results)


def test_a_page_neither_arm_vouches_for_is_not_returned(dana: None) -> None:
    """Regression (newcomer): hybrid search filled its limit with the vector arm's
    nearest neighbours even when they hold no query term and their cosine is at or
    below ``COSINE_FLOOR``: results with ``score`` 0.0, evidence of nothing."""
    results = page_search(
        scope=scope(), query="Dana pottery class quarterly", limit=20
    ).results
    assert results and results[0].slug == POTTERY
    assert all(r.score > 0.0 for r in results), [
        (r.slug, r.score, r.similarity) for r in results if r.score <= 0.0
    ]


def test_calibrated_score_is_a_noisy_or_of_coverage_and_cosine() -> None:
    assert calibrated_score(1.0, None) == 1.0
    assert calibrated_score(0.0, 0.1) == 0.0
    assert calibrated_score(0.0, 0.9) == 1.0
    half = (search_module.COSINE_FLOOR + search_module.COSINE_FULL) / 2
    assert calibrated_score(0.5, half) == pytest.approx(0.75)


def test_the_keyword_top_three_are_never_pushed_out_of_the_fused_top_ten() -> None:
    ordered = list(range(30))
    kept = keep_keyword_hits(ordered, [17, 3, 25, 12], window=10)
    assert {17, 3, 25} <= set(kept[:10])
    assert 12 not in kept[:10]  # only the first three are protected
    assert sorted(kept) == ordered  # nothing lost or duplicated
    # the displaced pages follow, in their order, just below the window
    assert kept[10:12] == [8, 9]
    assert keep_keyword_hits(ordered, [1, 2, 3], window=10) == ordered


def test_all_terms_and_the_phrase_are_boosted_not_required(
    default_source: Source, django_capture_on_commit_callbacks, settings
) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    with django_capture_on_commit_callbacks(execute=True):
        for slug, body in (
            ("notes/one", "The harbour crane was repaired on Monday."),
            ("notes/both", "The crane repaired, harbour reopened."),
            ("notes/phrase", "Harbour crane repaired after the storm."),
            ("notes/other", "A crane flew over the lake."),
        ):
            page_add(
                source=default_source,
                slug=slug,
                title=slug,
                body=body,
                actor=local_caller(),
            )
    ranked = [
        r.slug
        for r in page_search(scope=scope(), query="harbour crane repaired").results
    ]
    assert ranked.index("notes/phrase") < ranked.index("notes/other")
    assert "notes/other" in ranked  # one term is enough to be a candidate


def test_common_terms_do_not_widen_the_candidate_set(
    default_source: Source, django_capture_on_commit_callbacks, settings, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """Bounded candidates: a term in more than ``DF_CAP`` chunks only scores; the
    rare term alone brings its pages in."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    monkeypatch.setattr(search_terms, "DF_CAP", 3)
    with django_capture_on_commit_callbacks(execute=True):
        for i in range(6):
            page_add(
                source=default_source,
                slug=f"notes/meeting-{i}",
                title=f"Meeting {i}",
                body="The weekly meeting covered the usual topics.",
                actor=local_caller(),
            )
        page_add(
            source=default_source,
            slug="notes/zeppelin",
            title="Airship",
            body="The zeppelin meeting is on Friday.",
            actor=local_caller(),
        )
    results = page_search(scope=scope(), query="zeppelin meeting").results
    assert [r.slug for r in results] == ["notes/zeppelin"]


def _pages(source: Source, capture, items: list[tuple[str, str]]) -> None:  # type: ignore[no-untyped-def]
    with capture(execute=True):
        for slug, body in items:
            page_add(
                source=source, slug=slug, title=slug, body=body, actor=local_caller()
            )


def test_the_query_is_parsed_as_pages_are_so_compounds_and_dotted_tokens_match(
    default_source: Source, django_capture_on_commit_callbacks, settings
) -> None:  # type: ignore[no-untyped-def]
    """Loss kind: query and page tokenised differently. The query was split on
    word characters first, so "802.11a" became ``802`` + ``11a`` and the parts of
    "XML-in-silicon" after the first hyphen were dropped: lexemes no page holds."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    _pages(
        default_source,
        django_capture_on_commit_callbacks,
        [
            ("notes/radio", "The radio range is long and the range is stable."),
            ("notes/wifi", "The 802.11a card has a short range."),
            ("notes/parsers", "XML parsers written in Java."),
            ("notes/appliance", "DataPower ships an XML-in-silicon appliance."),
        ],
    )
    top = page_search(scope=scope(), query="802.11a range").results[0]
    assert top.slug == "notes/wifi"
    assert "802.11" in top.matched_terms
    top = page_search(scope=scope(), query="an XML-in-silicon box").results[0]
    assert top.slug == "notes/appliance"
    assert {"xml-in-silicon", "silicon"} <= set(top.matched_terms)


def test_a_minus_inside_a_compound_is_not_an_exclusion(
    default_source: Source, django_capture_on_commit_callbacks, settings
) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    _pages(
        default_source,
        django_capture_on_commit_callbacks,
        [
            ("notes/p2p", "A peer-to-peer network of digests."),
            ("notes/digests", "Digests of the mailing list, weekly."),
        ],
    )
    assert [
        r.slug for r in page_search(scope=scope(), query="digests -weekly").results
    ] == ["notes/p2p"]
    ranked = [r.slug for r in page_search(scope=scope(), query="peer-to-peer").results]
    assert ranked == ["notes/p2p"]


def test_term_frequency_counts_with_saturation(
    default_source: Source, django_capture_on_commit_callbacks, settings
) -> None:  # type: ignore[no-untyped-def]
    """Loss kind: binary term frequency. A chunk that keeps returning to the rare
    word used to score the same as one naming it once (same length), the tie going
    to the older chunk; BM25 counts the occurrences, saturating (k1 1.2)."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    once = "The zeppelin flew over the harbour on a calm and quiet morning."
    thrice = "A zeppelin: the zeppelin hangar, zeppelin crews, morning works."
    assert len(thrice) >= len(once)
    _pages(
        default_source,
        django_capture_on_commit_callbacks,
        [("notes/once", once), ("notes/thrice", thrice)],
    )
    results = page_search(scope=scope(), query="zeppelin").results
    assert [r.slug for r in results] == ["notes/thrice", "notes/once"]


def test_a_strong_hit_of_one_arm_beats_a_page_both_arms_find_weakly() -> None:
    """Loss kind: rank fusion. RRF (k 60) scored a page that one arm ranks 2nd and
    the other misses (1/62) below a page both arms rank 15th (2/75); the fused key
    weighs the arms' evidence, so a close vector match (cosine 0.75) outranks a
    weak keyword share (0.3) with a loose cosine (0.40), and the keyword arm's
    first page (share 1.0) with a fair cosine (0.55) outranks a vector-only page
    of the same cosine."""
    assert search_module.fused_key(0.0, 0.75) > search_module.fused_key(0.3, 0.40)
    assert search_module.fused_key(1.0, 0.55) > search_module.fused_key(0.0, 0.55)
    assert search_module.fused_key(1.0, None) == pytest.approx(
        search_module.KEYWORD_WEIGHT
    )
    assert search_module.fused_key(1.0, 0.9) == pytest.approx(1.0)


ELECTION = (
    "Yesterday we messed up our gubernatorial election too. The same six "
    "districts that were sued in 2000 came up gimpy again."
)
HEADER = (
    "-----Original Message-----\n"
    "From: list-admin@example.org [mailto:list-admin@example.org] On Behalf Of {0}\n"
    "Sent: Wednesday, September 11, 2002 9:32 PM\n"
    "To: list@example.org\n"
    "Subject: RE: take two\n\n"
)
ARTICLE = (
    "MIAMI, Sept. 10 -- A two-gram rock was found inside the shoe of the "
    "governor's daughter by workers at the central rehabilitation center where she "
    "is undergoing court-ordered treatment, police said today. She was not "
    "arrested because witnesses would not give sworn statements, but the incident "
    "is under investigation, according to the police spokesman. Wow, the witnesses "
    "would not talk in an era where there are no more restrictions on being held "
    "without a cause? Imagine that."
)
# The message that says it, over the article it answers (its own quoted history),
# and a reply that quotes all of it under one line of its own.
ORIGINAL = ELECTION + "\n\n" + HEADER.format("Tom") + ARTICLE
QUOTING_REPLY = (
    "I meant the gubernatorial primary.\n\n" + HEADER.format("Geege") + ORIGINAL
)


def test_a_reply_quoting_the_answer_ranks_below_the_message_that_gives_it(
    default_source: Source, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    """Loss kind: quoted history. A reply carries the message it answers below an
    "Original Message" header, so the same words sit on both pages, and hybrid
    search ranked the reply, which names a query word once more in its own line,
    above the message that says it. Quoted history is secondary evidence
    (``brain.mailtext``, ``SECONDARY_WEIGHT``), so the original ranks first; the
    reply is still found."""
    _pages(
        default_source,
        django_capture_on_commit_callbacks,
        [("notes/original", ORIGINAL), ("notes/reply", QUOTING_REPLY)],
    )
    ranked = [
        r.slug
        for r in page_search(
            scope=scope(), query="gubernatorial election in six districts"
        ).results
    ]
    assert ranked[:2] == ["notes/original", "notes/reply"]


def test_quoted_history_is_still_found_when_its_original_is_not_in_the_brain(
    default_source: Source, django_capture_on_commit_callbacks, settings
) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    _pages(
        default_source,
        django_capture_on_commit_callbacks,
        [
            ("notes/reply", QUOTING_REPLY),
            ("notes/other", "The districts office moved to a new building."),
        ],
    )
    results = page_search(scope=scope(), query="gimpy districts sued").results
    assert results[0].slug == "notes/reply"
    assert "gimpy" in results[0].chunk


YAHOO_FOOTER = (
    "------------------------ Yahoo! Groups Sponsor ---------------------~-->\n"
    "Looking for a more powerful website? Try GeoCities for $8.95 per month.\n"
    "Register your domain name (http://your-name.com). More storage! No ads!\n"
    "http://geocities.yahoo.com/ps/info\n"
    "---------------------------------------------------------------------~->\n\n"
    "To unsubscribe from this group, send an email to:\n"
    "forteana-unsubscribe@egroups.com\n\n"
    "Your use of Yahoo! Groups is subject to http://docs.yahoo.com/info/terms/"
)


def test_a_short_reply_is_embedded_as_its_own_words_not_its_list_footer(
    default_source: Source, django_capture_on_commit_callbacks, settings
) -> None:  # type: ignore[no-untyped-def]
    """Loss kind: boilerplate. A two-line reply under a list footer was one chunk,
    embedded mostly as the footer that every message of the list carries, so a
    question about what the reply says found pages on the topic first. The footer
    is a secondary chunk of its own (``brain.mailtext``); the reply's words are
    embedded alone."""
    _pages(
        default_source,
        django_capture_on_commit_callbacks,
        [
            (
                "notes/reply",
                "Ah, I see where the problem lies! You seem to think that Zimbabwe "
                "and Zambia are the same country.\n\nMartin\n\n" + YAHOO_FOOTER,
            ),
            (
                "notes/news",
                "Aid workers say millions of people in southern Africa face famine; "
                "several governments in the region refused food aid.",
            ),
            (
                "notes/travel",
                "Our safari went through Kenya and Tanzania, two countries with "
                "wonderful wildlife parks.",
            ),
        ],
    )
    results = page_search(
        scope=scope(), query="Which African nations was someone confusing?"
    ).results
    assert results[0].slug == "notes/reply"


def test_question_frame_words_are_not_terms(
    default_source: Source, django_capture_on_commit_callbacks, settings
) -> None:  # type: ignore[no-untyped-def]
    """Loss kind: question filler. "would", "someone" and "say" frame the question
    (``QUESTION_FRAME``); as terms they made a page that only chats ("someone
    would say so") a candidate and gave it idf weight beside the page that names
    what is asked."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    _pages(
        default_source,
        django_capture_on_commit_callbacks,
        [
            ("notes/chat", "Someone would say so, and someone else would say not."),
            ("notes/kettle", "Descale the kettle with vinegar once a month."),
        ],
    )
    results = page_search(
        scope=scope(), query="What would someone say about descaling a kettle?"
    ).results
    assert [r.slug for r in results] == ["notes/kettle"]
    assert results[0].matched_terms == ["descaling", "kettle"]


def test_a_query_of_question_frame_words_alone_still_searches_them(
    default_source: Source, django_capture_on_commit_callbacks, settings
) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    _pages(
        default_source,
        django_capture_on_commit_callbacks,
        [("notes/chat", "Someone would say so."), ("notes/tea", "Green tea.")],
    )
    results = page_search(scope=scope(), query="someone would say").results
    assert [r.slug for r in results] == ["notes/chat"]


def test_keyword_lead_moves_the_keyword_first_page_past_clearly_weaker_pages() -> None:
    """The keyword arm's first page moves up past each page directly above it
    whose coverage is more than the margin below its own, and stops at the first
    page that is not; nothing else moves."""
    coverage = {1: 0.5, 2: 0.9, 3: 0.4, 4: 0.3, 5: 1.0, 6: 0.2}
    assert keyword_lead([1, 2, 3, 4, 5, 6], 5, coverage, 0.3) == [1, 2, 5, 3, 4, 6]
    # a page within the margin holds the lead back (a near tie stays as fused)
    assert keyword_lead([2, 5], 5, coverage, 0.3) == [2, 5]
    # a page without found terms counts 0; a lead not in the order changes nothing
    assert keyword_lead([7, 5], 5, coverage, 0.3) == [5, 7]
    assert keyword_lead([1, 2], 9, coverage, 0.3) == [1, 2]


THREAD = [
    (
        "notes/answer",
        "Kiln log for Saturday. We cleaned the shelves, swept the floor and "
        "restocked the clay bins. Priya glazed the teapot with celadon before the "
        "second firing in the gas kiln. Next week we order more cones and a new "
        "pyrometer.",
    ),
    (
        "notes/reply-1",
        "Re: teapot glazing. Who glazed the teapot? I would love to know who "
        "glazed that teapot.",
    ),
    (
        "notes/reply-2",
        "Re: teapot glazing. Which glaze went on the teapot? Who glazed it before "
        "firing?",
    ),
]


def test_the_keyword_first_page_leads_replies_that_share_only_its_subject(
    default_source: Source, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    """Loss kind: thread replies in fusion. Replies that repeat the thread's
    subject sit as close to the question as the message that answers it, and
    hybrid ranked one first though it holds only the question's subject words; the
    answer, which also holds its rarer words, is the keyword arm's first page and
    now leads (``keyword_lead``)."""
    _pages(default_source, django_capture_on_commit_callbacks, THREAD)
    results = page_search(
        scope=scope(), query="Who glazed the teapot with celadon?"
    ).results
    assert results[0].slug == "notes/answer"
    assert results[1].slug.startswith("notes/reply-")


def test_keyword_lead_does_not_pass_a_page_the_query_names(
    default_source: Source, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    """A page named by the query (alias or title) counts as fully covered in the
    keyword lead, so the page that merely holds the name (the keyword arm's first
    page: the alias is not in the named page's text) stays below it."""
    with django_capture_on_commit_callbacks(execute=True):
        page_add(
            source=default_source,
            slug="people/jane-doe",
            title="Jane Doe",
            body="Runs finance.",
            frontmatter={"aliases": ["jane@example.org"]},
            actor=local_caller(),
        )
        page_add(
            source=default_source,
            slug="notes/invoices",
            title="Invoices",
            body="Send the invoices to jane@example.org before Friday.",
            actor=local_caller(),
        )
    results = page_search(scope=scope(), query="jane@example.org").results
    assert [r.slug for r in results[:2]] == ["people/jane-doe", "notes/invoices"]


def test_compound_spacing_two_query_words_match_the_word_they_make_written_as_one(
    default_source: Source, django_capture_on_commit_callbacks, settings
) -> None:  # type: ignore[no-untyped-def]
    """Fault kind: compound spacing. The question writes "Red Hat" and "white
    paper", the page "redhat" and "whitepapers": the page matched none of those
    words and lost to pages holding them apart in other senses. Two adjacent query
    words now also match their concatenation ("redhat", stemmed "whitepap"), which
    counts as an occurrence of each (``_Terms.joined``)."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    _pages(
        default_source,
        django_capture_on_commit_callbacks,
        [
            (
                "notes/answer",
                "The disk tuning guide is in one of the redhat whitepapers.",
            ),
            ("notes/team", "The red team wore a white hat to the paper mill."),
            ("notes/sky", "A red sky, a white paper hat and a red paper boat."),
            ("notes/kernel", "Kernel notes: disk caches and schedulers."),
        ],
    )
    results = page_search(
        scope=scope(), query="Where is the Red Hat white paper about disk tuning?"
    ).results
    assert results[0].slug == "notes/answer"
    assert results[0].matched_terms == [
        "red",
        "hat",
        "white",
        "paper",
        "disk",
        "tuning",
    ]


def test_compound_spacing_a_chunk_with_both_spellings_counts_the_words_once(
    default_source: Source, django_capture_on_commit_callbacks, settings
) -> None:  # type: ignore[no-untyped-def]
    """The joined form stands for the words it joins: a chunk holding "Red Hat"
    and "redhat" is scored as holding "red" and "hat" twice (term frequency,
    saturating), not as holding three different terms, so it does not pass a
    chunk with the question's other rare word."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    _pages(
        default_source,
        django_capture_on_commit_callbacks,
        [
            ("notes/both", "Red Hat ships it; see the redhat site for the kernel."),
            ("notes/answer", "Red Hat ships the kernel with the zeppelin driver."),
        ],
    )
    results = page_search(scope=scope(), query="Red Hat zeppelin driver").results
    assert [r.slug for r in results] == ["notes/answer", "notes/both"]


def test_compound_spacing_a_hyphenated_query_word_matches_it_written_as_one(
    default_source: Source, django_capture_on_commit_callbacks, settings
) -> None:  # type: ignore[no-untyped-def]
    """Fault kind: compound spacing, the hyphen as the space. The question writes
    "e-mail", the page "email": the parser reads the query word as ``e-mail``,
    ``e`` and ``mail``, none of which the page holds. The word without its hyphens
    now stands for the compound and its parts."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    _pages(
        default_source,
        django_capture_on_commit_callbacks,
        [
            ("notes/answer", "Ana asked for the invoice by email."),
            ("notes/carrier", "The mail carrier brought a parcel for the e-shop."),
            ("notes/template", "Invoice template for the mail order desk."),
        ],
    )
    results = page_search(
        scope=scope(), query="Who wanted the invoice sent by e-mail?"
    ).results
    assert results[0].slug == "notes/answer"
    assert {"invoice", "e-mail", "mail"} <= set(results[0].matched_terms)


def test_compound_spacing_a_hyphenated_word_with_a_stopword_part_still_joins(
    default_source: Source, django_capture_on_commit_callbacks, settings
) -> None:  # type: ignore[no-untyped-def]
    """A hyphenated query word one of whose parts is a stopword ("check-in": "in")
    still stands for itself written as one ("checkin"); only the compound itself
    must be a term."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    _pages(
        default_source,
        django_capture_on_commit_callbacks,
        [
            ("notes/answer", "The checkin desk opens at noon."),
            ("notes/drawer", "Check the desk drawer; check it before the desk opens."),
        ],
    )
    results = page_search(
        scope=scope(), query="When does the check-in desk open?"
    ).results
    assert results[0].slug == "notes/answer"
    assert "check-in" in results[0].matched_terms


def test_a_page_whose_query_words_are_split_between_its_chunks_counts_them_all(
    default_source: Source, django_capture_on_commit_callbacks, settings
) -> None:  # type: ignore[no-untyped-def]
    """Loss kind: page evidence split between chunks. The writer's name is in the
    mail's signature (a chunk of its own) and the subject in its own lines; scored
    by its best chunk alone, the reply counted as holding one of the question's
    words and ranked below a page naming that word more often. The page's keyword
    score adds its further chunk's share (``page_keyword_scores``)."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    _pages(
        default_source,
        django_capture_on_commit_callbacks,
        [
            (
                "notes/reply",
                "kelly, same as on Dalnet: the frogstone channel is still there, and "
                "forteana too.\n\n-- \nFel\nCafe Forteana is back: "
                "http://www.frogstone.net/Cafe/\n",
            ),
            (
                "notes/channels",
                "Every channel of the network: one channel per topic, a channel for "
                "news and a channel for help.",
            ),
            ("notes/weather", "Rain over the harbour, then a calm and quiet night."),
            ("notes/garden", "The roses and tulips came up early this spring."),
        ],
    )
    results = page_search(scope=scope(), query="Which channel did Fel name?").results
    ranked = list(dict.fromkeys(r.slug for r in results))
    assert ranked == ["notes/reply", "notes/channels"]


def test_page_keyword_score_adds_one_further_chunk_for_the_terms_the_best_lacks() -> (
    None
):
    """The best chunk's score, plus ``PAGE_EXTRA_WEIGHT`` × the share of the next
    chunk holding a new lexeme (by idf); lexemes the page already holds add
    nothing, and a third chunk adds nothing."""
    hit = _KeywordHit
    idf = {"fel": 3.0, "channel": 1.0, "still": 1.0}
    scores = search_module.page_keyword_scores(
        [
            hit(1, 10, 6.0, ("channel",)),
            hit(2, 20, 5.0, ("channel",)),
            hit(3, 10, 4.0, ("fel", "channel")),  # new: fel, 3 of 4 idf
            hit(4, 10, 3.0, ("still",)),  # a second further chunk: not counted
            hit(5, 20, 2.0, ("channel",)),  # nothing new
        ],
        idf,
    )
    weight = search_module.PAGE_EXTRA_WEIGHT
    assert scores == pytest.approx({10: 6.0 + weight * 4.0 * 0.75, 20: 5.0})
    assert list(scores) == [10, 20]


def test_page_keyword_score_is_the_larger_of_chunk_based_and_page_bm25() -> None:
    """``combine_page_scores``: per page the larger of its chunk-based score and
    its page-level BM25; a page only page-level BM25 found joins with its best
    chunk (appended to the hits, its evidence) and that chunk's score as its
    chunk-based side."""
    hit = _KeywordHit
    hits = [hit(1, 10, 6.0, ("channel",)), hit(2, 20, 5.0, ("channel",))]
    scores = search_module.combine_page_scores(
        hits,
        [
            (hit(1, 10, 6.0, ("channel",)), 4.0),  # chunk-based wins
            (hit(2, 20, 5.0, ("channel",)), 7.5),  # page-level wins
            (hit(3, 30, 2.0, ("fel",)), 3.0),  # found by page-level BM25 only
        ],
        {"channel": 1.0, "fel": 3.0},
    )
    assert scores == pytest.approx({10: 6.0, 20: 7.5, 30: 3.0})
    assert list(scores) == [10, 20, 30]
    assert [(h.chunk_id, h.page_id) for h in hits] == [(1, 10), (2, 20), (3, 30)]


def test_a_long_page_is_scored_as_a_whole_beside_its_best_chunk(
    default_source: Source, django_capture_on_commit_callbacks, settings
) -> None:  # type: ignore[no-untyped-def]
    """Loss kind: a long page's question words spread over its chunks. One
    newsletter issue names itself, its break and the holidays in three different
    items (chunks); another issue of the same length names itself and the
    holidays in one item (and the weather page says "break", so the three words
    weigh alike). Scored by its best chunk and one further chunk's share
    the first issue counted two of the three words and ranked below the second;
    page-level BM25 (term frequencies summed over the page, its length the
    page's, ``combine_page_scores``) counts all three."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    filler = " ".join(
        f"Item {i}: the quarterly storage market report covers disks, tapes and "
        f"arrays for the enterprise buyer."
        for i in range(10)
    )

    def issue(*items: str) -> str:
        return "\n\n".join(f"{item} {filler}" for item in items)

    _pages(
        default_source,
        django_capture_on_commit_callbacks,
        [
            (
                "notes/issue-a",
                issue(
                    "AnchorDesk is written by our staff.",
                    "We take a break.",
                    "Happy holidays to all.",
                ),
            ),
            (
                "notes/issue-b",
                issue(
                    "AnchorDesk wishes you happy holidays.",
                    "Our writers are away.",
                    "See you next week.",
                ),
            ),
            ("notes/weather", "Rain over the harbour, a break in the clouds."),
        ],
    )
    assert all(
        Chunk.objects.filter(page__slug=slug).count() == 3
        for slug in ("notes/issue-a", "notes/issue-b")
    )
    results = page_search(
        scope=scope(), query="Why was AnchorDesk on break over the holidays?"
    ).results
    ranked = list(dict.fromkeys(r.slug for r in results))
    assert ranked[:2] == ["notes/issue-a", "notes/issue-b"]


def test_token_parts_splits_the_tokens_the_parser_keeps_whole() -> None:
    """``token_parts``: the words and numbers of slashed dates, paths, hosts, URLs
    and e-mail addresses; plain words, decimals and sentence ends give nothing."""
    from brain.services.pages.index import token_parts

    assert token_parts("West VaR - 11/26/2001") == "11 26 2001"
    assert token_parts("run /usr/bin/python3 on foo.bar.com") == (
        "usr bin python3 foo bar com"
    )
    assert token_parts("mail phillip.allen@enron.com") == "phillip allen enron com"
    assert token_parts("It costs 3.5 dollars. The end.") == ""


def test_a_slashed_date_in_a_title_matches_the_date_written_out(
    default_source: Source, django_capture_on_commit_callbacks, settings
) -> None:  # type: ignore[no-untyped-def]
    """Loss kind: a token the parser keeps whole. "West VaR - 11/26/2001" was
    indexed as ``11/26/2001``, so a question for "26 November 2001" matched the
    report of every date equally; the chunk's tsvector now holds the date's parts
    too (``brain.services.pages.index.token_parts``)."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    with django_capture_on_commit_callbacks(execute=True):
        for day in (19, 26, 27):
            page_add(
                source=default_source,
                slug=f"notes/var-{day}",
                title=f"West VaR - 11/{day}/2001",
                body=f"The West VaR report is at http://example.com/var/{day}",
                actor=local_caller(),
            )
    results = page_search(
        scope=scope(),
        query="Where can I view the West VaR report dated 26 November 2001?",
    ).results
    assert results[0].slug == "notes/var-26"


def _hit(slug: str, chunk: str, title: str = "Investment structure") -> SearchResult:
    return SearchResult(
        slug=slug,
        title=title,
        source_id="default",
        type="note",
        chunk=chunk,
        score=0.9,
        similarity=0.7,
        evidence="weak_semantic",
        create_safety="unknown",
    )


def _fold(pairs: list[tuple[SearchResult, bool]], *, limit: int) -> list[SearchResult]:
    """``fold_near_duplicates`` over ``(result, secondary)`` pairs, each built on
    demand from its result, as ``page_search`` offers them."""
    return fold_near_duplicates(
        (
            FoldCandidate(
                hit.slug, hit.title, hit.chunk, secondary, lambda hit=hit: hit
            )
            for hit, secondary in pairs
        ),
        limit=limit,
    )


def _letters(capture, items: list[tuple[Source, str, str]]) -> None:  # type: ignore[no-untyped-def]
    """Pages ``(source, slug, body)``, all titled "Investment structure" (copies
    of one message share its subject), indexed before returning."""
    with capture(execute=True):
        for source, slug, body in items:
            page_add(
                source=source,
                slug=slug,
                title="Investment structure",
                body=body,
                actor=local_caller(),
            )


LETTER = (
    "Typically the structure is a limited partnership with a corporate general "
    "partner. The general partner owns one percent of the project and carries the "
    "liability of construction, and the land is bought in the partnership's name. "
    "Each of the individual investors and all of the principals would also "
    "personally guarantee the loans; if an investor does not sign on the loans, a "
    "larger amount of cash is required and the investor's share of profits is "
    "reduced. The initial investment is used for the land deposit, engineering and "
    "architectural design, soils tests, surveys, filing fees and legal fees."
)


def test_near_duplicate_results_are_folded_into_the_first_and_the_next_page_fills_in() -> (
    None
):
    """Loss kind: copies fill the result window. A letter sent twice and forwarded
    (the forward adds its forward line) took three places of a top 5. Copies fold
    into the first, listed in its ``duplicates``, and do not count against the
    limit."""
    candidates = [
        (_hit("notes/sent-1", LETTER), False),
        (_hit("notes/sent-2", LETTER), False),
        (_hit("notes/other", "The variance hearing moved to Tuesday."), False),
        (_hit("notes/fwd", "Forwarded by Phillip on 09/26/2000. " + LETTER), False),
        (_hit("notes/fourth", "Phillip will sign the paperwork on Monday."), False),
        (_hit("notes/fifth", "Never read: the limit is reached first."), False),
    ]
    kept = _fold(candidates, limit=3)
    assert [r.slug for r in kept] == ["notes/sent-1", "notes/other", "notes/fourth"]
    assert kept[0].duplicates == ["notes/sent-2", "notes/fwd"]
    assert kept[1].duplicates == [] and kept[2].duplicates == []


NOTICE = (
    "The West VaR report dated {day} November 2001 is now available on the risk "
    "website. Please review the positions listed for your desk and report any "
    "discrepancy to the market risk group before the close of business, so that "
    "the corrected figures can be included in the next daily run."
)


def test_notices_that_differ_by_their_date_are_not_copies() -> None:
    """Loss kind: a template is not a copy. Weekly notices that differ only by their
    date (or access requests that differ by the person) share over 85 % of their
    words, yet each answers a different question; each holds a word the other
    lacks, so none is folded into another."""
    candidates = [
        (_hit("notes/var-26", NOTICE.format(day="26"), title="West VaR"), False),
        (_hit("notes/var-19", NOTICE.format(day="19"), title="West VaR"), False),
    ]
    kept = _fold(candidates, limit=10)
    assert [r.slug for r in kept] == ["notes/var-26", "notes/var-19"]
    assert kept[0].duplicates == []


def test_a_quoted_copy_gives_way_to_the_message_it_quotes() -> None:
    """Loss kind: a reply quoting a message whole ranked above the message. The
    reply's quoted chunk (secondary) and the original's own words are copies; the
    original takes the reply's place and the reply is listed as its duplicate."""
    candidates = [
        (_hit("notes/reply", LETTER), True),
        (_hit("notes/elsewhere", "A different letter about the land loans."), False),
        (_hit("notes/original", LETTER), False),
    ]
    kept = _fold(candidates, limit=10)
    assert [r.slug for r in kept] == ["notes/original", "notes/elsewhere"]
    assert kept[0].duplicates == ["notes/reply"]


def test_short_messages_with_the_same_words_in_different_threads_are_not_copies() -> (
    None
):
    """Two different threads' "Thanks, will do." are two answers, not one message
    twice: the title is part of what is compared, and a short text is a copy only
    when its words are the same (``near_copy``)."""
    candidates = [
        (_hit("notes/a", "Thanks, will do.", title="Budget review"), False),
        (_hit("notes/b", "Thanks, will do.", title="Parking permit"), False),
    ]
    kept = _fold(candidates, limit=10)
    assert [r.slug for r in kept] == ["notes/a", "notes/b"]
    # One changed word in a short text is another message, not a copy.
    candidates = [
        (_hit("notes/p1", "Payment of $500 received for invoice 41."), False),
        (_hit("notes/p2", "Payment of $700 received for invoice 41."), False),
    ]
    kept = _fold(candidates, limit=10)
    assert [r.slug for r in kept] == ["notes/p1", "notes/p2"]


def test_a_message_sent_twice_is_one_search_result_naming_both_pages(
    default_source: Source, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    """Through ``page_search`` (hybrid, the real model): the same letter stored as
    two pages comes back once, the other page in ``duplicates`` (also in the API
    form, ``as_dict``)."""
    _letters(
        django_capture_on_commit_callbacks,
        [
            (default_source, "notes/sent-1", LETTER),
            (default_source, "notes/sent-2", LETTER),
            (default_source, "notes/unrelated", "The variance hearing moved."),
        ],
    )
    results = page_search(
        scope=scope(), query="who carries the construction liability"
    ).results
    slugs = [r.slug for r in results]
    assert slugs[0] in ("notes/sent-1", "notes/sent-2")
    twin = ({"notes/sent-1", "notes/sent-2"} - {slugs[0]}).pop()
    assert twin not in slugs
    assert results[0].duplicates == [twin]
    assert results[0].as_dict()["duplicates"] == [twin]


def test_copies_below_the_limit_are_still_listed_as_duplicates() -> None:
    """Regression (fresh-clone check): with ``limit=1`` the kept result listed no
    duplicates, and with ``limit=2`` only the copies ranked above the second
    result, because candidates were read only until the limit was reached; an
    agent asking for one result had no sign that copies exist."""
    candidates = [
        (_hit("notes/sent-1", LETTER), False),
        (_hit("notes/other", "The variance hearing moved to Tuesday."), False),
        (_hit("notes/sent-2", LETTER), False),
        (_hit("notes/fwd", "Forwarded by Phillip on 09/26/2000. " + LETTER), False),
    ]
    for limit in (1, 2, 10):
        kept = _fold(candidates, limit=limit)
        assert kept[0].slug == "notes/sent-1"
        assert kept[0].duplicates == ["notes/sent-2", "notes/fwd"], limit
        assert len(kept) == min(limit, 2)
        for item, _secondary in candidates:  # fresh lists for the next round
            item.duplicates = []


def test_a_page_without_evidence_takes_no_place_and_past_the_limit_nothing_is_built() -> (
    None
):
    """``fold_near_duplicates`` leaves out a candidate whose ``build`` gives None (a
    page scoring 0) and fills its place with the next; a candidate past the limit
    that is no copy is never built (only its words are read)."""
    built: list[str] = []

    def candidate(slug: str, text: str, *, evidence: bool = True) -> FoldCandidate:
        def build() -> SearchResult | None:
            built.append(slug)
            return _hit(slug, text) if evidence else None

        return FoldCandidate(
            slug, "Investment structure", text, secondary=False, build=build
        )

    kept = fold_near_duplicates(
        [
            candidate("notes/none", "Nothing the query asks about.", evidence=False),
            candidate("notes/a", LETTER),
            candidate("notes/b", "The variance hearing moved to Tuesday."),
            candidate("notes/c", "Phillip will sign the paperwork on Monday."),
        ],
        limit=2,
    )
    assert [r.slug for r in kept] == ["notes/a", "notes/b"]
    assert built == ["notes/none", "notes/a", "notes/b"]


def test_duplicates_never_name_a_page_outside_the_read_scope(
    default_source: Source, source_a: Source, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    """SPEC §8: a caller who reads ``default`` only sees the copy stored there, and
    the same letter in ``team-a`` is neither a result nor listed in
    ``duplicates``; a caller who reads both gets one result naming the other."""
    _letters(
        django_capture_on_commit_callbacks,
        [
            (default_source, "notes/mine", LETTER),
            (source_a, "notes/theirs", LETTER),
        ],
    )
    query = "who carries the construction liability"
    narrow = page_search(scope=local_caller().read_scope(["default"]), query=query)
    assert [r.slug for r in narrow.results][:1] == ["notes/mine"]
    assert all(
        "notes/theirs" not in r.duplicates and r.slug != "notes/theirs"
        for r in narrow.results
    )
    both = page_search(
        scope=local_caller().read_scope(["default", "team-a"]), query=query
    )
    assert both.results[0].duplicates == [
        ({"notes/mine", "notes/theirs"} - {both.results[0].slug}).pop()
    ]


def test_a_minus_word_excludes_in_hybrid_search_too(
    default_source: Source, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    """Regression (newcomer, attacker walk): ``-word`` was applied in the keyword
    arm only, so with embeddings on "harbour -zephyr" returned the Zephyr page at
    score 1.0 through the vector arm (which embedded "-zephyr" too), and a query
    of exclusions alone returned pages. The vector arm skips chunks holding an
    excluded word, as the keyword arm does, and embeds the query without it."""
    with django_capture_on_commit_callbacks(execute=True):
        for slug, title, body in (
            (
                "notes/zephyr",
                "Zephyr Harbour plan",
                "The Zephyr harbour acquisition closes in March; the harbour "
                "master signs the berth lease.",
            ),
            (
                "notes/harbour",
                "Harbour works",
                "The harbour dredging starts in April and the berth lease is "
                "renewed for ten years.",
            ),
        ):
            page_add(
                source=default_source,
                slug=slug,
                title=title,
                body=body,
                actor=local_caller(),
            )
    both = [r.slug for r in page_search(scope=scope(), query="harbour berth").results]
    assert "notes/zephyr" in both  # the control: without the exclusion it is found
    slugs = [
        r.slug for r in page_search(scope=scope(), query="harbour -zephyr").results
    ]
    assert slugs and "notes/zephyr" not in slugs
    assert page_search(scope=scope(), query="-zephyr").results == []
