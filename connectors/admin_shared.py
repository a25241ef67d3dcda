"""Admin of shared mailboxes and Workspace service-account keys (SPEC §6.1 shared
mailboxes, §6.1a IMAP): add a mailbox, its members and schedule, enter a credential
that is stored encrypted and never shown again, see the exact scopes to grant in the
Workspace console, sync now, and open the mailbox's waiting view."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from brain.admin import SourceAdmin
from brain.exceptions import BrainError
from brain.models import Source
from connectors.base import ConnectorError
from connectors.dispatch import source_sync
from connectors.google.delegation import DELEGATION_SCOPES
from connectors.models import SharedMailbox, WorkspaceServiceAccount
from connectors.services_shared import (
    shared_mailbox_create,
    shared_mailbox_owners_sync,
    shared_mailbox_secret_set,
    workspace_key_parse,
    workspace_key_upload,
)

if TYPE_CHECKING:
    from django.db.models import QuerySet
    from django.http import HttpRequest

WORKSPACE_STEPS = (
    "In the Google Admin console (admin.google.com) open Security → Access and data "
    "control → API controls → Manage domain-wide delegation → Add new; paste the "
    "service account's Client ID and, in OAuth scopes, exactly: {scopes} ; then "
    "Authorize. Changes can take a few minutes to apply."
)


def workspace_steps() -> str:
    """The Workspace console steps with the exact scope list to paste."""
    return WORKSPACE_STEPS.format(scopes=DELEGATION_SCOPES)


class SharedMailboxForm(forms.ModelForm):
    """Add or edit a shared mailbox. ``secret`` is write-only: it is encrypted on
    save and the field is always empty when the form is shown again."""

    source_id = forms.CharField(
        required=False,
        max_length=32,
        help_text="Source id (a-z, 0-9, -). Empty: shared-<local part of the address>.",
    )
    secret = forms.CharField(
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="IMAP password or XOAUTH2 access token. Stored encrypted and never "
        "shown again; leave empty to keep the stored one. Or name an environment "
        "variable below instead.",
    )

    class Meta:
        model = SharedMailbox
        fields = (
            "address",
            "provider",
            "members",
            "sync_every_minutes",
            "imap_host",
            "imap_port",
            "imap_security",
            "imap_username",
            "imap_auth",
            "imap_folders",
            "secret_env",
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        members = self.fields.get("members")
        if isinstance(members, forms.ModelMultipleChoiceField):
            members.queryset = get_user_model().objects.filter(is_staff=True)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        provider = data.get("provider") or self.instance.provider
        if provider == SharedMailbox.Provider.IMAP:
            if not data.get("imap_host"):
                self.add_error("imap_host", "An IMAP mailbox needs a host.")
            has_secret = bool(
                data.get("secret")
                or data.get("secret_env")
                or self.instance.secret_encrypted
            )
            if not has_secret:
                self.add_error(
                    "secret", "Enter the password or token, or an environment variable."
                )
        folders = data.get("imap_folders")
        if folders and not (
            isinstance(folders, list) and all(isinstance(f, str) for f in folders)
        ):
            self.add_error("imap_folders", 'A JSON list of names, e.g. ["INBOX"].')
        return data


@admin.action(description="Sync now")
def sync_mailboxes_now(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet[SharedMailbox],
) -> None:
    """Run ``source_sync`` for each selected mailbox and report the counts."""
    for mailbox in queryset:
        try:
            report = source_sync(
                source_id=mailbox.source_id, actor=f"admin:{request.user}"
            )
        except (BrainError, ConnectorError) as exc:
            modeladmin.message_user(
                request, f"{mailbox.address}: {exc}", level=messages.ERROR
            )
            continue
        counts = (
            ", ".join(f"{v} {k}" for k, v in sorted(report.counts.items()))
            or "nothing new"
        )
        level = messages.WARNING if report.held or report.warnings else messages.SUCCESS
        modeladmin.message_user(
            request, f"{mailbox.address} ({report.status}): {counts}.", level=level
        )


@admin.register(SharedMailbox)
class SharedMailboxAdmin(admin.ModelAdmin):
    """Shared mailboxes: superusers see all; other staff see those they are
    members of."""

    form = SharedMailboxForm
    list_display = (
        "address",
        "provider",
        "source",
        "sync_every_minutes",
        "last_success",
        "credential",
        "waiting_link",
    )
    list_filter = ("provider",)
    search_fields = ("address", "source__id")
    list_select_related = ("source",)
    filter_horizontal = ("members",)
    actions = (sync_mailboxes_now,)
    readonly_fields = ("credential", "owner_addresses", "delegation", "waiting_link")

    def get_queryset(self, request: HttpRequest) -> QuerySet[SharedMailbox]:
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        return qs.filter(members=request.user).distinct()

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = tuple(super().get_readonly_fields(request, obj))
        # The address and the provider decide the source: fixed once added.
        return (*fields, "address", "provider") if obj else fields

    _IMAP_FIELDS = (
        "imap_host",
        "imap_port",
        "imap_security",
        "imap_username",
        "imap_auth",
        "imap_folders",
        "secret_env",
        "secret",
    )

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            head: tuple[str, ...] = ("address", "provider", "source_id")
            tail: tuple[str, ...] = ("delegation",)
        else:
            head = ("address", "provider", "owner_addresses")
            tail = ("credential", "delegation", "waiting_link")
        return (*head, "members", "sync_every_minutes", *self._IMAP_FIELDS, *tail)

    def save_model(
        self,
        request: HttpRequest,
        obj: SharedMailbox,
        form: Any,
        change: bool,  # noqa: FBT001 (Django's signature)
    ) -> None:
        data = form.cleaned_data
        if change:
            super().save_model(request, obj, form, change)
            if data.get("secret"):
                shared_mailbox_secret_set(mailbox=obj, secret=data["secret"])
            return
        imap = {
            name: data[name]
            for name in (
                "imap_host",
                "imap_port",
                "imap_security",
                "imap_username",
                "imap_auth",
                "imap_folders",
                "secret_env",
            )
            if data.get(name) not in (None, "")
        }
        created = shared_mailbox_create(
            address=data["address"],
            provider=data["provider"],
            source_id=data.get("source_id") or None,
            sync_every_minutes=data["sync_every_minutes"],
            secret=data.get("secret") or "",
            members=data.get("members") or (),
            **imap,
        )
        # The form's instance becomes the stored row (save_related sets members).
        obj.__dict__.update(created.__dict__)

    def save_related(
        self,
        request: HttpRequest,
        form: Any,
        formsets: Any,
        change: bool,  # noqa: FBT001 (Django's signature)
    ) -> None:
        super().save_related(request, form, formsets, change)
        shared_mailbox_owners_sync(mailbox=form.instance)

    @admin.display(description="last successful sync")
    def last_success(self, obj: SharedMailbox) -> Any:
        return obj.source.last_success_at

    @admin.display(description="credential")
    def credential(self, obj: SharedMailbox) -> str:
        if obj.provider == SharedMailbox.Provider.WORKSPACE:
            return "service account (domain-wide delegation)"
        if obj.secret_env:
            return f"from environment variable {obj.secret_env}"
        return "stored encrypted" if obj.secret_encrypted else "missing"

    @admin.display(description="owner addresses")
    def owner_addresses(self, obj: SharedMailbox) -> str:
        return ", ".join(obj.source.owner_addresses)

    @admin.display(description="waiting")
    def waiting_link(self, obj: SharedMailbox) -> str:
        url = reverse("admin:loops_waiting") + f"?source={obj.source_id}"
        return format_html('<a href="{}">who is waiting</a>', url)

    @admin.display(description="Workspace console")
    def delegation(self, obj: SharedMailbox | None) -> str:
        key = WorkspaceServiceAccount.objects.first()
        client = key.client_id if key else "(the Client ID of your key file)"
        return format_html(
            "<p>{}</p><p>Client ID: <code>{}</code></p><p>OAuth scopes: "
            "<code>{}</code></p>",
            workspace_steps(),
            client,
            DELEGATION_SCOPES,
        )


class WorkspaceKeyForm(forms.ModelForm):
    """Upload a service-account JSON key; it is encrypted and never shown again."""

    key_file = forms.FileField(
        help_text="The JSON key of a service account with domain-wide delegation "
        "(Google Cloud console → IAM → Service accounts → Keys → Add key → JSON)."
    )

    class Meta:
        model = WorkspaceServiceAccount
        fields: tuple[str, ...] = ()

    def clean_key_file(self) -> bytes:
        upload = self.cleaned_data["key_file"]
        data = upload.read(64 * 1024 + 1)
        if len(data) > 64 * 1024:
            raise forms.ValidationError("A service-account key is a small JSON file.")
        try:
            workspace_key_parse(data)
        except BrainError as exc:
            raise forms.ValidationError(f"{exc} {exc.suggestion}") from None
        return data


@admin.register(WorkspaceServiceAccount)
class WorkspaceServiceAccountAdmin(admin.ModelAdmin):
    """Uploaded keys: shown by client e-mail and ID only; the newest is used."""

    form = WorkspaceKeyForm
    list_display = ("client_email", "client_id", "private_key_id", "uploaded_at")
    readonly_fields = ("client_email", "client_id", "private_key_id", "uploaded_at")

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.readonly_fields if obj else ("key_file", "console_steps")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.readonly_fields if obj else ("console_steps",)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def save_model(
        self,
        request: HttpRequest,
        obj: WorkspaceServiceAccount,
        form: Any,
        change: bool,  # noqa: FBT001 (Django's signature)
    ) -> None:
        row = workspace_key_upload(key_json=form.cleaned_data["key_file"])
        obj.__dict__.update(row.__dict__)
        self.message_user(
            request,
            f"Key stored encrypted. Now authorise client ID {row.client_id} in the "
            "Workspace console with the scopes shown.",
            messages.SUCCESS,
        )

    @admin.display(description="Workspace console")
    def console_steps(self, obj: Any = None) -> str:
        return format_html_join(
            "", "<p>{}</p>", [(workspace_steps(),), (f"Scopes: {DELEGATION_SCOPES}",)]
        )


class MemberAwareSourceAdmin(SourceAdmin):
    """The Sources list, where a shared mailbox's source shows only to superusers
    and the mailbox's members (SPEC §6.1a: members see it in the admin)."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Source]:
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        hidden = SharedMailbox.objects.exclude(members=request.user.pk).values(
            "source_id"
        )
        return qs.exclude(pk__in=hidden)


admin.site.unregister(Source)
admin.site.register(Source, MemberAwareSourceAdmin)
