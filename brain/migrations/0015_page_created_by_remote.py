from django.db import migrations, models

# Backfill from the page's first revision: the write path stamps a remote (untrusted)
# caller's provenance with ``key`` = the caller's actor, which is also the revision's
# ``actor``; a trusted writer's provenance gets ``actor`` instead and never a ``key``
# the server stamped. Pages without a revision stay trusted (they were not written by
# a remote caller through the write path).
BACKFILL = """
UPDATE brain_page p
   SET created_by_remote = true
  FROM (SELECT DISTINCT ON (page_id) page_id, actor, provenance
          FROM brain_pagerevision
         ORDER BY page_id, created_at, id) r
 WHERE r.page_id = p.id
   AND r.actor LIKE 'key:%'
   AND r.provenance ->> 'key' = r.actor
"""


class Migration(migrations.Migration):
    """Pages remember whether a remote caller created them (``Page.created_by_remote``),
    the input of the slug and name precedence rule (``brain.precedence``, SPEC §8),
    filled for existing pages from their first revision's server-stamped provenance."""

    dependencies = [
        ("brain", "0014_title_words"),
    ]

    operations = [
        migrations.AddField(
            model_name="page",
            name="created_by_remote",
            field=models.BooleanField(
                db_default=False,
                default=False,
                editable=False,
                help_text="Created by an untrusted API key (HTTP or MCP over HTTP).",
            ),
        ),
        migrations.RunSQL(BACKFILL, reverse_sql=migrations.RunSQL.noop),
    ]
