"""Reading mailbox files: every item under a path, each one a message or a reason
(SPEC §6, "Every importer"; §6.2).

``MailboxReader(path)`` yields ``MailboxEntry`` rows in a stable order (natural sort
of names, mailbox order inside a file), so deduplication and thread ids are
deterministic across re-runs. An entry either carries message bytes (exactly as
read) or a ``problem`` code saying why it holds none; the importer holds those
(``HeldItem``), so nothing under the path is skipped without a row.

Layouts read (a folder tree may mix them, nested to any depth):

- **Maildir**: files in ``cur/`` and ``new/`` are messages of the folder that holds
  them; any of ``cur/``, ``new/``, ``tmp/`` may be missing (git drops empty folders).
  Files in ``tmp/`` are deliveries that never finished: entries with problem
  ``maildir_tmp`` (held with their bytes; "retry" in the admin imports them).
  Sub-folders that are not dot-named and loose files in a maildir root are read
  like any other folder. The stdlib ``mailbox.Maildir`` is not used for the walk:
  it refuses a maildir without ``new/`` and ignores loose files.
- **Maildir++**: a dot-named sub-folder (``.Sent``, ``.Lists.python``) is the
  folder ``Sent`` (``Lists/python``).
- **MH** (``inbox/1``, ``inbox/2`` …) and **loose RFC 822 files** (``.eml`` or no
  extension at all, as in the Enron export): one message per file.
- **mbox**: a file whose first non-blank bytes are ``From `` (or named ``*.mbox`` /
  ``*.mbx``), read with the stdlib ``mailbox.mbox`` whose table of contents is
  built by ``_StrictMbox``:

  - a message starts at a ``From `` line only when that line is an envelope line
    (``From <sender> <asctime date>``, e.g. ``From ada@example.org Mon Mar  3
    09:15:00 2025``); a body line such as "From the warehouse we shipped…" in an
    mboxo file is body text, not a new message;
  - **Content-Length** (mboxcl/mboxcl2): when a message's headers give a length
    that ends exactly at the end of the file or at the next envelope line, the
    body is taken by length, so an envelope-like line inside it does not split it;
  - **mboxo / mboxrd quoting**: the raw bytes keep the quoting as read;
    ``unquote_from`` removes one ``>`` from ``>From `` / ``>>From `` … lines for
    the derived text (the mboxrd rule; for mboxo it restores the usual case);
  - **one message without an envelope line** (a ``.mbox`` export of a single
    message): the whole file is that message.
- **MMDF** (messages between ``\\x01\\x01\\x01\\x01`` lines): stdlib ``mailbox.MMDF``.

Files that are part of a mailbox format but hold no message (``.mh_sequences``,
``maildirfolder``, dovecot and courier index files) are listed in
``MailboxReader.metadata`` and yield no entry. So do the documents a mail folder
is shipped with, in the root of the path only (``README*``, ``LICENSE*``,
``LICENCE*``, ``COPYING*``, ``NOTICE*``, ``SOURCE.txt``/``SOURCE.md``, see
``is_folder_document``): they are listed in ``MailboxReader.not_mail`` and the
importer counts them as "skipped (not mail)". Any other file is an entry: an empty
file has problem ``empty`` and a file that is not mail is refused by the parser
(held as ``not_mail``).

Safety: symbolic links are followed only when their target stays under the root
(a link outside gives problem ``symlink_outside_root``); a directory reached twice
(``self -> .``, a loop, or a second link to one folder) gives ``symlink_loop`` and
is not walked again, so the walk is linear. FIFOs, sockets and devices are never
opened (problem ``not_regular_file``); an unreadable file gives ``unreadable``.
A root that is missing or not a regular file or folder raises ``MailboxPathError``.
"""

from __future__ import annotations

import mailbox
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from connectors.base import PermanentError

if TYPE_CHECKING:
    from collections.abc import Iterator

