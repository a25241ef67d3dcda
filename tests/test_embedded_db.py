"""The embedded PostgreSQL bootstrap after a crash (issue: after a disk-full crash
the first command failed with ``AssertionError`` from pgserver reading a
``postmaster.pid`` cut short)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gbrain_site.embedded_db import clear_stale_pid


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])  # noqa: S607 - a process that has exited
    proc.wait()
    return proc.pid


def test_a_truncated_pid_file_of_a_dead_server_is_removed(tmp_path: Path) -> None:
    pid_file = tmp_path / "postmaster.pid"
    pid_file.write_text(f"{_dead_pid()}\n{tmp_path}\n")  # cut short by a full disk
    assert clear_stale_pid(tmp_path) is True
    assert not pid_file.exists()


def test_an_empty_pid_file_is_removed(tmp_path: Path) -> None:
    (tmp_path / "postmaster.pid").write_text("")
    assert clear_stale_pid(tmp_path) is True


def test_a_live_or_complete_pid_file_is_left_alone(tmp_path: Path) -> None:
    pid_file = tmp_path / "postmaster.pid"
    pid_file.write_text(f"{os.getpid()}\n{tmp_path}\n")
    assert clear_stale_pid(tmp_path) is False
    pid_file.write_text("\n".join([str(_dead_pid())] + ["x"] * 7) + "\n")
    assert clear_stale_pid(tmp_path) is False
    assert pid_file.exists()
    assert clear_stale_pid(tmp_path / "missing") is False
