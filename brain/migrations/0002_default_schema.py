"""Install the default Schema and the ``default`` source (SPEC §2.1, §2.2).

Idempotent (update_or_create on names) so re-running over an edited Schema only
restores the defaults' missing rows and endpoint sets.
"""

from django.db import migrations

PAGE_TYPES = [
    # name, primitive, path prefixes, extractable, description
    ("person", "entity", ["people/"], False, "A human being."),
    ("company", "entity", ["companies/"], False, "A company or firm."),
    (
        "organization",
        "entity",
        ["orgs/", "organizations/"],
        False,
        "A non-company organisation: a team, a board, a community.",
    ),
    ("project", "entity", ["projects/"], False, "A piece of work with a goal."),
    ("deal", "entity", ["deals/"], False, "A negotiation, sale or investment."),
    ("email", "temporal", ["emails/"], True, "A mail thread."),
    ("meeting", "temporal", ["calendar/", "meetings/"], True, "A calendar event."),
    ("note", "annotation", ["notes/"], True, "Free notes; the catch-all type."),
    ("concept", "concept", ["concepts/"], False, "An idea, topic or term."),
    ("document", "media", ["documents/", "docs/"], True, "A file or long document."),
]

ENTITY_TYPES = ["company", "organization", "project", "deal"]
RECORD_TYPES = ["email", "meeting", "note", "document"]

RELATION_TYPES = [
    # name, inverse, from types ([] = any), to types, description
    (
        "works_at",
        "employs",
        ["person"],
        ["company", "organization"],
        "A person works at a company or organisation.",
    ),
    (
        "founded",
        "founded_by",
        ["person"],
        ["company", "organization", "project"],
        "A person founded a company, organisation or project.",
    ),
    (
        "invested_in",
        "investor",
        ["person", "company", "organization"],
        ["company", "organization", "project", "deal"],
        "An investment.",
    ),
    (
        "advises",
        "advised_by",
        ["person"],
        ["person", "company", "organization", "project"],
        "An advisory role.",
    ),
    (
        "member_of",
        "has_member",
        ["person"],
        ["organization", "company", "project"],
        "Membership of a group or team.",
    ),
    ("attended", "attendee", ["person"], ["meeting"], "A person attended a meeting."),
    ("mentions", "mentioned_by", [], [], "A page mentions another (not a backlink)."),
    (
        "owes_to",
        "owed_by",
        RECORD_TYPES,
        ["person"],
        "I owe this person something promised in the thread.",
    ),
    (
        "awaiting_reply_from",
        "awaited_by",
        RECORD_TYPES,
        ["person"],
        "This person owes me something promised in the thread.",
    ),
    ("related_to", "related_to", [], [], "A generic relation."),
]


def install(apps, schema_editor):
    PageType = apps.get_model("brain", "PageType")
    RelationType = apps.get_model("brain", "RelationType")
    Source = apps.get_model("brain", "Source")
    by_name = {}
    for name, primitive, prefixes, extractable, description in PAGE_TYPES:
        page_type, _ = PageType.objects.update_or_create(
            name=name,
            defaults={
                "primitive": primitive,
                "path_prefixes": prefixes,
                "extractable": extractable,
                "description": description,
            },
        )
        by_name[name] = page_type
    for name, inverse, from_types, to_types, description in RELATION_TYPES:
        relation_type, _ = RelationType.objects.update_or_create(
            name=name, defaults={"inverse_name": inverse, "description": description}
        )
        relation_type.source_types.set([by_name[t] for t in from_types])
        relation_type.target_types.set([by_name[t] for t in to_types])
    Source.objects.get_or_create(
        id="default",
        defaults={"name": "Harness notes", "kind": "manual", "federated": True},
    )


class Migration(migrations.Migration):
    dependencies = [("brain", "0001_initial")]

    operations = [migrations.RunPython(install, migrations.RunPython.noop)]
