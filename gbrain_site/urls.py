"""URL map: ``/`` goes to the console (the admin), the HTTP API at /api/ (OpenAPI at /api/openapi.json, docs at
/api/docs), Google sign-in and the mailbox grant under /oauth/."""

from django.contrib import admin
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from interfaces.http.api import api, unknown_endpoint

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="admin:index"), name="home"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    # After the API routes: unknown /api/ paths answer with the error envelope.
    re_path(r"^api/(?P<rest>(?s:.*))$", unknown_endpoint),
    path("oauth/", include("social_django.urls", namespace="social")),
]
