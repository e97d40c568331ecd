"""Placeholders: the one definition of unrendered template syntax and placeholder markers.

Render time (``render.py`` refuses to sample a message that holds one) and output time (the leak
detector reports one as ``leak_placeholder``) both read ``PLACEHOLDER_SHAPES``; suites add
their own regexes (``render.placeholder_patterns``) and exemptions
(``render.allowed_placeholders``) to both.

What counts (docs/leakage.md):

- template syntax: ``{{ ... }}``, ``{% ... %}``, ``{# ... #}`` (on one line, up to 200 chars);
- a variable in single braces, padded or not: ``{goal}``, ``{ goal }``, ``{agent_name}``,
  ``{agentName}``, ``{AGENT_NAME}``, ``{GOAL}`` (upper snake case only for the known slots);
- a bracketed or angled name: snake case with at least one underscore (``[AGENT_NAME]``,
  ``<CURRENT_GOAL>``, ``[current_goal]``, ``[ AGENT_NAME ]``), upper kebab case ending in a slot
  noun (``[AGENT-NAME]``, ``<START-DATE>``; not ``[COVID-19]``, ``[FOLLOW-UP]``) or one of
  ``PLACEHOLDER_WORDS`` (``[GOAL]``, ``<NAME>``); and ``[INSERT ...]``, ``[FILL IN ...]``,
  ``[YOUR NAME]``, ``[TODO: ...]``;
- a slot written in words, any letter case (``is_slot_phrase``): prefix words and a slot noun
  (``[Your Name]``, ``[Team Member]``), any words and a strong noun (``[Recipient Name]``,
  ``[Task Description]``), an instruction (``[Insert relevant details]``), a noun and an
  of-phrase (``[Name of the project]``), optionally ``here``; in square brackets, and in angle
  brackets or braces when it starts upper case or with an instruction verb (``<Your Name>``,
  ``{Agent Name}``, ``<insert goal here>``; not ``<tool name>``, a prompt's format metavariable);
- a name of the suite's own template variables in any of those brackets (``[EVENTS]``), a name
  with an underscore in any case, padded, in kebab case or run together (``<agent_name>``,
  ``[agent-name]``, ``{agentName}``).

Near misses that are not placeholders: other bracketed words (``[OK]``, ``[UPDATE]``,
``[insert coin]``, ``[Todo]``), buttons, titles and places (``[Change Name]``, ``[Name of the Wind]``,
``[Meeting Room]``), kebab phrases (``[UP-TO-DATE]``), LaTeX (``\\text{Time}``), a slot phrase that is a
filled form label or a Markdown reference label (``is_filled_label``: ``[Team Role] Scout``),
numbers and letters (``[1]``, ``[x]``, ``[ ]``), Markdown links and references (``[GOAL](url)``,
``[GOAL][1]``), citations (``[Smith 2020]``), Mistral control words (``[TOOL_CALLS]``, which are
tool markup), and anything inside a code span (judged by the leak detector).

Every shape is linear-time: bounded quantifiers that stop at a newline or the bracket's closer.
"""

from __future__ import annotations

