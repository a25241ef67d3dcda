"""The mail pipeline shared by the mailbox and Google connectors (SPEC §6.1, §6.2):
MIME parsing, threading, thread-page rendering, person pages and storage.

Both connectors turn what they capture into ``ParsedMail`` objects and hand them to
``connectors.mail.store``; nothing here talks to Google or reads mailbox files.
"""
