from django.apps import AppConfig


class JobsConfig(AppConfig):
    """Durable jobs on django-q2: sync, extraction, sweeps, dream (SPEC §7)."""

    name = "jobs"
    verbose_name = "Jobs"
