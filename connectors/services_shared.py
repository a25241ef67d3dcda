"""Write services of shared mailboxes (SPEC §6.1 shared mailboxes, §6.1a IMAP):
adding one, its owner addresses, its encrypted credential, and the uploaded
Workspace service-account key. Admin actions and commands only call these."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from django.db import transaction

from brain.exceptions import InvalidParams
from brain.models import Source
from brain.services.sources import source_ensure
from connectors.google.client import READONLY_SCOPES
from connectors.models import (
    FOLDER_HELD_KIND,
    GoogleAccount,
    SharedMailbox,
    WorkspaceServiceAccount,
)
from connectors.secrets import secret_encrypt
from connectors.services import held_kind_release_except

_KIND = {
    SharedMailbox.Provider.WORKSPACE: Source.Kind.GOOGLE,
    SharedMailbox.Provider.IMAP: Source.Kind.IMAP,
}


def shared_mailbox_source_id(address: str) -> str:
    """Suggested source id for a shared address: ``shared-<local part>`` in the
    source-id alphabet, at most 32 characters (SPEC §2.1)."""
    local = address.split("@", 1)[0].lower()
    local = re.sub(r"[^a-z0-9]+", "-", local).strip("-") or "mailbox"
    return f"shared-{local}"[:32].rstrip("-")


def shared_mailbox_owner_addresses(mailbox: SharedMailbox) -> list[str]:
    """The addresses that count as "me" for a shared mailbox (SPEC §2.1, §5.1):
    the shared address, each member's address, and (Workspace) the send-as aliases
    read from Gmail. Sorted, lower-cased, no blanks."""
    addresses = {mailbox.address}
    addresses |= {u.email for u in mailbox.members.all() if u.email}
    account = GoogleAccount.objects.filter(source_id=mailbox.source_id).first()
    if account is not None:
        addresses |= set(account.send_as or [])
    return sorted({a.strip().lower() for a in addresses if a and a.strip()})


def shared_mailbox_owners_sync(*, mailbox: SharedMailbox) -> list[str]:
    """Set the source's owner addresses to ``shared_mailbox_owner_addresses``
    (a removed member's address stops counting as mine). Returns them."""
    owners = shared_mailbox_owner_addresses(mailbox)
    Source.objects.filter(pk=mailbox.source_id).update(owner_addresses=owners)
    return owners


def shared_mailbox_secret_set(*, mailbox: SharedMailbox, secret: str) -> None:
    """Store ``secret`` (IMAP password or XOAUTH2 token) encrypted; an empty value
    clears it. The plain text is not kept anywhere else."""
    mailbox.secret_encrypted = secret_encrypt(secret) if secret else ""
    SharedMailbox.objects.filter(pk=mailbox.pk).update(
        secret_encrypted=mailbox.secret_encrypted
    )


def shared_mailbox_create(
    *,
    address: str,
    provider: str,
    source_id: str | None = None,
    name: str = "",
    members: Iterable[Any] = (),
    sync_every_minutes: int = 10,
    secret: str = "",
    **imap: Any,
) -> SharedMailbox:
    """Add a shared mailbox: its Source (``google`` for Workspace, ``imap``
    otherwise; unfederated and private like every mail source), the
    ``SharedMailbox`` row, the encrypted ``secret`` and the owner addresses.
    ``imap`` keyword arguments are ``SharedMailbox`` fields (``imap_host``,
    ``imap_port``, ``imap_security``, ``imap_username``, ``imap_auth``,
    ``imap_folders``, ``secret_env``). A Workspace mailbox also gets a
    ``GoogleAccount`` row recording the delegated read-only scopes.

    Raises ``InvalidParams`` for an unknown provider, an address already added (or,
    for Workspace, already connected by a person's Google sign-in), or a bad
    source id."""
    address = address.strip().lower()
    if provider not in _KIND:
        raise InvalidParams(
            f"Unknown shared-mailbox provider {provider!r}.",
            suggestion="Use 'workspace' or 'imap'.",
            detail={"provider": provider},
        )
    signed_in = GoogleAccount.objects.filter(email=address).first()
    if provider == SharedMailbox.Provider.WORKSPACE and signed_in is not None:
        raise InvalidParams(
            f"{address} is already connected by a Google sign-in (source "
            f"{signed_in.source_id!r}).",
            suggestion="Keep that source, or delete it (admin → Google accounts) "
            "before adding the address as a shared mailbox.",
            detail={"address": address, "source": signed_in.source_id},
        )
    if SharedMailbox.objects.filter(address=address).exists():
        raise InvalidParams(
            f"The shared mailbox {address} is already added.",
            suggestion="Edit it in admin → Shared mailboxes.",
            detail={"address": address},
        )
    sid = source_id or shared_mailbox_source_id(address)
    with transaction.atomic():
        source = source_ensure(
            source_id=sid,
            kind=_KIND[SharedMailbox.Provider(provider)],
            name=name or address,
            owner_addresses=[address],
        )
        mailbox = SharedMailbox.objects.create(
            source=source,
            provider=provider,
            address=address,
            sync_every_minutes=sync_every_minutes,
            **imap,
        )
        mailbox.members.set(list(members))
        if secret:
            shared_mailbox_secret_set(mailbox=mailbox, secret=secret)
        if provider == SharedMailbox.Provider.WORKSPACE:
            GoogleAccount.objects.update_or_create(
                email=address,
                defaults={
                    "source": source,
                    "granted_scopes": list(READONLY_SCOPES),
                    "missing_scopes": [],
                },
            )
        shared_mailbox_owners_sync(mailbox=mailbox)
    return mailbox


def workspace_key_parse(key_json: str | bytes) -> dict[str, Any]:
    """Parse a Google service-account JSON key (SPEC §6.1 shared mailboxes).
    Raises ``InvalidParams`` when the text is not one; the message never echoes
    the key."""
    text = (
        key_json.decode("utf-8", "replace") if isinstance(key_json, bytes) else key_json
    )
    try:
        info = json.loads(text)
    except ValueError:
        info = None
    required = ("client_email", "client_id", "private_key", "token_uri")
    if (
        not isinstance(info, dict)
        or info.get("type") != "service_account"
        or not all(info.get(k) for k in required)
    ):
        raise InvalidParams(
            "This is not a Google service-account key.",
            suggestion="In Google Cloud console → IAM → Service accounts → Keys, "
            "create a JSON key and upload that file.",
            detail={"expected": ["type=service_account", *required]},
        )
    return info


def workspace_key_upload(*, key_json: str | bytes) -> WorkspaceServiceAccount:
    """Store a Google service-account JSON key encrypted (SPEC §6.1 shared
    mailboxes); returns the row with the ``client_email`` / ``client_id`` an admin
    authorises in the Workspace console. Raises ``InvalidParams`` (see
    ``workspace_key_parse``)."""
    info = workspace_key_parse(key_json)
    return WorkspaceServiceAccount.objects.create(
        client_email=info["client_email"],
        client_id=str(info["client_id"]),
        private_key_id=str(info.get("private_key_id", ""))[:64],
        key_encrypted=secret_encrypt(json.dumps(info)),
    )


def shared_mailbox_folder_remap(
    *, mailbox: SharedMailbox, old: str, new: str
) -> SharedMailbox:
    """Re-map a configured IMAP folder the server no longer lists (issue 46): in
    ``imap_folders`` the name ``old`` becomes ``new`` (kept once), and the hold
    that named ``old`` is released; the cursor of ``new`` starts empty, so the next
    sync reads it whole and the ledger skips what was stored before.

    Raises ``InvalidParams`` when ``old`` is not configured or ``new`` is empty."""
    folders = list(mailbox.imap_folders or [])
    if old not in folders or not new.strip():
        raise InvalidParams(
            f"Folder {old!r} is not configured for {mailbox.address}, or no new "
            "folder was chosen.",
            suggestion="Pick one of the folders the server lists.",
            detail={"folders": folders, "old": old, "new": new},
        )
    remapped: list[str] = []
    for name in folders:
        target = new if name == old else name
        if target not in remapped:
            remapped.append(target)
    with transaction.atomic():
        SharedMailbox.objects.filter(pk=mailbox.pk).update(imap_folders=remapped)
        mailbox.imap_folders = remapped
        held_kind_release_except(
            source=mailbox.source,
            kind=FOLDER_HELD_KIND,
            keep=[n for n in remapped if n != new],
        )
    return mailbox
