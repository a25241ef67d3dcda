from django.apps import AppConfig


class JobsConfig(AppConfig):
    """Durable jobs on django-q2: sync, extraction, sweeps, dream (SPEC §7)."""

    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        """Make LLM extraction after detection an ``extract_commitments`` job, and
        the embedding of a large page write an ``embed_pending`` job."""
        from brain.extensions import register_embed_queue
        from jobs.services import commitments_extraction_enqueue, embed_pending_enqueue
        from loops.extraction import register_extraction_queue

        register_extraction_queue(commitments_extraction_enqueue)
        register_embed_queue(
            lambda source_ids: embed_pending_enqueue(
                source_ids=source_ids, created_by="page_write"
            )
        )
