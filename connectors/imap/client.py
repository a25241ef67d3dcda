"""A read-only IMAP client for shared mailboxes (SPEC §6.1a), on ``imapclient``.

``ImapReader`` connects with SSL/TLS, STARTTLS or (loopback only) plain, logs in with
a password (LOGIN) or an OAuth 2.0 access token (XOAUTH2), and offers only reads:
the folder list with SPECIAL-USE flags, ``EXAMINE`` (read-only select), UID search and
``BODY.PEEK[]`` fetches, which never set ``\\Seen``.

Read-only is enforced twice: the wrapper has no write method, and every command the
underlying ``imaplib`` connection sends passes a guard that refuses the commands which
change a mailbox (``STORE``, ``EXPUNGE``, ``APPEND``, ``COPY``, ``MOVE``, ``SELECT``,
``CREATE``…), raising ``ImapWriteRefused`` before anything reaches the server.

Errors are typed: a dropped connection or a timeout is a ``TransientError``
(``imap_connection_lost``, the sync resumes from its cursor); a refused login is a
permanent ``auth_failed``; any other server refusal is a permanent ``imap_error``.
Credentials never appear in errors or logs.
"""

from __future__ import annotations

import imaplib
import socket
import ssl
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from imapclient import IMAPClient
from imapclient.exceptions import IMAPClientAbortError, IMAPClientError, LoginError

from connectors.base import PermanentError, TransientError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

# Commands that change server state; the guard refuses them (RFC 3501, 4315, 6851,
# 9051). SELECT is refused too: the reader opens folders with EXAMINE only.
WRITE_COMMANDS = frozenset(
    {
        "APPEND",
        "COPY",
        "CREATE",
        "DELETE",
        "EXPUNGE",
        "MOVE",
        "RENAME",
        "SELECT",
        "SETACL",
        "DELETEACL",
        "SETQUOTA",
        "SETMETADATA",
        "STORE",
        "SUBSCRIBE",
        "UNSUBSCRIBE",
    }
)
DEFAULT_TIMEOUT_SECONDS = 60.0


class ImapWriteRefused(PermanentError):
    """Our reader refused a command that would change the mailbox (SPEC §6.1a:
    read-only, never STORE/EXPUNGE). Nothing was sent to the server."""

    code = "imap_write_refused"


@dataclass(frozen=True)
class ImapSettings:
    """How to reach one IMAP mailbox. ``security``: ``ssl`` | ``starttls`` |
    ``plain``; ``auth``: ``password`` | ``xoauth2``; ``secret`` is the password or
    access token (kept out of ``repr``); ``port`` None means 993 for SSL, else 143;
    ``timeout`` in seconds; ``ssl_context`` None means the system trust store."""

    host: str
    username: str
    secret: str = field(repr=False)
    port: int | None = None
    security: str = "ssl"
    auth: str = "password"
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)

    @property
    def effective_port(self) -> int:
        """The port to connect to (993 for SSL, 143 for STARTTLS/plain by default)."""
        return self.port or (993 if self.security == "ssl" else 143)


@dataclass(frozen=True)
class ImapFolder:
    """A folder from LIST: its name, its flags (``\\Sent``, ``\\HasNoChildren``…)
    and ``special_use`` (``\\Sent``, ``\\Junk``, ``\\Trash``… or '')."""

    name: str
    flags: tuple[str, ...]
    special_use: str = ""


@dataclass(frozen=True)
class FolderStatus:
    """What ``EXAMINE`` said about a folder: UIDVALIDITY, UIDNEXT, message count."""

    uidvalidity: int
    uidnext: int | None
    exists: int


_SPECIAL_USE: tuple[str, ...] = (
    "\\All",
    "\\Archive",
    "\\Drafts",
    "\\Flagged",
    "\\Junk",
    "\\Sent",
)
_SPECIAL_USE += ("\\Trash",)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _guard(imap: imaplib.IMAP4) -> None:
    """Replace ``imap._command`` so that no mailbox-changing command (plain or under
    ``UID``) is ever sent. The replacement is a bound method, as imaplib expects:
    it tells a SASL continuation (AUTHENTICATE, XOAUTH2) from a literal by
    comparing ``type(literal)`` with ``type(self._command)``."""
    command = imap._command

    def guarded(_imap: imaplib.IMAP4, name: str, *args: Any) -> Any:
        verb = name.upper()
        if verb == "UID" and args:
            verb = _text(args[0]).upper()
        if verb in WRITE_COMMANDS:
            raise ImapWriteRefused(
                f"IMAP {verb} refused: the brain reads mailboxes and never changes them.",
                detail={"command": verb},
            )
        return command(name, *args)

    imap._command = types.MethodType(guarded, imap)  # type: ignore[attr-defined]  # imaplib keeps _command private


