"""Reading and rendering GBrain-compatible markdown page files (SPEC §6.3).

No database access here. A page file is::

    ---
    <YAML frontmatter: type, title, summary, tags, aliases, ...>
    ---
    <body: the compiled truth>

    ## Facts
    <!--- gbrain:facts:begin -->
    | # | claim | kind | confidence | visibility | notability | valid_from | valid_until | source | context |
    ...
    <!--- gbrain:facts:end -->

    <!-- timeline -->
    - **YYYY-MM-DD** | summary

The path relative to the folder, without ``.md``, is the slug.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import frontmatter
import yaml

from brain.text import slugify_title

TIMELINE_SENTINEL = "<!-- timeline -->"
FACTS_BEGIN = "<!--- gbrain:facts:begin -->"
FACTS_END = "<!--- gbrain:facts:end -->"
FACT_COLUMNS = [
    "#",
    "claim",
    "kind",
    "confidence",
    "visibility",
    "notability",
    "valid_from",
    "valid_until",
    "source",
    "context",
]
_TIMELINE_LINE = re.compile(
    r"^\s*[-*]\s+\*\*(\d{4}-\d{2}-\d{2})\*\*\s*(?:\||--|-|\u2013|\u2014)\s*(.+?)\s*$"
)
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_FACTS_BLOCK = re.compile(
    r"(?:^##\s+Facts\s*\n+)?" + re.escape(FACTS_BEGIN) + r".*?" + re.escape(FACTS_END),
    re.S | re.M,
)


class MarkdownFileError(Exception):
    """A file that cannot be read as a page (bad YAML, not UTF-8). ``permanent`` is
    True: retrying the same bytes fails the same way."""

    permanent = True


@dataclass
class FactRow:
    """One row of a ``## Facts`` fence; ``struck`` marks a superseded or forgotten fact."""

    claim: str
    kind: str = "fact"
    confidence: float = 1.0
    visibility: str = "world"
    valid_from: str = ""
    valid_until: str = ""
    source: str = ""
    context: str = ""
    struck: bool = False


@dataclass
class MarkdownPage:
    """A parsed page file: slug from its path, frontmatter, body, timeline and facts."""

    relpath: str
    slug: str
    sha256: str
    raw_text: str
    frontmatter: dict[str, Any]
    body: str
    timeline: list[tuple[date, str]] = field(default_factory=list)
    facts: list[FactRow] = field(default_factory=list)


def path_to_slug(relpath: str) -> str:
    """``People/Jane Doe.md`` → ``people/jane-doe``: per segment, ``.`` and ``_`` become
    spaces, then the title slug rules apply (letters of any script, digits, ``-``)."""
    stem = relpath[:-3] if relpath.lower().endswith(".md") else relpath
    segments = [
        slugify_title(part.replace("_", " ").replace(".", " "))
        for part in stem.replace("\\", "/").split("/")
    ]
    return "/".join(s for s in segments if s)


def slug_to_path(slug: str) -> str:
    """The relative file path of a slug (``people/jane-doe`` → ``people/jane-doe.md``)."""
    return f"{slug}.md"


def _parse_timeline(text: str) -> list[tuple[date, str]]:
    entries = []
    for line in text.splitlines():
        match = _TIMELINE_LINE.match(line)
        if not match:
            continue
        try:
            day = date.fromisoformat(match.group(1))
        except ValueError:
            continue  # an invalid calendar date is skipped, as GBrain does
        entries.append((day, match.group(2)))
    return entries


