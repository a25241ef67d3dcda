from django.apps import AppConfig


class LoopsConfig(AppConfig):
    """Open loops: detectors, commitment extractors, waiting (SPEC §5)."""

    name = "loops"
    verbose_name = "Open loops"

    def ready(self) -> None:
        """Register the loop reads brain's entity card, delta and push show."""
        from brain.extensions import register_loop_views
        from loops.brain_views import LOOP_VIEWS

        register_loop_views(LOOP_VIEWS)
