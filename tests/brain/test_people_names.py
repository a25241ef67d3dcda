"""Names and addresses in every form mail exports write them (``brain.people``,
issue 25). Pure functions: no database."""

from __future__ import annotations

import pytest

from brain.people import (
    export_entry,
    is_role_address,
    name_keys,
    names_compatible,
    person_name,
    split_export_list,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '"Quinn Harlow" <QHarlow@corp.example>',
            ("Quinn Harlow", "qharlow@corp.example"),
        ),
        (
            "qharlow@corp.example (Quinn Harlow)",
            ("Quinn Harlow", "qharlow@corp.example"),
        ),
        (
            "Harlow, Quinn </O=CORP/OU=NA/CN=RECIPIENTS/CN=QHARLOW>",
            ("Harlow, Quinn", ""),
        ),
        ("Ines Varga/HOU/CORP@CORP", ("Ines Varga", "")),
        ("Ines Varga <Ines Varga/HOU/CORP@CORP>", ("Ines Varga", "")),
        (
            '"Rowan Pike" <rpike@example.net>@ENRON <IMCEANOTES-+22Rowan+20Pike+22'
            "+20+3Crpike+40example+2Enet+3E+40ENRON@ENRON.com>",
            ("Rowan Pike", "rpike@example.net"),
        ),
        (
            "IMCEANOTES-+22Pike+2C+20Rowan+22+20+3Crpike+40example+2Enet+3E+40ENRON@ENRON.com",
            ("Pike, Rowan", "rpike@example.net"),
        ),
        ("rpike@example.net @ ENRON", ("", "rpike@example.net")),
        ("Corp Announcements@CORP", ("Corp Announcements", "")),
    ],
)
def test_every_export_form_gives_its_name_and_address(
    text: str, expected: tuple[str, str]
) -> None:
    assert export_entry(text) == expected


def test_one_name_in_every_form_meets_on_the_same_keys() -> None:
    forms = [
        "Quinn J. Harlow",
        "Harlow, Quinn J.",
        "Harlow, Quinn J. </O=CORP/OU=NA/CN=RECIPIENTS/CN=QHARLOW>",
        "Quinn J Harlow/HOU/CORP@CORP",
        '"Harlow, Quinn J." <q@corp.example>@CORP',
        "QUINN J HARLOW",
    ]
    for text in forms:
        assert name_keys(text)[:2] == ["quinn j harlow", "quinn harlow"], text


def test_lookup_keys_drop_only_initials() -> None:
    """A lookup of a long title never tries its first and last words alone."""
    assert name_keys("Project Alpha Beta Gamma") == ["project alpha beta gamma"]


def test_titles_suffixes_and_annotations_are_not_the_name() -> None:
    name = person_name("Dr. Kit Moreau Jr. (E-mail)")
    assert name is not None
    assert (name.first, name.last, name.suffix) == ("Kit", "Moreau", "Jr.")
    assert person_name("Moreau, Kit [PVTC]") == person_name("Kit Moreau")
    assert person_name("Kit Moreau - Home") == person_name("Kit Moreau")
    for not_a_name in ("", "kit@example.org", "Invoice #1234", "a b c d e f"):
        assert person_name(not_a_name) is None, not_a_name


def test_exchange_entries_keep_their_comma() -> None:
    assert split_export_list(
        "Kit Moreau, Harlow, Quinn </O=CORP/OU=NA/CN=RECIPIENTS/CN=QHARLOW>, "
        '"Pike, Rowan" <rpike@example.net>'
    ) == [
        "Kit Moreau",
        "Harlow, Quinn </O=CORP/OU=NA/CN=RECIPIENTS/CN=QHARLOW>",
        '"Pike, Rowan" <rpike@example.net>',
    ]


def test_compatible_names_allow_initials_and_short_forms_only() -> None:
    def ok(a: str, b: str) -> bool:
        x, y = person_name(a), person_name(b)
        assert x is not None and y is not None
        return names_compatible(x, y)

    assert ok("Tova Brandt", "T. J. Brandt")
    assert ok("Tim Heizen", "Timothy Heizen")
    assert not ok("Nora Port", "Nora V. Porter")
    assert not ok("Jon Kent", "Jane Kent")
    assert not ok("Tova J Brandt", "Tova K Brandt")


def test_role_local_parts() -> None:
    for role in ("events@club.example", "no-reply@x.example", "Support2@x.example"):
        assert is_role_address(role), role
    for human in (
        "jkent4@x.example",
        "eventsby.dana@x.example",
        "tova.brandt@x.example",
    ):
        assert not is_role_address(human), human
