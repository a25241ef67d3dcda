from django.apps import AppConfig


class BrainConfig(AppConfig):
    """Pages, Schema, sources, relations, facts, search and the memory verbs."""

    name = "brain"
    verbose_name = "Brain"

    def ready(self) -> None:
        from brain import checks  # noqa: F401 - registers the system checks
