"""``ConsoleSite``: the admin site as the curators' console (SPEC §0 "team admins").

Branded header; a dashboard home (``console/index.html``); the curator's apps first
and third-party internals (workers, sign-in, groups) grouped last; "View site" goes
to the home; the console's own pages (``interfaces.console.views``) under
``/admin/console/``, each behind ``admin_view`` (staff login, CSRF on POST).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.urls import path

from interfaces.console import views
from interfaces.console.dashboard import dashboard_context

if TYPE_CHECKING:
    from django.http import HttpRequest
    from django.template.response import TemplateResponse
    from django.urls import URLPattern

#: Our apps, in the order a curator reaches for them; anything else is third-party.
CURATOR_APPS = ("loops", "brain", "connectors", "jobs", "accounts")
THIRD_PARTY = "Third-party internals (workers, sign-in, groups)"


class ConsoleSite(admin.AdminSite):
    """The admin site with the console's home, grouping and pages."""

    site_header = "Brain console"
    site_title = "Brain console"
    index_title = "Home"
    index_template = "console/index.html"
    site_url = "/"

    def get_app_list(
        self, request: HttpRequest, app_label: str | None = None
    ) -> list[dict[str, Any]]:
        """Curator apps first (in ``CURATOR_APPS`` order), then one group holding
        every third-party app's models."""
        apps = super().get_app_list(request, app_label)
        if app_label is not None:
            return apps
        ours = sorted(
            (a for a in apps if a["app_label"] in CURATOR_APPS),
            key=lambda a: CURATOR_APPS.index(a["app_label"]),
        )
        others = [a for a in apps if a["app_label"] not in CURATOR_APPS]
        if others:
            ours.append(
                {
                    "name": THIRD_PARTY,
                    "app_label": "third_party",
                    "app_url": "#third-party",
                    "has_module_perms": True,
                    "models": [m for a in others for m in a["models"]],
                }
            )
        return ours

    def index(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> TemplateResponse:
        """The dashboard: ``dashboard_context`` above the app list."""
        return super().index(request, {**dashboard_context(), **(extra_context or {})})

    def get_urls(self) -> list[URLPattern | Any]:
        wrap = self.admin_view
        console = [
            path("console/run/", wrap(views.run_job), name="console_run"),
            path("console/search/", wrap(views.search), name="console_search"),
            path("console/people/", wrap(views.people), name="console_people"),
            path(
                "console/loops/<int:loop_id>/act/",
                wrap(views.loop_act),
                name="console_loop_act",
            ),
            path(
                "console/person/<str:source_id>/<path:slug>/",
                wrap(views.person_card),
                name="console_person",
            ),
            path(
                "console/fact/<int:fact_id>/act/",
                wrap(views.fact_act),
                name="console_fact_act",
            ),
            path("console/merge/", wrap(views.merge_preview), name="console_merge"),
            path(
                "console/sources/<str:source_id>/folders/",
                wrap(views.source_folders),
                name="console_source_folders",
            ),
            path(
                "console/page/<str:source_id>/<path:slug>/edit/",
                wrap(views.page_edit),
                name="console_page_edit",
            ),
            path(
                "console/page/<str:source_id>/<path:slug>/revisions/",
                wrap(views.page_revisions),
                name="console_page_revisions",
            ),
            path(
                "console/page/<str:source_id>/<path:slug>/",
                wrap(views.page_view),
                name="console_page",
            ),
            path(
                "console/revision/<int:revision_id>/revert/",
                wrap(views.revision_revert),
                name="console_revision_revert",
            ),
        ]
        return console + super().get_urls()
