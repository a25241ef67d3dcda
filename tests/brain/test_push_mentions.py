"""SPEC §9 mention extraction (``brain.mentions``): pure text, no database."""

from __future__ import annotations

from brain.mentions import extract_mentions, is_common_word, tokenize


def strong(text: str, *turns: str) -> set[str]:
    window = extract_mentions([*turns, text])
    return {s.surface for s in window.spans if s.kind == "strong"}


def test_capitalised_runs_of_up_to_4_tokens_and_their_sub_spans() -> None:
    spans = strong("Ask Sarah Chen today.")
    assert {"Sarah Chen", "Sarah", "Chen"} <= spans
    long_run = strong("Meet Anna Maria Lopez Garcia Fernandez.")
    assert max(len(s.split()) for s in long_run) == 4


def test_connectors_join_a_run_but_never_end_it() -> None:
    spans = strong("Call Bank of America now.")
    assert "Bank of America" in spans
    assert not any(s.endswith(" of") or s.startswith("of ") for s in spans)


def test_stopwords_break_runs_and_never_count() -> None:
    spans = strong("Thanks Sarah, I think The Plan is fine.")
    assert "Thanks" not in spans and "I" not in spans and "The" not in spans
    assert "Thanks Sarah" not in spans
    assert "Sarah" in spans


def test_sentence_initial_common_words_are_dropped_unless_seen_mid_sentence() -> None:
    assert "Will" not in strong("Will you send it? Mark the date.")
    assert "Mark" not in strong("Will you send it? Mark the date.")
    assert "Will" in strong("Will you send it?", "Please ask Will first.")
    # Not a common word: a sentence-initial name stays.
    assert "Priya" in strong("Priya sent it.")


def test_possessives_are_stripped() -> None:
    assert "Priya Raman" in strong("Priya Raman's feedback is in.")
    assert "Priya Raman" in strong("Priya Raman’s feedback is in.")


def test_handles_and_emails_are_candidates() -> None:
    window = extract_mentions(["ping @schen, then mail h.weiss@globex.example."])
    kinds = {(s.kind, s.key) for s in window.spans if s.kind in {"handle", "email"}}
    assert kinds == {("handle", "@schen"), ("email", "h.weiss@globex.example")}
    # An e-mail address is not also a handle.
    assert not any(s.key == "@globex.example" for s in window.spans)


def test_lower_case_words_are_weak_unless_common() -> None:
    window = extract_mentions(["did priya eat the apple near the northwind office"])
    weak = {s.key for s in window.spans if s.kind == "weak" and s.length == 1}
    assert {"priya", "northwind"} <= weak
    assert "apple" not in weak and "the" not in weak and "office" not in weak
    assert is_common_word("apple") and not is_common_word("priya")


def test_only_the_last_4_turns_are_read() -> None:
    window = extract_mentions(["Ask Priya.", "a", "b", "c", "d"])
    assert window.n_turns == 4
    assert not window.spans


def test_sentence_initial_flag() -> None:
    tokens = tokenize("Sarah called. Then Mark said: Will you come?")
    flags = {t.text: t.sentence_initial for t in tokens}
    assert flags["Sarah"] and flags["Then"] and flags["Will"]
    assert not flags["Mark"] and not flags["called"]
