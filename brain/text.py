"""Text normalisation shared by every writer and reader: slugs and aliases (SPEC §2.3).

Pure functions, no database access.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any

from brain.exceptions import InvalidParams

SLUG_MAX_LENGTH = 255
TITLE_SLUG_MAX_LENGTH = 80

# Bidi controls and other format characters that can disguise a slug.
_BIDI = {
    "\u200e",
    "\u200f",
    "\u202a",
    "\u202b",
    "\u202c",
    "\u202d",
    "\u202e",
    "\u2066",
    "\u2067",
    "\u2068",
    "\u2069",
    "\u061c",
}
_WRAPPERS = {
    ('"', '"'),
    ("'", "'"),
    ("(", ")"),
    ("[", "]"),
    ("{", "}"),
    ("<", ">"),
    ("\u201c", "\u201d"),
    ("\u2018", "\u2019"),
    ("`", "`"),
}


def sha256_hex(text: str) -> str:
    """Hex SHA-256 of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def slugify_title(title: str, *, max_length: int = TITLE_SLUG_MAX_LENGTH) -> str:
    """Derive one slug segment from a title (SPEC §2.3).

    Keeps letters of any script, digits, spaces and hyphens (everything else, including
    ``/``, ``.``, ``\\`` and bidi controls, is stripped, so a title can never point outside its namespace),
    lower-cases, collapses spaces to ``-`` and cuts at ``max_length`` (80) characters.
    Returns ``""`` when nothing is left; callers pick a fallback.
    """
    text = unicodedata.normalize("NFKC", title).lower()
    kept = "".join(
        ch
        for ch in text
        if (ch.isalnum() or ch in " -") and unicodedata.category(ch)[0] != "C"
    )
    slug = re.sub(r"[\s-]+", "-", kept).strip("-")
    return slug[:max_length].strip("-")


_SEGMENT = re.compile(r"^[\w-]+$", re.UNICODE)


def validate_slug(slug: str) -> str:
    """Check an explicit slug against SPEC §2.3 and return it lower-cased.

    Lower-case, ``/``-separated segments of letters (any script), digits and ``-``; no
    empty segment, no ``..``, no leading ``/``, no backslash, no control or bidi
    characters, at most 255 characters. Raises ``InvalidParams`` naming the rule.
    """
    problem = None
    if not slug:
        problem = "is empty"
    elif len(slug) > SLUG_MAX_LENGTH:
        problem = f"is longer than {SLUG_MAX_LENGTH} characters"
    elif slug.startswith("/"):
        problem = "starts with '/'"
    elif "\\" in slug:
        problem = "contains a backslash"
    elif any(ch in _BIDI or unicodedata.category(ch)[0] == "C" for ch in slug):
        problem = "contains a control or bidi character"
    elif ".." in slug:
        problem = "contains '..'"
    else:
        for segment in slug.split("/"):
            if not segment:
                problem = "has an empty segment"
                break
            if not _SEGMENT.match(segment) or "_" in segment:
                problem = f"has an invalid segment {segment!r}"
                break
    if problem:
        raise InvalidParams(
            f"Slug {slug!r} {problem}.",
            suggestion=(
                "Use lower-case '/'-separated segments of letters, digits and '-', "
                "e.g. 'people/jane-doe', or omit the slug to derive it from the title."
            ),
            detail={"slug": slug},
        )
    return slug.lower()


def normalize_alias(text: str) -> str:
    """Normalise alias text (SPEC §2.3): NFKC, lower-case, whitespace collapsed, one
    layer of wrapping quotes or brackets stripped."""
    value = unicodedata.normalize("NFKC", text or "").strip()
    if len(value) >= 2 and (value[0], value[-1]) in _WRAPPERS:
        value = value[1:-1]
    value = re.sub(r"\s+", " ", value).strip().lower()
    return value


def estimate_tokens(text: str) -> int:
    """The SPEC §3 token estimate: characters / 4, rounded up (at least 1 for text)."""
    return (len(text) + 3) // 4


def _unstorable(value: str) -> str | None:
    """Why PostgreSQL text cannot hold ``value``: "NUL character" or "lone
    surrogate"; ``None`` when it can."""
    if "\x00" in value:
        return "NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "lone surrogate"
    return None


def _first_unstorable(data: Any, path: str) -> tuple[str, str] | None:
    """The first (field path, problem) of a string in ``data`` (parsed JSON) that
    PostgreSQL text cannot hold, keys included; ``None`` when every string can."""
    if isinstance(data, str):
        problem = _unstorable(data)
        return (path, problem) if problem else None
    if isinstance(data, dict):
        for key, item in data.items():
            where = f"{path}.{key}" if path else str(key)
            found = _first_unstorable(str(key), where) or _first_unstorable(item, where)
            if found:
                return found
    elif isinstance(data, list):
        for n, item in enumerate(data):
            found = _first_unstorable(item, f"{path}.{n}" if path else str(n))
            if found:
                return found
    return None


def refuse_unstorable_text(data: Any, *, where: str = "body") -> None:
    """Raise ``InvalidParams`` naming the field when any string in ``data`` (parsed
    JSON: dicts, lists, strings, numbers) holds what PostgreSQL text cannot: a NUL
    character (``\\u0000``) or a lone UTF-16 surrogate (JSON's ``"\\ud800"``
    escape), which the database or the UTF-8 encoder would refuse later with an
    unhandled or vague error (SPEC §4: bad input gets a clear error, nothing
    written). ``where`` names the input in the message ("body", "arguments")."""
    found = _first_unstorable(data, "")
    if found is None:
        return
    field, problem = found
    if problem == "NUL character":
        message = f"The request {where} holds a NUL character (\\u0000) in '{field}'."
        suggestion = "Remove NUL characters: text cannot hold them."
    else:
        message = (
            f"The request {where} holds a lone surrogate escape (such as \\ud800) "
            f"in '{field}', which is not Unicode text."
        )
        suggestion = (
            "Send UTF-8 text: pair each high surrogate escape with a low one, or "
            "send the character itself."
        )
    raise InvalidParams(
        message,
        suggestion=suggestion,
        detail={"fields": [{"field": field or where, "problem": problem}]},
    )


# A full-text query over more words builds a tsquery deep enough to exceed
# PostgreSQL's stack ("stack depth limit exceeded" at about 20,000 words).
MAX_TSQUERY_WORDS = 256


# PostgreSQL refuses a tsquery word of 2,047 bytes or more ("word is too long in
# tsquery") and never indexes one (to_tsvector skips it), so a longer query word
# can match nothing: it is dropped from the keyword text.
MAX_QUERY_WORD_CHARS = 500


def bounded_query(text: str) -> str:
    """``text`` for a full-text query (SPEC §3 search, §4 recall): cut to its first
    ``MAX_TSQUERY_WORDS`` white-space separated words (a pasted page as a query
    answered 500) without the words longer than ``MAX_QUERY_WORD_CHARS`` (one
    2,047-character word answered 500; no index holds such a word). Text within
    both bounds comes back unchanged; text of only over-long words comes back
    empty."""
    words = text.split()
    kept = [w for w in words if len(w) <= MAX_QUERY_WORD_CHARS]
    if len(kept) == len(words) and len(words) <= MAX_TSQUERY_WORDS:
        return text
    return " ".join(kept[:MAX_TSQUERY_WORDS])
