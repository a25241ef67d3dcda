"""Files that belong to one brain live under its data directory (operations issue):
two data directories never overwrite each other's demo admin password."""

from __future__ import annotations

from pathlib import Path

import pytest

from interfaces.management.commands.demo import Command as Demo

pytestmark = pytest.mark.django_db


def test_demo_admin_password_lives_in_the_data_directory(
    settings, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    first, second = tmp_path / "one", tmp_path / "two"
    settings.BRAIN_DATA_DIR = first
    password = Demo()._ensure_admin()
    assert (first / "admin-password").read_text().strip() == password
    assert (
        not (Path(settings.BASE_DIR) / "var" / "admin-password").exists()
        or (Path(settings.BASE_DIR) / "var" / "admin-password").read_text().strip()
        != password
    )

    settings.BRAIN_DATA_DIR = second
    Demo()._ensure_admin()
    assert (second / "admin-password").exists()
    assert (first / "admin-password").read_text().strip() == password
