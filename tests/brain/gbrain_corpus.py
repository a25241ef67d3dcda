"""A generated GBrain-style markdown corpus (issue 24): people, companies, projects
and meetings whose bodies link each other with ``[[wiki-links]]`` in the three forms
(``[[slug]]``, ``[[slug|label]]``, ``[[Title]]``), some typed by their context
("works at [[…]]"), with prose sentences taken from the real mail copied in
``tests/data`` (SpamAssassin ham, Enron; see tests/data/SOURCE.md) and a
timeline section (``<!-- timeline -->``, ``--- timeline ---`` or ``## Timeline``, in
turn). Fixed seed; every name is invented.

``generate(n, seed)`` returns the files plus what was written (the links, by kind, and
one distinctive sentence per page for known-item queries), so a test can count from
the files without using the code under test.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data"

_FIRST = "Ada Bo Cy Dara Eli Fen Gus Hale Ivo Juno Kit Lark Milo Nell Otto Pia".split()
_LAST = "Quill Lantern Marrow Thistle Vane Orrin Pell Sorrel Tamsin Wick".split()
_CO = "Zinc Basalt Heron Juniper Kestrel Lumen Moss Nimbus Opal Quarry".split()
_CO_KIND = "Works Labs Partners Freight Foods Systems".split()
_PROJ = "Orbit Lattice Ember Tide Harbor Ridge Falcon Prism".split()


@dataclass
class CorpusPage:
    """One generated file: ``slug``, ``type``, ``title``, ``text`` (the whole file),
    ``links`` = ``[(target_slug, typed)]`` distinct per target, ``sentence`` (a
    distinctive sentence of the body for known-item search)."""

    slug: str
    type: str
    title: str
    text: str = ""
    links: list[tuple[str, bool]] = field(default_factory=list)
    sentence: str = ""


def mail_sentences() -> list[str]:
    """Sentences (8-30 words, letters mostly) from the mail copied in tests/data."""
    texts = []
    for path in sorted((DATA / "spamassassin_ham").glob("*.txt")):
        texts.append(path.read_text(errors="replace").split("\n\n", 1)[-1])
    for path in sorted((DATA / "enron").rglob("*.")):
        texts.append(path.read_text(errors="replace").split("\n\n", 1)[-1])
    mbox = (DATA / "spamassassin" / "easy-ham-1-slice.mbox").read_text(errors="replace")
    texts.extend(part.split("\n\n", 1)[-1] for part in mbox.split("\nFrom "))
    out: list[str] = []
    seen: set[str] = set()
    for text in texts:
        text = re.sub(r"\s+", " ", text)
        for sentence in re.split(r"(?<=[.!?])\s+", text):
            words = sentence.split()
            letters = sum(c.isalpha() for c in sentence)
            if not 6 <= len(words) <= 40 or letters < 0.75 * len(sentence):
                continue
            if any(ch in sentence for ch in "[]|<>@#`*_=/\\{}"):
                continue
            if sentence.lower() not in seen:
                seen.add(sentence.lower())
                out.append(sentence)
    return out


def generate(n: int = 150, seed: int = 24) -> list[CorpusPage]:
    """``n`` pages (40 % people, 20 % companies, 20 % projects, 20 % meetings). Page
    ``i``'s ``sentence`` is unique to it for ``i < distinct_count()`` (about 100)."""
    rng = random.Random(seed)
    pool = mail_sentences()
    rng.shuffle(pool)
    # Distinctive sentences (one page each, known-item queries) never reappear as
    # filler prose on another page.
    half = len(pool) // 2
    distinct, filler = pool[:half], pool[half:]
    pages: list[CorpusPage] = []
    kinds = [("person", 0.4), ("company", 0.2), ("project", 0.2), ("meeting", 0.2)]
    titles: set[str] = set()
    for kind, share in kinds:
        for i in range(int(n * share)):
            while True:
                if kind == "person":
                    title = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
                elif kind == "company":
                    title = f"{rng.choice(_CO)} {rng.choice(_CO_KIND)}"
                elif kind == "project":
                    title = f"Project {rng.choice(_PROJ)} {i}"
                else:
                    title = f"Meeting {i} {rng.choice(_PROJ)} review"
                if title not in titles:
                    break
                title = f"{title} {i}"
                if title not in titles:
                    break
            titles.add(title)
            prefix = {
                "person": "people",
                "company": "companies",
                "project": "projects",
                "meeting": "meetings",
            }[kind]
            slug = f"{prefix}/{re.sub(r'[^a-z0-9]+', '-', title.lower()).strip('-')}"
            pages.append(CorpusPage(slug=slug, type=kind, title=title))
    by_type: dict[str, list[CorpusPage]] = {}
    for page in pages:
        by_type.setdefault(page.type, []).append(page)
    start = date(2024, 1, 1)
    for index, page in enumerate(pages):
        distinctive = distinct[index % len(distinct)]
        prose = [distinctive] + [rng.choice(filler) for _ in range(rng.randint(1, 3))]
        lines: list[str] = []
        targets: dict[str, bool] = {}
        if page.type == "person" and rng.random() < 0.8:
            company = rng.choice(by_type["company"])
            lines.append(f"{page.title} works at [[{company.slug}]].")
            targets[company.slug] = True
        for _ in range(rng.randint(0, 4)):
            other = rng.choice(pages)
            if other.slug == page.slug or other.slug in targets:
                continue
            form = rng.randrange(3)
            if form == 0:
                ref = f"[[{other.slug}]]"
            elif form == 1:
                ref = f"[[{other.slug}|{other.title.split()[0]}]]"
            else:
                ref = f"[[{other.title}]]"
            lines.append(f"See also {ref} on this.")
            targets[other.slug] = False
        body_lines = [prose[0], *lines, *prose[1:]]
        rng.shuffle(body_lines)
        timeline = [
            f"- **{(start + timedelta(days=rng.randrange(600))).isoformat()}** | "
            f"{rng.choice(filler)[:80]}"
            for _ in range(rng.randint(0, 2))
        ]
        text = (
            f"---\ntype: {page.type}\ntitle: {page.title}\n---\n"
            + "\n\n".join(body_lines)
            + "\n"
        )
        if timeline:
            # GBrain's three timeline sentinels in turn (canonical, rule, heading).
            sentinel = ("<!-- timeline -->", "--- timeline ---", "## Timeline")[
                index % 3
            ]
            text += f"\n{sentinel}\n" + "\n".join(timeline) + "\n"
        page.text = text
        page.links = list(targets.items())
        page.sentence = distinctive
    return pages


def write(pages: list[CorpusPage], directory: Path) -> None:
    """Write the files (``<slug>.md``) under ``directory``."""
    for page in pages:
        path = directory / f"{page.slug}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page.text)


def distinct_count() -> int:
    """How many leading pages of ``generate`` have a sentence no other page has."""
    return len(mail_sentences()) // 2
