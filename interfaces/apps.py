from django.apps import AppConfig


class InterfacesConfig(AppConfig):
    """Every way in (SPEC §4): HTTP routers and schemas, the MCP server, the error
    envelope and caller resolution; the top of the stack, importing every domain app."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "interfaces"
