"""Encrypted credential fields of shared mailboxes (SPEC §6.1, §6.1a).

An uploaded Workspace service-account key or an IMAP password/XOAUTH2 token is stored
as a Fernet token (``cryptography``: AES-128-CBC + HMAC-SHA256, authenticated). The
Fernet key is derived with HKDF-SHA256 from ``settings.BRAIN_SECRETS_KEY`` (default:
``SECRET_KEY``), so nothing but the settings can read it back. Plain text is never
logged, never shown again in the admin and never part of an error message.
"""

from __future__ import annotations

import base64
from functools import cache

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

from connectors.base import PermanentError

_HKDF_INFO = b"brain shared-mailbox credentials v1"


class SecretUnreadable(PermanentError):
    """A stored secret cannot be decrypted (the secrets key changed, or the token was
    altered). Fix: enter the credential again in the admin."""

    code = "secret_unreadable"


@cache
def _fernet(key_material: str) -> Fernet:
    derived = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO
    ).derive(key_material.encode("utf-8"))
    return Fernet(base64.urlsafe_b64encode(derived))


def _current() -> Fernet:
    return _fernet(settings.BRAIN_SECRETS_KEY or settings.SECRET_KEY)


def secret_encrypt(plain: str) -> str:
    """Encrypt ``plain`` (UTF-8 text) into an ASCII Fernet token for a text column."""
    return _current().encrypt(plain.encode("utf-8")).decode("ascii")


def secret_decrypt(token: str, *, what: str = "credential") -> str:
    """Decrypt a token written by ``secret_encrypt``. Raises ``SecretUnreadable``
    (permanent) when the key changed or the token was altered; the message names
    ``what`` and the fix, never the token."""
    try:
        return _current().decrypt(token.encode("ascii")).decode("utf-8")
    except (InvalidToken, ValueError, UnicodeError):
        raise SecretUnreadable(
            f"The stored {what} cannot be decrypted (BRAIN_SECRETS_KEY or SECRET_KEY changed?).",
            detail={"fix": f"Enter the {what} again in the admin."},
        ) from None
