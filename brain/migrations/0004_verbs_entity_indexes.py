"""Indexes for the entity() resolver (SPEC §4, §11: entity p99 ≤ 25 ms at 200,000
pages): slug-suffix lookups through ``reverse(slug) LIKE reverse('/<slug>') || '%'``
(brain.services.entities). The case-insensitive exact-title arm uses
``brain_page_title_lower``, declared on the model (migration 0005)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("brain", "0003_merge_proposal"),
    ]

    operations = [
        migrations.RunSQL(
            sql=[
                # entity() slug-suffix arm: slug ends with '/<slugified name>'.
                "CREATE INDEX IF NOT EXISTS brain_page_slug_reverse "
                "ON brain_page (reverse(slug) text_pattern_ops)",
            ],
            reverse_sql=[
                "DROP INDEX IF EXISTS brain_page_slug_reverse",
            ],
        ),
    ]
