"""The layering rule (README "Where things live"): ``brain <- {accounts, loops} <-
connectors <- jobs <- interfaces <- gbrain_site``. The import-linter contract in
pyproject.toml holds on the real tree and fails on a deliberate violation, including a
function-local import (grimp reads every import statement)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("gbrain_site", "interfaces", "jobs", "connectors", "accounts", "loops", "brain")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """Run ``lint-imports`` with the repository's contract on the apps under ``root``."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def copy_apps(dest: Path) -> None:
    """Copy the product packages' Python files and pyproject.toml into ``dest``."""
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    for app in APPS:
        shutil.copytree(
            ROOT / app,
            dest / app,
            ignore=shutil.ignore_patterns("__pycache__", "*.html", "*.txt", "*.css"),
        )


def test_the_layers_contract_holds_on_the_real_tree() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_the_layers_contract_fails_when_brain_imports_loops_inside_a_function(
    tmp_path: Path,
) -> None:
    copy_apps(tmp_path)
    with (tmp_path / "brain" / "text.py").open("a") as f:
        f.write("\n\ndef _violation() -> None:\n    import loops  # noqa: F401\n")
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "brain is not allowed to import loops" in result.stdout
    assert "brain.text -> loops" in result.stdout


def test_the_layers_contract_fails_when_loops_imports_accounts(tmp_path: Path) -> None:
    copy_apps(tmp_path)
    with (tmp_path / "loops" / "selectors.py").open("a") as f:
        f.write("\nfrom accounts.models import ApiKey  # noqa: E402, F401\n")
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "loops is not allowed to import accounts" in result.stdout