_MAILDIR_PARTS = ("cur", "new", "tmp")
# Files of a mailbox format that are not messages (listed, never held).
_METADATA_NAMES = {
    ".mh_sequences",
    ".mh_profile",
    ".xmhcache",
    "maildirfolder",
    "subscriptions",
    ".ds_store",
    "thumbs.db",
}
_METADATA_PREFIXES = ("dovecot", "courierimap", ".uidvalidity")
# Index files of mail clients (Thunderbird ``Inbox.msf``) and version-control folders.
_METADATA_SUFFIXES = (".msf",)
_METADATA_FOLDERS = {".git", ".hg", ".svn"}
# Documents shipped beside mail in a folder's root (a dataset's provenance note,
# its licence): never messages. Names without a suffix (``README``) match too.
_DOCUMENT_STEMS = ("readme", "license", "licence", "copying", "notice", "source")
_DOCUMENT_SUFFIXES = ("", ".txt", ".md", ".rst", ".html", ".pdf")
_MBOX_SUFFIXES = (".mbox", ".mbx", ".mboxrd", ".mboxo", ".mboxcl")
# An mbox envelope line: "From <sender> <asctime>" with an optional time zone
# before the year (Google Takeout), or an RFC 5322 date.
_ENVELOPE = re.compile(
    rb"From \S*[ \t]+(?:"
    rb"(?:[A-Z][a-z]{2}[ \t]+)?[A-Z][a-z]{2}[ \t]+\d{1,2}[ \t]+\d{1,2}:\d{2}(?::\d{2})?"
    rb"(?:[ \t]+(?:[A-Z]{1,5}|[+-]\d{4}))?[ \t]+\d{4}"
    rb"|(?:[A-Z][a-z]{2},?[ \t]+)?\d{1,2}[ \t]+[A-Z][a-z]{2}[ \t]+\d{4}[ \t]+\d{1,2}:\d{2}"
    rb")[^\n]*\n"
)
_CONTENT_LENGTH = re.compile(rb"^Content-Length:[ \t]*(\d+)[ \t]*\r?$", re.I | re.M)
_QUOTED_FROM = re.compile(rb"^>(>*From )", re.M)


class MailboxPathError(PermanentError):
    """The path does not exist or is neither a regular file nor a folder."""

    code = "mailbox_not_found"


@dataclass(frozen=True)
class MailboxEntry:
    """One item read from a mailbox.

    ``folder``: the mail folder ('' for the top level, ``/``-separated);
    ``location``: where it was, relative to the root (``path`` or ``path#n`` for
    the n-th message of an mbox, 0-based); ``data``: the bytes exactly as read
    (an mbox message includes its envelope line); ``problem``: '' for a message,
    else the reason it holds no message (see the module docstring);
    ``mbox``: True when read from an mbox (``>From`` quoting applies).
    """

    folder: str
    location: str
    data: bytes
    problem: str = ""
    detail: str = ""
    mbox: bool = False


def unquote_from(data: bytes) -> bytes:
    """One ``>`` removed from each ``>From `` / ``>>From `` … line (mboxrd)."""
    if b">From " not in data and b">>" not in data:
        return data
    return _QUOTED_FROM.sub(rb"\1", data)


def is_metadata_file(name: str) -> bool:
    """True for files of a mailbox format that are not messages."""
    lower = name.lower()
    return (
        lower in _METADATA_NAMES
        or lower in _METADATA_FOLDERS
        or lower.startswith(_METADATA_PREFIXES)
        or lower.endswith(_METADATA_SUFFIXES)
    )


def is_folder_document(name: str) -> bool:
    """True for a document a mail folder ships with (``README``, ``README.md``,
    ``LICENSE.txt``, ``COPYING``, ``NOTICE``, ``SOURCE.txt`` …, any case): read
    only in the root of an imported folder, where such files describe the data."""
    stem, dot, suffix = name.lower().partition(".")
    suffix = dot + suffix
    return (
        any(stem == d or stem.startswith(d + "-") for d in _DOCUMENT_STEMS)
        and suffix in _DOCUMENT_SUFFIXES
    )