import functools
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
        *("message", "team", "project", "company", "city", "email", "role", "member", "deadline", "number"),
        *("position", "signature"),
    )
)
#: the slot nouns that are a slot on their own (``[Name]``); ``[Task]`` alone is a chat label
SLOT_NOUNS_ALONE = frozenset(
    (
        *("name", "goal", "date", "time", "location", "topic", "email", "city", "company", "placeholder"),
        *("recipient", "signature", "username"),
    )
)
#: words that may come before the slot noun (at most three of them)
SLOT_PREFIXES = frozenset(
    (
        *("insert", "fill", "in", "enter", "add", "your", "current", "agent", "agent's", "team", "team's", "user"),
        *("user's", "first", "last", "full", "player", "target", "project", "company", "meeting", "start", "due"),
        *("player's", "specific", "relevant", "recipient", "recipient's", "teammate", "teammate's", "leader"),
        *("leader's", "assigned", "phone", "contact"),
    )
)
#: nouns that are a slot after any one to three words: ``[Recipient Name]``, ``[Task Description]``,
#: ``[GOAL DESCRIPTION]``, ``[Teammate's Name]``
SLOT_HEADS = frozenset(("name", "description", "email", "address", "title"))
#: verbs that open an instruction to fill a slot: ``[Insert relevant details]``, ``[Enter your name]``;
#: the instruction must end with what it asks for (a ``SLOT_NOUNS``/``SLOT_HEADS`` word or
#: ``SLOT_DETAILS``): ``[insert coin]`` is no slot
SLOT_VERBS = frozenset(("insert", "enter", "add", "fill", "describe", "specify", "provide", "write", "type", "put"))
SLOT_DETAILS = frozenset(("details", "detail", "info", "information"))
#: slot nouns that take an "of" phrase: ``[Name of the project]``, ``[Date of the meeting]``
SLOT_OF_HEADS = frozenset(("name", "description", "title", "date", "details", "address"))
#: what an of-phrase must end in: ``[Name of the project]``, ``[Name of recipient]``; not
#: ``[Name of the Wind]``, ``[Title of Liberty]``, ``[Details of the Plan]`` (titles, headings)
SLOT_OF_OBJECTS = frozenset(("meeting", "event", "recipient", "sender", "person", "organization", "teammate", "leader"))
#: an interface verb before a ``SLOT_HEADS`` noun names a button: ``[Change Name]``, ``[Edit Title]``
#: (an instruction verb, ``[Insert Name]``, ``[Enter Name]``, is a slot)
UI_VERBS = frozenset(
    (
        *("change", "edit", "show", "hide", "view", "update", "set", "rename", "copy", "clear", "reset", "save"),
        *("delete", "remove", "sort", "filter", "search", "toggle", "open", "close"),
    )
)
#: nouns of the game world, a slot only after a pronoun or instruction: ``[Your Position]``, not
#: ``[Start Position]``, ``[Meeting Room]``
WORLD_NOUNS = frozenset(("room", "position"))
WORLD_PREFIXES = frozenset(
    (
        *("insert", "fill", "in", "enter", "add", "your", "agent", "agent's", "user", "user's", "recipient"),
        *("recipient's", "teammate", "teammate's", "leader's", "player's", "assigned"),
    )
)


def is_slot_phrase(inner: str) -> bool:
    """Is the text between brackets a slot written in words (any letter case, optionally ending
    in "here"): up to three ``SLOT_PREFIXES`` and a ``SLOT_NOUNS`` word; one to three words and a
    ``SLOT_HEADS`` noun; a ``SLOT_VERBS`` verb, up to four words and what it asks for; a
    ``SLOT_OF_HEADS`` noun, "of" and one to three words, the last a slot noun or
    ``SLOT_OF_OBJECTS``; or two slot nouns joined by "and"/"or"? Hyphens separate words
    (``[Your-Name]``); a number may stand between words or after a single word (``[Agent 1
    Name]``, ``[Name 2]``). ``[insert coin]``, ``[Change Name]``, ``[Meeting Room]`` are not."""
    words = inner.lower().replace("-", " ").split()
    if len(words) == 2 and words[1].isdigit():
        words.pop()  # [Name 2]
    if not words or words[0].isdigit() or words[-1].isdigit():
        return False  # [Mill Street Address 12]: a number ends an address or a title
    words = [w for w in words if not w.isdigit()]
    if words[-1] == "here":
        words.pop()
    if len(words) == 1:
        return words[0] in SLOT_NOUNS_ALONE
    if len(words) < 2 or len(words) > 6:
        return False
    if words[0] in SLOT_VERBS and words[-1] in _ASKED_FOR:
        return True
    if words[0] in SLOT_OF_HEADS and words[1] == "of" and 3 <= len(words) <= 5 and words[-1] in _OF_OBJECTS:
        return True
    if len(words) == 3 and words[1] in ("and", "or") and words[0] in _PAIRED and words[2] in _PAIRED:
        return True  # [Date and Time], [Name or Role]
    if len(words) > 4:
        return False
    if words[-1] in WORLD_NOUNS:
        return all(w in WORLD_PREFIXES for w in words[:-1])
    return (words[-1] in SLOT_HEADS and words[0] not in UI_VERBS) or (
        words[-1] in SLOT_NOUNS and all(w in SLOT_PREFIXES for w in words[:-1])
    )


_ASKED_FOR = SLOT_NOUNS | SLOT_HEADS | SLOT_DETAILS
_OF_OBJECTS = SLOT_NOUNS | SLOT_HEADS | SLOT_OF_OBJECTS
# [Time and Place] is a heading; [Date and Time] a slot
_PAIRED = (SLOT_NOUNS | SLOT_HEADS) - {"place"}


