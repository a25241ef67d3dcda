"""Mention extraction for push context (SPEC §9): pure text, no database.

From the last few conversation turns this finds what might name a page:

- **strong** candidates: runs of capitalised tokens (Unicode upper-case initial, camel
  case such as ``iPhone``, all caps), and every contiguous sub-span of up to 4 tokens
  of a run, so "Ask Sarah Chen" offers "Sarah Chen", "Sarah" and "Chen";
- **handles** (``@sarahc``, at least 2 characters) and e-mail addresses;
- **names** in the forms mail exports write them (``Harlow, Quinn``, Exchange
  ``Harlow, Quinn </O=…>``, Notes ``Ines Varga/HOU/CORP@CORP``), keyed
  ``quinn harlow`` and matched through exact aliases only;
- **weak** candidates: lower-case words (and runs of up to 3) that are neither
  stopwords nor common English words; the resolver matches them only through exact
  aliases.

Stopwords (pronouns, articles, auxiliaries, greetings, honorifics) never count.
Common words (weekdays, months, meeting words, sentence-opening verbs, and words that
double as names or brands such as "Will", "Mark" or "Apple") are dropped as
single-token candidates when every occurrence in the window is sentence-initial.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from brain.people import name_keys
from brain.text import normalize_alias

# Turns read per call (SPEC §9: "the last 4 turns").
WINDOW_TURNS = 4
# Longest capitalised span offered as one candidate (SPEC §9: "up to 4 tokens").
MAX_SPAN_TOKENS = 4
# Longest lower-case span offered to the alias arm.
MAX_WEAK_TOKENS = 3
# Per-turn caps keep a pasted document from costing more than a chat turn.
MAX_STRONG_PER_TURN = 64
MAX_WEAK_PER_TURN = 32
# Only the tail of a very long turn is read (characters).
MAX_TURN_CHARS = 8000

# Never a mention, in any case or position; a capitalised one ends a run.
HARD_STOPWORDS = frozenset(
    """
    a an the i me my mine myself we us our ours ourselves you your yours yourself
    yourselves he him his himself she her hers herself it its itself they them their
    theirs themselves this that these those who whom whose which what when where why
    how is are was were be been being am do does did doing done have has had having
    can could would should shall must might ought and or but nor if then else so
    than too very of in on at to for from by with without about above below between
    into onto over under after before during through until upon via per as not no
    yes yeah yep nope hi hello hey dear thanks thank thx ty please pls ok okay sure
    cheers regards best sincerely re fwd fw cc bcc mr mrs ms mx dr prof sir madam
    there here all any some each every both either neither few more most other such
    only own same just also again once out up down off now still even ever
    i'm i'll i've i'd we're we'll we've we'd you're you'll you've you'd he's she's
    it's it'll that's there's here's what's who's let's don't doesn't didn't can't
    won't isn't aren't wasn't weren't haven't hasn't hadn't wouldn't shouldn't
    couldn't
    """.split()
)

# Common words that open sentences: weekdays, months, time and meeting words, verbs.
SOFT_WORDS = frozenset(
    """
    monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu
    thur thurs fri sat sun january february march july september october november
    december jan feb mar apr jun jul aug sep sept oct nov dec today tomorrow
    yesterday tonight morning afternoon evening night week weekend month year
    quarter q1 q2 q3 q4 h1 h2 eod eow asap fyi btw tbd eta am pm utc
    meeting meetings call calls sync standup update updates notes note agenda
    minutes review kickoff draft deck doc docs email emails message chat thread
    invite invitation reminder followup follow-up recap summary plan plans
    new next last first second third final great good nice sounds sorry quick
    maybe perhaps yes also well right cool awesome perfect agreed noted done
    ask tell ping send invite remind schedule book check follow loop reach talk
    speak meet see get make keep add share forward reply confirm let give take
    put find look bring help tag text cancel move push pull set sign call write
    read note draft prepare prep fix update discuss introduce thank congrats
    congratulations welcome happy hope hoping glad looking
    """.split()
)

# Common English words that are also names or brands: a capitalised one mid-sentence
# is a candidate, a sentence-initial one alone is not ("Will you...", "Mark the date").
NAME_WORDS = frozenset(
    """
    will mark bill grace hope may june april august rose frank joy faith summer
    autumn art pat sue guy rich drew chase hunter jack penny ruby dawn eve iris
    jade lily violet ray max sunny cliff dean earl miles wade reed sandy rob don
    gene bob sterling amber crystal angel christian hazel holly ivy jasmine olive
    pearl robin skye storm apple amazon target square shell oracle slack notion
    stripe linear zoom signal meta visa gap subway delta united mercury atlas
    apollo phoenix orion titan sage ember echo nova river forest brook stone
    """.split()
)

# Lower-case words allowed inside a capitalised run: "Bank of America".
CONNECTORS = frozenset(
    {"of", "de", "van", "von", "der", "den", "da", "del", "la", "le", "du"}
)

_TOKEN = re.compile(
    r"(?P<email>[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+)"
    r"|(?<![\w@])(?P<handle>@\w[\w.\-]*\w)"
    r"|(?P<word>\w(?:[\w'’\-.]*\w)?)",
    re.UNICODE,
)
# A gap between tokens containing one of these starts a new sentence.
_SENTENCE_BREAK = re.compile(r"[.!?;:\n\r•·()\[\]{}\"“”—–]|^\s*[-*>#]\s")
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)


COMMON_WORDS_FILE = Path(__file__).resolve().parent / "data" / "common_words.txt"


@functools.cache
def _common_words() -> frozenset[str]:
    """Common English words: lower-case dictionary words among the 20,000 most
    frequent (``brain/data/common_words.txt``, about 11,500 words; see its README).

    A lower-case common word never counts as a mention ("apple", "target", "atlas"),
    while a rare one that is an exact alias does ("lumen", "acme"). Loaded once.
    """
    return frozenset(COMMON_WORDS_FILE.read_text(encoding="utf-8").split())


def is_common_word(word: str) -> bool:
    """True when ``word`` (any case) is a common English word."""
    return word.lower() in _common_words()


@dataclass(frozen=True)
class Token:
    """One token of a turn: ``kind`` is ``word``, ``handle`` or ``email``."""

    text: str
    kind: str
    cap: bool
    lower: bool
    sentence_initial: bool
    # True when whitespace only (no newline) separates it from the previous token.
    joined: bool


@dataclass
class Run:
    """A maximal run of capitalised tokens (``strong``) or lower-case words (``weak``)
    in one turn; spans and the name-neighbour check refer to positions in it."""

    turn: int
    kind: str
    tokens: list[Token]

    def name_like(self, pos: int) -> bool:
        """True when the token at ``pos`` could be part of a person's name."""
        if pos < 0 or pos >= len(self.tokens):
            return False
        token = self.tokens[pos]
        word = token.text.lower()
        return (
            token.cap
            and len(word) >= 2
            and word not in SOFT_WORDS
            and word not in HARD_STOPWORDS
            and word not in CONNECTORS
        )


