import django.contrib.postgres.indexes
import django.contrib.postgres.search
import django.db.models.deletion
from django.db import migrations, models

# The words of every stored title (soft-deleted pages too: a restored page keeps its
# title), as the page write path adds them from here on.
FILL_TITLE_WORDS = """
INSERT INTO brain_titleword (source_id, word)
SELECT DISTINCT p.source_id, w.word
  FROM brain_page p,
       unnest(tsvector_to_array(to_tsvector('simple'::regconfig, p.title))) AS w(word)
ON CONFLICT DO NOTHING
"""


class Migration(migrations.Migration):
    """Entity near-miss suggestions by words (issue 22): ``TitleWord``, the lexicon of
    title words (trigram-indexed), filled from the stored titles, and
    ``brain_page_title_words``, the words of each title."""

    dependencies = [
        ("brain", "0013_chunk_secondary"),
    ]

    operations = [
        migrations.CreateModel(
            name="TitleWord",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True,
                        primary_key=True,
                        serialize=False,
                        verbose_name="ID",
                    ),
                ),
                ("word", models.TextField()),
            ],
        ),
        migrations.AddIndex(
            model_name="page",
            index=django.contrib.postgres.indexes.GinIndex(
                django.contrib.postgres.search.SearchVector("title", config="simple"),
                name="brain_page_title_words",
            ),
        ),
        migrations.AddField(
            model_name="titleword",
            name="source",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="brain.source",
            ),
        ),
        migrations.AddIndex(
            model_name="titleword",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["word"], name="brain_titleword_trgm", opclasses=["gin_trgm_ops"]
            ),
        ),
        migrations.AddConstraint(
            model_name="titleword",
            constraint=models.UniqueConstraint(
                fields=("source", "word"), name="brain_titleword_unique_word"
            ),
        ),
        migrations.RunSQL(FILL_TITLE_WORDS, migrations.RunSQL.noop),
    ]
