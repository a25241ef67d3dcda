"""SPEC §2.2: the default Schema, and writes that break it are refused clearly."""

from __future__ import annotations

import pytest

from brain.exceptions import SchemaViolation
from brain.models import PageType, RelationType, Source
from brain.services.schema import (
    schema_page_type,
    schema_page_type_for_slug,
    schema_relation_type,
    schema_required_fields,
)

pytestmark = pytest.mark.django_db


def test_default_schema_is_installed_by_the_data_migration() -> None:
    assert set(PageType.objects.values_list("name", flat=True)) == {
        "person",
        "company",
        "organization",
        "project",
        "deal",
        "email",
        "meeting",
        "note",
        "concept",
        "document",
    }
    assert set(RelationType.objects.values_list("name", flat=True)) == {
        "works_at",
        "founded",
        "invested_in",
        "advises",
        "member_of",
        "attended",
        "mentions",
        "owes_to",
        "awaiting_reply_from",
        "related_to",
    }


def test_default_source_exists_and_is_federated() -> None:
    source = Source.objects.get(id="default")
    assert source.federated is True


def test_unknown_page_type_is_refused_with_the_allowed_values() -> None:
    with pytest.raises(
        SchemaViolation,
        match=r"Unknown page type 'robot'\. Allowed: "
        r"company, concept, deal, document, email, meeting, note, "
        r"organization, person, project\.",
    ) as info:
        schema_page_type(name="robot")
    assert info.value.code == "invalid_params"
    assert "admin → Brain → Page types" in info.value.suggestion
    assert "person" in info.value.detail["allowed"]


def test_unknown_relation_type_is_refused_with_the_allowed_values() -> None:
    person = PageType.objects.get(name="person")
    company = PageType.objects.get(name="company")
    with pytest.raises(
        SchemaViolation,
        match=r"Unknown relation type 'hates'\. "
        r"Allowed: advises, attended, awaiting_reply_from",
    ) as info:
        schema_relation_type(name="hates", from_type=person, to_type=company)
    assert "admin → Brain → Relation types" in info.value.suggestion


def test_relation_between_disallowed_types_is_refused() -> None:
    company = PageType.objects.get(name="company")
    meeting = PageType.objects.get(name="meeting")
    with pytest.raises(
        SchemaViolation,
        match=r"Relation 'works_at' cannot go from a "
        r"'company' page\. Allowed from types: person\.",
    ) as info:
        schema_relation_type(name="works_at", from_type=company, to_type=company)
    assert info.value.detail["allowed"] == ["person"]
    person = PageType.objects.get(name="person")
    with pytest.raises(
        SchemaViolation,
        match=r"cannot go to a 'meeting' page\. "
        r"Allowed to types: company, organization\.",
    ):
        schema_relation_type(name="works_at", from_type=person, to_type=meeting)


def test_allowed_relation_passes_and_any_means_any() -> None:
    person = PageType.objects.get(name="person")
    company = PageType.objects.get(name="company")
    meeting = PageType.objects.get(name="meeting")
    assert (
        schema_relation_type(name="works_at", from_type=person, to_type=company).name
        == "works_at"
    )
    assert (
        schema_relation_type(name="mentions", from_type=meeting, to_type=company).name
        == "mentions"
    )


def test_schema_edits_apply_at_once() -> None:
    PageType.objects.create(
        name="vendor", primitive="entity", path_prefixes=["vendors/"]
    )
    assert schema_page_type(name="vendor").name == "vendor"
    assert schema_page_type_for_slug(slug="vendors/acme").name == "vendor"


def test_type_is_inferred_from_the_longest_slug_prefix() -> None:
    assert schema_page_type_for_slug(slug="people/jane-doe").name == "person"
    assert schema_page_type_for_slug(slug="emails/2024/01/x").name == "email"
    assert schema_page_type_for_slug(slug="misc/thing").name == "note"


def test_required_frontmatter_fields_are_enforced() -> None:
    deal = PageType.objects.get(name="deal")
    deal.required_fields = ["stage"]
    deal.save()
    with pytest.raises(SchemaViolation, match=r"need frontmatter field\(s\): stage"):
        schema_required_fields(page_type=deal, frontmatter={"title": "x"})
    schema_required_fields(page_type=deal, frontmatter={"stage": "won"})
