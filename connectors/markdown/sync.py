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
from brain.services.facts import FactRowInput, facts_apply_rows
from brain.services.pages import (
    PageInput,
    RawInput,
    TimelineInput,
    WriteResult,
    page_soft_delete,
    pages_embed_pending,
    pages_link_waiting,
    pages_write,
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


def _page_input(*, page: MarkdownPage, data: bytes, type_names: set[str]) -> PageInput:
    """The ``pages_write`` item of one parsed file (its bytes exactly as the raw
    record); ``type_names`` are the Schema's page types (read once per import):
    an unknown ``type`` is kept as ``legacy_type`` and the page typed by slug."""
    fm = dict(page.frontmatter)
    visibility = str(fm.pop("visibility", "") or "") or None
    if visibility not in (None, "world", "private"):
        visibility = "private"  # an unknown value never widens who can read
    effective = _as_date(fm.pop("effective_date", None))
    type_name = fm.get("type")
    if type_name and str(type_name) not in type_names:
        fm["legacy_type"] = fm.pop("type")  # unknown type: kept, page typed by slug
        type_name = None
    return PageInput(
        mode="upsert",
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
    )


def _count(report: ImportReport, result: WriteResult) -> None:
    if result.created:
        report.created += 1
    elif result.changed:
        report.updated += 1
    else:
        report.unchanged += 1


def _add_facts(*, source: Source, entity: Page | None, rows: list[FactRow]) -> int:
    """Make the entity's facts follow the file's facts table through the fact
    service (``facts_apply_rows``): live rows are remembered (dedup and
    supersession by slot), a struck row supersedes or expires its fact, a row
    removed from the table expires the fact this importer stored. ``entity`` None
    is ``FACTS_FILE`` (facts attached to no page), by the same rules (SPEC §2.4,
    §6.3). Returns the number of rows inserted."""
    where = entity.slug if entity is not None else FACTS_FILE
    inputs = []
    for row in rows:
        if not row.claim:
            continue
        inputs.append(
            FactRowInput(
                text=row.claim,
                kind=row.kind,
                confidence=row.confidence,
                visibility=row.visibility
                if row.visibility in ("world", "private")
                else "private",
                valid_from=_as_moment(row.valid_from),
                valid_until=_as_moment(row.valid_until),
                provenance=(row.source or f"markdown:{where}")[:500],
                context=row.context,
                struck=row.struck,
            )
        )
    report = facts_apply_rows(
        caller=local_caller(actor=f"markdown:{source.id}"),
        source=source,
        entity=entity,
        rows=inputs,
        use_llm=entity is not None,
    )
    return report.added + report.history


def _as_moment(value: Any) -> datetime | None:
    """A facts-table date cell as midnight of that day (aware), or None."""
    day = _as_date(value)
    return (
        timezone.make_aware(datetime.combine(day, datetime.min.time())) if day else None
    )


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

    Changed files are written ``BATCH_FILES`` at a time through ``pages_write``
    (one transaction and a constant number of queries per batch, so the import's
    rate does not fall as the source grows; issue 48). The run is a ``SyncRun``
    (``succeeded_with_holds`` when files were held) under the source's import
    lock. Embeddings are filled at the end unless ``embed`` is False; then the
    indexes are settled (``connectors.services.import_settle``: GIN pending
    lists merged, tables analysed) so the first search runs at settled speed. ``progress(relpath)`` is called per file. Idempotent: a second run
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


# Files written per ``pages_write`` call (one transaction): each batch costs a
# constant number of queries whatever the size of the source (issue 48).
BATCH_FILES = 100


@dataclass
class _Folder:
    """The state of one folder import: the cursor as it was (``known``) and as it
    will be (``seen``), the holds, the files stored, the batch waiting to be
    written and the Schema's page type names (read once)."""

    source: Source
    report: ImportReport
    known: dict[str, dict[str, str]]
    type_names: set[str]
    seen: dict[str, dict[str, str]] = field(default_factory=dict)
    holds: list[HeldInput] = field(default_factory=list)
    stored: list[str] = field(default_factory=list)
    batch: list[tuple[str, MarkdownPage, bytes]] = field(default_factory=list)

    def hold(
        self,
        relpath: str,
        data: bytes,
        code: str,
        message: str,
        line: int,
        *,
        keep: bool = True,
    ) -> None:
        """Hold one file (SPEC §6 "Every importer"); with ``keep`` a file imported
        before keeps its cursor entry, so an error never deletes its page."""
        self.report.errors.append(f"{relpath}: {message.removeprefix(relpath + ': ')}")
        self.report.held += 1
        self.holds.append(
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
        if keep and relpath in self.known:
            self.seen[relpath] = self.known[relpath]

    def written(self, relpath: str, page: MarkdownPage) -> None:
        self.seen[relpath] = {"sha256": page.sha256, "slug": page.slug}
        self.stored.append(relpath)


def _write_batch(run: _Folder) -> None:
    """Write the waiting files with one ``pages_write`` call in one transaction
    (set-based: a constant number of queries per batch, plus the fact service for
    files with a facts table or pages that had one). A file the write path refuses
    (``BrainError``) is held and the others are written; any other error rolls the
    batch back and its files are written one by one, so only the bad one is held."""
    batch, run.batch = run.batch, []
    if not batch:
        return
    items = [
        _page_input(page=p, data=d, type_names=run.type_names) for _, p, d in batch
    ]
    counts = ImportReport()
    try:
        with transaction.atomic():
            results = pages_write(
                source=run.source,
                actor=local_caller(actor=f"markdown:{run.source.id}"),
                items=items,
                embed=False,
                errors="collect",
                link_waiting=False,
            )
            for (_, page, _), result in zip(batch, results, strict=True):
                if isinstance(result, WriteResult):
                    _count(counts, result)
                    if page.facts or not result.created:
                        counts.facts_added += _add_facts(
                            source=run.source, entity=result.page, rows=page.facts
                        )
    except (OperationalError, InterfaceError):
        raise  # transient: the job retries
    except Exception:  # noqa: BLE001 - the batch is retried file by file below
        for relpath, page, data in batch:
            _write_one(run, relpath, page, data)
        return
    for name in ("created", "updated", "unchanged", "facts_added"):
        setattr(run.report, name, getattr(run.report, name) + getattr(counts, name))
    for (relpath, page, data), result in zip(batch, results, strict=True):
        if isinstance(result, BrainError):
            run.hold(
                relpath,
                data,
                HeldItem.Reason.STORAGE_REFUSED,
                f"{relpath}: {result.code}: {result.message}",
                0,
            )
        else:
            run.written(relpath, page)


def _write_one(run: _Folder, relpath: str, page: MarkdownPage, data: bytes) -> None:
    """Write one file in its own transaction (a batch that failed); a refusal or an
    error holds the file and the import goes on."""
    try:
        with transaction.atomic():
            (result,) = pages_write(
                source=run.source,
                actor=local_caller(actor=f"markdown:{run.source.id}"),
                items=[_page_input(page=page, data=data, type_names=run.type_names)],
                embed=False,
                link_waiting=False,
            )
            assert isinstance(result, WriteResult)  # errors="raise"
            facts = _add_facts(source=run.source, entity=result.page, rows=page.facts)
    except (OperationalError, InterfaceError):
        raise  # transient: the job retries
    except BrainError as exc:
        code, message = HeldItem.Reason.STORAGE_REFUSED, f"{exc.code}: {exc.message}"
        run.hold(relpath, data, code, f"{relpath}: {message}", 0)
        return
    except Exception as exc:  # noqa: BLE001 - one bad file never aborts the import
        code, message = HeldItem.Reason.STORAGE_ERROR, f"{type(exc).__name__}: {exc}"
        run.hold(relpath, data, code, f"{relpath}: {message}", 0)
        return
    _count(run.report, result)
    run.report.facts_added += facts
    run.written(relpath, page)


def _read_files(
    run: _Folder, directory: Path, progress: Callable[[str], None] | None
) -> None:
    """Read, parse and check every file of ``directory`` (holds, slug collisions,
    unchanged files), writing the changed ones ``BATCH_FILES`` at a time."""
    slug_owner: dict[str, str] = {}
    for path in iter_folder(directory):
        relpath = path.relative_to(directory).as_posix()
        run.report.files += 1
        if progress is not None:
            progress(relpath)
        try:
            data = path.read_bytes()
        except OSError as exc:
            run.hold(
                relpath,
                b"",
                HeldItem.Reason.UNREADABLE,
                f"{relpath}: {exc}",
                0,
                keep=False,
            )
            continue
        try:
            page = read_file(path, directory=directory)
        except MarkdownFileError as exc:
            run.hold(relpath, data, exc.code, exc.message, exc.line)
            continue
        owner = slug_owner.setdefault(page.slug, relpath)
        if owner != relpath:
            run.hold(
                relpath,
                data,
                HeldItem.Reason.SLUG_COLLISION,
                f"{relpath}: maps to slug {page.slug!r}, which {owner} already has; "
                "rename one of the files",
                0,
                keep=False,
            )
            continue
        previous = run.known.get(relpath)
        if previous and previous.get("sha256") == page.sha256:
            run.report.unchanged += 1
            run.seen[relpath] = {"sha256": page.sha256, "slug": page.slug}
            continue
        run.batch.append((relpath, page, data))
        if len(run.batch) >= BATCH_FILES:
            _write_batch(run)
    _write_batch(run)


def _import_folder(
    *,
    source: Source,
    directory: Path,
    report: ImportReport,
    sync: SyncReport,
    progress: Callable[[str], None] | None,
) -> None:
    run = _Folder(
        source=source,
        report=report,
        known=dict(source.cursor.get(CURSOR_KEY, {})),
        type_names=set(PageType.objects.values_list("name", flat=True)),
    )
    _read_files(run, directory, progress)
    facts_path = directory / FACTS_FILE
    if facts_path.is_file():
        try:
            rows = parse_facts_file(facts_path.read_bytes().decode("utf-8"))
        except UnicodeDecodeError as exc:
            report.errors.append(f"{FACTS_FILE}: not UTF-8 text ({exc})")
        else:
            report.facts_added += _add_facts(source=source, entity=None, rows=rows)
    caller = local_caller(actor=f"markdown:{source.id}")
    # Links to pages written after the page holding them resolve here, once per
    # page, not in every later batch (issue 48).
    pages_link_waiting(source=source, actor=caller)
    live_slugs = {entry["slug"] for entry in run.seen.values()}
    for relpath, entry in run.known.items():
        if relpath in run.seen or entry["slug"] in live_slugs:
            continue
        gone = Page.objects.filter(source=source, slug=entry["slug"]).first()
        if gone is not None and page_soft_delete(
            page=gone, actor=caller, reason=f"file {relpath} removed"
        ):
            report.deleted += 1
    if run.holds:
        held_items_record(source=source, items=run.holds, report=sync)
    if run.stored:
        HeldItem.objects.filter(
            source=source,
            kind=HELD_KIND,
            folder__in=run.stored,
            released_at__isnull=True,
        ).update(released_at=timezone.now())
    with transaction.atomic():
        locked = Source.objects.select_for_update().get(pk=source.pk)
        locked.cursor = {**locked.cursor, CURSOR_KEY: run.seen}
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
