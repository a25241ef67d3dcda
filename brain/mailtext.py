"""What a page says itself and what it only repeats (issue 26; SPEC §3).

Pages made from mail carry text their writer did not write: quoted history
("> …", "JH> …", "-----Original Message-----" and the message under it, a
forwarded original), the attribution line above a quote ("On …, Ann wrote:"), a
signature below "-- " and a mailing list's footer. The same words then sit on
every page of the thread and on every message of the list, so the page that only
quotes an answer competed with the page that gives it, and a two-line reply under a
twelve-line list footer was embedded mostly as the footer.

``split_secondary`` marks those lines; the chunker keeps them in chunks of their
own (``brain.chunking.chunk_segments``) that search counts as weaker evidence
(``brain.search.SECONDARY_WEIGHT``), so quoted text stays findable when its
original is not in the brain. Pure functions, no database.

This module is the one home of the quoted-history markers: ``loops.definitions``
cuts a message's newest reply with ``history_start`` too.
"""

from __future__ import annotations

import re
from bisect import bisect_right

# Lines that open a forwarded message (Gmail's "---------- Forwarded message
# ---------", Apple Mail's "Begin forwarded message:", Notes' "----- Forwarded by
# Ann/HOU on …", Eudora's "--- begin forwarded text"): the alternatives and the
# compiled line match.
FORWARD_MARKER_ALTERNATIVES = (
    r"-{5,}\s*Forwarded by|-{3,}\s*(?:Forwarded|Begin forwarded) message|"
    r"Begin forwarded message:|-{2,}\s*begin forwarded text"
)
FORWARD_MARKERS = re.compile(rf"^\s*(?:{FORWARD_MARKER_ALTERNATIVES})", re.I | re.M)
# Markers that start a quoted or forwarded message: everything below is history
# (the alternatives, for callers that add their own, and the compiled line match).
HISTORY_MARKER_ALTERNATIVES = (
    rf"-{{2,}}\s*Original Message\s*-{{2,}}|_{{5,}}|{FORWARD_MARKER_ALTERNATIVES}"
)
HISTORY_MARKERS = re.compile(rf"^\s*(?:{HISTORY_MARKER_ALTERNATIVES})", re.I | re.M)
# A client's header block above a quoted message: Outlook ("From: / Sent: / To: /
# Subject:"), Lotus Notes (a sender line, then "To:" and "cc:" / "Subject:" in
# columns, "Sent by:"). A "To:" line followed within four lines by "cc:" or
# "Subject:" starts it; up to three lines just above it (sender, date, "Sent by")
# belong to it.
_HEADER_TO = re.compile(r"(?:^|\s)To:\s", re.I)
# Where ``_HEADER_TO`` can match, searched over the whole text at once: "To:" (any
# case) with whitespace after it and, checked by the caller, the text start or
# whitespace before it (every line break is whitespace).
_HEADER_TO_ANYWHERE = re.compile(r"[Tt][Oo]:(?=\s)")
_HEADER_NEXT = re.compile(r"(?:^|\s)(?:cc|Subject|Sent by):", re.I)
_HEADER_ABOVE = re.compile(
    r"(?:@|\bSent(?: by)?:|\bFrom:|\bDate:|\d{1,2}/\d{1,2}/\d{2,4}|"
    r"\d{1,2}:\d{2}\s*[AP]M|^\s*\S+\s*$)",
    re.I,
)
# "On <date>, <name> wrote:" / "<name> wrote:" above a quote.
ATTRIBUTION = re.compile(r"^\s*On .{0,200}wrote:\s*$|^.{0,80}\bwrote:\s*$", re.I)
# A quoted line: ">", initials or a first name before it as some clients write them
# ("JH> ", "    E> ", Supercite's "Chris> ", "  Guido> "), pine's "--]", or a
# closing parenthesis some old clients quote with (") This isn't a MIME message").
_NAME_QUOTE = r"[A-Za-z]{1,4}>|[A-Z][a-z]{4,9}>(?=\s|$)"
QUOTED_LINE = re.compile(rf"^\s*(?:{_NAME_QUOTE}|>|--\]|\)(?=\s|$))")
_INITIALS_QUOTE = re.compile(rf"^\s*(?:{_NAME_QUOTE}|--\])")
# The signature delimiter ("-- ", often stripped to "--").
_SIGNATURE = re.compile(r"^--\s?$")
# A rule line above a list footer (Mailman's underscores, Yahoo! Groups' dashes
# with a sponsor line) and the words that make the text under it a footer.
_RULE = re.compile(r"^\s*(?:[_=]{10,}|-{10,}.*)\s*$")
_FOOTER_WORDS = re.compile(
    r"mailing list|listinfo|unsubscrib|list maintainer|groups sponsor", re.I
)
FOOTER_LINES = 15
# What a line needs before one of the line patterns above can match it (searched
# over a whole text at once, ``_lines_with``): "wrote:" (``ATTRIBUTION``), ">" or
# "--]" (the quote patterns), "forwarded " (``_FORWARD_LINE``), and a line opening
# with "--" or, after spaces, ten rule characters (``_SIGNATURE``, ``_RULE``).
_WROTE = re.compile(r"wrote:", re.I)
_QUOTE_MARK = re.compile(r">|--\]")
_FORWARDED = re.compile(r"forwarded ", re.I)
_TAIL_MARK = re.compile(r"^(?:--|[^\S\n]*(?:[_=]{10}|-{10}))", re.M)
# A forward's opening line ("--- begin forwarded text", "Forwarded message:"): not
# words of the page's own, so a page that is only a forward stays whole evidence.
_FORWARD_LINE = re.compile(r"^\W*(?:begin )?forwarded (?:text|message)\W*$", re.I)


