"""Index the message date inside RawRecord.metadata.

``loops.selectors.newest_message_at`` (the reference time of mailbox sources, SPEC
§5.2) runs after every import batch; without this expression index each call read
and sorted every raw record of the source, so an import slowed down as it grew
(SPEC §11 ingest rate). With it the newest date is a backward index scan.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("loops", "0001_open_loops"),
        ("brain", "0005_push_context_indexes"),
    ]

    operations = [
        migrations.RunSQL(
            sql=(
                "CREATE INDEX IF NOT EXISTS loops_rawrecord_date "
                "ON brain_rawrecord (source_id, (metadata ->> 'date'))"
            ),
            reverse_sql="DROP INDEX IF EXISTS loops_rawrecord_date",
        ),
    ]
