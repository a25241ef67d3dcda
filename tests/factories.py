"""factory_boy factories for the knowledge model (STYLE rule 18).

Factories write rows directly: they build fixtures for tests of readers, admin and
constraints. Tests of the write path itself go through ``brain.services``.
"""

from __future__ import annotations

from pathlib import Path

import factory
from factory.django import DjangoModelFactory

from brain.models import (
    Alias,
    Fact,
    Page,
    PageType,
    RawRecord,
    Relation,
    RelationType,
    Source,
    TimelineEntry,
)
from brain.text import sha256_hex


class SourceFactory(DjangoModelFactory):
    class Meta:
        model = Source
        django_get_or_create = ("id",)

    id = factory.Sequence(lambda n: f"src-{n}")
    name = factory.LazyAttribute(lambda o: f"Source {o.id}")
    kind = Source.Kind.MANUAL
    federated = True


def page_type(name: str) -> PageType:
    """Return a default-Schema page type (installed by migration 0002)."""
    return PageType.objects.get(name=name)


def relation_type(name: str) -> RelationType:
    """Return a default-Schema relation type."""
    return RelationType.objects.get(name=name)


class PageFactory(DjangoModelFactory):
    class Meta:
        model = Page

    class Params:
        person = factory.Trait(
            type=factory.LazyFunction(lambda: page_type("person")),
            slug=factory.Sequence(lambda n: f"people/person-{n}"),
        )

    source = factory.SubFactory(SourceFactory)
    slug = factory.Sequence(lambda n: f"notes/note-{n}")
    type = factory.LazyFunction(lambda: page_type("note"))
    title = factory.Faker("sentence", nb_words=4)
    body = factory.Faker("paragraph", nb_sentences=5)
    content_hash = factory.LazyAttribute(lambda o: sha256_hex(o.body))


class RawRecordFactory(DjangoModelFactory):
    class Meta:
        model = RawRecord

    source = factory.SubFactory(SourceFactory)
    external_id = factory.Sequence(lambda n: f"msg-{n}@example.org")
    kind = RawRecord.Kind.RFC822
    content = factory.Faker("paragraph")
    content_hash = factory.LazyAttribute(lambda o: sha256_hex(o.content))


class AliasFactory(DjangoModelFactory):
    class Meta:
        model = Alias

    page = factory.SubFactory(PageFactory)
    source = factory.SelfAttribute("page.source")
    alias = factory.Sequence(lambda n: f"alias {n}")


class RelationFactory(DjangoModelFactory):
    class Meta:
        model = Relation

    from_page = factory.SubFactory(PageFactory)
    to_page = factory.SubFactory(
        PageFactory, source=factory.SelfAttribute("..from_page.source")
    )
    source = factory.SelfAttribute("from_page.source")
    relation_type = factory.LazyFunction(lambda: relation_type("related_to"))


class TimelineEntryFactory(DjangoModelFactory):
    class Meta:
        model = TimelineEntry

    page = factory.SubFactory(PageFactory)
    date = factory.Faker("date_object")
    summary = factory.Faker("sentence")
    summary_hash = factory.LazyAttribute(lambda o: sha256_hex(o.summary))
    source_ref = "test"


class FactFactory(DjangoModelFactory):
    class Meta:
        model = Fact

    source = factory.SubFactory(SourceFactory)
    text = factory.Faker("sentence")
    provenance = "test fixture"


# One ask (Ada Quill to me@example.org, 30 Nov 2026 10:00 UTC) as RFC 5322 text.
ONE_ASK_MESSAGE = (
    "From: Ada Quill <ada@example.org>\n"
    "To: me@example.org\n"
    "Subject: Budget\n"
    "Date: Mon, 30 Nov 2026 10:00:00 +0000\n"
    "Message-ID: <b1@example.org>\n\n"
    "Can you send the budget by Friday?\n"
)


def one_message_mbox(directory: Path) -> Path:
    """Write ``one.mbox`` in ``directory``: ``ONE_ASK_MESSAGE`` alone, for commands
    that import a mailbox file; returns its path."""
    mbox = directory / "one.mbox"
    mbox.write_text("From ada@example.org Mon Nov 30 10:00:00 2026\n" + ONE_ASK_MESSAGE)
    return mbox
