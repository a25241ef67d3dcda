"""Fixtures for loops tests: a mailbox and a Google source owned by Phillip Allen,
a person page for Jeff Smith, and ``store(messages)`` that saves MailMessages the way
the connectors do (RawRecord.metadata + an ``email`` thread page)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from brain.models import Page, RawRecord, Source
from brain.text import sha256_hex
from tests.factories import AliasFactory, PageFactory, SourceFactory, page_type
from tests.loops.shapes import JEFF, OWNERS, ROBIN

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from loops.message import MailMessage


@pytest.fixture
def robins_mailbox(db: None) -> Source:
    """A mailbox of invented mail owned by ``ROBIN`` (the fault-kind tests)."""
    return SourceFactory(
        id="robin", kind=Source.Kind.MAILBOX, owner_addresses=[ROBIN], federated=False
    )


@pytest.fixture
def mailbox(db: None) -> Source:
    return SourceFactory(
        id="allen",
        kind=Source.Kind.MAILBOX,
        owner_addresses=list(OWNERS),
        federated=False,
    )


@pytest.fixture
def google(db: None) -> Source:
    from django.utils import timezone

    return SourceFactory(
        id="allen-g",
        kind=Source.Kind.GOOGLE,
        owner_addresses=list(OWNERS),
        federated=False,
        last_success_at=timezone.now(),
    )


@pytest.fixture
def jeff(mailbox: Source) -> Page:
    page = PageFactory(
        source=mailbox,
        slug="people/jeff-smith",
        type=page_type("person"),
        title="Jeff Smith",
    )
    AliasFactory(page=page, source=mailbox, alias=JEFF, kind="email")
    return page


@pytest.fixture
def store() -> Callable[..., list[MailMessage]]:
    """``store(source, messages, page=True)``: save messages as raw records (and an
    email page per thread); returns them with ``raw_record_id`` set."""

    def _store(
        source: Source, messages: Sequence[MailMessage], *, page: bool = True
    ) -> list[MailMessage]:
        for m in messages:
            meta = m.to_metadata()
            rec, _ = RawRecord.objects.update_or_create(
                source=source,
                external_id=m.message_id,
                defaults={
                    "kind": RawRecord.Kind.RFC822,
                    "content": m.body,
                    "metadata": meta,
                    "content_hash": sha256_hex(m.body),
                },
            )
            m.raw_record_id = rec.pk
            if (
                page
                and not Page.objects.filter(
                    source=source, frontmatter__thread_id=m.thread_id
                ).exists()
            ):
                PageFactory(
                    source=source,
                    type=page_type("email"),
                    slug=f"emails/{m.thread_id}",
                    title=m.subject or "(no subject)",
                    frontmatter={"thread_id": m.thread_id, "from": m.from_addr},
                )
        return list(messages)

    return _store
