"""Placeholders: the one definition of unrendered template syntax and placeholder markers.

Render time (``render.py`` refuses to sample a message that holds one) and output time (the leak
detector reports one as ``leak_placeholder``) both read ``PLACEHOLDER_SHAPES``; suites add
their own regexes (``render.placeholder_patterns``) and exemptions
(``render.allowed_placeholders``) to both.

What counts (docs/leakage.md):

- template syntax: ``{{ ... }}``, ``{% ... %}``, ``{# ... #}`` (on one line, up to 200 chars);
- a variable in single braces: ``{goal}``, ``{agent_name}``, ``{AGENT_NAME}``, ``{GOAL}`` (upper
  snake case only for the known slots);
- a bracketed or angled name: snake case with at least one underscore (``[AGENT_NAME]``,
  ``<CURRENT_GOAL>``, ``[current_goal]``) or one of ``PLACEHOLDER_WORDS`` (``[GOAL]``,
  ``<NAME>``); and ``[INSERT ...]``, ``[FILL IN ...]``, ``[YOUR NAME]``, ``[TODO: ...]``;
- a slot written in words, in brackets, any letter case: up to three prefix words (``your``,
  ``insert``, ``current``, ``agent's``, ...) and a slot noun (``SLOT_NOUNS``), optionally
  ``here``: ``[Your Name]``, ``[Agent Name]``, ``[insert goal here]``, ``[Date]``;
- a name of the suite's own template variables in any of those brackets (``[EVENTS]``).

Near misses that are not placeholders: other bracketed words (``[OK]``, ``[UPDATE]``,
``[insert coin]``, ``[Todo]``),
numbers and letters (``[1]``, ``[x]``, ``[ ]``), Markdown links and references (``[GOAL](url)``,
``[GOAL][1]``), citations (``[Smith 2020]``), Mistral control words (``[TOOL_CALLS]``, which are
tool markup), and anything inside a code span (judged by the leak detector).

Every shape is linear-time: bounded quantifiers that stop at a newline or the bracket's closer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: single upper-case words that appear bracketed only as a template's unfilled slot (``[TASK]``,
#: ``[UPDATE]``, ``[USER]`` also serve as chat labels: not here)
PLACEHOLDER_WORDS = (
    "GOAL",
    "NAME",
    "DATE",
    "TIME",
    "LOCATION",
    "TOPIC",
    "PLACEHOLDER",
    "TODO",
    "TBD",
)
_WORDS = "|".join(PLACEHOLDER_WORDS)
#: what a template slot written in words names (``[Your Name]``, ``[insert goal here]``)
SLOT_NOUNS = frozenset(
    (
        *("name", "goal", "task", "room", "agent", "user", "topic", "target", "location", "place", "date", "time"),
        *("message", "team", "project", "company", "city", "email"),
    )
)
#: the slot nouns that are a slot on their own (``[Name]``); ``[Task]`` alone is a chat label
SLOT_NOUNS_ALONE = frozenset(("name", "goal", "date", "time", "location", "topic", "email", "city", "company"))
#: words that may come before the slot noun (at most three of them)
SLOT_PREFIXES = frozenset(
    (
        *("insert", "fill", "in", "enter", "add", "your", "current", "agent", "agent's", "team", "team's", "user"),
        *("user's", "first", "last", "full", "player", "target", "project", "company", "meeting", "start", "due"),
    )
)


def is_slot_phrase(inner: str) -> bool:
    """Is the text between brackets a slot written in words: up to three ``SLOT_PREFIXES``, a
    ``SLOT_NOUNS`` word, optionally "here" (any letter case)? ``[insert coin]`` is not."""
    words = inner.lower().split()
    if words and words[-1] == "here":
        words.pop()
    if len(words) == 1:
        return words[0] in SLOT_NOUNS_ALONE
    return 2 <= len(words) <= 4 and words[-1] in SLOT_NOUNS and all(w in SLOT_PREFIXES for w in words[:-1])


def _alternation(words: frozenset[str]) -> str:
    return "|".join(sorted(words, key=lambda w: (-len(w), w)))


# the same rule as a regex, for render-time checks (the leak detector runs the cheaper
# ``SLOT_CANDIDATE`` and ``is_slot_phrase``: a case-insensitive alternation tried at every "["
# cost it a microsecond per bracket)
_SLOT_PHRASE = (
    rf"(?i:(?:(?:{_alternation(SLOT_PREFIXES)})\s{{1,3}}){{1,3}}(?:{_alternation(SLOT_NOUNS)})(?:\s{{1,3}}here)?"
    rf"|(?:{_alternation(SLOT_NOUNS_ALONE)})(?:\s{{1,3}}here)?)"
)
#: what the leak detector matches after "[" before asking ``is_slot_phrase``
SLOT_CANDIDATE = r"(?=[A-Za-z])[A-Za-z' ]{1,60}+\](?![\[(])"

# possessive (no backtracking into a run that cannot end well): "[INSERT " * 50000 stays cheap
_UPPER_SNAKE = r"[A-Z][A-Z0-9]{0,40}+(?:_[A-Z0-9]{1,40}+){1,8}+"
_LOWER_SNAKE = r"[a-z][a-z0-9]{0,40}+(?:_[a-z0-9]{1,40}+){1,8}+"
# Mistral's control words are bracketed upper snake case too; they are tool markup
_MISTRAL = r"(?!/?(?:TOOL_CALLS|TOOL_RESULTS|TOOL_CONTENT|AVAILABLE_TOOLS|CALL_ID|SYSTEM_PROMPT)\])"
# a bracket that opens a Markdown link or reference is a link's text, not a slot
_NOT_LINK = r"(?![\[(])"

#: (first character, rest of the regex): the shapes, split so the leak detector can group its
#: one combined scanner by first character (docs/performance.md)
PLACEHOLDER_SHAPES: tuple[tuple[str, str], ...] = (
    ("{", r"\{[^{}\n]{0,200}\}\}"),
    ("{", r"%[^%\n]{0,200}%\}"),
    ("{", r"#[^#\n]{0,200}#\}"),
    # upper snake case in braces only for the known slots: {NORTH_BARN_X} inside a broken JSON
    # call is the model's garbage, not an unfilled slot (tests/corpus/real)
    ("{", rf"(?:current_goal|goal|agent_name|room|name|task|{_WORDS}|AGENT_NAME|CURRENT_GOAL|{_LOWER_SNAKE})\}}"),
    (
        "[",
        r"(?=[A-Za-z])(?:(?:TODO|TBD):[^\[\]\n]{0,200}+|INSERT\b[^\[\]\n]{0,200}+|FILL(?:\s{1,3}IN)?\b[^\[\]\n]{0,200}+"
        rf"|YOUR [A-Z ]{{1,80}}+|{_MISTRAL}(?:{_WORDS}|{_UPPER_SNAKE}|{_LOWER_SNAKE}))\]{_NOT_LINK}",
    ),
    ("<", rf"(?:INSERT\b[^<>\n]{{0,200}}+|{_WORDS}|{_UPPER_SNAKE})>"),
)

#: the same shapes as standalone regexes (what ``render.find_placeholders`` searches for), and
#: the slot-in-words rule of ``is_slot_phrase`` as a regex
PLACEHOLDER_PATTERNS: tuple[str, ...] = (
    *(re.escape(first) + rest for first, rest in PLACEHOLDER_SHAPES),
    rf"\[{_SLOT_PHRASE}\]{_NOT_LINK}",
)


def name_shapes(names: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """Shapes for a suite's own template variable names (``{{ name }}`` is template syntax
    already). A name with an underscore (``agent_name``) in any bracket and letter case:
    ``[agent_name]``, ``[AGENT_NAME]``, ``{Agent_Name}``, ``<AGENT_NAME>`` (a lower-case ``<name>``
    is an XML tag). A one-word name (``team``, ``events``) only as written or upper-cased in
    braces and as written in square brackets: ``{team}``, ``{TEAM}``, ``[team]``; ``[TEAM]`` and
    ``[Team]`` also serve as chat labels. Names shorter than three characters are skipped: ``[x]``
    is a checkbox, not a slot."""
    usable = sorted({n for n in names if len(n) >= 3 and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,60}", n)})
    snake = [n for n in usable if "_" in n.strip("_")]
    single = [n for n in usable if n not in snake]
    shapes: list[tuple[str, str]] = []
    if snake:
        # the guard keeps the case-insensitive alternation from being tried after every bracket
        alt = "(?=[A-Za-z_])(?i:" + "|".join(snake) + ")"
        upper = "(?:" + "|".join(n.upper() for n in snake) + ")"
        shapes += [("[", alt + r"\]" + _NOT_LINK), ("<", upper + ">"), ("{", alt + r"\}")]
    if single:
        exact = "(?:" + "|".join(single) + ")"
        both = "(?:" + "|".join(sorted({*single, *(n.upper() for n in single)})) + ")"
        shapes += [("[", exact + r"\]" + _NOT_LINK), ("{", both + r"\}")]
    return tuple(shapes)
