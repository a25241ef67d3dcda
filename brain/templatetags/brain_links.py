"""Template filters for links and stored JSON: ``{{ url|safe_href }}`` is the URL when
its scheme is http, https or mid, else empty (SPEC §8, see ``brain.hrefs``);
``{{ value|json_table }}`` renders stored JSON as escaped HTML tables
(``brain.display.json_table``), never as a Python repr."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from brain.display import json_table as _json_table
from brain.hrefs import safe_href as _safe_href

register = template.Library()


@register.filter
def safe_href(url: object) -> str:
    """The URL when it may be an ``href`` (http, https, mid), else ``""``."""
    return _safe_href(url)


@register.filter
def json_table(value: object) -> SafeString:
    """Stored JSON (a dict, list or scalar) as escaped HTML: ``json_table``."""
    return _json_table(value)
