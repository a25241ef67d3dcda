"""Fixtures of the connector tests: the real Dovecot IMAP server (SPEC §6.1a)."""

from tests.connectors.dovecot import dovecot, imap_account  # noqa: F401
