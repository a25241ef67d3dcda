"""Apply a markdown folder to a source, and export a source to a folder (SPEC §6.3).

Import goes through the one page write path (``brain.services.pages.page_write``,
mode ``upsert``): each file version is kept as a ``markdown`` raw record, unchanged
files are skipped by content hash (``Source.cursor['markdown_files']``), and a file
that disappeared soft-deletes its page. Export writes every live page with its facts
and timeline, so the folder, committed to git, is a readable history.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone

from brain.access import local_caller
from brain.exceptions import BrainError
from brain.models import Fact, Page, PageType, RawRecord, Source
from brain.selectors_facts import fact_active_q
from brain.services.facts import (
    FactRowInput,
    fact_remember,
    facts_apply_rows,
    normalize_fact_text,
)
from brain.services.pages import (
    RawInput,
    TimelineInput,
    page_soft_delete,
    page_write,
    pages_embed_pending,
)
from brain.services.sources import source_ensure
from connectors.base import SyncReport
from connectors.markdown.client import (
    FACTS_FILE,
    FactRow,
    MarkdownFileError,
    MarkdownPage,
    iter_folder,
    parse_facts_file,
    read_file,
    render_facts_file,
    render_page,
    slug_to_path,
)
from connectors.models import HeldItem
from connectors.services import (
    HeldInput,
    held_items_record,
    import_settle,
    sync_run_finish,
    sync_run_start,
)

CURSOR_KEY = "markdown_files"
HELD_KIND = "markdown_file"
# Frontmatter keys that are Page columns rather than free frontmatter.
COLUMN_KEYS = ("visibility", "effective_date")
LEADING_KEYS = ("type", "title", "summary", "tags", "aliases")


@dataclass
class ImportReport:
    """What one import did; ``errors`` holds ``"path: message"`` lines (one per
    held file). ``files == created + updated + unchanged + held``."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    facts_added: int = 0
    embedded: int = 0
    files: int = 0
    held: int = 0
    status: str = ""
    errors: list[str] = field(default_factory=list)

    def as_counts(self) -> dict[str, int]:
        """The run's counts, with the accounting of SPEC §6 "Every importer"
        (items = stored + duplicates + held; unchanged files are duplicates)."""
        return {
            "files": self.files,
            "items": self.files,
            "stored": self.created + self.updated,
            "duplicates": self.unchanged,
            "held": self.held,
            "lost": self.files
            - self.created
            - self.updated
            - self.unchanged
            - self.held,
            "created": self.created,
            "updated": self.updated,
            "deleted": self.deleted,
            "facts_added": self.facts_added,
        }


@dataclass
class ExportReport:
    """What one export did (``facts``: page-less facts written to the facts file)."""

    pages: int = 0
    written: int = 0
    unchanged: int = 0
    facts: int = 0


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


def _apply_file(
    *, source: Source, page: MarkdownPage, report: ImportReport, data: bytes
) -> None:
    """Write one parsed file through ``page_write`` (its bytes exactly as the raw
    record) and add its facts."""
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
                data=data,
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


def _add_loose_facts(*, source: Source, rows: list[FactRow]) -> int:
    """Remember the live rows of ``FACTS_FILE`` (facts attached to no page) through
    the fact service (``fact_remember``: dedup and supersession by slot); a row
    whose text is already a live page-less fact of the source is left alone, and
    struck rows (history) are not re-imported. Returns the number stored."""
    caller = local_caller(actor=f"markdown:{source.id}")
    now = timezone.now()
    live = {
        normalize_fact_text(text)
        for text in Fact.objects.filter(source=source, entity__isnull=True)
        .filter(fact_active_q(now=now))
        .values_list("text", flat=True)
    }
    added = 0
    for row in rows:
        if row.struck or not row.claim.strip():
            continue
        if normalize_fact_text(row.claim) in live:
            continue
        valid_from = _as_date(row.valid_from)
        valid_until = _as_date(row.valid_until)
        written = fact_remember(
            caller=caller,
            source=source,
            entity=None,
            text=row.claim,
            provenance=(row.source or f"markdown:{FACTS_FILE}")[:500],
            kind=row.kind if row.kind in Fact.Kind.values else Fact.Kind.FACT,
            visibility=row.visibility
            if row.visibility in ("world", "private")
            else "private",
            confidence=row.confidence,
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
            use_llm=False,
        )
        live.add(normalize_fact_text(row.claim))
        if written.status != "duplicate":
            added += 1
    return added


