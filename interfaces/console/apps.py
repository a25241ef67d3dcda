"""The admin app with the console as its default site (Django's documented way to
replace ``admin.site``: an ``AdminConfig`` subclass naming ``default_site``)."""

from django.contrib.admin.apps import AdminConfig


class ConsoleAdminConfig(AdminConfig):
    """``django.contrib.admin`` whose ``admin.site`` is ``ConsoleSite``."""

    default_site = "interfaces.console.site.ConsoleSite"
