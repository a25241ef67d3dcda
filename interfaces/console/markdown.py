"""Markdown to safe HTML for the console's page views (SPEC §2.3 pages are markdown).

markdown-it-py (CommonMark plus tables and strikethrough, raw HTML off) renders; nh3
(the ammonia sanitiser) keeps only the tags and attributes a page needs and only
http, https, mailto and mid links. Wiki-links ``[[slug]]`` and ``[[slug|label]]``
become links to the console page of the same source.
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING

import nh3
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

if TYPE_CHECKING:
    from collections.abc import Callable

_MD = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(
    ["table", "strikethrough"]
)
_WIKI_LINK = re.compile(r"\[\[([^\]|\n]{1,300})(?:\|([^\]\n]{1,300}))?\]\]")
_TAGS = {
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5",
    "h6", "hr", "li", "ol", "p", "pre", "strong", "table", "tbody", "td", "th",
    "thead", "tr", "ul",
}  # fmt: skip
_ATTRIBUTES = {"a": {"href", "title"}, "td": {"align"}, "th": {"align"}}
_SCHEMES = {"http", "https", "mailto", "mid"}


def _wiki_links(text: str, href: Callable[[str], str]) -> str:
    def link(match: re.Match[str]) -> str:
        target = match.group(1).strip()
        label = (match.group(2) or target).strip().replace("]", "")
        return f"[{label}](<{href(target)}>)"

    return _WIKI_LINK.sub(link, text)


def render_markdown(text: str, *, source_id: str | None = None) -> SafeString:
    """``text`` (markdown) as sanitised HTML. With ``source_id``, wiki-links point
    at the console page ``admin:console_page`` of that source."""
    if source_id is not None:
        text = _wiki_links(
            text,
            lambda slug: reverse(
                "admin:console_page", args=[source_id, slug.strip("/") or "-"]
            ),
        )
    html = _MD.render(text or "")
    clean = nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes=_SCHEMES,
        link_rel="noopener noreferrer",
    )
    return mark_safe(clean)  # sanitised by nh3 just above


def markdown_plain(text: str) -> str:
    """``text`` (markdown) as the plain words a reader sees, for one-line snippets:
    rendered, every tag dropped, entities decoded, white space collapsed (so
    ``## Budget`` reads ``Budget`` and ``[[people/dana]]`` reads ``people/dana``).
    The result is unescaped text: a template escapes it as any string."""
    rendered = _MD.render(_wiki_links(text or "", lambda slug: slug))
    words = nh3.clean(rendered.replace("<", " <"), tags=set())
    return " ".join(html.unescape(words).split())
