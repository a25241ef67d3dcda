from django.apps import AppConfig


class LoopsConfig(AppConfig):
    """Open loops: detectors, commitment extractors, waiting (SPEC §5)."""

    name = "loops"
    verbose_name = "Open loops"
