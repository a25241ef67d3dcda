"""The one rule for links rendered from stored data (SPEC §8): only ``http``,
``https`` and ``mid:`` (a Message-ID, RFC 2392) may become an ``href``.

Evidence links come from mail and from agents; a ``javascript:`` or ``data:`` URL
there must never be clickable in the admin. Templates use the ``safe_href`` filter
(``brain.templatetags.brain_links``); Python admin code calls ``safe_href``.
"""

from __future__ import annotations

from urllib.parse import urlsplit

SAFE_SCHEMES = frozenset({"http", "https", "mid"})


def safe_href(url: object) -> str:
    """Return ``url`` (stripped) when its scheme is http, https or mid, else ``""``.

    Control characters and whitespace inside the scheme (``java\\tscript:``) make it
    unsafe; relative or scheme-less values are refused too.
    """
    if not isinstance(url, str):
        return ""
    value = url.strip()
    if not value or any(ord(c) < 32 or c == "\x7f" for c in value):
        return ""
    try:
        scheme = urlsplit(value).scheme.lower()
    except ValueError:
        return ""
    if scheme not in SAFE_SCHEMES:
        return ""
    if scheme in ("http", "https") and not urlsplit(value).netloc:
        return ""
    return value