def _alternation(words: frozenset[str]) -> str:
    return "|".join(sorted(words, key=lambda w: (-len(w), w)))


# the same rule as a regex, for render-time checks (the leak detector runs the cheaper
# ``SLOT_CANDIDATE`` and ``is_slot_phrase``: a case-insensitive alternation tried at every "["
# cost it a microsecond per bracket)
_PHRASE_WORD = r"[a-z'][a-z']{0,40}"
# between two words: spaces or hyphens, and numbers standing between them ([Agent 1 Name])
_SEP = r"[\s-]{1,3}(?:[0-9]{1,9}[\s-]{1,3}){0,3}"
_HERE = rf"(?:{_SEP}here)?"
_SLOT_PHRASE = (
    rf"(?i:(?:(?:{_alternation(SLOT_PREFIXES)}){_SEP}){{1,3}}(?:{_alternation(SLOT_NOUNS - WORLD_NOUNS)}){_HERE}"
    rf"|(?:(?:{_alternation(WORLD_PREFIXES)}){_SEP}){{1,3}}(?:{_alternation(WORLD_NOUNS)}){_HERE}"
    rf"|(?!(?:{_alternation(UI_VERBS)})[\s-])(?:{_PHRASE_WORD}{_SEP}){{1,3}}(?:{_alternation(SLOT_HEADS)}){_HERE}"
    rf"|(?:{_alternation(SLOT_VERBS)})(?:{_SEP}{_PHRASE_WORD}){{0,4}}{_SEP}(?:{_alternation(_ASKED_FOR)}){_HERE}"
    rf"|(?:{_alternation(SLOT_OF_HEADS)}){_SEP}of(?:{_SEP}{_PHRASE_WORD}){{0,2}}{_SEP}(?:{_alternation(_OF_OBJECTS)}){_HERE}"
    rf"|(?:{_alternation(_PAIRED)}){_SEP}(?:and|or){_SEP}(?:{_alternation(_PAIRED)}){_HERE}"
    rf"|(?:{_alternation(SLOT_NOUNS_ALONE)})(?:[\s-]{{1,3}}[0-9]{{1,9}}|{_HERE}))"
)
_SLOT_CHARS = r"[A-Za-z0-9'\- ]{1,60}+"
#: what the leak detector matches after "[" before asking ``is_slot_phrase`` (padding allowed:
#: ``[ Your Name ]``)
SLOT_CANDIDATE = rf"(?=[ \t]{{0,3}}[A-Za-z]){_SLOT_CHARS}\](?![\[(])"
#: the same after "<" and "{": ``<Your Name>``, ``<YOUR NAME>``, ``{Agent Name}``, ``{Name}``,
#: ``<insert goal here>``. These need an upper-case first letter or a ``SLOT_VERBS`` verb first:
#: in lower case, ``<name>``, ``<time>``, ``<b>`` are HTML/XML tags and ``<tool name>``,
#: ``<your message>`` are how a prompt spells a format ("Reply with {"tool": "<tool name>", ...}")
_BRACED_SLOT_GUARD = rf"(?=[A-Z]|(?:{_alternation(SLOT_VERBS)})\s)"
# a brace right after a letter, digit or backslash is LaTeX: \text{Time}, \textbf{Goal}
_NOT_LATEX = r"(?<![A-Za-z0-9\\])"
SLOT_CANDIDATES: tuple[tuple[str, str], ...] = (
    ("[", SLOT_CANDIDATE),
    ("<", _BRACED_SLOT_GUARD + _SLOT_CHARS + ">"),
    ("{", r"(?<![A-Za-z0-9\\]\{)" + _BRACED_SLOT_GUARD + _SLOT_CHARS + r"\}"),
)