def header_block_start(text: str) -> int | None:
    """Offset of the first quoted-message header block (Outlook or Notes style) in
    ``text``, or None."""
    hits = [
        m.start()
        for m in _HEADER_TO_ANYWHERE.finditer(text)
        if m.start() == 0 or text[m.start() - 1].isspace()
    ]
    if not hits:
        return None  # no line can open a block: skip the line walk
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    # Only the lines holding a hit can open a block (in order, each once).
    for i in dict.fromkeys(bisect_right(offsets, hit) - 1 for hit in hits):
        line = lines[i]
        if not _HEADER_TO.search(line):
            continue
        if not any(_HEADER_NEXT.search(nxt) for nxt in lines[i + 1 : i + 5]):
            continue
        start = i
        while (
            start > 0
            and i - start < 3
            and lines[start - 1].strip()
            and _HEADER_ABOVE.search(lines[start - 1])
        ):
            start -= 1
        return offsets[start]
    return None


def _lines_with(
    pattern: re.Pattern[str], text: str, limit: int | None = None
) -> list[int]:
    """Indexes, in order and each once, of the lines of ``text`` (lines joined by
    "\\n") where ``pattern`` matches, below ``limit`` when given."""
    found: list[int] = []
    line, pos = 0, 0
    for match in pattern.finditer(text):
        line += text.count("\n", pos, match.start())
        pos = match.start()
        if limit is not None and line >= limit:
            break
        if not found or found[-1] != line:
            found.append(line)
    return found


def history_start(text: str) -> int | None:
    """Offset in ``text`` where quoted or forwarded history begins (an "Original
    Message" or forward marker, a rule of underscores, or a client's header block),
    or None when there is none."""
    marker = HISTORY_MARKERS.search(text)
    block = header_block_start(text)
    found = [o for o in (marker.start() if marker else None, block) if o is not None]
    return min(found) if found else None


def split_secondary(body: str) -> list[tuple[str, bool]]:
    """``body`` cut into runs of whole lines, ``[(text, secondary)]`` in order:
    ``secondary`` is True for text the page repeats rather than says.

    Secondary lines: everything from the start of quoted or forwarded history
    (``history_start``) on; quoted lines ("> …" when the page shows mail structure,
    i.e. an attribution line, "JH> …" and "--] …" always) with the attribution line
    above them; a signature (from a "-- " line to the end of the page's own text);
    a list footer (from a rule line whose next ``FOOTER_LINES`` lines name a mailing
    list or unsubscribing, to the end of the own text); a forward's opening line.
    When nothing else is left — a bare forward — the whole body is the page's own
    text (one run, False).
    Joining the runs' texts with newlines gives back the body's lines.
    """
    lines = (body or "").splitlines()
    if not lines:
        return []
    text = "\n".join(lines)
    cut = history_start(text)
    end = len(lines) if cut is None else text[:cut].count("\n")
    secondary = [i >= end for i in range(len(lines))]
    # Only lines holding what a pattern needs are matched (one search of the whole
    # text each): "wrote:" for an attribution, ">" or "--]" for a quote,
    # "forwarded " for a forward's opening line.
    attributions = {i for i in _lines_with(_WROTE, text) if ATTRIBUTION.match(lines[i])}
    mail_like = cut is not None or bool(attributions)
    for i in sorted(
        attributions
        | set(_lines_with(_QUOTE_MARK, text, end))
        | set(_lines_with(_FORWARDED, text, end))
    ):
        if i >= end:
            break
        line = lines[i]
        quoted = _INITIALS_QUOTE.match(line) or (mail_like and QUOTED_LINE.match(line))
        if quoted or i in attributions or _FORWARD_LINE.match(line):
            secondary[i] = True
    # The first line of the page's own non-blank text: a signature or a footer
    # rule counts only below it.
    first_own = next(
        (i for i in range(end) if not secondary[i] and lines[i].strip()), end
    )
    for i in _lines_with(_TAIL_MARK, text, end):
        line = lines[i]
        if i > first_own and (
            _SIGNATURE.match(line)
            or (
                _RULE.match(line)
                and _FOOTER_WORDS.search("\n".join(lines[i + 1 : i + 1 + FOOTER_LINES]))
            )
        ):
            for j in range(i, end):
                secondary[j] = True
            break
    if all(secondary[i] or not lines[i].strip() for i in range(len(lines))):
        return [(text, False)]
    for i in range(1, len(lines)):
        if not lines[i].strip():  # a blank line stays with the run above it
            secondary[i] = secondary[i - 1]
    runs: list[tuple[str, bool]] = []
    start = 0
    for i in range(1, len(lines) + 1):
        if i == len(lines) or secondary[i] != secondary[start]:
            runs.append(("\n".join(lines[start:i]), secondary[start]))
            start = i
    return runs
