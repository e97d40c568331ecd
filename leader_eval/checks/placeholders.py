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
- a name of the suite's own template variables in any of those brackets (``[EVENTS]``).

Near misses that are not placeholders: other single bracketed words (``[OK]``, ``[UPDATE]``),
numbers and letters (``[1]``, ``[x]``, ``[ ]``), Markdown links and references (``[GOAL](url)``,
``[GOAL][1]``), citations (``[Smith 2020]``), Mistral control words (``[TOOL_CALLS]``, which are
tool markup), and anything inside a code span (judged by the leak detector).

Every shape is linear-time: bounded quantifiers that stop at a newline or the bracket's closer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: single upper-case words that only ever appear bracketed as a template's unfilled slot
PLACEHOLDER_WORDS = (
    "GOAL",
    "NAME",
    "TASK",
    "ROOM",
    "AGENT",
    "USER",
    "TOPIC",
    "TARGET",
    "LOCATION",
    "DATE",
    "TIME",
    "MESSAGE",
    "PLACEHOLDER",
    "TODO",
    "TBD",
)
_WORDS = "|".join(PLACEHOLDER_WORDS)
_UPPER_SNAKE = r"[A-Z][A-Z0-9]{0,40}(?:_[A-Z0-9]{1,40}){1,8}"
_LOWER_SNAKE = r"[a-z][a-z0-9]{0,40}(?:_[a-z0-9]{1,40}){1,8}"
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
        r"(?:(?:TODO|TBD):[^\[\]\n]{0,200}|INSERT\b[^\[\]\n]{0,200}|FILL(?:\s{1,3}IN)?\b[^\[\]\n]{0,200}"
        rf"|YOUR [A-Z ]{{1,80}}|{_MISTRAL}(?:{_WORDS}|{_UPPER_SNAKE}|{_LOWER_SNAKE}))\]{_NOT_LINK}",
    ),
    ("<", rf"(?:INSERT\b[^<>\n]{{0,200}}|{_WORDS}|{_UPPER_SNAKE})>"),
)

#: the same shapes as standalone regexes (what ``render.find_placeholders`` searches for)
PLACEHOLDER_PATTERNS: tuple[str, ...] = tuple(re.escape(first) + rest for first, rest in PLACEHOLDER_SHAPES)


def name_shapes(names: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """Shapes for a suite's own template variable names: ``[name]`` and ``{name}`` in any letter
    case, ``<NAME>`` in upper case (a lower-case ``<name>`` is an XML tag; ``{{ name }}`` is
    template syntax already). Names shorter than three characters are skipped: ``[x]`` is a
    checkbox, not a slot."""
    usable = sorted({n for n in names if len(n) >= 3 and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,60}", n)})
    if not usable:
        return ()
    alt = "(?i:" + "|".join(usable) + ")"
    upper = "(?:" + "|".join(n.upper() for n in usable) + ")"
    return (("[", alt + r"\]" + _NOT_LINK), ("<", upper + ">"), ("{", alt + r"\}"))
