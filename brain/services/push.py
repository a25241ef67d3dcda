"""Push context (SPEC §9): the brain volunteers the pages an agent needs, no LLM.

``push_context`` reads the last 4 conversation turns, extracts mentions
(``brain.mentions``), resolves them against the caller's read scope with one indexed
query, and returns at most ``max_pages`` pages the newest turn mentions and it is
confident about (earlier turns give context and suppression, never a late push), each
with a safe one-line synopsis and the due open loops with that person. Precision over
recall: an ambiguous mention yields nothing, and pages already pushed in the session
are not pushed again. Every pushed page is logged as a ``PushEvent``.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from brain.access import Caller, ReadScope
from brain.exceptions import PROTOCOL_VERSION, InvalidParams
from brain.extensions import loop_views
from brain.mentions import MentionWindow, Span, extract_mentions
from brain.models import Alias, Page, PageType, PushEvent
from brain.precedence import trusted_first
from brain.text import normalize_alias, slugify_title

# SPEC §9 resolution confidences and gate.
ARM_CONFIDENCE = {"alias": 0.9, "title": 0.8, "surname": 0.72, "slug_suffix": 0.6}
SALIENCE_BONUS = 0.05
GATE = 0.7
DEFAULT_MAX_PAGES = 3
HARD_CAP_PAGES = 5
SYNOPSIS_MAX_CHARS = 160
PERSON_TYPE = "person"


@dataclass(frozen=True)
class Match:
    """How one candidate key resolved: the arm and the page ids it points at.

    More than one page id means the mention is ambiguous (SPEC §9: nothing for it).
    """

    arm: str
    page_ids: frozenset[int]

    @property
    def ambiguous(self) -> bool:
        """True when the key names several pages."""
        return len(self.page_ids) > 1


@dataclass
class Lookups:
    """What the indexed queries found, by normalised key."""

    alias: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    title: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    surname: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    slug_tail: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    pages: dict[int, dict[str, Any]] = field(default_factory=dict)
    # Pages already pushed in this session (PushEvent).
    pushed: set[int] = field(default_factory=set)
    # Pages a remote caller created: they answer a mention only when no page a
    # trusted writer created does (brain.precedence, SPEC §8).
    remote: set[int] = field(default_factory=set)


@dataclass
class Resolution:
    """The outcome for the window: per-page evidence and silenced mentions."""

    # page id -> list of (arm, turn, surface) for each clean sighting.
    sightings: dict[int, list[tuple[str, int, str]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    # page ids a partial-name sighting made unsafe.
    unsafe: set[int] = field(default_factory=set)
    # (surface, reason, turn) for mentions that matched but were silenced.
    skipped: list[tuple[str, str, int]] = field(default_factory=list)


def push_context(
    *,
    caller: Caller,
    turns: Sequence[str | Mapping[str, Any]],
    session_id: str | None = None,
    source: str | None = None,
    max_pages: int = DEFAULT_MAX_PAGES,
) -> dict[str, Any]:
    """Return the pages an agent should know about now (SPEC §9, scoping §8).

    ``turns``: oldest first, each a string or ``{"role", "text"}``; the last 4 are
    read, and only pages the newest turn mentions are pushed (the older turns add
    the two-turn bonus and silence ambiguous or partial names). A single string holding ``user:`` / ``assistant:`` lines is split into
    turns. ``session_id``: suppresses pages already pushed in that session (per caller)
    and logs what is pushed; without it nothing is suppressed or logged. ``source``:
    read only that source (else the caller's federated sources). ``max_pages``:
    default 3, clamped to the hard cap 5.

    Returns ``{"pages": [{slug, title, source_id, type, confidence, arm, mention,
    synopsis (≤ 160 chars), loops: [{loop_id, loop_type, summary, due_at, overdue}]}],
    "skipped": [{mention, reason}], "session_id", "source", "max_pages",
    "latency_ms", "protocol_version": PROTOCOL_VERSION}``. Reasons: ``ambiguous``,
    ``partial_name``, ``below_gate``, ``already_pushed``, ``over_cap``.

    Raises ``InvalidParams`` for malformed turns or ``max_pages`` < 1, and
    ``ScopeDenied`` when ``source`` is not readable by the caller.
    """
    started = time.perf_counter()
    texts = _turn_texts(turns)
    if isinstance(max_pages, bool) or not isinstance(max_pages, int) or max_pages < 1:
        raise InvalidParams(
            f"max_pages must be a positive integer, got {max_pages!r}.",
            suggestion=f"Pass max_pages between 1 and {HARD_CAP_PAGES} (default 3).",
            detail={"max_pages": max_pages},
        )
    limit = min(max_pages, HARD_CAP_PAGES)
    scope = caller.read_scope([source] if source else None)
    result: dict[str, Any] = {
        "pages": [],
        "skipped": [],
        "session_id": session_id,
        "source": source,
        "max_pages": limit,
        "protocol_version": PROTOCOL_VERSION,
    }
    window = extract_mentions(texts)
    # Only the newest turn can push (SPEC §9: never a late push); with nothing in it
    # there is nothing to look up.
    if window.newest_spans() and scope.source_ids:
        lookups = _lookup(window, scope, session_id=session_id, client=caller.actor)
        resolution = resolve_window(window, lookups)
        _select(
            result,
            resolution=resolution,
            lookups=lookups,
            window=window,
            caller=caller,
            scope=scope,
            session_id=session_id,
            limit=limit,
        )
    result["latency_ms"] = round((time.perf_counter() - started) * 1000, 2)
    return result


def _turn_texts(turns: Sequence[str | Mapping[str, Any]]) -> list[str]:
    """Normalise turns to strings; raise ``InvalidParams`` on anything else."""
    if isinstance(turns, (str, bytes)) or not isinstance(turns, Sequence):
        raise InvalidParams(
            "turns must be a list of strings or {role, text} objects.",
            suggestion='Pass e.g. turns=["user: who is Sarah?"] oldest first.',
        )
    texts: list[str] = []
    for i, turn in enumerate(turns):
        if isinstance(turn, str):
            texts.append(turn)
        elif isinstance(turn, Mapping) and isinstance(turn.get("text"), str):
            texts.append(turn["text"])
        else:
            raise InvalidParams(
                f"turns[{i}] is neither a string nor an object with a 'text' string.",
                suggestion='Send each turn as a string or {"role": "user", "text": ...}.',
                detail={"index": i},
            )
    if len(texts) == 1 and _ROLE_LINE.search(texts[0]):
        texts = _split_transcript(texts[0])
    return texts


# A transcript pasted as one string: lines starting "user:" / "assistant:" open turns.
_ROLE_LINE = re.compile(
    r"^(?:user|assistant|human|system)\s*:", re.IGNORECASE | re.MULTILINE
)


def _split_transcript(text: str) -> list[str]:
    """Split ``user: …`` / ``assistant: …`` lines into turns (prefixes dropped)."""
    turns: list[str] = []
    for line in text.splitlines():
        match = _ROLE_LINE.match(line)
        if match or not turns:
            turns.append(line[match.end() :] if match else line)
        else:
            turns[-1] += "\n" + line
    return [t.strip() for t in turns]


# --- Lookups: a handful of indexed queries per turn ------------------------------------


# One round trip for every candidate key of the window. Each UNION branch uses one
# index: Alias (source, alias); Page lower(title) (brain_page_title_lower); the
# surname expression (brain_page_surname); the slug tail (brain_page_slug_tail). The
# expressions must stay identical to ``brain.models.page_surname`` and
# ``page_slug_tail`` for the planner to pick those indexes.
_LOOKUP_SQL = r"""
WITH hits AS (
    SELECT a.alias, a.page_id, a.source_id
    FROM {alias} a
    WHERE a.source_id = ANY(%(sources)s::text[]) AND a.alias = ANY(%(alias_keys)s::text[])
), candidates AS (
    SELECT page_id AS id FROM hits
    UNION
    SELECT id FROM {page}
    WHERE lower(title) = ANY(%(title_keys)s::text[])
    UNION
    SELECT id FROM {page}
    WHERE lower(regexp_replace(title, '^.*\s', '')) = ANY(%(surname_keys)s::text[])
    UNION
    SELECT id FROM {page}
    WHERE regexp_replace(slug, '^.*/', '') = ANY(%(tail_keys)s::text[])
)
SELECT p.id, p.slug, p.title, p.source_id, t.name, p.summary, p.frontmatter->>'summary',
       substring(p.body from 1 for 1200),
       lower(p.title),
       lower(regexp_replace(p.title, '^.*\s', '')),
       regexp_replace(p.slug, '^.*/', ''),
       ARRAY(SELECT h.alias FROM hits h WHERE h.page_id = p.id AND h.source_id = p.source_id),
       EXISTS(
           SELECT 1 FROM {push} e
           WHERE e.session_id = %(session)s AND e.client = %(client)s AND e.page_id = p.id
       ),
       p.created_by_remote
FROM candidates c
JOIN {page} p ON p.id = c.id
JOIN {page_type} t ON t.id = p.type_id
WHERE p.source_id = ANY(%(sources)s::text[])
  AND p.deleted_at IS NULL
  AND p.visibility = ANY(%(visibilities)s::text[])
"""
_COLUMNS = (
    "id",
    "slug",
    "title",
    "source_id",
    "type__name",
    "summary",
    "frontmatter_summary",
    "body_head",
    "title_l",
    "surname",
    "slug_tail",
    "aliases",
    "pushed",
    "created_by_remote",
)


def lookup_query(
    window: MentionWindow, scope: ReadScope, *, session_id: str | None, client: str
) -> tuple[str, dict[str, Any], set[str], set[str], set[str]]:
    """The one indexed lookup of a window: ``(sql, params, title_keys, surname_keys,
    tail_keys)``. ``benchmarks/push.py`` times this bare SQL as the latency floor.

    Only the newest turn's keys are looked up, plus every key of an older run that
    shares one of them: only the newest turn's mentions can push, and an older
    sighting matters only through such a run (the two-turn bonus, an ambiguous key,
    "Sarah Johnson" earlier making a later "Sarah" unsafe, "Nadia Petrov" earlier
    explaining a later "nadia").
    """
    newest = window.newest_spans()
    wanted = {s.key for s in newest}
    runs = {s.run for s in window.spans if s.run >= 0 and s.key in wanted}
    spans = newest + [
        s for s in window.spans if s.run in runs and s.turn != window.newest_turn
    ]
    alias_keys = {s.key for s in spans}
    # A handle matches its alias with or without the "@"; a bare lower-case word
    # matches a handle alias too ("dalvarez" for "@dalvarez").
    for span in spans:
        if span.kind == "handle":
            alias_keys.add(span.key.lstrip("@"))
        elif span.kind == "weak" and " " not in span.key:
            alias_keys.add("@" + span.key)
    strong = [s for s in spans if s.kind == "strong"]
    title_keys = {s.key for s in strong}
    surname_keys = {s.key for s in strong if s.length == 1}
    tail_keys = {slugify_title(s.surface) for s in strong} - {""}
    sql = _LOOKUP_SQL.format(
        alias=Alias._meta.db_table,
        page=Page._meta.db_table,
        page_type=PageType._meta.db_table,
        push=PushEvent._meta.db_table,
    )
    params: dict[str, Any] = {
        "sources": list(scope.source_ids),
        "visibilities": list(scope.visibilities),
        "alias_keys": sorted(alias_keys),
        "title_keys": sorted(title_keys),
        "surname_keys": sorted(surname_keys),
        "tail_keys": sorted(tail_keys),
        "session": session_id or "",
        "client": client,
    }
    return sql, params, title_keys, surname_keys, tail_keys


def _lookup(
    window: MentionWindow, scope: ReadScope, *, session_id: str | None, client: str
) -> Lookups:
    """Find every candidate key of the window in one indexed query inside the read
    scope (sources and visibilities from ``Caller.read_scope``), with each page's
    "already pushed in this session" flag."""
    found = Lookups()
    sql, params, title_keys, surname_keys, tail_keys = lookup_query(
        window, scope, session_id=session_id, client=client
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = [dict(zip(_COLUMNS, row, strict=True)) for row in cursor.fetchall()]
    for row in rows:
        page_id = row["id"]
        found.pages[page_id] = row
        if session_id and row["pushed"]:
            found.pushed.add(page_id)
        if row["created_by_remote"]:
            found.remote.add(page_id)
        own_title = normalize_alias(row["title"])
        for alias in row["aliases"]:
            # The page write path stores every title as an alias too; that row is the
            # title arm (0.8), and never serves lower-case words (SPEC §9).
            if alias == own_title:
                found.title[alias].add(page_id)
            else:
                found.alias[alias].add(page_id)
        if row["title_l"] in title_keys:
            found.title[row["title_l"]].add(page_id)
        if row["type__name"] == PERSON_TYPE and row["surname"] in surname_keys:
            found.surname[row["surname"]].add(page_id)
        if row["slug_tail"] in tail_keys:
            found.slug_tail[row["slug_tail"]].add(page_id)
    return found


# --- Resolution: arms, ambiguity, longest match, partial names ------------------------


def match_span(span: Span, lookups: Lookups) -> Match | None:
    """Resolve one candidate through the arms in SPEC §9 order.

    Strong (capitalised) spans: alias and exact title together (if they disagree the
    mention is ambiguous), then surname (single token, person pages), then slug
    suffix. Weak (lower-case) spans, handles and e-mails: exact alias only. The
    arms run over the pages trusted writers created first; the pages remote callers
    created are considered only when none of those matches (``brain.precedence``).
    """
    return trusted_first(lambda skip: _match_arms(span, lookups, skip), lookups.remote)


def _match_arms(span: Span, lookups: Lookups, skip: AbstractSet[int]) -> Match | None:
    """``match_span``'s arm cascade, ignoring the page ids in ``skip``."""

    def ids(table: dict[str, set[int]], *keys: str) -> set[int]:
        return {i for key in keys for i in table.get(key, ()) if i not in skip}

    if span.kind == "handle":
        found = ids(lookups.alias, span.key, span.key.lstrip("@"))
        return Match("alias", frozenset(found)) if found else None
    if span.kind == "weak":
        found = ids(lookups.alias, span.key, "@" + span.key)
        return Match("alias", frozenset(found)) if found else None
    if span.kind != "strong":
        found = ids(lookups.alias, span.key)
        return Match("alias", frozenset(found)) if found else None
    by_alias = ids(lookups.alias, span.key)
    by_title = ids(lookups.title, span.key)
    if by_alias or by_title:
        return Match("alias" if by_alias else "title", frozenset(by_alias | by_title))
    if span.length == 1:
        by_surname = ids(lookups.surname, span.key)
        if by_surname:
            return Match("surname", frozenset(by_surname))
    by_tail = ids(lookups.slug_tail, slugify_title(span.surface))
    if by_tail:
        return Match("slug_suffix", frozenset(by_tail))
    return None


def resolve_window(window: MentionWindow, lookups: Lookups) -> Resolution:
    """Resolve every candidate of the window (pure: no database access).

    Within a run the longest matching span wins and its tokens are consumed, so
    "Sarah Chen" is one mention, not three. A person matched by part of a run whose
    neighbouring token is another, unexplained name ("Sarah Johnson" when only
    "Sarah" is known) is someone else: that page is silenced (``partial_name``).
    """
    out = Resolution()
    by_run: dict[int, list[Span]] = defaultdict(list)
    for span in window.spans:
        if span.run >= 0:
            by_run[span.run].append(span)
        else:
            _record(out, span, match_span(span, lookups))
    for run_id, spans in by_run.items():
        run = window.runs[run_id]
        consumed: set[int] = set()
        matched: list[tuple[Span, Match]] = []
        for span in sorted(spans, key=lambda s: (-s.length, s.start)):
            positions = set(range(span.start, span.end))
            if positions & consumed:
                continue
            match = match_span(span, lookups)
            if match is None:
                continue
            consumed |= positions
            matched.append((span, match))
        for span, match in matched:
            if (
                run.kind == "strong"
                and not match.ambiguous
                and _is_person(lookups, match)
                and any(
                    run.name_like(pos) and pos not in consumed
                    for pos in (span.start - 1, span.end)
                )
            ):
                out.unsafe |= match.page_ids
                out.skipped.append((span.surface, "partial_name", span.turn))
                continue
            _record(out, span, match)
    return out


def _is_person(lookups: Lookups, match: Match) -> bool:
    page = lookups.pages.get(next(iter(match.page_ids)))
    return page is not None and page["type__name"] == PERSON_TYPE


def _record(out: Resolution, span: Span, match: Match | None) -> None:
    if match is None:
        return
    if match.ambiguous:
        out.skipped.append((span.surface, "ambiguous", span.turn))
        return
    (page_id,) = match.page_ids
    out.sightings[page_id].append((match.arm, span.turn, span.surface))


def page_confidence(
    sightings: Iterable[tuple[str, int, str]], *, newest_turn: int
) -> tuple[float, str]:
    """Confidence and arm of a page from its sightings (SPEC §9).

    The best arm's base confidence, plus 0.05 when the page is mentioned in 2 or
    more turns or in the newest turn. Returns ``(confidence, arm)``.
    """
    items = list(sightings)
    arm = max(items, key=lambda s: ARM_CONFIDENCE[s[0]])[0]
    turns = {turn for _, turn, _ in items}
    bonus = SALIENCE_BONUS if len(turns) >= 2 or newest_turn in turns else 0.0
    return round(ARM_CONFIDENCE[arm] + bonus, 2), arm


# --- Selection, suppression, output -------------------------------------------------


def _select(
    result: dict[str, Any],
    *,
    resolution: Resolution,
    lookups: Lookups,
    window: MentionWindow,
    caller: Caller,
    scope: ReadScope,
    session_id: str | None,
    limit: int,
) -> None:
    """Apply suppression, the gate and the cap; fill ``result`` and log the pushes.

    Only pages sighted in the newest turn are candidates (SPEC §9): earlier turns
    add the two-turn bonus and silence (ambiguity, partial names, pages already
    pushed), never a page of their own, so a page skipped on an earlier turn (over
    the cap, say) is not pushed on a later turn that does not mention it. ``skipped``
    likewise lists only the newest turn's mentions.
    """
    newest = window.newest_turn
    skipped = result["skipped"]
    skipped.extend(
        {"mention": m, "reason": r}
        for m, r, turn in resolution.skipped
        if turn == newest
    )
    candidates = []
    for page_id, sightings in resolution.sightings.items():
        now = [s for s in sightings if s[1] == newest]
        if not now:
            continue
        first = now[0][2]
        if page_id in resolution.unsafe:
            # Silenced by a partial name ("Sarah Johnson") in this or an older turn.
            if not any(k == (first, "partial_name") for k in _reasons(skipped)):
                skipped.append({"mention": first, "reason": "partial_name"})
            continue
        confidence, arm = page_confidence(sightings, newest_turn=window.newest_turn)
        last_turn = max(turn for _, turn, _ in sightings)
        candidates.append((page_id, confidence, arm, first, last_turn))
    if not candidates:
        return
    client = caller.actor
    already = lookups.pushed
    # Suppression before the gate and the cap, so repeats cannot take a slot.
    fresh = []
    for cand in candidates:
        if cand[0] in already:
            skipped.append({"mention": cand[3], "reason": "already_pushed"})
        elif cand[1] < GATE:
            skipped.append({"mention": cand[3], "reason": "below_gate"})
        else:
            fresh.append(cand)
    fresh.sort(key=lambda c: (-c[1], -c[4]))
    chosen, dropped = fresh[:limit], fresh[limit:]
    skipped.extend({"mention": c[3], "reason": "over_cap"} for c in dropped)
    if not chosen:
        return
    loops = due_loops_by_page(
        page_ids=[
            c[0] for c in chosen if lookups.pages[c[0]]["type__name"] == PERSON_TYPE
        ],
        scope=scope,
    )
    for page_id, confidence, arm, mention, _ in chosen:
        page = lookups.pages[page_id]
        result["pages"].append(
            {
                "slug": page["slug"],
                "title": page["title"],
                "source_id": page["source_id"],
                "type": page["type__name"],
                "confidence": confidence,
                "arm": arm,
                "mention": mention,
                "synopsis": page_synopsis(
                    summary=page["summary"],
                    frontmatter_summary=page["frontmatter_summary"],
                    body=page["body_head"],
                ),
                "loops": loops.get(page_id, []),
            }
        )
    if session_id:
        # One INSERT statement (atomic on its own); a concurrent duplicate is ignored
        # by the once-per-session unique constraint.
        PushEvent.objects.bulk_create(
            [
                PushEvent(
                    session_id=session_id,
                    client=client,
                    page_id=page_id,
                    mention=mention[:300],
                    arm=arm,
                    confidence=confidence,
                )
                for page_id, confidence, arm, mention, _ in chosen
            ],
            ignore_conflicts=True,
        )


def _reasons(skipped: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(s["mention"], s["reason"]) for s in skipped]


_FENCE = re.compile(r"^\s*(```|~~~)")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_MARKERS = re.compile(r"^\s*(?:#{1,6}\s+|[-*+>]\s+|\d+[.)]\s+)")


def page_synopsis(*, summary: str, frontmatter_summary: str | None, body: str) -> str:
    """A one-line synopsis of at most 160 characters from a safe source (SPEC §9).

    The page summary, else the frontmatter ``summary``, else the first prose line of
    the body (HTML comments, fenced blocks and list or heading markers skipped).
    Whitespace is collapsed; longer text is cut at a word and ends with "…".
    """
    text = (summary or "").strip()
    if not text and frontmatter_summary:
        text = frontmatter_summary.strip()
    if not text:
        in_fence = False
        for line in _COMMENT.sub("", body or "").splitlines():
            if _FENCE.match(line):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            line = _MARKERS.sub("", line).strip()
            if line:
                text = line
                break
    text = " ".join(text.split())
    if len(text) <= SYNOPSIS_MAX_CHARS:
        return text
    cut = text[: SYNOPSIS_MAX_CHARS - 1]
    if " " in cut[SYNOPSIS_MAX_CHARS // 2 :]:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,;:.-") + "…"


def due_loops_by_page(
    *, page_ids: Sequence[int], scope: ReadScope
) -> dict[int, list[dict[str, Any]]]:
    """Due open loops with each person page (``loops.brain_views.due_by_page``),
    ``{page_id: [loop, ...]}``; ``{}`` while no app above brain has registered loop
    views (``brain.extensions``)."""
    views = loop_views()
    if views is None or not page_ids:
        return {}
    return views.due_by_page(page_ids=page_ids, scope=scope)
