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

Input rules (SPEC §6 "Every importer", §6.3): a UTF-8 byte-order mark is stripped;
frontmatter values keep their text (``_AsWrittenLoader``: ``No`` stays "No",
``01234`` stays "01234", ``1.10`` stays "1.10"), so an export writes back what was
read; YAML dates are read as text and checked by the importer, so an impossible value
such as ``effective_date: 2026-02-30`` is a ``MarkdownFileError`` naming the line,
as is a NUL byte; never an exception that stops the import. Page-less facts are
exported to ``FACTS_FILE`` (hidden, so page readers skip it) and read back.
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
# GBrain's timeline sentinels after the canonical ``<!-- timeline -->`` (digest §1.3):
# ``--- timeline ---``; a bare ``---`` whose next non-empty line is ``## Timeline`` or
# ``## History``; a ``## Timeline`` section holding only dated bullets.
_TIMELINE_RULE = re.compile(r"^-{3,}\s*timeline\s*-{3,}\s*$", re.I | re.M)
_TIMELINE_LEGACY = re.compile(
    r"^-{3,}\s*\n(?:\s*\n)*(?=##\s+(?:timeline|history)\s*$)", re.I | re.M
)
_TIMELINE_HEADING = re.compile(r"^##\s+timeline\s*$", re.I | re.M)
FACTS_FILE = ".facts.md"
BOM = "\ufeff"
# Frontmatter keys whose values must be ISO dates.
DATE_KEYS = ("effective_date",)


class _AsWrittenLoader(yaml.SafeLoader):
    """SafeLoader whose plain scalars keep their text unless the YAML 1.2 core
    schema names them, and a number only when it reads back as written (issue 46):
    ``No``, ``on``, ``y`` stay text (YAML 1.1 made them booleans: ``title: No``
    became a page titled "False"), ``01234`` and ``0x1F`` stay text (not 668 or 31),
    ``1.10`` stays text (not 1.1), ``1:20`` stays text (not 80). Timestamps are text
    too: an impossible date (``2026-02-30``) is then a value the importer rejects
    with its line, instead of a ``ValueError`` thrown from inside the YAML
    constructor. ``true``/``false`` (any of the core schema's cases), ``null``/``~``/
    empty, integers without a leading zero and floats whose text is their own
    ``repr`` (``0.5``, ``-2.25``) keep their types; merge keys (``<<``) still merge.
    """


_AsWrittenLoader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in (
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("int", r"^-?(?:0|[1-9][0-9]*)$", "-0123456789"),
    ("float", r"^-?(?:0|[1-9][0-9]*)\.[0-9]+$", "-0123456789"),
    ("merge", r"^(?:<<)$", ["<"]),
):
    _AsWrittenLoader.add_implicit_resolver(
        f"tag:yaml.org,2002:{_tag}", re.compile(_pattern), list(_first)
    )


def _float_as_written(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float | str:
    """A float whose text is its own ``repr`` (``1.5``); otherwise the text
    (``1.10``, ``2.50``), so the export writes back what was read."""
    text = str(loader.construct_scalar(node))
    try:
        value = float(text)
    except ValueError:
        return text
    return value if repr(value) == text else text


_AsWrittenLoader.add_constructor("tag:yaml.org,2002:float", _float_as_written)


class _Handler(frontmatter.YAMLHandler):
    def load(self, fm: str, **kwargs: Any) -> Any:
        return yaml.load(fm, Loader=_AsWrittenLoader)  # noqa: S506 - a SafeLoader


_FACTS_BLOCK = re.compile(
    r"(?:^##\s+Facts\s*\n+)?" + re.escape(FACTS_BEGIN) + r".*?" + re.escape(FACTS_END),
    re.S | re.M,
)


class MarkdownFileError(Exception):
    """A file that cannot be read as a page (bad YAML, an invalid frontmatter
    value, a NUL byte, not UTF-8). ``permanent`` is True: retrying the same bytes
    fails the same way. ``code`` is a ``HeldItem.Reason`` value, ``line`` the
    1-based line of the problem (0 when unknown)."""

    permanent = True

    def __init__(
        self, message: str, *, code: str = "invalid_frontmatter", line: int = 0
    ):
        super().__init__(message)
        self.message = message
        self.code = code
        self.line = line


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


def split_timeline(content: str) -> tuple[str, str]:
    """``(body, timeline_text)`` of a page's content, by GBrain's sentinel precedence:
    ``<!-- timeline -->`` > ``--- timeline ---`` > a bare ``---`` followed by a
    ``## Timeline``/``## History`` heading > a trailing ``## Timeline`` section whose
    non-empty lines are all dated bullets. Otherwise ``---`` is a horizontal rule and
    the whole content is body (``timeline_text`` ``""``)."""
    if TIMELINE_SENTINEL in content:
        body, _, tail = content.partition(TIMELINE_SENTINEL)
        return body, tail
    for pattern in (_TIMELINE_RULE, _TIMELINE_LEGACY):
        match = pattern.search(content)
        if match:
            return content[: match.start()], content[match.end() :]
    for match in _TIMELINE_HEADING.finditer(content):
        tail = content[match.end() :]
        lines = [ln for ln in tail.splitlines() if ln.strip()]
        if lines and all(_TIMELINE_LINE.match(ln) for ln in lines):
            return content[: match.start()], tail
    return content, ""


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


def _line_of(text: str, needle: str) -> int:
    for number, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return number
    return 0


def parse_page(text: str, *, relpath: str) -> MarkdownPage:
    """Parse one page file (a leading BOM is stripped). Raises ``MarkdownFileError``
    on unreadable frontmatter, an invalid date in ``DATE_KEYS`` or a NUL byte, with
    the line and the reason."""
    text = text.removeprefix(BOM)
    if "\x00" in text:
        line = _line_of(text, "\x00")
        raise MarkdownFileError(
            f"{relpath}: line {line}: a NUL byte (not text)", line=line
        )
    try:
        post = frontmatter.loads(text, handler=_Handler())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 0  # +1 based, +1 for "---"
        raise MarkdownFileError(
            f"{relpath}: line {line}: bad YAML frontmatter: {exc}", line=line
        ) from exc
    if not isinstance(post.metadata, dict):
        raise MarkdownFileError(f"{relpath}: frontmatter is not a mapping", line=1)
    for key in DATE_KEYS:
        value = post.metadata.get(key)
        if value in (None, ""):
            continue
        try:
            date.fromisoformat(str(value).strip()[:10])
        except ValueError:
            line = _line_of(text, f"{key}:")
            raise MarkdownFileError(
                f"{relpath}: line {line}: {key} {str(value)!r} is not a date "
                "(YYYY-MM-DD)",
                line=line,
            ) from None
    content = post.content
    content, tail = split_timeline(content)
    timeline = _parse_timeline(tail) if tail else []
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
    """Read and parse one file. Raises ``MarkdownFileError`` when it is not UTF-8
    (see ``parse_page`` for the rest)."""
    relpath = path.relative_to(directory).as_posix()
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MarkdownFileError(
            f"{relpath}: not UTF-8 text (byte {exc.start})", code="unreadable"
        ) from exc
    return parse_page(text, relpath=relpath)


def parse_facts_file(text: str) -> list[FactRow]:
    """The rows of a ``FACTS_FILE`` (page-less facts)."""
    return _parse_facts(text.removeprefix(BOM))


def render_facts_file(rows: list[FactRow]) -> str:
    """A ``FACTS_FILE``: the facts fence of the page-less facts."""
    page = render_page(frontmatter_data={}, body="", facts=rows, timeline=[])
    return page.split("\n\n", 1)[1] if rows else ""


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
