"""Harness skills (seeds): every skill is well formed, names only tools that exist on
the surface it targets, and installs where the harness reads skills."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import frontmatter
import pytest
from django.core.management import call_command

from interfaces.skills import Skill, skills_list

EXPECTED = {
    "brain-first-lookup",
    "brain-write-back",
    "close-loops-after-acting",
    "daily-waiting-review",
    "forget-on-request",
}


def test_the_five_skills_exist() -> None:
    assert {s.name for s in skills_list()} == EXPECTED


@pytest.mark.parametrize("skill", skills_list(), ids=lambda s: s.name)
def test_each_skill_names_only_tools_of_its_surface(skill: Skill) -> None:
    assert skill.tools_named(), f"{skill.name} names no tool"
    assert skill.unknown_tools() == set(), (
        f"{skill.name} ({skill.surface}) names tools its surface lacks"
    )
    assert skill.folder.name == skill.name


def test_the_surface_check_catches_a_tool_of_a_wider_surface(tmp_path: Path) -> None:
    skill = Skill(
        folder=tmp_path, name="x", description="Use `whoami`.", surface="verbs", body=""
    )
    assert skill.unknown_tools() == {"whoami"}


def test_skills_install_for_claude_code_writes_every_skill(tmp_path: Path) -> None:
    out = StringIO()
    call_command(
        "skills",
        "install",
        "--target",
        "claude-code",
        "--dir",
        str(tmp_path),
        stdout=out,
    )
    written = {p.parent.name for p in tmp_path.glob("*/SKILL.md")}
    assert written == EXPECTED
    post = frontmatter.load(tmp_path / "brain-first-lookup" / "SKILL.md")
    assert post["name"] == "brain-first-lookup"
    assert "Installed 5 skill(s) for claude-code" in out.getvalue()
    # A second install replaces, never duplicates.
    call_command(
        "skills",
        "install",
        "--target",
        "codex",
        "--dir",
        str(tmp_path),
        stdout=StringIO(),
    )
    assert {p.parent.name for p in tmp_path.glob("*/SKILL.md")} == EXPECTED
