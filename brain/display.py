"""Readable HTML for stored JSON (SPEC §0 "team admins"): the admin shows ``counts``,
``progress``, ``result`` and ``history`` fields as tables instead of raw JSON.

``json_table(value)`` returns safe HTML: a dict becomes a two-column table (key,
value), a list of dicts a table with one column per key, a list of scalars a
comma-separated line; nested values recurse. Every string is escaped.
"""

from __future__ import annotations

from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

MAX_ROWS = 200


def json_table(value: Any) -> SafeString:
    """``value`` (anything ``json.loads`` returns) as escaped HTML; ``—`` when empty."""
    if value in (None, "", [], {}):
        return mark_safe("—")
    if isinstance(value, dict):
        rows = format_html_join(
            "",
            '<tr><th scope="row">{}</th><td>{}</td></tr>',
            ((k, json_table(v)) for k, v in list(value.items())[:MAX_ROWS]),
        )
        return format_html('<table class="json-table">{}</table>', rows)
    if isinstance(value, list):
        if all(isinstance(item, dict) for item in value):
            keys: list[str] = []
            for item in value[:MAX_ROWS]:
                keys.extend(k for k in item if k not in keys)
            head = format_html_join("", "<th>{}</th>", ((k,) for k in keys))
            body = format_html_join(
                "",
                "<tr>{}</tr>",
                (
                    (
                        format_html_join(
                            "",
                            "<td>{}</td>",
                            ((json_table(item.get(k)),) for k in keys),
                        ),
                    )
                    for item in value[:MAX_ROWS]
                ),
            )
            more = (
                format_html("<p>… and {} more</p>", len(value) - MAX_ROWS)
                if len(value) > MAX_ROWS
                else ""
            )
            return format_html(
                '<table class="json-table"><thead><tr>{}</tr></thead>'
                "<tbody>{}</tbody></table>{}",
                head,
                body,
                more,
            )
        return format_html_join(", ", "{}", ((json_table(v),) for v in value))
    if isinstance(value, bool):
        return mark_safe("yes" if value else "no")
    return format_html("{}", value)


def diff_rows(diff: str) -> list[tuple[str, str]]:
    """A unified diff's lines (``difflib.unified_diff`` text, file headers dropped)
    as ``(kind, line)`` for the ``.diff`` styles: kind ``add`` | ``del`` | ``hunk``
    | ``same``. The console editor and the admin form show a conflict's diff
    (SPEC §4 ``conflict``) with it."""
    return [
        ({"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same"), line)
        for line in diff.splitlines()
        if not line.startswith(("---", "+++"))
    ]