def markdown_import(
    *,
    source_id: str,
    directory: Path,
    embed: bool = True,
    progress: Callable[[str], None] | None = None,
    actor: str = "cli",
) -> ImportReport:
    """Apply ``directory`` to source ``source_id`` (created as a markdown source when
    missing; SPEC §6.3). Unchanged files (same SHA-256 as last time) are skipped;
    files gone since the last import soft-delete their page.

    Every file is stored, unchanged (a duplicate of what is stored) or held (SPEC §6
    "Every importer"): a file that cannot be read (bad YAML, an invalid frontmatter
    value such as ``effective_date: 2026-02-30``, a NUL byte, not UTF-8), one the
    write path refuses, or a second file mapping to a slug another file already
    has (``Fern Walk.md`` and ``fern_walk.md``: reported, never merged) is held
    with its line, reason and bytes; the import goes on. ``errors`` lists them as
    ``"path: message"``. Page-less facts are read from ``FACTS_FILE``.

    The run is a ``SyncRun`` (``succeeded_with_holds`` when files were held) under
    the source's import lock. Embeddings are filled at the end unless ``embed``
    is False. ``progress(relpath)`` is called per file. Idempotent: a second run
    of the same folder reports everything unchanged.
    """
    source = Source.objects.filter(id=source_id).first() or source_ensure(
        source_id=source_id,
        kind=Source.Kind.MARKDOWN,
        name=f"Markdown {directory.name}",
    )
    run = sync_run_start(source=source, kind="import_markdown", actor=actor)
    sync = SyncReport(source_id=source.id, kind="markdown")
    sync.run_id = run.pk
    report = ImportReport()
    try:
        _import_folder(
            source=source,
            directory=directory,
            report=report,
            sync=sync,
            progress=progress,
        )
        sync.counts.update(report.as_counts())
    except BaseException as exc:
        sync_run_finish(run=run, report=sync, error=f"{type(exc).__name__}: {exc}")
        raise
    sync_run_finish(run=run, report=sync)
    report.status = sync.status
    if embed:
        report.embedded = pages_embed_pending(source_ids=[source.id])
    import_settle()  # after the embeddings: their updates fill the indexes too
    return report