# possessive (no backtracking into a run that cannot end well): "[INSERT " * 50000 stays cheap
_UPPER_SNAKE = r"[A-Z][A-Z0-9]{0,40}+(?:_[A-Z0-9]{1,40}+){1,8}+"
_LOWER_SNAKE = r"[a-z][a-z0-9]{0,40}+(?:_[a-z0-9]{1,40}+){1,8}+"
# upper kebab case whose last segment names a slot: [AGENT-NAME], <START-DATE>; each segment starts
# with a letter and the last is a slot noun, so [COVID-19], [GPT-4], [UTF-8], [FOLLOW-UP] are not
# or in a slot noun and HERE ([NAME-HERE]); a function word in it makes it a phrase: [UP-TO-DATE],
# [SAVE-THE-DATE], [YOU-ARE-HERE]
_KEBAB_LAST = (
    *("NAME", "GOAL", "DATE", "LOCATION", "TOPIC", "EMAIL", "ID", "DESCRIPTION", "DETAILS", "TITLE", "ROLE"),
    *("NUMBER", "ADDRESS"),
)
KEBAB_SLOT_NOUNS = _KEBAB_LAST  # for the leak scanner's leads (checks/leakage.py)
_KEBAB_FUNCTION_WORDS = "TO|OF|THE|A|AN|ARE|IS|AT|IN|ON|UP|OUT|BY|FOR|AND|OR"
_UPPER_KEBAB = (
    # a hyphen after the first segment first: the function-word check is costly at every letter
    r"(?=[A-Z][A-Z0-9]{0,40}+-)"
    rf"(?!(?:[A-Z0-9]{{1,41}}-){{0,8}}(?:{_KEBAB_FUNCTION_WORDS})-)"
    r"[A-Z][A-Z0-9]{0,40}+(?:-[A-Z][A-Z0-9]{0,40}+){1,8}+(?:"
    + "|".join(f"(?<=-{w})|(?<=[^A-Z0-9]{w}-HERE)" for w in _KEBAB_LAST)
    + ")"
)
# lower camel case in braces: {agentName}, {currentGoal} (a template variable; prose has none), a
# first part of two letters or more: {iPhone}, {eBay} are names
# and a lower-case letter or digit in every hump: {macOS} is a name
_LOWER_CAMEL = r"[a-z][a-z0-9]{1,40}+(?:[A-Z][a-z0-9]{1,40}+){1,8}+"
# possessive: what follows never starts with a blank, and retrying shorter pads made "[   " * N slow
_PAD = r"[ \t]{0,3}+"
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
    (
        "{",
        rf"{_PAD}(?:current_goal|goal|agent_name|room|name|task|{_WORDS}|AGENT_NAME|CURRENT_GOAL|{_LOWER_SNAKE}"
        rf"|{_LOWER_CAMEL}|placeholder){_PAD}\}}",
    ),
    (
        "[",
        r"(?=[A-Za-z])(?:(?:TODO|TBD):[^\[\]\n]{0,200}+|INSERT\b[^\[\]\n]{0,200}+|FILL(?:\s{1,3}IN)?\b[^\[\]\n]{0,200}+"
        rf"|YOUR [A-Z ]{{1,80}}+|{_WORDS}|{_MISTRAL}{_UPPER_SNAKE}|{_LOWER_SNAKE})\]{_NOT_LINK}",
    ),
    ("<", rf"(?:INSERT\b[^<>\n]{{0,200}}+|{_WORDS}|placeholder|{_UPPER_SNAKE}|{_UPPER_KEBAB})>"),
    # padded ([ AGENT_NAME ]) and kebab ([AGENT-NAME]) bracketed slots
    # (the blanks are possessive and a letter must follow: the words were tried after every "[   ")
    (
        "[",
        rf"(?:[ \t]{{1,3}}+(?=[A-Za-z_])(?:{_WORDS}|{_UPPER_SNAKE}|{_LOWER_SNAKE}){_PAD}"
        rf"|{_UPPER_KEBAB})\]{_NOT_LINK}",
    ),
)

#: the same shapes as standalone regexes (what ``render.find_placeholders`` searches for), and
#: the slot-in-words rule of ``is_slot_phrase`` as a regex, angled, braced and (last) bracketed
PLACEHOLDER_PATTERNS: tuple[str, ...] = (
    *(re.escape(first) + rest for first, rest in PLACEHOLDER_SHAPES),
    rf"<{_BRACED_SLOT_GUARD}{_SLOT_PHRASE}>",
    rf"{_NOT_LATEX}\{{{_BRACED_SLOT_GUARD}{_SLOT_PHRASE}\}}",
    rf"\[{_PAD}{_SLOT_PHRASE}{_PAD}\]{_NOT_LINK}",
)


