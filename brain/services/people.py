"""People resolution: the one service every writer of person pages uses (SPEC §6.2;
issue 25).

Writers (mail importers, contacts, calendar) hand it *sightings*: an address and the
display names seen with it, in any form (``brain.people``). It

- attaches every parsed name as an alias (``first middle last`` and ``first last``)
  to the page of the address it came with, and gives an address-titled page the
  best name as its title;
- creates a page for a new address the writer may create one for, or files the
  address on an existing page when the evidence is strong (the same full name, the
  same organisation domain, and both local parts fit that name);
- keeps role addresses (``events@``, or an address many different humans sign
  for) on ``role`` pages that never take a human's name;
- leaves the owner's own other addresses alone (an address whose name is the
  owner's is learned as an owner address, never a person page);
- scores merge proposals for person pages from evidence (``person_merge_candidates``)
  instead of title similarity alone.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rapidfuzz.distance import OSA

from brain.access import local_caller
from brain.models import Alias, Page, Source
from brain.people import (
    PersonName,
    exchange_mailbox,
    is_role_address,
    local_part,
    name_fits_address,
    names_compatible,
    org_domain,
    person_name,
)
from brain.services.pages import PageInput, WriteResult, pages_write
from brain.text import normalize_alias, slugify_title

PERSON_TYPE = "person"
# Score at which a new address is filed on an existing page instead of getting its
# own (same full name, same organisation, both local parts fit the name).
JOIN_SCORE = 0.9
# Merge proposals below this score are not made (precision first).
PROPOSAL_SCORE = 0.6
# Source.config key holding the auto-merge confidence (absent: auto-merge off).
AUTO_MERGE_KEY = "people_auto_merge_score"
_LETTERS = re.compile(r"[^a-z]")
_LOCAL_TOKENS = re.compile(r"[._+-]+")


@dataclass
class PeopleOutcome:
    """What ``people_resolve`` did: pages created, pages updated (names, title or
    an address filed on them), role addresses, owner addresses learned."""

    created: int = 0
    updated: int = 0
    roles: set[str] = field(default_factory=set)
    owner_addresses: set[str] = field(default_factory=set)


def parsed_names(names: Mapping[str, int] | Iterable[str]) -> Counter[PersonName]:
    """Human names among raw display names (any form), counted; not-names dropped."""
    counts: Counter[PersonName] = Counter()
    items = names.items() if isinstance(names, Mapping) else ((n, 1) for n in names)
    for raw, count in items:
        parsed = person_name(raw)
        if parsed is not None:
            counts[parsed] += count
    return counts


def best_name(names: Counter[PersonName]) -> PersonName | None:
    """The title name: the most seen full name (a family name and a given name),
    preferring the variant that carries a middle; else the most seen name."""
    full = Counter({n: c for n, c in names.items() if n.full})
    pool = full or names
    if not pool:
        return None
    by_key: Counter[str] = Counter()
    for name, count in pool.items():
        by_key[name.key()] += count
    key = by_key.most_common(1)[0][0]
    variants = [n for n in pool if n.key() == key]
    return max(variants, key=lambda n: (bool(n.middle), pool[n], n.display))


def distinct_humans(names: Counter[PersonName]) -> list[PersonName]:
    """Full names grouped by compatibility: one representative per human."""
    groups: list[PersonName] = []
    for name, _count in names.most_common():
        if not name.full:
            continue
        if not any(names_compatible(name, other) for other in groups):
            groups.append(name)
    return groups


def is_role(addr: str, names: Counter[PersonName]) -> bool:
    """A role address: a role-like local part, or two or more different humans
    signing for it when its local part fits none of them."""
    if is_role_address(addr):
        return True
    humans = distinct_humans(names)
    return len(humans) >= 2 and not any(name_fits_address(h, addr) for h in humans)


def name_aliases(names: Iterable[PersonName]) -> list[str]:
    """The alias texts of ``names`` (their ``keys()``), deduplicated in order."""
    out: list[str] = []
    for name in names:
        for key in name.keys():
            value = normalize_alias(key)[:320]
            if value and value not in out:
                out.append(value)
    return out


def render_person(
    *,
    addr: str,
    name: str,
    aliases: Iterable[str],
    origin: str,
    extra: dict[str, Any] | None = None,
    role: bool = False,
) -> tuple[str, str, dict[str, Any]]:
    """(title, body, frontmatter) of a new person page: title ``name`` (else the
    address), ``Email:`` line, frontmatter ``emails``, ``aliases``, ``origin`` and
    ``role`` (a role address: no human name, ever)."""
    title = (name if not role else "") or addr
    emails = sorted({a.lower() for a in [addr, *aliases] if a and "@" in a})
    names = [] if role else sorted({a for a in aliases if a and "@" not in a})
    frontmatter: dict[str, Any] = {
        "emails": emails,
        "aliases": names + emails,
        "origin": origin,
        **(extra or {}),
    }
    if role:
        frontmatter["role"] = True
    lines = [f"# {title}", "", "Email: " + ", ".join(emails)]
    if role:
        lines.append("A role address (several people write from it).")
    if extra and extra.get("company"):
        job = extra.get("role")
        lines.append(f"Works at: {extra['company']}" + (f" ({job})" if job else ""))
    lines.append("")
    lines.append(f"[Source: {origin}]")
    return title, "\n".join(lines) + "\n", frontmatter


def person_slug(*, name: str, addr: str) -> str:
    """``people/<slug>`` from the display name, else the address's local part."""
    base = slugify_title(name, max_length=64) if name else ""
    if not base:
        base = slugify_title(addr.split("@")[0].replace(".", " "), max_length=64)
    return f"people/{base or _short_hash(addr)}"


