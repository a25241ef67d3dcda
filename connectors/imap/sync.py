"""IMAP sync: a shared mailbox on any provider → the mailbox-import pipeline
(SPEC §6.1a).

``imap_sync`` examines each folder (INBOX and the SPECIAL-USE ``\\Sent`` folder by
default), lists the UIDs above the folder's cursor and fetches them, INBOX first, in
chunks of ``FETCH_CHUNK`` messages that may span folders. Each chunk goes through the mailbox import's own path
(``MailboxConnector``: parsing, Message-ID + content-hash ledger, threading with the
threads already stored, person pages, loop detection, held and skipped items) with
the fetched messages in place of files; nothing of that path is copied here. The
cursor ``{folder: {uidvalidity, last_uid}}`` is saved after each stored chunk, so a
sync killed or cut off mid-way resumes at the chunk it was in and the ledger turns
the messages it had already stored into "already imported"; a dropped connection is
first retried in the same run (reconnect with backoff, SPEC §6). A changed UIDVALIDITY
re-lists the folder from UID 1; the ledger keeps that free of duplicates.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from brain.models import Source
from connectors.base import (
    MAX_ATTEMPTS,
    PermanentError,
    ProgressFn,
    SyncReport,
    TransientError,
    backoff_delay,
)
from connectors.imap.client import (
    FolderStatus,
    ImapFolder,
    ImapReader,
    ImapSettings,
)
from connectors.mail.threading import folder_role
from connectors.mailbox.client import MailboxEntry
from connectors.mailbox.sync import BATCH_THREADS, MailboxConnector
from connectors.models import FOLDER_HELD_KIND, SharedMailbox
from connectors.secrets import secret_decrypt
from connectors.services import (
    held_item_record,
    held_kind_release_except,
    import_settle,
    source_cursor_save,
    sync_run_finish,
    sync_run_start,
)

if TYPE_CHECKING:
    from collections.abc import Callable

# Messages fetched, stored and checkpointed together, across folders. One chunk sees
# its messages at once, as a mailbox-file import does (threads whose parent arrives
# in a later chunk are joined through the ledger, which is slower); a resumed sync
# re-fetches at most one chunk, whose stored threads the ledger skips.
FETCH_CHUNK = 5000
# A SPECIAL-USE folder is filed under a canonical name, so the mail pipeline labels
# it (a ``\\Sent`` folder called "Gesendete Objekte" still marks messages as mine).
_CANONICAL = {"sent": "Sent", "drafts": "Drafts", "junk": "Junk", "trash": "Trash"}
_ROLE_OF_SPECIAL_USE = {
    "\\Sent": "sent",
    "\\Drafts": "drafts",
    "\\Junk": "junk",
    "\\Trash": "trash",
}


def imap_settings_for(mailbox: SharedMailbox) -> ImapSettings:
    """The connection settings of an ``imap`` shared mailbox, with its secret read
    from the environment variable ``secret_env`` or decrypted from
    ``secret_encrypted``. Raises ``PermanentError`` (``credentials_missing``) when
    neither holds a value; the message never contains the secret."""
    secret = ""
    if mailbox.secret_env:
        secret = os.environ.get(mailbox.secret_env, "")
    elif mailbox.secret_encrypted:
        secret = secret_decrypt(mailbox.secret_encrypted, what="IMAP credential")
    if not secret or not mailbox.imap_host:
        where = (
            f"environment variable {mailbox.secret_env}"
            if mailbox.secret_env
            else "admin → Shared mailboxes"
        )
        raise PermanentError(
            f"The IMAP mailbox {mailbox.address} has no host or credential.",
            code="credentials_missing",
            detail={"mailbox": mailbox.address, "fix": f"Set it in {where}."},
        )
    return ImapSettings(
        host=mailbox.imap_host,
        port=mailbox.imap_port,
        security=mailbox.imap_security,
        auth=mailbox.imap_auth,
        username=mailbox.imap_username or mailbox.address,
        secret=secret,
    )


def imap_folder_role(folder: ImapFolder) -> str:
    """A folder's role (``sent``, ``drafts``, ``junk``, ``trash`` or ''): its
    SPECIAL-USE attribute first (RFC 6154), else what its name says in the table
    of localised names (``connectors.mail.threading.folder_role``)."""
    if folder.special_use in _ROLE_OF_SPECIAL_USE:
        return _ROLE_OF_SPECIAL_USE[folder.special_use]
    if folder.special_use:
        return ""  # \\All, \\Archive, \\Flagged: a role the sync does not use
    return folder_role(folder.name)


def folders_to_sync(folders: list[ImapFolder], wanted: list[str]) -> list[ImapFolder]:
    """The folders a sync reads: those named in ``wanted`` (case-insensitive for
    INBOX, exact otherwise), or by default INBOX and every ``\\Sent`` folder
    (SPECIAL-USE, RFC 6154), INBOX first; on a server without SPECIAL-USE, the
    folders whose name says sent in one of the languages of the name table
    ("Sent Items", "Gesendete Elemente", "送信済みアイテム"…). ``\\Noselect``
    folders are left out."""
    usable = [f for f in folders if "\\Noselect" not in f.flags]
    if wanted:
        names = {w.upper() if w.upper() == "INBOX" else w for w in wanted}
        return [
            f
            for f in usable
            if f.name in names or (f.name.upper() == "INBOX" and "INBOX" in names)
        ]
    inbox = [f for f in usable if f.name.upper() == "INBOX"]
    sent = [f for f in usable if f.special_use == "\\Sent"]
    if not sent:
        sent = [
            f
            for f in usable
            if f.name.upper() != "INBOX" and imap_folder_role(f) == "sent"
        ]
    return inbox + sent


def missing_folders(folders: list[ImapFolder], wanted: list[str]) -> list[str]:
    """The configured folder names (``wanted``) that LIST no longer shows: renamed
    or deleted on the server (issue 46). INBOX is matched case-insensitively."""
    listed = {f.name for f in folders} | {
        "INBOX" for f in folders if f.name.upper() == "INBOX"
    }
    return [
        w for w in wanted if (w.upper() if w.upper() == "INBOX" else w) not in listed
    ]


class ImapChunkConnector(MailboxConnector):
    """The mailbox-import connector over one chunk of fetched messages: the same
    parsing, ledger, threading, person pages and loop detection (SPEC §6.1a, §6.2);
    only where the messages come from differs."""

    kind = "imap"

    def __init__(
        self, *, entries: list[MailboxEntry], account: str, **kwargs: Any
    ) -> None:
        super().__init__(path=account, **kwargs)
        self._entries = entries
        self.account = account

    def entries(self) -> list[MailboxEntry]:
        """The fetched messages of this chunk (folder = canonical folder name)."""
        return self._entries

    def _reference_time(self, prepared: Any) -> None:
        """A shared mailbox is live: loop detection runs at the wall clock, as for
        Google (``loops.selectors.reference_time``), not at the newest message of
        the source as for an exported mailbox file (SPEC §5.2)."""
        return None


def imap_sync(
    *,
    source: Source,
    progress: ProgressFn | None = None,
    actor: str = "cli",
    settings: ImapSettings | None = None,
    reader_factory: Callable[[ImapSettings], ImapReader] = ImapReader,
    chunk: int = FETCH_CHUNK,
    embed: bool = False,
    attempts: int = MAX_ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
) -> SyncReport:
    """Sync an ``imap`` source from its cursor (SPEC §6.1a); returns the report.

    Counts: ``fetched`` (messages read from the server) plus the mailbox import's
    messages, threads, pages, people; skips: already imported, duplicate copy,
    unparseable…; ``uidvalidity_resets`` when a folder's UIDVALIDITY changed.
    ``settings`` overrides the stored ones (tests, benchmarks). A lost connection
    is retried in the same run up to ``attempts`` sessions in all (SPEC §6: 6, with
    ``backoff_delay`` waits through ``sleep``), each resuming after the last stored
    chunk (count ``reconnects``). Raises ``TransientError`` when the last attempt
    fails too (the run is marked failed, the cursor of the last stored chunk is
    kept, the next sync resumes) or ``PermanentError`` (login refused, missing
    credentials).
    """
    mailbox = SharedMailbox.objects.filter(source=source).first()
    if settings is None:
        if mailbox is None:
            raise PermanentError(
                f"Source {source.id!r} has no IMAP settings.",
                code="credentials_missing",
                detail={"fix": "Add it in admin → Shared mailboxes."},
            )
        settings = imap_settings_for(mailbox)
    wanted = list(mailbox.imap_folders) if mailbox else []
    owners = set(source.owner_addresses)
    report = SyncReport(source_id=source.id, kind="imap")
    run = sync_run_start(source=source, kind="sync_source", actor=actor)
    report.run_id = run.pk
    state: dict[str, Any] = dict((source.cursor or {}).get("imap", {}))
    account = mailbox.address if mailbox else settings.username

    def save(folder: str, uidvalidity: int, last_uid: int) -> None:
        state[folder] = {"uidvalidity": uidvalidity, "last_uid": last_uid}
        source_cursor_save(source=source, key="imap", value=dict(state))

    resets: set[str] = set()

    noted: set[str] = set()

    def session(reader: ImapReader) -> None:
        listed = reader.folders()
        _note_missing(source, missing_folders(listed, wanted), report, noted)
        plan = _plan(reader, folders_to_sync(listed, wanted), state)
        for folder, status, _uids, reset_from in plan:
            if reset_from is not None and folder.name not in resets:
                resets.add(folder.name)
                report.counts["uidvalidity_resets"] += 1
                report.warnings.append(
                    f"{folder.name}: UIDVALIDITY changed ({reset_from} → "
                    f"{status.uidvalidity}); the folder was re-listed, stored "
                    "messages were recognised."
                )
        work = [(index, uid) for index, p in enumerate(plan) for uid in p[2]]
        for start in range(0, len(work), chunk):
            part = work[start : start + chunk]
            entries: list[MailboxEntry] = []
            last: dict[int, int] = {}
            for index in sorted({i for i, _uid in part}):
                folder, status, _uids, _reset = plan[index]
                uids = [uid for i, uid in part if i == index]
                if reader.examine(folder.name).uidvalidity != status.uidvalidity:
                    raise TransientError(
                        f"{folder.name}: UIDVALIDITY changed during the sync; "
                        "the next sync re-lists it.",
                        code="imap_uidvalidity_changed",
                    )
                fetched = reader.fetch(uids)
                report.counts["fetched"] += len(fetched)
                if len(fetched) < len(uids):
                    missing = len(uids) - len(fetched)
                    report.skipped["expunged before fetch"] += missing
                label = _CANONICAL.get(imap_folder_role(folder), folder.name)
                entries += [
                    MailboxEntry(
                        label,
                        f"imap://{settings.host}/{folder.name};"
                        f"UIDVALIDITY={status.uidvalidity}/;UID={uid}",
                        data,
                    )
                    for uid, data in sorted(fetched.items())
                ]
                last[index] = uids[-1]
            _store_chunk(
                source=source,
                entries=entries,
                owners=owners,
                account=account,
                report=report,
                embed=embed,
            )
            for index, uid in last.items():
                save(plan[index][0].name, plan[index][1].uidvalidity, uid)
            if progress:
                progress("imap", start + len(part), len(work))
        for folder, status, uids, _reset in plan:
            if (
                not uids
                and (state.get(folder.name) or {}).get("uidvalidity")
                != status.uidvalidity
            ):
                save(folder.name, status.uidvalidity, 0)

    try:
        for attempt in range(1, attempts + 1):
            try:
                with reader_factory(settings) as reader:
                    session(reader)
                break
            except TransientError as exc:
                if attempt >= attempts:
                    raise
                # SPEC §6: retry with backoff; the cursor of the last stored chunk
                # is in ``state``, so the new session resumes there.
                report.counts["reconnects"] += 1
                report.warnings.append(
                    f"IMAP connection lost ({exc.code}); reconnected and resumed "
                    "after the last stored chunk."
                )
                sleep(backoff_delay(attempt, exc.retry_after))
    except BaseException as exc:
        report.status = "failed"
        code = getattr(exc, "code", type(exc).__name__)
        message = getattr(exc, "message", str(exc))
        sync_run_finish(run=run, report=report, error=f"{code}: {message}")
        raise
    sync_run_finish(run=run, report=report)
    import_settle()  # issue 48: the first search after a sync at settled speed
    return report


def _note_missing(
    source: Source, missing: list[str], report: SyncReport, noted: set[str]
) -> None:
    """Hold each configured folder the server no longer lists (kind
    ``imap_folder``, code ``imap_folder_missing``) and name it in
    ``report.unfinished`` (the run is ``partial``), once per run (``noted``);
    release the holds of folders that are back or no longer configured."""
    held_kind_release_except(source=source, kind=FOLDER_HELD_KIND, keep=missing)
    for name in missing:
        if name in noted:
            continue
        noted.add(name)
        message = (
            f"The configured IMAP folder {name!r} is not on the server any more "
            "(renamed or deleted); nothing of it was synced. Re-map it in the "
            "console (Sources → Folders) or in admin → Shared mailboxes."
        )
        held_item_record(
            source=source,
            kind=FOLDER_HELD_KIND,
            external_id=name,
            error=PermanentError(message, code="imap_folder_missing"),
            report=report,
        )
        report.unfinished.append(message)


def _plan(
    reader: ImapReader, folders: list[ImapFolder], state: dict[str, Any]
) -> list[tuple[ImapFolder, FolderStatus, list[int], int | None]]:
    """For each folder: its EXAMINE status, the UIDs to fetch (above the cursor,
    or every UID when UIDVALIDITY changed) and the old UIDVALIDITY when it did."""
    plan = []
    for folder in folders:
        status = reader.examine(folder.name)
        previous = state.get(folder.name) or {}
        last_uid = int(previous.get("last_uid", 0))
        reset_from = None
        if previous and previous.get("uidvalidity") != status.uidvalidity:
            reset_from = previous.get("uidvalidity")
            last_uid = 0
        plan.append((folder, status, reader.uids_after(last_uid), reset_from))
    return plan


def _store_chunk(
    *,
    source: Source,
    entries: list[MailboxEntry],
    owners: set[str],
    account: str,
    report: SyncReport,
    embed: bool,
) -> None:
    """Run the mailbox import over one chunk of fetched messages and add its counts
    to ``report`` (``files`` becomes part of ``fetched``)."""
    if not entries:
        return
    source.refresh_from_db(fields=["owner_addresses"])
    connector = ImapChunkConnector(
        source=source,
        entries=entries,
        account=account,
        owners=owners | set(source.owner_addresses),
        embed=embed,
        batch_threads=BATCH_THREADS,
    )
    connector.run(cursor={}, save_cursor=lambda _cursor: None, report=connector.report)
    connector.finish()
    connector.report.counts.pop("files", None)
    report.merge(connector.report)


def imap_server_folders(
    *,
    source: Source,
    reader_factory: Callable[[ImapSettings], ImapReader] = ImapReader,
) -> list[ImapFolder]:
    """The folders the server of an ``imap`` source lists now (LIST with
    SPECIAL-USE), for re-mapping a configured folder that is gone (issue 46).
    Raises ``PermanentError`` (no settings, login refused) or ``TransientError``
    (server unreachable)."""
    mailbox = SharedMailbox.objects.filter(source=source).first()
    if mailbox is None:
        raise PermanentError(
            f"Source {source.id!r} has no IMAP settings.",
            code="credentials_missing",
            detail={"fix": "Add it in admin → Shared mailboxes."},
        )
    with reader_factory(imap_settings_for(mailbox)) as reader:
        return reader.folders()
