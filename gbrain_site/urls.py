"""URL map: the admin, the HTTP API at /api/ (OpenAPI at /api/openapi.json, docs at
/api/docs), Google sign-in and the mailbox grant under /oauth/."""

from django.contrib import admin
from django.urls import include, path

from gbrain_site.api import api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("oauth/", include("social_django.urls", namespace="social")),
]
