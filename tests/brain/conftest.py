"""Fixtures for the memory-verb tests: a seeded person page, keys and HTTP callers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from brain.access import local_caller
from brain.services.pages import page_add
from tests.brain.verbs_helpers import call

if TYPE_CHECKING:
    from collections.abc import Callable

    from django.test import Client

    from brain.models import Page, Source


def add_page(
    source: Source,
    *,
    title: str,
    body: str = "",
    type_name: str = "person",
    slug: str | None = None,
    visibility: str | None = None,
    frontmatter: dict[str, Any] | None = None,
    relations: list[dict[str, str]] | None = None,
) -> Page:
    """Write a page through the one write path (no embeddings)."""
    return page_add(
        source=source,
        actor=local_caller(),
        title=title,
        body=body or f"{title} is a page used by the verb tests.",
        type_name=type_name,
        slug=slug,
        visibility=visibility,
        frontmatter=frontmatter,
        relations=relations or [],
        embed=False,
    ).page


@pytest.fixture
def verb(api_client) -> Callable[..., tuple[int, dict[str, Any]]]:  # type: ignore[no-untyped-def]
    """``verb(key_plaintext, "recall", {...}) -> (status, json)``."""

    def _call(key: str, name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        client: Client = api_client(key)
        return call(client, name, body)

    return _call
