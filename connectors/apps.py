from django.apps import AppConfig


class ConnectorsConfig(AppConfig):
    """Capture: Google, mailbox files and markdown folders (SPEC §6)."""

    name = "connectors"
    verbose_name = "Connectors"
