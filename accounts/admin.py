"""Admin for staff users and API keys (SPEC §8). A new key's secret is shown once,
in the success message after saving; only its hash is stored."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.models import ApiKey, User
from accounts.services import apikey_create, apikey_revoke, apikey_validate


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    """Django's user admin, registered for the custom ``accounts.User``."""


class ApiKeyForm(forms.ModelForm):
    """The key form: a new key is checked by ``apikey_validate``, the same rules as
    the ``apikey`` command (SPEC §8)."""

    class Meta:
        model = ApiKey
        fields = (
            "name",
            "scopes",
            "write_source",
            "readable_sources",
            "trusted",
            "rate_limit_per_minute",
            "expires_at",
        )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or self.cleaned_data
        if (
            self.instance.pk is None
            or "scopes" in self.changed_data
            or ("write_source" in self.changed_data)
        ):
            try:
                apikey_validate(
                    name=data.get("name") or "",
                    scopes=data.get("scopes") or [],
                    write_source=data.get("write_source"),
                    expires_at=(
                        data.get("expires_at")
                        if self.instance.pk is None or "expires_at" in self.changed_data
                        else None
                    ),
                )
            except ValidationError as exc:
                for field, errors in exc.message_dict.items():
                    self.add_error(field if field in self.fields else None, errors)
        return data


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    form = ApiKeyForm
    list_display = (
        "name",
        "prefix",
        "scopes",
        "write_source",
        "trusted",
        "is_active",
        "expires_at",
        "last_used_at",
        "created_at",
    )
    list_filter = (
        "trusted",
        ("revoked_at", admin.EmptyFieldListFilter),
        "write_source",
    )
    search_fields = ("name", "prefix")
    list_select_related = ("write_source",)
    autocomplete_fields = ("write_source",)
    filter_horizontal = ("readable_sources",)
    readonly_fields = (
        "prefix",
        "created_at",
        "last_used_at",
        "revoked_at",
        "created_by",
    )
    actions = ("revoke_keys",)

    @admin.display(description="active", boolean=True)
    def is_active(self, obj: ApiKey) -> bool:
        return obj.is_active

    def save_model(
        self,
        request: HttpRequest,
        obj: ApiKey,
        form: Any,
        change: bool,  # noqa: FBT001 (Django's signature)
    ) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        issued = apikey_create(
            name=obj.name,
            scopes=obj.scopes,
            write_source=obj.write_source,
            readable_sources=form.cleaned_data.get("readable_sources") or [],
            trusted=obj.trusted,
            rate_limit_per_minute=obj.rate_limit_per_minute,
            expires_at=obj.expires_at,
            created_by=request.user if request.user.is_authenticated else None,
        )
        obj.pk = issued.api_key.pk
        obj.prefix = issued.api_key.prefix
        self.message_user(
            request,
            f"Key created. Copy it now, it is shown only once: {issued.plaintext}",
            messages.WARNING,
        )

    def save_related(
        self,
        request: HttpRequest,
        form: Any,
        formsets: Any,
        change: bool,  # noqa: FBT001 (Django's signature)
    ) -> None:
        if change:
            super().save_related(request, form, formsets, change)
        # On create, apikey_create already set readable_sources (plus the write source).

    @admin.action(description="Revoke selected keys")
    def revoke_keys(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        revoked = sum(
            apikey_revoke(api_key=key, actor=request.user.get_username())
            for key in queryset
        )
        self.message_user(request, f"{revoked} key(s) revoked.", messages.SUCCESS)