@dataclass
class Span:
    """One candidate occurrence: ``key`` is the alias-normalised text.

    ``kind`` is ``strong``, ``weak``, ``handle``, ``email`` or ``name``; ``run`` indexes
    ``MentionWindow.runs`` (-1 for handles and e-mails); ``start``/``end`` are token
    positions in the run (end exclusive).
    """

    key: str
    surface: str
    turn: int
    kind: str
    run: int
    start: int
    end: int
    sentence_initial: bool = False

    @property
    def length(self) -> int:
        """Tokens covered."""
        return self.end - self.start


@dataclass
class MentionWindow:
    """Everything extracted from the window: runs, candidate spans, turn count."""

    n_turns: int
    runs: list[Run] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)

    @property
    def newest_turn(self) -> int:
        """Index of the newest turn in the window."""
        return self.n_turns - 1

    def newest_spans(self) -> list[Span]:
        """The candidate spans of the newest turn (the only turn that may push)."""
        return [s for s in self.spans if s.turn == self.newest_turn]

    def keys(self, *kinds: str) -> set[str]:
        """Distinct keys of the spans of the given kinds (all kinds when none)."""
        return {s.key for s in self.spans if not kinds or s.kind in kinds}


def tokenize(text: str) -> list[Token]:
    """Split a turn into tokens, with sentence-initial and run-joining flags."""
    tokens: list[Token] = []
    prev_end = 0
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup or "word"
        raw = m.group(kind)
        gap = text[prev_end : m.start()]
        prev_end = m.end()
        if kind == "word":
            raw = _POSSESSIVE.sub("", raw)
        letters = [ch for ch in raw if ch.isalpha()]
        cap = bool(letters) and (
            raw[0].isupper() or (raw[0].islower() and any(ch.isupper() for ch in raw))
        )
        lower = bool(letters) and raw == raw.lower()
        initial = not tokens or bool(_SENTENCE_BREAK.search(gap))
        joined = bool(tokens) and gap.strip(" \t") == "" and "\n" not in gap
        tokens.append(Token(raw, kind, cap, lower, initial, joined))
    return tokens