def _import_folder(
    *,
    source: Source,
    directory: Path,
    report: ImportReport,
    sync: SyncReport,
    progress: Callable[[str], None] | None,
) -> None:
    known: dict[str, dict[str, str]] = dict(source.cursor.get(CURSOR_KEY, {}))
    seen: dict[str, dict[str, str]] = {}
    holds: list[HeldInput] = []
    slug_owner: dict[str, str] = {}
    stored: list[str] = []

    def hold(relpath: str, data: bytes, code: str, message: str, line: int) -> None:
        report.errors.append(f"{relpath}: {message.removeprefix(relpath + ': ')}")
        report.held += 1
        holds.append(
            HeldInput(
                kind=HELD_KIND,
                external_id=f"markdown:{relpath}@{hashlib.sha256(data).hexdigest()[:16]}",
                code=code,
                message=message,
                location=f"{relpath}:{line}" if line else relpath,
                folder=relpath,
                raw=data,
            )
        )

    for path in iter_folder(directory):
        relpath = path.relative_to(directory).as_posix()
        report.files += 1
        if progress is not None:
            progress(relpath)
        try:
            data = path.read_bytes()
        except OSError as exc:
            hold(relpath, b"", HeldItem.Reason.UNREADABLE, f"{relpath}: {exc}", 0)
            continue
        try:
            page = read_file(path, directory=directory)
        except MarkdownFileError as exc:
            hold(relpath, data, exc.code, exc.message, exc.line)
            if relpath in known:
                seen[relpath] = known[relpath]  # keep tracking; never delete on error
            continue
        owner = slug_owner.setdefault(page.slug, relpath)
        if owner != relpath:
            hold(
                relpath,
                data,
                HeldItem.Reason.SLUG_COLLISION,
                f"{relpath}: maps to slug {page.slug!r}, which {owner} already has; "
                "rename one of the files",
                0,
            )
            continue
        previous = known.get(relpath)
        if previous and previous.get("sha256") == page.sha256:
            report.unchanged += 1
            seen[relpath] = {"sha256": page.sha256, "slug": page.slug}
            continue
        try:
            with transaction.atomic():
                _apply_file(source=source, page=page, report=report, data=data)
        except (OperationalError, InterfaceError):
            raise  # transient: the job retries
        except BrainError as exc:
            hold(
                relpath,
                data,
                HeldItem.Reason.STORAGE_REFUSED,
                f"{relpath}: {exc.code}: {exc.message}",
                0,
            )
            if relpath in known:
                seen[relpath] = known[relpath]
            continue
        except Exception as exc:  # noqa: BLE001 - one bad file never aborts the import
            hold(
                relpath,
                data,
                HeldItem.Reason.STORAGE_ERROR,
                f"{relpath}: {type(exc).__name__}: {exc}",
                0,
            )
            if relpath in known:
                seen[relpath] = known[relpath]
            continue
        seen[relpath] = {"sha256": page.sha256, "slug": page.slug}
        stored.append(relpath)
    facts_path = directory / FACTS_FILE
    if facts_path.is_file():
        try:
            rows = parse_facts_file(facts_path.read_bytes().decode("utf-8"))
        except UnicodeDecodeError as exc:
            report.errors.append(f"{FACTS_FILE}: not UTF-8 text ({exc})")
        else:
            report.facts_added += _add_loose_facts(source=source, rows=rows)
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
    if holds:
        held_items_record(source=source, items=holds, report=sync)
    if stored:
        HeldItem.objects.filter(
            source=source, kind=HELD_KIND, folder__in=stored, released_at__isnull=True
        ).update(released_at=timezone.now())
    with transaction.atomic():
        locked = Source.objects.select_for_update().get(pk=source.pk)
        locked.cursor = {**locked.cursor, CURSOR_KEY: seen}
        locked.save(update_fields=["cursor", "updated_at"])


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


def _fact_rows(facts: Any) -> list[FactRow]:
    rows = []
    for fact in sorted(facts, key=lambda f: (f.created_at, f.pk)):
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


def _write(target: Path, text: str, report: ExportReport) -> None:
    if target.exists() and target.read_text(encoding="utf-8") == text:
        report.unchanged += 1
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    report.written += 1


def markdown_export(
    *,
    directory: Path,
    source_id: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> ExportReport:
    """Write every live page (frontmatter, body, facts fence, timeline) as
    ``<slug>.md`` under ``directory``, and the facts attached to no page to
    ``FACTS_FILE``; without ``source_id`` each source goes to its own sub-folder
    ``<source>/``. Files whose content is unchanged are not rewritten (clean git
    diffs). ``markdown_import`` of the folder reads both back. Returns an
    ``ExportReport``.
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
            facts=_fact_rows(page.facts.all()),
            timeline=timeline,
        )
        report.pages += 1
        if progress is not None:
            progress(page.slug)
        _write(target, text, report)
    # Facts attached to no page: one facts file per source (SPEC §6.3 round trip).
    loose = Fact.objects.filter(entity__isnull=True).order_by("source_id")
    if source_id:
        loose = loose.filter(source_id=source_id)
    by_source: dict[str, list[Fact]] = {}
    for fact in loose:
        by_source.setdefault(fact.source_id, []).append(fact)
    for fact_source, facts in by_source.items():
        root = directory if source_id else directory / fact_source
        _write(root / FACTS_FILE, render_facts_file(_fact_rows(facts)), report)
        report.facts += len(facts)
    return report


__all__ = [
    "ExportReport",
    "ImportReport",
    "markdown_export",
    "markdown_import",
]