#: words that keep a line-start slot a slot whatever follows it (``[Your Name] Ada``, ``[Agent
#: Name]: hi all``): the model knows who speaks and to whom; an instruction is never filled
_UNFILLED = (
    frozenset(("your", "yours", "agent", "agent's", "user", "user's", "teammate", "teammate's", "here")) | SLOT_VERBS
)
_LINE_START = re.compile(r"[ \t]{0,8}(?:(?:[-*>]|[0-9]{1,3}[.)])[ \t]{1,3})?")
_LINK_DESTINATION = r"(?:<|[a-z][a-z0-9+.-]{1,20}:|/|\.{1,2}/|#)"  # <url>, https:, mailto:, /path, ./path, #anchor
_LABEL_VALUE = re.compile(r":?[ \t]{1,3}(?=\S)")


_REFERENCE = re.compile(rf"(?:^|\n)[ ]{{0,3}}(\[[^\[\]\n]{{1,62}}\]):[ \t]{{0,3}}{_LINK_DESTINATION}")


@functools.lru_cache(maxsize=4)
def _reference_labels(text: str, lo: int) -> frozenset[str]:
    """The Markdown reference labels ``text[lo:]`` defines, once per text (a string's hash is
    cached, so each later hit in the same text costs a lookup, not a scan)."""
    if "]:" not in text:
        return frozenset()
    return frozenset(m.group(1) for m in _REFERENCE.finditer(text[lo:]))


def is_filled_label(text: str, start: int, end: int, lo: int = 0) -> bool:
    """Is the bracketed slot phrase ``text[start:end]`` (``[Team Name]``) a label, not a slot?

    - a Markdown reference link: ``text`` defines it on a line of its own with a URL or path
      (``[Job Description]: https://...``), so ``[Job Description]`` is the link's text;
    - a form label with its value, written in title or sentence case (``[Team Name]``, not
      ``[TEAM NAME]``), not naming the speaker or addressee nor instructing (``_UNFILLED``:
      ``[Your Name] Ada`` stays a slot): at the start of a line (``lo`` or after a newline,
      optionally indented and after a list marker) followed on the same line by an optional colon,
      a space and a value that starts with a capital letter, a digit, "(", "@" or "+" (``[Team
      Role] Scout``, ``- [Quest Title]: The Lost Mill``); elsewhere a colon, a space and a value
      that starts with a digit, "(", "@" or "+" (``Office [Phone Number]: 555-0199``)."""
    inner = text[start + 1 : end - 1].strip()
    if text[start] != "[" or not inner:
        return False
    if text[start:end] in _reference_labels(text, lo):
        return True
    if not inner[0].isupper() or inner == inner.upper():
        return False
    m = _LABEL_VALUE.match(text, end)
    if m is None or not _UNFILLED.isdisjoint(inner.lower().replace("-", " ").split()):
        return False
    first = text[m.end()]
    if first.isdigit() or first in "(@+":
        return text[end] == ":" or _at_line_start(text, start, lo)
    return first.isupper() and _at_line_start(text, start, lo)


def _at_line_start(text: str, start: int, lo: int) -> bool:
    # looks back at most 16 characters (the longest _LINE_START): linear on a long line of hits
    k = max(lo, start - 16)
    nl = text.rfind("\n", k, start)
    if nl == -1 and k > lo:
        return False
    return _LINE_START.fullmatch(text, k if nl == -1 else nl + 1, start) is not None


# what a name shape may start with (after its padding), as the (?=[A-Za-z_]) it had before
_FOLDABLE = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"


def _same_letter(c: str, letter: str) -> bool:
    return re.fullmatch(f"(?i:{re.escape(letter)})", c) is not None


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
        # each name also in kebab case and run together (camelCase in any case: agentName);
        # the guard keeps the case-insensitive alternation from being tried after every bracket
        spellings = sorted({v for n in snake for v in (n, *(n.replace("_", c) for c in ("-", "", " ")))}, key=len)[::-1]
        # the first letters the names can start with, as the case-insensitive match sees them
        # (a set test is cheaper than trying each spelling at every bracket)
        firsts = "".join(sorted({c for c in _FOLDABLE if any(_same_letter(c, n[0]) for n in spellings)}))
        alt = _PAD + f"(?=[{re.escape(firsts)}])(?i:" + "|".join(map(re.escape, spellings)) + ")" + _PAD
        shapes += [("[", alt + r"\]" + _NOT_LINK), ("<", alt + ">"), ("{", alt + r"\}")]
    if single:
        exact = "(?:" + "|".join(single) + ")"
        both = "(?:" + "|".join(sorted({*single, *(n.upper() for n in single)})) + ")"
        shapes += [("[", exact + r"\]" + _NOT_LINK), ("{", both + r"\}")]
    return tuple(shapes)
