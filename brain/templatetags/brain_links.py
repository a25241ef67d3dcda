"""Template filters for links (SPEC §8): ``{{ url|safe_href }}`` is the URL when its
scheme is http, https or mid, else empty (see ``brain.hrefs``)."""

from __future__ import annotations

from django import template

from brain.hrefs import safe_href as _safe_href

register = template.Library()


@register.filter
def safe_href(url: object) -> str:
    """The URL when it may be an ``href`` (http, https, mid), else ``""``."""
    return _safe_href(url)
