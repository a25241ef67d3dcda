"""SPEC §2.3: slug and alias normalisation."""

from __future__ import annotations

import pytest

from brain.exceptions import InvalidParams
from brain.text import estimate_tokens, normalize_alias, slugify_title, validate_slug


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Jane Doe", "jane-doe"),
        ("../../etc/passwd", "etcpasswd"),
        ("a/b\\c", "abc"),
        ("  Q3   plan: v2.0! ", "q3-plan-v20"),
        ("김민수 회의록", "김민수-회의록"),
        ("\u202eevil\u202c name", "evil-name"),
    ],
)
def test_slug_sanitising_strips_what_could_escape_the_namespace(
    title: str, slug: str
) -> None:
    assert slugify_title(title) == slug


def test_slug_from_title_is_cut_at_80_characters() -> None:
    assert len(slugify_title("word " * 40)) <= 80


@pytest.mark.parametrize(
    "bad",
    ["", "/abs", "a//b", "a/../b", "a\\b", "a/b/", "x\u202e", "a b", "A" * 300],
)
def test_explicit_slugs_that_break_the_rules_are_refused(bad: str) -> None:
    with pytest.raises(InvalidParams, match="Slug"):
        validate_slug(bad)


def test_valid_explicit_slugs_pass_lower_cased() -> None:
    assert validate_slug("People/Jane-Doe") == "people/jane-doe"
    assert validate_slug("emails/2024/01/2024-01-02-hello-abcdef12") == (
        "emails/2024/01/2024-01-02-hello-abcdef12"
    )


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("  Jane   DOE ", "jane doe"),
        ('"Jane Doe"', "jane doe"),
        ("(Acme)", "acme"),
        ("Ｊａｎｅ", "jane"),
        ("Jane.Doe@Example.COM", "jane.doe@example.com"),
    ],
)
def test_alias_normalisation(raw: str, normal: str) -> None:
    assert normalize_alias(raw) == normal


def test_token_estimate_is_chars_over_four() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