def _runs(tokens: list[Token], turn: int) -> tuple[list[Run], list[Run]]:
    """Group tokens into strong (capitalised) and weak (lower-case) runs."""
    strong: list[Run] = []
    weak: list[Run] = []
    current: list[Token] = []
    current_weak: list[Token] = []

    def flush() -> None:
        # A run never ends on a connector ("Bank of").
        while (
            current and current[-1].text.lower() in CONNECTORS and not current[-1].cap
        ):
            current.pop()
        if current:
            strong.append(Run(turn, "strong", list(current)))
        current.clear()

    def flush_weak() -> None:
        if current_weak:
            weak.append(Run(turn, "weak", list(current_weak)))
        current_weak.clear()

    for i, token in enumerate(tokens):
        word = token.text.lower()
        is_strong = token.kind == "word" and token.cap and word not in HARD_STOPWORDS
        is_connector = (
            token.kind == "word"
            and not token.cap
            and word in CONNECTORS
            and bool(current)
            and i + 1 < len(tokens)
            and tokens[i + 1].cap
            and tokens[i + 1].joined
        )
        if is_strong or is_connector:
            if current and not token.joined:
                flush()
            if not current and is_connector:
                continue
            current.append(token)
        else:
            flush()
        if token.kind == "word" and token.lower:
            if current_weak and not token.joined:
                flush_weak()
            current_weak.append(token)
        else:
            flush_weak()
    flush()
    flush_weak()
    return strong, weak


def _weak_ok(word: str) -> bool:
    """A lower-case word that may name something: at least 3 characters, not a
    stopword, not a listed common word, not a common English word."""
    return (
        len(word) >= 3
        and word not in HARD_STOPWORDS
        and word not in SOFT_WORDS
        and word not in NAME_WORDS
        and not word.isdigit()
        and not is_common_word(word)
    )


