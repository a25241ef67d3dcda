"""Markdown to safe HTML for the console's page views (SPEC §2.3 pages are markdown).

markdown-it-py (CommonMark plus tables and strikethrough, raw HTML off) renders; nh3
(the ammonia sanitiser) keeps only the tags and attributes a page needs and only
http, https, mailto and mid links. Wiki-links ``[[slug]]`` and ``[[slug|label]]``
become links to the console page of the same source, read as the linked page's
title.
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING

import nh3
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

from brain.models import Page

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

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


def _wiki_links(
    text: str, href: Callable[[str], str], titles: Mapping[str, str] | None = None
) -> str:
    """``[[slug]]`` / ``[[slug|label]]`` as markdown links to ``href(slug)``,
    labelled with the label, else the page's title (``titles``: slug → title),
    else the slug."""

    def link(match: re.Match[str]) -> str:
        target = match.group(1).strip()
        label = match.group(2) or (titles or {}).get(target.strip("/")) or target
        label = label.strip().replace("]", "").replace("[", "")
        return f"[{label}](<{href(target)}>)"

    return _WIKI_LINK.sub(link, text)


def _link_titles(text: str, source_id: str) -> dict[str, str]:
    """Titles of the live pages of ``source_id`` that ``text``'s unlabelled
    wiki-links name by slug (one query): ``{slug: title}``."""
    slugs = {
        m.group(1).strip().strip("/")
        for m in _WIKI_LINK.finditer(text)
        if not m.group(2)
    }
    if not slugs:
        return {}
    rows = (
        Page.objects.filter(
            source_id=source_id, slug__in=slugs, deleted_at__isnull=True
        )
        .exclude(title="")
        .values_list("slug", "title")
    )
    return dict(rows)


def render_markdown(text: str, *, source_id: str | None = None) -> SafeString:
    """``text`` (markdown) as sanitised HTML. With ``source_id``, wiki-links point
    at the console page ``admin:console_page`` of that source and read as the
    linked page's title (``[[people/dana]]`` reads "Dana Reyes")."""
    if source_id is not None:
        text = _wiki_links(
            text or "",
            lambda slug: reverse(
                "admin:console_page", args=[source_id, slug.strip("/") or "-"]
            ),
            _link_titles(text or "", source_id),
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