class ImapReader:
    """A read-only session on one IMAP account (SPEC §6.1a). Use as a context
    manager; ``connect`` raises ``TransientError`` (unreachable) or
    ``PermanentError`` (``auth_failed``, TLS refused)."""

    def __init__(
        self,
        settings: ImapSettings,
        *,
        factory: Callable[..., IMAPClient] = IMAPClient,
    ) -> None:
        self.settings = settings
        self._factory = factory
        self._conn: IMAPClient | None = None

    # --- session -----------------------------------------------------------------

    def __enter__(self) -> ImapReader:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> None:
        """Open the connection, secure it and log in."""
        s = self.settings
        context = s.ssl_context or ssl.create_default_context()
        try:
            conn = self._factory(
                s.host,
                port=s.effective_port,
                ssl=s.security == "ssl",
                ssl_context=context if s.security == "ssl" else None,
                timeout=s.timeout,
            )
        except ssl.SSLError as exc:
            raise self._tls(exc) from None
        except (OSError, IMAPClientError, imaplib.IMAP4.error) as exc:
            raise self._lost(exc, "connect") from None
        _guard(conn._imap)
        self._conn = conn
        try:
            if s.security == "starttls":
                conn.starttls(context)
            if s.auth == "xoauth2":
                conn.oauth2_login(s.username, s.secret)
            else:
                conn.login(s.username, s.secret)
        except LoginError:
            self.close()
            raise PermanentError(
                f"The IMAP server {s.host} refused the login of {s.username}.",
                code="auth_failed",
                detail={
                    "host": s.host,
                    "username": s.username,
                    "fix": "Check the password or token (admin → Shared mailboxes).",
                },
            ) from None
        except ssl.SSLError as exc:
            self.close()
            raise self._tls(exc) from None
        except Exception as exc:
            self.close()
            raise self._error(exc, "login") from None

    def close(self) -> None:
        """Log out (best effort) and drop the connection."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.logout()
        except Exception:  # noqa: BLE001 - the connection may already be gone
            try:
                conn.shutdown()
            except Exception:  # noqa: BLE001, S110
                pass

    @property
    def connection(self) -> IMAPClient:
        """The guarded ``IMAPClient`` (every command passes the write guard)."""
        if self._conn is None:
            raise TransientError("Not connected.", code="imap_connection_lost")
        return self._conn

    # --- reads -------------------------------------------------------------------

    def folders(self) -> list[ImapFolder]:
        """Every folder with its flags and SPECIAL-USE attribute (RFC 6154)."""
        rows = self._call(lambda c: c.list_folders(), "LIST")
        out = []
        for flags, _delimiter, name in rows:
            names = tuple(_text(f) for f in flags)
            special = next((f for f in names if f in _SPECIAL_USE), "")
            out.append(ImapFolder(name=_text(name), flags=names, special_use=special))
        return out

    def examine(self, folder: str) -> FolderStatus:
        """Open ``folder`` read-only (``EXAMINE``) and return its UIDVALIDITY,
        UIDNEXT and message count. Raises ``PermanentError`` when the server does
        not report UIDVALIDITY (a cursor could not be trusted)."""
        info = self._call(lambda c: c.select_folder(folder, readonly=True), "EXAMINE")
        if b"UIDVALIDITY" not in info:
            raise PermanentError(
                f"The IMAP server gave no UIDVALIDITY for {folder!r}.",
                code="imap_no_uidvalidity",
                detail={"folder": folder},
            )
        return FolderStatus(
            uidvalidity=int(info[b"UIDVALIDITY"]),
            uidnext=int(info[b"UIDNEXT"]) if b"UIDNEXT" in info else None,
            exists=int(info.get(b"EXISTS", 0)),
        )

    def uids_after(self, last_uid: int) -> list[int]:
        """UIDs greater than ``last_uid`` in the examined folder, ascending
        (``UID SEARCH UID n:*`` also returns the highest UID when none is newer;
        it is dropped)."""
        uids = self._call(lambda c: c.search(["UID", f"{last_uid + 1}:*"]), "SEARCH")
        return sorted(int(u) for u in uids if int(u) > last_uid)

    def fetch(self, uids: Iterable[int]) -> dict[int, bytes]:
        """The exact bytes of each message (``BODY.PEEK[]``: the ``\\Seen`` flag is
        not set); a UID expunged meanwhile is missing from the result."""
        wanted = list(uids)
        if not wanted:
            return {}
        rows = self._call(lambda c: c.fetch(wanted, ["BODY.PEEK[]"]), "FETCH")
        return {
            int(uid): bytes(data[b"BODY[]"])
            for uid, data in rows.items()
            if b"BODY[]" in data
        }

    def command(self, name: str, *args: Any) -> Any:
        """Send a raw command through the guard (a mailbox-changing command raises
        ``ImapWriteRefused`` and nothing is sent)."""
        return self._call(lambda c: c._imap._simple_command(name, *args), name)

    # --- errors ------------------------------------------------------------------

    def _call(self, fn: Callable[[IMAPClient], Any], what: str) -> Any:
        conn = self.connection
        try:
            return fn(conn)
        except ImapWriteRefused:
            raise
        except Exception as exc:
            raise self._error(exc, what) from None

    def _tls(self, exc: ssl.SSLError) -> TransientError | PermanentError:
        """A TLS failure: a connection cut during the handshake is transient; a
        certificate or protocol refusal is permanent (``tls_failed``)."""
        if isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError):
            return self._lost(exc, "TLS handshake")
        return PermanentError(
            f"TLS with {self.settings.host} failed: "
            f"{getattr(exc, 'verify_message', '') or exc.reason or type(exc).__name__}.",
            code="tls_failed",
            detail={
                "host": self.settings.host,
                "fix": "Check the host name and the server's certificate.",
            },
        )

    def _lost(self, exc: BaseException, what: str) -> TransientError:
        return TransientError(
            f"The IMAP connection to {self.settings.host} was lost during {what} "
            f"({type(exc).__name__}); the next sync resumes.",
            code="imap_connection_lost",
            detail={"host": self.settings.host, "what": what},
        )

    def _error(self, exc: BaseException, what: str) -> TransientError | PermanentError:
        if isinstance(
            exc,
            (
                IMAPClientAbortError,
                imaplib.IMAP4.abort,
                OSError,
                socket.timeout,
                EOFError,
            ),
        ):
            return self._lost(exc, what)
        return PermanentError(
            f"The IMAP server refused {what}: {str(exc)[:200]}",
            code="imap_error",
            detail={"host": self.settings.host, "what": what},
        )