def _parse_facts(block: str) -> list[FactRow]:
    rows = []
    for line in block.splitlines():
        line = line.strip()
        if not line.startswith("|") or set(line) <= {"|", "-", " ", ":"}:
            continue
        inner = (
            line[1:-1] if line.endswith("|") and not line.endswith("\\|") else line[1:]
        )
        cells = [c.strip() for c in _CELL_SPLIT.split(inner)]
        if cells[:2] == ["#", "claim"] or len(cells) < 2:
            continue
        cells += [""] * (len(FACT_COLUMNS) - len(cells))
        claim = cells[1].replace("\\|", "|")
        struck = claim.startswith("~~") and claim.endswith("~~")
        try:
            confidence = float(cells[3]) if cells[3] else 1.0
        except ValueError:
            confidence = 1.0
        rows.append(
            FactRow(
                claim=claim.strip("~") if struck else claim,
                kind=cells[2] or "fact",
                confidence=min(max(confidence, 0.0), 1.0),
                visibility=cells[4] or "world",
                valid_from=cells[6],
                valid_until=cells[7],
                source=cells[8].replace("\\|", "|"),
                context=cells[9].replace("\\|", "|"),
                struck=struck,
            )
        )
    return rows


def parse_page(text: str, *, relpath: str) -> MarkdownPage:
    """Parse one page file. Raises ``MarkdownFileError`` on unreadable frontmatter."""
    try:
        post = frontmatter.loads(text)
    except yaml.YAMLError as exc:
        raise MarkdownFileError(f"{relpath}: bad YAML frontmatter: {exc}") from exc
    if not isinstance(post.metadata, dict):
        raise MarkdownFileError(f"{relpath}: frontmatter is not a mapping")
    content = post.content
    timeline: list[tuple[date, str]] = []
    if TIMELINE_SENTINEL in content:
        content, _, tail = content.partition(TIMELINE_SENTINEL)
        timeline = _parse_timeline(tail)
    facts: list[FactRow] = []
    for match in _FACTS_BLOCK.finditer(content):
        facts.extend(_parse_facts(match.group(0)))
    content = _FACTS_BLOCK.sub("", content)
    return MarkdownPage(
        relpath=relpath,
        slug=path_to_slug(relpath),
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        raw_text=text,
        frontmatter=dict(post.metadata),
        body=content.strip("\n").rstrip(),
        timeline=timeline,
        facts=facts,
    )


def iter_folder(directory: Path) -> Iterator[Path]:
    """Every ``*.md`` file under ``directory`` (hidden folders such as ``.git`` and
    ``.raw`` skipped), sorted by path."""
    for path in sorted(directory.rglob("*.md")):
        rel = path.relative_to(directory)
        if any(part.startswith(".") for part in rel.parts):
            continue
        yield path


def read_file(path: Path, *, directory: Path) -> MarkdownPage:
    """Read and parse one file. Raises ``MarkdownFileError`` when it is not UTF-8."""
    relpath = path.relative_to(directory).as_posix()
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise MarkdownFileError(f"{relpath}: not UTF-8 text") from exc
    return parse_page(text, relpath=relpath)


def _cell(value: Any) -> str:
    return (
        str(value if value is not None else "").replace("|", "\\|").replace("\n", " ")
    )


def render_page(
    *,
    frontmatter_data: dict[str, Any],
    body: str,
    facts: list[FactRow],
    timeline: list[tuple[date, str]],
) -> str:
    """Render a page file (the inverse of ``parse_page``)."""
    post = frontmatter.Post(body.strip("\n"), **frontmatter_data)
    parts = [frontmatter.dumps(post, sort_keys=False, allow_unicode=True).rstrip("\n")]
    if facts:
        lines = [
            "## Facts",
            FACTS_BEGIN,
            "| " + " | ".join(FACT_COLUMNS) + " |",
            "|" + "---|" * len(FACT_COLUMNS),
        ]
        for number, row in enumerate(facts, start=1):
            claim = f"~~{row.claim}~~" if row.struck else row.claim
            lines.append(
                "| "
                + " | ".join(
                    _cell(v)
                    for v in (
                        number,
                        claim,
                        row.kind,
                        row.confidence,
                        row.visibility,
                        "medium",
                        row.valid_from,
                        row.valid_until,
                        row.source,
                        row.context,
                    )
                )
                + " |"
            )
        lines.append(FACTS_END)
        parts.append("\n".join(lines))
    if timeline:
        parts.append(
            TIMELINE_SENTINEL
            + "\n"
            + "\n".join(
                f"- **{day.isoformat()}** | {summary}" for day, summary in timeline
            )
        )
    return "\n\n".join(parts) + "\n"
