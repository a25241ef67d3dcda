"""Harness skills (seeds): the ``skills/`` folder's SKILL.md files, where each
harness reads them, and the check that a skill names only tools of its surface.

A skill is ``skills/<name>/SKILL.md`` with YAML frontmatter ``name``,
``description`` and ``surface`` (``verbs``, ``starter`` or ``full``: the smallest MCP
surface offering every tool it names). Tool names are written in backticks.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import frontmatter
from django.conf import settings

from interfaces.mcp.tools import TOOLS, tools_for_surface

SKILLS_DIR = Path(settings.BASE_DIR) / "skills"

#: Where each harness reads user-level skills (``--dir`` overrides, e.g. a
#: project's ``.claude/skills``).
TARGETS = {
    "claude-code": Path("~/.claude/skills"),
    "codex": Path("~/.codex/skills"),
}

_BACKTICKED = re.compile(r"`([a-z_]+)`")


@dataclass(frozen=True)
class Skill:
    """One skill: its folder, frontmatter fields and body."""

    folder: Path
    name: str
    description: str
    surface: str
    body: str

    def tools_named(self) -> set[str]:
        """Every MCP tool name the skill mentions in backticks."""
        known = {t.name for t in TOOLS}
        text = f"{self.description}\n{self.body}"
        return {w for w in _BACKTICKED.findall(text) if w in known}

    def unknown_tools(self) -> set[str]:
        """Tools the skill names that its surface does not offer."""
        offered = {t.name for t in tools_for_surface(self.surface)}
        return self.tools_named() - offered


def skills_list(directory: Path = SKILLS_DIR) -> list[Skill]:
    """Every skill under ``directory``, by name. Raises ``ValueError`` for a
    SKILL.md without ``name``, ``description`` or a known ``surface``."""
    out = []
    for path in sorted(directory.glob("*/SKILL.md")):
        post = frontmatter.load(path)
        missing = [k for k in ("name", "description", "surface") if not post.get(k)]
        if missing:
            raise ValueError(f"{path}: frontmatter lacks {', '.join(missing)}")
        out.append(
            Skill(
                folder=path.parent,
                name=str(post["name"]),
                description=str(post["description"]),
                surface=str(post["surface"]),
                body=post.content,
            )
        )
    return out


def skills_install(*, target: str, directory: Path | None = None) -> list[Path]:
    """Copy every skill folder to ``directory`` (default: the ``target`` harness's
    user skills folder), replacing older copies of the same skills; returns the
    SKILL.md paths written. Raises ``KeyError`` for an unknown target."""
    root = (directory or TARGETS[target]).expanduser()
    written = []
    for skill in skills_list():
        dest = root / skill.name
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(skill.folder, dest)
        written.append(dest / "SKILL.md")
    return written