def _natural(name: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _head(path: Path, size: int = 64) -> bytes:
    with path.open("rb") as fh:
        return fh.read(size)


def _envelope_starts(data: bytes) -> list[int]:
    """Offsets of the messages of an mbox image (see the module docstring)."""
    starts: list[int] = []
    position = 0
    end = len(data)
    while position < end:
        match = _ENVELOPE.match(data, position)
        if match is None:
            # Next line that could be an envelope.
            found = data.find(b"\nFrom ", position)
            if found < 0:
                break
            position = found + 1
            continue
        starts.append(position)
        body_at = _body_offset(data, match.end())
        length = _content_length(data, match.end(), body_at)
        if length is not None:
            stop = body_at + length
            tail = data[stop : stop + 2]
            if stop == end or (
                stop < end
                and (
                    _ENVELOPE.match(data, stop)
                    or (tail[:1] == b"\n" and _ENVELOPE.match(data, stop + 1))
                )
            ):
                position = stop if _ENVELOPE.match(data, stop) else stop + 1
                continue
        found = data.find(b"\nFrom ", match.end())
        if found < 0:
            break
        position = found + 1
    return starts


def _body_offset(data: bytes, headers_at: int) -> int:
    for sep in (b"\n\n", b"\r\n\r\n"):
        found = data.find(sep, headers_at)
        if found >= 0:
            return found + len(sep)
    return len(data)


def _content_length(data: bytes, headers_at: int, body_at: int) -> int | None:
    match = _CONTENT_LENGTH.search(data, headers_at, body_at)
    return int(match.group(1)) if match else None


class _StrictMbox(mailbox.mbox):
    """``mailbox.mbox`` with a stricter table of contents: envelope lines only,
    Content-Length honoured (the stdlib splits at every line starting "From ")."""

    def _generate_toc(self) -> None:
        self._file.seek(0)  # type: ignore[attr-defined]  # mailbox.mbox private
        data = self._file.read()  # type: ignore[attr-defined]
        starts = _envelope_starts(data)
        bounds = [*starts[1:], len(data)] if starts else []
        self._toc = {
            index: (start, stop)
            for index, (start, stop) in enumerate(zip(starts, bounds, strict=True))
        }
        self._next_key = len(self._toc)
        self._file_length = len(data)


@dataclass
class MailboxReader:
    """Iterate every item under ``path`` (see the module docstring).

    After iteration, ``metadata`` lists the mailbox-format files seen and
    ``not_mail`` the folder documents skipped in the root (relative paths). Raises ``MailboxPathError`` when ``path`` is missing or is a FIFO,
    socket or device.
    """

    path: Path
    metadata: list[str] = field(default_factory=list)
    not_mail: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    def __iter__(self) -> Iterator[MailboxEntry]:
        root = self.path
        try:
            mode = root.stat().st_mode
        except OSError as exc:
            raise MailboxPathError(
                f"No mailbox at {root}.", detail={"path": str(root)}
            ) from exc
        if stat.S_ISREG(mode):
            yield from self._file(root, "", root.name)
            return
        if not stat.S_ISDIR(mode):
            raise MailboxPathError(
                f"{root} is not a mailbox file or folder (a FIFO, socket or device).",
                code="mailbox_not_regular",
                detail={"path": str(root)},
            )
        real_root = Path(os.path.realpath(root))
        yield from self._walk(root, real_root, root, {real_root})

    # --- folders -----------------------------------------------------------------

    def _walk(
        self, root: Path, real_root: Path, directory: Path, seen: set[Path]
    ) -> Iterator[MailboxEntry]:
        rel = directory.relative_to(root).as_posix()
        folder = _folder_of("" if rel == "." else rel)
        try:
            children = sorted(os.scandir(directory), key=lambda e: _natural(e.name))
        except OSError as exc:
            yield MailboxEntry(
                folder, rel, b"", "unreadable", f"{type(exc).__name__}: {exc}"
            )
            return
        # A maildir's tmp/ (beside cur/ or new/) holds unfinished deliveries.
        in_tmp = directory.name == "tmp" and any(
            (directory.parent / part).is_dir() for part in ("cur", "new")
        )
        for child in children:
            path = Path(child.path)
            location = path.relative_to(root).as_posix()
            if is_metadata_file(child.name):
                self.metadata.append(location)
                continue
            if directory == root and child.is_file() and is_folder_document(child.name):
                self.not_mail.append(location)
                continue
            if child.is_symlink():
                real = Path(os.path.realpath(path))
                if real != real_root and real_root not in real.parents:
                    yield MailboxEntry(
                        folder,
                        location,
                        b"",
                        "symlink_outside_root",
                        f"links to {path.readlink()}",
                    )
                    continue
            else:
                real = None
            try:
                mode = path.stat().st_mode
            except OSError as exc:
                # A dangling or looping link, or a file that vanished.
                yield MailboxEntry(
                    folder, location, b"", "unreadable", f"{type(exc).__name__}: {exc}"
                )
                continue
            if stat.S_ISDIR(mode):
                real = real or Path(os.path.realpath(path))
                if real in seen:
                    yield MailboxEntry(
                        folder,
                        location,
                        b"",
                        "symlink_loop",
                        "folder already read through another path",
                    )
                    continue
                seen.add(real)
                yield from self._walk(root, real_root, path, seen)
            elif not stat.S_ISREG(mode):
                yield MailboxEntry(
                    folder,
                    location,
                    b"",
                    "not_regular_file",
                    "a FIFO, socket or device is never opened",
                )
            else:
                yield from self._file(path, folder, location, tmp=in_tmp)

    # --- files -------------------------------------------------------------------

    def _file(
        self, path: Path, folder: str, location: str, *, tmp: bool = False
    ) -> Iterator[MailboxEntry]:
        try:
            head = _head(path)
        except OSError as exc:
            yield MailboxEntry(
                folder, location, b"", "unreadable", f"{type(exc).__name__}: {exc}"
            )
            return
        if not head:
            yield MailboxEntry(folder, location, b"", "empty", "empty file")
            return
        if tmp:
            yield MailboxEntry(
                folder,
                location,
                path.read_bytes(),
                "maildir_tmp",
                "in a maildir tmp/ folder: a delivery that never finished",
            )
            return
        # An mbox file is a folder of its own, named after the file.
        sub = f"{folder}/{path.stem}".strip("/")
        if head.startswith(b"\x01\x01\x01\x01"):
            yield from self._mmdf(path, sub, location)
        elif (
            head.lstrip(b"\r\n").startswith(b"From ")
            or path.suffix.lower() in _MBOX_SUFFIXES
        ):
            yield from self._mbox(path, sub, location)
        else:
            yield MailboxEntry(folder, location, path.read_bytes())

    def _mbox(self, path: Path, folder: str, location: str) -> Iterator[MailboxEntry]:
        box = _StrictMbox(str(path), factory=None, create=False)
        try:
            keys = list(box.iterkeys())
            if not keys:
                # One message without an envelope line: the whole file.
                yield MailboxEntry(folder, location, path.read_bytes(), mbox=True)
                return
            first_start = box._toc[keys[0]][0]  # type: ignore[index]  # mbox keys are ints
            if path.stat().st_size and first_start > 0:
                prefix = path.read_bytes()[:first_start]
                if prefix.strip():
                    yield MailboxEntry(folder, f"{location}#head", prefix, mbox=True)
            for index, key in enumerate(keys):
                yield MailboxEntry(
                    folder,
                    f"{location}#{index}",
                    box.get_bytes(key, from_=True),
                    mbox=True,
                )
        finally:
            box.close()

    def _mmdf(self, path: Path, folder: str, location: str) -> Iterator[MailboxEntry]:
        box = mailbox.MMDF(str(path), factory=None, create=False)
        try:
            for index, key in enumerate(box.iterkeys()):
                yield MailboxEntry(folder, f"{location}#{index}", box.get_bytes(key))
        finally:
            box.close()


def _folder_of(rel: str) -> str:
    """The mail folder of a directory: maildir ``cur``/``new``/``tmp`` parts
    dropped, Maildir++ ``.A.B`` names turned into ``A/B``."""
    parts: list[str] = []
    for part in rel.split("/") if rel else []:
        if part in _MAILDIR_PARTS:
            continue
        if part.startswith(".") and len(part) > 1:
            parts += [p for p in part[1:].split(".") if p]
        else:
            parts.append(part)
    return "/".join(parts)


def iter_mailbox(path: str | Path) -> Iterator[MailboxEntry]:
    """Every entry under ``path`` (``MailboxReader``); entries with a problem
    included. Raises ``MailboxPathError`` for a missing or special path."""
    return iter(MailboxReader(Path(path)))
