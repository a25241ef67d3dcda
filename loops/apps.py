from django.apps import AppConfig


class LoopsConfig(AppConfig):
    """Open loops: detectors, commitment extractors, waiting (SPEC §5)."""

    name = "loops"
    verbose_name = "Open loops"

    def ready(self) -> None:
        """Register the loop reads brain's entity card, delta and push show, and the
        loop mover of page merges (and their undo)."""
        from brain.extensions import (
            MergeMover,
            register_loop_views,
            register_merge_mover,
        )
        from loops.brain_views import LOOP_VIEWS
        from loops.services import loops_merge_move, loops_merge_restore

        register_loop_views(LOOP_VIEWS)
        register_merge_mover(
            "loops", MergeMover(move=loops_merge_move, restore=loops_merge_restore)
        )
