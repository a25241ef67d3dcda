from django.apps import AppConfig


class JobsConfig(AppConfig):
    """Durable jobs on django-q2: sync, extraction, sweeps, dream (SPEC §7)."""

    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        """Make LLM extraction after detection an ``extract_commitments`` job."""
        from jobs.services import commitments_extraction_enqueue
        from loops.extraction import register_extraction_queue

        register_extraction_queue(commitments_extraction_enqueue)