def _short_hash(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()[:8]


# --- resolution ---------------------------------------------------------------------


@dataclass
class PersonFacts:
    """What the brain knows of one person page: its addresses, the names on it
    (parsed from its name aliases) and whether it is a role page."""

    page_id: int
    emails: set[str] = field(default_factory=set)
    names: Counter[PersonName] = field(default_factory=Counter)
    role: bool = False
    title: str = ""
    # Exchange mailbox names seen in X.500 entries with this person's names.
    mailboxes: set[str] = field(default_factory=set)


def person_facts(*, source_id: str, page_ids: Iterable[int]) -> dict[int, PersonFacts]:
    """``PersonFacts`` of live pages ``page_ids`` of ``source_id`` (one query for the
    pages, one for their aliases)."""
    facts = {
        pk: PersonFacts(
            page_id=pk,
            role=bool((fm or {}).get("role")),
            title=title,
            mailboxes={str(m) for m in (fm or {}).get("mailboxes") or [] if m},
        )
        for pk, fm, title in Page.objects.filter(
            source_id=source_id, pk__in=list(page_ids), deleted_at__isnull=True
        ).values_list("pk", "frontmatter", "title")
    }
    for page_id, alias, kind in Alias.objects.filter(
        source_id=source_id, page_id__in=list(facts)
    ).values_list("page_id", "alias", "kind"):
        if kind == Alias.Kind.EMAIL:
            facts[page_id].emails.add(alias)
        elif kind == Alias.Kind.NAME:
            parsed = person_name(alias)
            if parsed is not None:
                facts[page_id].names[parsed] += 1
    return facts


_FREE_MAIL = frozenset(
    """
    aol.com gmail.com googlemail.com hotmail.com outlook.com live.com msn.com
    yahoo.com ymail.com icloud.com me.com mac.com juno.com earthlink.net
    comcast.net att.net sbcglobal.net verizon.net mail.com gmx.com gmx.net
    proton.me protonmail.com web.de
    """.split()
)


def same_organisation(a: str, b: str) -> bool:
    """True when two addresses share an organisation domain that is not a public
    mail provider (``ect.enron.com`` and ``enron.com``: yes; two ``aol.com``: no)."""
    org = org_domain(a)
    return org == org_domain(b) and org not in _FREE_MAIL


def _built_forms(name: PersonName) -> set[str]:
    """The local parts built from a full name: ``first.last``, ``firstlast``,
    ``flast`` and ``first_last`` (empty for a name without both parts)."""
    if not name.full:
        return set()
    first = _LETTERS.sub("", name.first.lower())
    last = _LETTERS.sub("", name.last.lower())
    if not first or not last:
        return set()
    return {f"{first}{last}", f"{first[0]}{last}", f"{first}.{last}", f"{first}_{last}"}


def _built_from(name: PersonName, addr: str) -> bool:
    """The local part is one of ``_built_forms(name)`` (trailing digits ignored)."""
    forms = _built_forms(name)
    local = re.sub(r"\d+$", "", local_part(addr))
    return bool(forms) and (local in forms or _LETTERS.sub("", local) in forms)


def _digits_differ(a: str, b: str) -> bool:
    """``jkent4`` / ``jkent5``: the same letters, different numbers."""
    return re.sub(r"\d", "", a) == re.sub(r"\d", "", b) and re.sub(
        r"\D", "", a
    ) != re.sub(r"\D", "", b)


def _initial_variant(a: str, b: str) -> bool:
    """Local parts of one name with and without middle initials or a short given
    name: ``tova.brandt`` / ``t.j.brandt``, ``jane.tholt`` / ``m..tholt``,
    ``tim.heizenrader`` / ``timothy.heizenrader``."""
    ta = [t for t in _LOCAL_TOKENS.split(a) if t]
    tb = [t for t in _LOCAL_TOKENS.split(b) if t]
    if len(ta) < 2 or len(tb) < 2 or ta[-1] != tb[-1] or len(ta[-1]) < 3:
        return False
    if ta == tb:
        return False
    fa, fb = ta[0], tb[0]
    short, long_ = sorted((fa, fb), key=len)
    return long_.startswith(short) or len(ta) != len(tb)


def pair_evidence(a: PersonFacts, b: PersonFacts) -> tuple[float, list[str]]:
    """Score (0..1) that two person pages are one human, with the evidence for it.

    Contradictions score 0: a role page, names that cannot be one person (different
    family names, given names that are neither equal, an initial nor a short form),
    or numbered look-alike addresses (``jkent4`` / ``jkent5``). Evidence adds up:
    the same full name (0.6), a display name seen on both (0.1), a compatible name
    (0.3), the same organisation domain (0.2), the same local part (0.25), a typo
    within edit distance 1 (0.6) or 2 (0.45) on one domain, an initial variant of
    the local part (0.25), an address built from the other page's name (0.4), a
    local part that is the other page's Exchange mailbox name (0.45), and
    both addresses built from the shared name (0.1). Title similarity alone adds
    nothing."""
    if a.role or b.role:
        return 0.0, ["role page"]
    humans_a, humans_b = distinct_humans(a.names), distinct_humans(b.names)
    if (
        humans_a
        and humans_b
        and not any(names_compatible(x, y) for x in humans_a for y in humans_b)
    ):
        return 0.0, ["different names"]
    for ea in a.emails:
        for eb in b.emails:
            if _digits_differ(local_part(ea), local_part(eb)):
                return 0.0, [f"numbered look-alikes {ea} / {eb}"]
    score = 0.0
    evidence: list[str] = []
    keys_a = {n.key() for n in humans_a}
    shared = sorted(keys_a & {n.key() for n in humans_b})
    if shared:
        score += 0.6
        evidence.append(f"same name: {shared[0]}")
        displays = {n.display.lower() for n in a.names} & {
            n.display.lower() for n in b.names
        }
        if any(" " in d and len(d.split()) > 2 for d in displays):
            score += 0.1
            evidence.append(f"display name seen on both: {sorted(displays)[0]}")
    elif humans_a and humans_b:
        score += 0.3
        evidence.append(
            f"compatible names: {humans_a[0].display} / {humans_b[0].display}"
        )
    org = local = typo = variant = built = False
    for ea in sorted(a.emails):
        for eb in sorted(b.emails):
            la, lb = local_part(ea), local_part(eb)
            org = org or same_organisation(ea, eb)
            if la == lb and not local:
                local = True
                evidence.append(f"same local part: {ea} / {eb}")
            if not typo and ea.rsplit("@", 1)[-1] == eb.rsplit("@", 1)[-1] and la != lb:
                distance = OSA.distance(la, lb)
                if distance <= 2 and min(len(la), len(lb)) >= 5 + distance:
                    typo = True
                    score += 0.6 if distance == 1 else 0.45
                    evidence.append(f"typo (edit distance {distance}): {ea} / {eb}")
            if not variant and _initial_variant(la, lb):
                variant = True
                evidence.append(f"initial variant: {ea} / {eb}")
    for mine, other in ((a, b), (b, a)):
        hit = next(
            (e for e in sorted(mine.emails) if local_part(e) in other.mailboxes), None
        )
        if hit and any(same_organisation(hit, e) for e in other.emails):
            score += 0.45
            evidence.append(
                f"{hit} is the Exchange mailbox of {other.title or 'the other page'}"
            )
            break
    if org:
        score += 0.2
        evidence.append("same organisation domain")
    if local:
        score += 0.25
    if variant:
        score += 0.25
    for mine, other in ((a, b), (b, a)):
        if not built and not distinct_humans(mine.names):
            for name in distinct_humans(other.names):
                hit = next(
                    (e for e in sorted(mine.emails) if _built_from(name, e)), None
                )
                if hit:
                    built = True
                    score += 0.4
                    evidence.append(f"{hit} is built from the name {name.display}")
                    break
    if shared:
        name = next(n for n in humans_a if n.key() == shared[0])
        if all(any(name_fits_address(name, e) for e in f.emails) for f in (a, b)):
            score += 0.1
            evidence.append("both addresses fit the name")
    return min(1.0, round(score, 3)), evidence


def _live_person_pages(
    source: Source, aliases: Iterable[str], kind: str
) -> list[tuple[str, int]]:
    return list(
        Alias.objects.filter(
            source=source,
            kind=kind,
            alias__in=list(aliases),
            page__deleted_at__isnull=True,
            page__type__name=PERSON_TYPE,
        )
        .order_by("page_id")
        .values_list("alias", "page_id")
    )


def people_resolve(
    *,
    source: Source,
    sightings: Mapping[str, Mapping[str, int]],
    create: Iterable[str],
    owner_addresses: Iterable[str],
    actor: str,
    embed: bool = False,
    origin: str = "mail",
    extra: Mapping[str, dict[str, Any]] | None = None,
) -> PeopleOutcome:
    """Resolve sightings (address -> raw display names seen with it, counted) to
    person pages of ``source`` (see the module docstring). Only addresses in
    ``create`` may get a new page; every sighted address that already has a person
    page gets its new names as aliases (and its best name as title when the page is
    titled by an address). ``extra`` adds frontmatter to pages created for an
    address (contacts: company, role). All page writes are one ``pages_write``
    call. Returns what was done; no errors for data (a refused page is skipped)."""
    owners = {a.lower() for a in owner_addresses}
    parsed: dict[str, Counter[PersonName]] = {}
    for addr, written in sightings.items():
        if "@" in addr:
            parsed.setdefault(addr.lower(), Counter()).update(parsed_names(written))
    boxes: dict[str, set[str]] = defaultdict(set)
    for addr, written in sightings.items():
        boxes[addr.lower()].update(
            box for raw in written if (box := exchange_mailbox(raw))
        )
    creatable = {a.lower() for a in create if "@" in a}
    for addr in creatable:
        parsed.setdefault(addr, Counter())
    outcome = PeopleOutcome()
    owner_keys = {n.key() for a in owners for n in parsed.get(a, Counter()) if n.full}
    for addr, seen in parsed.items():
        best = best_name(seen)
        if addr not in owners and best and best.full and best.key() in owner_keys:
            outcome.owner_addresses.add(addr)
    candidates = {
        a: n for a, n in parsed.items() if a not in owners | outcome.owner_addresses
    }
    if not candidates:
        return outcome
    page_of: dict[str, int] = {}
    for alias, page_id in _live_person_pages(source, candidates, Alias.Kind.EMAIL):
        page_of.setdefault(alias, page_id)
    # An address any page of the source already names (a company, a hand-made
    # page) is left to that page.
    taken = set(
        Alias.objects.filter(source=source, alias__in=list(candidates)).values_list(
            "alias", flat=True
        )
    )
    # Addresses without a page: a correspondent's may get one; any other is only
    # filed on an existing page when the evidence is strong.
    fresh = sorted(a for a in candidates if a not in taken)
    best_of = {a: best_name(candidates[a]) for a in candidates}
    join_keys = {b.key() for a in fresh if (b := best_of[a]) is not None and b.full}
    by_key: dict[str, set[int]] = defaultdict(set)
    for alias, page_id in _live_person_pages(source, join_keys, Alias.Kind.NAME):
        by_key[alias].add(page_id)
    facts = person_facts(
        source_id=source.id,
        page_ids=set(page_of.values()) | {p for ids in by_key.values() for p in ids},
    )
    # page id -> addresses and names to add.
    adds: dict[int, tuple[set[str], Counter[PersonName]]] = defaultdict(
        lambda: (set(), Counter())
    )
    # New pages of this call, as PersonFacts (page_id 0) with their role flag: a
    # second new address of the same person joins the first one's page.
    new_pages: list[tuple[PersonFacts, bool]] = []
    waiting: list[str] = []
    add_boxes: dict[int, set[str]] = defaultdict(set)
    for addr in fresh:
        names = candidates[addr]
        role = is_role(addr, names)
        best = best_of[addr]
        sighting = PersonFacts(
            page_id=0, emails={addr}, names=Counter(names), mailboxes=set(boxes[addr])
        )
        if role:
            if addr in creatable:
                outcome.roles.add(addr)
                new_pages.append((sighting, True))
            continue
        if best is not None and best.full and len(by_key.get(best.key(), ())) == 1:
            page_id = next(iter(by_key[best.key()]))
            known = facts.get(page_id)
            if known is not None and pair_evidence(sighting, known)[0] >= JOIN_SCORE:
                adds[page_id][0].add(addr)
                adds[page_id][1].update(names)
                add_boxes[page_id] |= boxes[addr]
                continue
        if not _join_new(sighting, new_pages):
            if addr in creatable:
                new_pages.append((sighting, False))
            else:
                waiting.append(addr)
    for addr in waiting:
        sighting = PersonFacts(
            page_id=0,
            emails={addr},
            names=Counter(candidates[addr]),
            mailboxes=set(boxes[addr]),
        )
        _join_new(sighting, new_pages)
    for addr, page_id in page_of.items():
        page = facts.get(page_id)
        names = candidates[addr]
        if page is None or page.role or is_role(addr, names):
            outcome.roles.add(addr)
            continue
        adds[page_id][1].update(names)
        add_boxes[page_id] |= boxes[addr]
    items = _update_items(source=source, facts=facts, adds=adds, boxes=add_boxes)
    outcome.updated = len(items)
    items += _create_items(
        source=source, new_pages=new_pages, origin=origin, extra=extra or {}
    )
    if not items:
        return outcome
    results = pages_write(
        source=source,
        actor=local_caller(actor=actor),
        items=items,
        embed=embed,
        errors="collect",
    )
    done = [
        item.mode
        for item, result in zip(items, results, strict=True)
        if isinstance(result, WriteResult)
    ]
    outcome.created = done.count("create")
    outcome.updated = len(done) - outcome.created
    return outcome


def _join_new(sighting: PersonFacts, new_pages: list[tuple[PersonFacts, bool]]) -> bool:
    """File ``sighting`` on a page of ``new_pages`` that shares a full name with it
    when the evidence is strong (``JOIN_SCORE``); True when it was."""
    keys = {n.key() for n in distinct_humans(sighting.names)}
    if not keys:
        return False
    for page, role in new_pages:
        if role or not keys & {n.key() for n in page.names if n.full}:
            continue
        if pair_evidence(sighting, page)[0] >= JOIN_SCORE:
            page.emails |= sighting.emails
            page.names.update(sighting.names)
            page.mailboxes |= sighting.mailboxes
            return True
    return False


def _update_items(
    *,
    source: Source,
    facts: dict[int, PersonFacts],
    adds: Mapping[int, tuple[set[str], Counter[PersonName]]],
    boxes: Mapping[int, set[str]],
) -> list[PageInput]:
    """``replace`` writes (body kept) for pages that gain an address, a name alias,
    an Exchange mailbox name (``boxes``) or a title; nothing for pages with nothing
    new."""
    pages = {
        p.pk: p
        for p in Page.objects.filter(
            source=source, pk__in=[k for k in adds if k in facts]
        )
    }
    items: list[PageInput] = []
    for page_id, (emails, names) in sorted(adds.items()):
        page = pages.get(page_id)
        if page is None:
            continue
        known = facts[page_id]
        new_emails = sorted(emails - known.emails)
        have = set(name_aliases(known.names)) | {normalize_alias(page.title)}
        new_names = [
            a for a in name_aliases(n for n, _c in names.most_common()) if a not in have
        ]
        best = best_name(names + known.names)
        retitle = "@" in page.title and best is not None
        new_boxes = boxes.get(page_id, set()) - known.mailboxes
        if not (new_emails or new_names or retitle or new_boxes):
            continue
        fm = page.frontmatter or {}
        declared = fm.get("aliases")
        old = [str(a) for a in declared] if isinstance(declared, list) else []
        frontmatter: dict[str, Any] = {
            "aliases": list(dict.fromkeys(old + new_names + new_emails))
        }
        if new_boxes:
            frontmatter["mailboxes"] = sorted(known.mailboxes | new_boxes)
        if new_emails:
            listed = fm.get("emails")
            frontmatter["emails"] = sorted(
                set(listed if isinstance(listed, list) else [])
                | set(new_emails)
                | known.emails
            )
        items.append(
            PageInput(
                mode="replace",
                slug=page.slug,
                title=best.display if retitle and best is not None else None,
                frontmatter=frontmatter,
                provenance={"connector": "people", "emails": new_emails},
            )
        )
    return items


def _create_items(
    *,
    source: Source,
    new_pages: list[tuple[PersonFacts, bool]],
    origin: str,
    extra: Mapping[str, dict[str, Any]],
) -> list[PageInput]:
    """``create`` writes for new people (their first address names the page); a
    slug taken by another page gets ``-<8 hex of the address>``."""
    planned = []
    for person, role in new_pages:
        addr = min(person.emails)
        best = None if role else best_name(person.names)
        base = person_slug(name=best.display if best else "", addr=addr)
        planned.append((addr, person, role, best, base))
    candidates = [s for *_rest, base in planned for s in (base,)]
    candidates += [f"{p[4]}-{_short_hash(p[0])}" for p in planned]
    taken = set(
        Page.objects.filter(source=source, slug__in=candidates).values_list(
            "slug", flat=True
        )
    )
    items: list[PageInput] = []
    for addr, person, role, best, base in planned:
        slug = base
        if slug in taken:
            slug = f"{slug}-{_short_hash(addr)}"
            if slug in taken:
                continue
        taken.add(slug)
        title, body, frontmatter = render_person(
            addr=addr,
            name=best.display if best else "",
            aliases=[
                *sorted(person.emails),
                *name_aliases(n for n, _c in person.names.most_common()),
            ],
            origin=origin,
            extra={
                **(extra.get(addr) or {}),
                **({"mailboxes": sorted(person.mailboxes)} if person.mailboxes else {}),
            },
            role=role,
        )
        items.append(
            PageInput(
                mode="create",
                slug=slug,
                title=title,
                body=body,
                type_name=PERSON_TYPE,
                frontmatter=frontmatter,
                provenance={"connector": origin, "email": addr},
            )
        )
    return items


# --- merge proposals ----------------------------------------------------------------


@dataclass(frozen=True)
class MergeCandidate:
    """Two person pages that look like one human: ``keep`` and ``merge`` page ids,
    the score (0..1) and the evidence behind it."""

    source_id: str
    keep: int
    merge: int
    score: float
    evidence: tuple[str, ...]


def person_merge_candidates(
    *, source_id: str, limit: int, threshold: float = PROPOSAL_SCORE
) -> list[MergeCandidate]:
    """Pairs of live person pages of ``source_id`` scoring at least ``threshold``
    by ``pair_evidence``, best first, at most ``limit``. Pairs are only compared
    when they share a name key, a local part, an organisation domain (edit distance
    on local parts) or a family name; the page with more addresses is kept."""
    page_ids = list(
        Page.objects.filter(
            source_id=source_id, deleted_at__isnull=True, type__name=PERSON_TYPE
        ).values_list("pk", flat=True)
    )
    facts = person_facts(source_id=source_id, page_ids=page_ids)
    buckets: dict[str, set[int]] = defaultdict(set)
    for f in facts.values():
        if f.role:
            continue
        for name in distinct_humans(f.names):
            buckets["n:" + name.last.lower()].add(f.page_id)
            # Meets a page whose address is built from this name (kholst@).
            for form in _built_forms(name):
                buckets["l:" + form].add(f.page_id)
        for box in f.mailboxes:
            buckets["l:" + box].add(f.page_id)
        for email in f.emails:
            local = local_part(email)
            tokens = [t for t in _LOCAL_TOKENS.split(local) if t]
            buckets["l:" + local].add(f.page_id)
            buckets["d:" + email.rsplit("@", 1)[-1]].add(f.page_id)
            if tokens and len(tokens[-1]) >= 3:
                buckets["t:" + tokens[-1]].add(f.page_id)
                buckets["n:" + tokens[-1]].add(f.page_id)
    seen: set[tuple[int, int]] = set()
    out: list[MergeCandidate] = []
    for key, members in buckets.items():
        ordered = sorted(members)
        if len(ordered) < 2:
            continue
        for i, a in enumerate(ordered):
            for b in ordered[i + 1 :]:
                if (a, b) in seen:
                    continue
                if key.startswith("d:") and not _typo_close(facts[a], facts[b]):
                    continue
                seen.add((a, b))
                score, evidence = pair_evidence(facts[a], facts[b])
                if score >= threshold:
                    keep, merge = sorted(
                        (a, b), key=lambda p: (-len(facts[p].emails), p)
                    )
                    out.append(
                        MergeCandidate(source_id, keep, merge, score, tuple(evidence))
                    )
    out.sort(key=lambda c: (-c.score, c.keep, c.merge))
    return out[:limit]


def _typo_close(a: PersonFacts, b: PersonFacts) -> bool:
    """Two pages on one domain whose local parts are within edit distance 2."""
    return any(
        OSA.distance(local_part(x), local_part(y), score_cutoff=2) <= 2
        for x in a.emails
        for y in b.emails
        if x.rsplit("@", 1)[-1] == y.rsplit("@", 1)[-1]
    )


def auto_merge_score(source: Source) -> float | None:
    """The confidence above which merge candidates of ``source`` merge without a
    curator (``Source.config["people_auto_merge_score"]``, set in admin); None
    (the default) means never."""
    value = (source.config or {}).get(AUTO_MERGE_KEY)
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
