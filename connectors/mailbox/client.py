"""Reading mailbox files: mbox, maildir (and Maildir++ folders), folders of .eml or
plain RFC 822 files such as the Enron export (SPEC §6.2).

The stdlib ``mailbox`` module reads mbox and maildir; a folder tree of message files
is walked directly. Each message comes out as a ``MailboxEntry`` with its folder
path (relative, ``/``-separated), so sent folders can mark messages as mine.
Entries are yielded in a stable order (sorted paths, mailbox order), which keeps
deduplication and thread ids deterministic across re-runs.
"""

from __future__ import annotations

import mailbox
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from connectors.base import PermanentError

if TYPE_CHECKING:
    from collections.abc import Iterator

_MAILDIR_PARTS = {"cur", "new", "tmp"}
_SKIP_FILES = {".ds_store", "thumbs.db", "source.txt", "license", "readme.md"}


class MailboxPathError(PermanentError):
    """The path does not exist or holds no mailbox."""

    code = "mailbox_not_found"


@dataclass(frozen=True)
class MailboxEntry:
    """One message read from a mailbox: its folder ('' for the top level), a
    location for reports (``path`` or ``path#n``) and the raw bytes."""

    folder: str
    location: str
    data: bytes


def _natural(path: Path) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name)]


def _looks_like_mbox(path: Path) -> bool:
    with path.open("rb") as fh:
        head = fh.read(5)
    return head == b"From "


def _is_maildir(path: Path) -> bool:
    return path.is_dir() and {"cur", "new"} <= {
        p.name for p in path.iterdir() if p.is_dir()
    }


def _read_mbox(path: Path, folder: str) -> Iterator[MailboxEntry]:
    box = mailbox.mbox(str(path), create=False)
    try:
        for index, key in enumerate(box.iterkeys()):
            yield MailboxEntry(folder, f"{path}#{index}", box.get_bytes(key))
    finally:
        box.close()


def _read_maildir(path: Path, folder: str) -> Iterator[MailboxEntry]:
    box = mailbox.Maildir(str(path), factory=None, create=False)
    keys = sorted(box.iterkeys())
    for key in keys:
        yield MailboxEntry(folder, f"{path}/{key}", box.get_bytes(key))
    # Maildir++ sub-folders: .Sent, .Trash, .Lists.python …
    for name in sorted(box.list_folders()):
        sub = path / f".{name}"
        yield from _read_maildir(sub, f"{folder}/{name}".strip("/"))


def iter_mailbox(path: str | Path) -> Iterator[MailboxEntry]:
    """Yield every message under ``path``: an mbox file, one .eml file, a maildir,
    or a directory tree mixing folders of message files, .mbox files and maildirs.

    Raises ``MailboxPathError`` when ``path`` does not exist.
    """
    root = Path(path)
    if not root.exists():
        raise MailboxPathError(f"No mailbox at {root}.", detail={"path": str(root)})
    if root.is_file():
        if _looks_like_mbox(root):
            yield from _read_mbox(root, root.stem)
        else:
            yield MailboxEntry("", str(root), root.read_bytes())
        return
    yield from _walk(root, root)


def _walk(root: Path, directory: Path) -> Iterator[MailboxEntry]:
    folder = directory.relative_to(root).as_posix()
    folder = "" if folder == "." else folder
    if _is_maildir(directory):
        yield from _read_maildir(directory, folder)
        return
    children = sorted(directory.iterdir(), key=_natural)
    for child in children:
        if child.name.startswith(".") or child.name.lower() in _SKIP_FILES:
            continue
        if child.is_dir():
            if child.name in _MAILDIR_PARTS:
                continue
            yield from _walk(root, child)
        elif child.is_file() and child.stat().st_size > 0:
            if child.suffix.lower() in (".mbox", ".mbx") or (
                not child.suffix.lower() == ".eml" and _looks_like_mbox(child)
            ):
                sub = f"{folder}/{child.stem}".strip("/")
                yield from _read_mbox(child, sub)
            else:
                yield MailboxEntry(folder, str(child), child.read_bytes())
