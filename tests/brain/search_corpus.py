"""A small real corpus for search tests: 12 SpamAssassin ham messages as pages.

Files live in ``tests/data/spamassassin_ham`` (public-domain corpus; see SOURCE.txt).
Each message becomes a note: title from the subject (list tags and ``Re:`` removed),
body from the text/plain part.
"""

from __future__ import annotations

import email
import re
from email import policy
from pathlib import Path

from brain.access import local_caller
from brain.models import Source
from brain.services.pages import page_add
from brain.text import slugify_title

DATA = Path(__file__).resolve().parent.parent / "data" / "spamassassin_ham"


def corpus_messages() -> list[tuple[str, str]]:
    """``[(title, body)]`` for every message file, sorted by file name."""
    out = []
    for path in sorted(DATA.glob("*.txt")):
        if path.name == "SOURCE.txt":
            continue
        message = email.message_from_bytes(path.read_bytes(), policy=policy.default)
        subject = re.sub(r"\[[^\]]*\]", "", str(message["subject"]))
        subject = re.sub(r"^\s*((re|fw|fwd):\s*)+", "", subject, flags=re.I)
        title = re.sub(r"\s+", " ", subject).strip(" :")
        part = message.get_body(preferencelist=("plain",))
        out.append((title, part.get_content() if part else ""))
    return out


def load_corpus(source: Source, **kw: object) -> dict[str, str]:
    """Write the corpus into ``source`` through the write path; returns title → slug."""
    slugs = {}
    for title, body in corpus_messages():
        result = page_add(
            source=source,
            slug=f"notes/{slugify_title(title)}",
            title=title,
            body=body,
            actor=local_caller(),
            **kw,
        )
        slugs[title] = result.page.slug
    return slugs
