"""Apply a markdown folder to a source, and export a source to a folder (SPEC §6.3).

Import goes through the one page write path (``brain.services.pages.page_write``,
mode ``upsert``): each file version is kept as a ``markdown`` raw record, unchanged
files are skipped by content hash (``Source.cursor['markdown_files']``), and a file
that disappeared soft-deletes its page. Export writes every live page with its facts
and timeline, so the folder, committed to git, is a readable history.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from brain.access import local_caller
from brain.exceptions import BrainError
from brain.models import Page, PageType, RawRecord, Source
from brain.services.facts import FactRowInput, facts_apply_rows
from brain.services.pages import (
    RawInput,
    TimelineInput,
    page_soft_delete,
    page_write,
    pages_embed_pending,
)
from brain.services.sources import source_ensure
from connectors.markdown.client import (
    FactRow,
    MarkdownFileError,
    MarkdownPage,
    iter_folder,
    read_file,
    render_page,
    slug_to_path,
)

CURSOR_KEY = "markdown_files"
# Frontmatter keys that are Page columns rather than free frontmatter.
COLUMN_KEYS = ("visibility", "effective_date")
LEADING_KEYS = ("type", "title", "summary", "tags", "aliases")


@dataclass
class ImportReport:
    """What one import did; ``errors`` holds ``"path: message"`` lines."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    facts_added: int = 0
    embedded: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass
class ExportReport:
    """What one export did."""

    pages: int = 0
    written: int = 0
    unchanged: int = 0


def _title_for(page: MarkdownPage) -> str:
    title = str(page.frontmatter.get("title") or "").strip()
    if title:
        return title
    for line in page.body.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return page.slug.rsplit("/", 1)[-1].replace("-", " ")


def _as_date(value: Any) -> date | None:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str) and value.strip():
        try:
            return date.fromisoformat(value.strip()[:10])
        except ValueError:
            return None
    return None


def _apply_file(*, source: Source, page: MarkdownPage, report: ImportReport) -> None:
    """Write one parsed file through ``page_write`` and add its facts."""
    fm = dict(page.frontmatter)
    visibility = str(fm.pop("visibility", "") or "") or None
    if visibility not in (None, "world", "private"):
        visibility = "private"  # an unknown value never widens who can read
    effective = _as_date(fm.pop("effective_date", None))
    type_name = fm.get("type")
    if type_name and not PageType.objects.filter(name=str(type_name)).exists():
        fm["legacy_type"] = fm.pop("type")  # unknown type: kept, page typed by slug
        type_name = None
    result = page_write(
        source=source,
        mode="upsert",
        actor=local_caller(actor=f"markdown:{source.id}"),
        slug=page.slug,
        title=_title_for(page),
        body=page.body,
        type_name=str(type_name) if type_name else None,
        frontmatter=fm,
        replace_frontmatter=True,
        visibility=visibility,
        effective_date=effective,
        raws=[
            RawInput(
                external_id=f"markdown:{page.relpath}@{page.sha256[:16]}",
                kind=RawRecord.Kind.MARKDOWN,
                content=page.raw_text,
                metadata={"path": page.relpath, "sha256": page.sha256},
            )
        ],
        timeline=[TimelineInput(day, text, "markdown") for day, text in page.timeline],
        allow_empty=True,
        embed=False,
    )
    if result.created:
        report.created += 1
    elif result.changed:
        report.updated += 1
    else:
        report.unchanged += 1
    report.facts_added += _add_facts(source=source, entity=result.page, rows=page.facts)


def _add_facts(*, source: Source, entity: Page, rows: list[FactRow]) -> int:
    """Make the entity's facts follow the file's facts table through the fact
    service (``facts_apply_rows``): live rows are remembered (dedup and
    supersession by slot), a struck row supersedes or expires its fact, a row
    removed from the table expires the fact this importer stored. Returns the
    number of rows inserted."""
    inputs = []
    for row in rows:
        if not row.claim:
            continue
        valid_from = _as_date(row.valid_from)
        valid_until = _as_date(row.valid_until)
        inputs.append(
            FactRowInput(
                text=row.claim,
                kind=row.kind,
                confidence=row.confidence,
                visibility=row.visibility
                if row.visibility in ("world", "private")
                else "private",
                valid_from=timezone.make_aware(
                    datetime.combine(valid_from, datetime.min.time())
                )
                if valid_from
                else None,
                valid_until=timezone.make_aware(
                    datetime.combine(valid_until, datetime.min.time())
                )
                if valid_until
                else None,
                provenance=(row.source or f"markdown:{entity.slug}")[:500],
                context=row.context,
                struck=row.struck,
            )
        )
    report = facts_apply_rows(
        caller=local_caller(actor=f"markdown:{source.id}"),
        source=source,
        entity=entity,
        rows=inputs,
    )
    return report.added + report.history