def extract_mentions(turns: Sequence[str]) -> MentionWindow:
    """Extract candidate mentions from the last ``WINDOW_TURNS`` turns (SPEC §9).

    ``turns`` is oldest first; the result's turn indexes are 0..n-1 within the
    window (n-1 = newest). Pure function: no database access.
    """
    texts = [t[-MAX_TURN_CHARS:] for t in list(turns)[-WINDOW_TURNS:]]
    window = MentionWindow(n_turns=len(texts))
    for turn, text in enumerate(texts):
        tokens = tokenize(text)
        strong_runs, weak_runs = _runs(tokens, turn)
        for token in tokens:
            if token.kind == "handle":
                key = normalize_alias(token.text)
                window.spans.append(Span(key, token.text, turn, "handle", -1, 0, 1))
            elif token.kind == "email":
                key = normalize_alias(token.text)
                window.spans.append(Span(key, token.text, turn, "email", -1, 0, 1))
        n_strong = 0
        for run in strong_runs:
            run_id = len(window.runs)
            window.runs.append(run)
            size = len(run.tokens)
            for length in range(min(MAX_SPAN_TOKENS, size), 0, -1):
                for start in range(size - length + 1):
                    end = start + length
                    part = run.tokens[start:end]
                    if (
                        part[0].text.lower() in CONNECTORS
                        or part[-1].text.lower() in CONNECTORS
                    ):
                        continue
                    surface = " ".join(t.text for t in part)
                    if length == 1 and len(surface) < 2:
                        continue
                    if n_strong >= MAX_STRONG_PER_TURN:
                        break
                    n_strong += 1
                    window.spans.append(
                        Span(
                            normalize_alias(surface),
                            surface,
                            turn,
                            "strong",
                            run_id,
                            start,
                            end,
                            sentence_initial=part[0].sentence_initial,
                        )
                    )
        n_weak = 0
        for run in weak_runs:
            run_id = len(window.runs)
            window.runs.append(run)
            words = [t.text for t in run.tokens]
            size = len(words)
            for length in range(min(MAX_WEAK_TOKENS, size), 0, -1):
                for start in range(size - length + 1):
                    chosen = words[start : start + length]
                    if chosen[0] in HARD_STOPWORDS or chosen[-1] in HARD_STOPWORDS:
                        continue
                    if any(w in HARD_STOPWORDS for w in chosen):
                        continue
                    if not any(_weak_ok(w) for w in chosen):
                        continue
                    if n_weak >= MAX_WEAK_PER_TURN:
                        break
                    n_weak += 1
                    surface = " ".join(chosen)
                    window.spans.append(
                        Span(
                            normalize_alias(surface),
                            surface,
                            turn,
                            "weak",
                            run_id,
                            start,
                            start + length,
                        )
                    )
        for surface, key in name_forms(text):
            window.spans.append(Span(key, surface, turn, "name", -1, 0, 1))
    _drop_sentence_initial_common_words(window)
    return window


# Export forms of a person's name that tokens split apart (issue 25): Exchange
# "Harlow, Quinn </O=…>", Notes "Ines Varga/HOU/CORP@CORP", and "Harlow, Quinn".
_CAP = r"[A-Z][\w'’.-]*"
_NAME_FORMS = (
    re.compile(
        rf"{_CAP}(?:\s{_CAP}){{0,2}},\s*{_CAP}(?:\s{_CAP}){{0,2}}\s*</O=[^>\s]*>?"
    ),
    re.compile(rf"{_CAP}(?:\s{_CAP}){{1,3}}/[A-Za-z0-9][\w/-]*@[A-Za-z][\w-]*"),
    re.compile(r"\b[A-Z][a-z][\w'’-]*,\s[A-Z][a-z][\w'’-]*(?:\s[A-Z]\.?)?(?![\w'’-])"),
)
MAX_NAME_FORMS_PER_TURN = 16


def name_forms(text: str) -> list[tuple[str, str]]:
    """(surface, alias key) for each export form of a person's name in ``text``
    (``brain.people``: "Last, First", X.500, Notes), matched by exact alias only."""
    found: list[tuple[str, str]] = []
    taken: list[tuple[int, int]] = []
    for pattern in _NAME_FORMS:
        for m in pattern.finditer(text):
            if any(m.start() < end and start < m.end() for start, end in taken):
                continue
            keys = name_keys(m.group(0))
            if keys and " " in keys[0]:
                taken.append((m.start(), m.end()))
                found.append((m.group(0), keys[0]))
            if len(found) >= MAX_NAME_FORMS_PER_TURN:
                return found
    return found


def _drop_sentence_initial_common_words(window: MentionWindow) -> None:
    """Drop single-token common-word candidates seen only at sentence starts.

    "Will you send it?" offers nothing; "ask Will" offers "Will" (and then every
    "Will" in the window counts, since one mid-sentence sighting shows a name).
    """
    common = {
        s.key
        for s in window.spans
        if s.kind == "strong"
        and s.length == 1
        and (s.key in SOFT_WORDS or s.key in NAME_WORDS or s.key in HARD_STOPWORDS)
    }
    if not common:
        return
    seen_mid = {
        s.key
        for s in window.spans
        if s.key in common and s.length == 1 and not s.sentence_initial
    }
    window.spans = [
        s
        for s in window.spans
        if not (
            s.kind == "strong"
            and s.length == 1
            and s.key in common
            and s.key not in seen_mid
        )
    ]