def markdown_import(
    *,
    source_id: str,
    directory: Path,
    embed: bool = True,
    progress: Callable[[str], None] | None = None,
) -> ImportReport:
    """Apply ``directory`` to source ``source_id`` (created as a markdown source when
    missing). Unchanged files (same SHA-256 as last time) are skipped; files gone since
    the last import soft-delete their page; a bad file is reported in ``errors`` and
    changes nothing. Embeddings are filled at the end unless ``embed`` is False.
    ``progress(relpath)`` is called per file. Idempotent: a second run of the same
    folder reports everything unchanged.
    """
    source = Source.objects.filter(id=source_id).first() or source_ensure(
        source_id=source_id,
        kind=Source.Kind.MARKDOWN,
        name=f"Markdown {directory.name}",
    )
    known: dict[str, dict[str, str]] = dict(source.cursor.get(CURSOR_KEY, {}))
    seen: dict[str, dict[str, str]] = {}
    report = ImportReport()
    for path in iter_folder(directory):
        relpath = path.relative_to(directory).as_posix()
        if progress is not None:
            progress(relpath)
        try:
            page = read_file(path, directory=directory)
            previous = known.get(relpath)
            if previous and previous.get("sha256") == page.sha256:
                report.unchanged += 1
            else:
                _apply_file(source=source, page=page, report=report)
            seen[relpath] = {"sha256": page.sha256, "slug": page.slug}
        except (MarkdownFileError, BrainError) as exc:
            message = getattr(exc, "message", str(exc))
            report.errors.append(f"{relpath}: {message}")
            if relpath in known:
                seen[relpath] = known[relpath]  # keep tracking; never delete on error
    caller = local_caller(actor=f"markdown:{source.id}")
    live_slugs = {entry["slug"] for entry in seen.values()}
    for relpath, entry in known.items():
        if relpath in seen or entry["slug"] in live_slugs:
            continue
        gone = Page.objects.filter(source=source, slug=entry["slug"]).first()
        if gone is not None and page_soft_delete(
            page=gone, actor=caller, reason=f"file {relpath} removed"
        ):
            report.deleted += 1
    now = timezone.now()
    with transaction.atomic():
        locked = Source.objects.select_for_update().get(pk=source.pk)
        locked.cursor = {**locked.cursor, CURSOR_KEY: seen}
        locked.last_sync_at = now
        if not report.errors:
            locked.last_success_at = now
        locked.last_error = "\n".join(report.errors[:20])
        locked.counts = {**locked.counts, "markdown_files": len(seen)}
        locked.save(
            update_fields=[
                "cursor",
                "last_sync_at",
                "last_success_at",
                "last_error",
                "counts",
                "updated_at",
            ]
        )
    if embed:
        report.embedded = pages_embed_pending(source_ids=[source.id])
    return report


def _frontmatter_for(page: Page) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": page.type.name,
        "title": page.title,
        "summary": page.summary,
        "tags": list(page.tags),
    }
    for key in LEADING_KEYS:
        if key in page.frontmatter and key not in data:
            data[key] = page.frontmatter[key]
    for key, value in page.frontmatter.items():
        if key not in data and key not in COLUMN_KEYS:
            data[key] = value
    if page.visibility != "world":
        data["visibility"] = page.visibility
    if page.effective_date:
        data["effective_date"] = page.effective_date.isoformat()
    return data


def _fact_rows(page: Page) -> list[FactRow]:
    rows = []
    for fact in sorted(page.facts.all(), key=lambda f: (f.created_at, f.pk)):
        rows.append(
            FactRow(
                claim=fact.text,
                kind=fact.kind,
                confidence=fact.confidence,
                visibility=fact.visibility,
                valid_from=fact.valid_from.date().isoformat()
                if fact.valid_from
                else "",
                valid_until=fact.valid_until.date().isoformat()
                if fact.valid_until
                else "",
                source=fact.provenance,
                context=fact.expired_reason,
                struck=fact.expired_at is not None,
            )
        )
    return rows


def markdown_export(
    *,
    directory: Path,
    source_id: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> ExportReport:
    """Write every live page (frontmatter, body, facts fence, timeline) as
    ``<slug>.md`` under ``directory``; without ``source_id`` each source goes to its
    own sub-folder ``<source>/``. Files whose content is unchanged are not rewritten
    (clean git diffs). Returns an ``ExportReport``.
    """
    pages = (
        Page.objects.filter(deleted_at__isnull=True)
        .select_related("type")
        .prefetch_related("facts", "timeline")
        .order_by("source_id", "slug")
    )
    if source_id:
        pages = pages.filter(source_id=source_id)
    report = ExportReport()
    for page in pages.iterator(chunk_size=200):
        root = directory if source_id else directory / page.source_id
        target = root / slug_to_path(page.slug)
        timeline = sorted(
            ((t.date, t.summary) for t in page.timeline.all()),
            key=lambda t: (t[0], t[1]),
        )
        text = render_page(
            frontmatter_data=_frontmatter_for(page),
            body=page.body,
            facts=_fact_rows(page),
            timeline=timeline,
        )
        report.pages += 1
        if progress is not None:
            progress(page.slug)
        if target.exists() and target.read_text(encoding="utf-8") == text:
            report.unchanged += 1
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        report.written += 1
    return report


__all__ = [
    "ExportReport",
    "ImportReport",
    "markdown_export",
    "markdown_import",
]
