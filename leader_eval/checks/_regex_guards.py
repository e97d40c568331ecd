"""Regex analysis for the leak scanner's guards (checks/leakage.py, ``_lead``): the characters a
pattern can start with, its top-level alternatives, and the lookaheads built from them.

Everything here reads patterns with the regex module's own parser and answers conservatively: a
character set that may hold more than the pattern can start with, never less; "unsure" where a
construct is not handled (the caller then builds no guard). An optimisation: never a reason to
fail. Linear in the pattern, run once per suite config.
"""

from __future__ import annotations

import re
import sys
from typing import Any

try:
    from re import _parser as sre_parse  # type: ignore[attr-defined]  # Python 3.11+
except ImportError:  # pragma: no cover
    import sre_parse


def precheck(first: str, lookahead: str) -> str:
    """A lookahead that rejects most positions in one or two set tests before ``lookahead`` is
    tried: the characters its alternatives can start with, and, for the alternatives that cannot
    have ``first`` as their second character, not ``first`` after it ("[A" * 500000 passed the set
    at every bracket and tried the leads). An alternative that starts with ``first`` itself
    (``<<SYS>>``, ``{{ goal }}``) is kept whole, so that a run of ``first`` fails on the set."""
    alternatives = _alternatives(lookahead)
    own = [a for a in alternatives if _opens_with(a, re.escape(first))]
    # an alternative that opens with a run of blanks (``blanks_then``'s second one) is tested on
    # the character after its blanks too: "x < y" passed the blank and tried every alternative
    # (the same blanks share one test: their bodies' first characters in one set)
    heads: dict[str, list[str]] = {}
    for blanks, firsts in filter(None, map(_padded_test, alternatives)):
        heads.setdefault(blanks, []).append(firsts)
    padded = [f"{blanks}[{''.join(sets)}]" for blanks, sets in heads.items()]
    if sum(map(len, heads.values())) < sum(1 for a in alternatives if _PADDED.match(a)):
        padded = []  # one whose body's first characters are unknown: tested on its blank, as before
    others = [a for a in alternatives if a not in own and not (padded and _PADDED.match(a))]
    rests = [_after_first(a) for a in others]
    never = [a for a, rest in zip(others, rests, strict=True) if rest is not None and not _may_open_with(rest, first)]
    maybe = [a for a in others if a not in never]
    sets = [first_class("|".join(part)) if part else "" for part in (never, maybe)]
    if None in sets:
        return ""
    tests = [f"[{sets[0]}](?!{re.escape(first)})"] * bool(sets[0]) + [f"[{sets[1]}]"] * bool(sets[1])
    return "(?=" + "|".join(tests + padded + own) + ")"


# blanks_then's padded alternative: a blank, at most ``most - 1`` more (possessive), then its body
_PADDED = re.compile(r"(\[ \\t\]|\\s)\1\{0,(\d+)\}\+(.+)\Z", re.DOTALL)


def _padded_test(alternative: str) -> tuple[str, str] | None:
    """For a padded alternative, (its blanks, the first characters of its body): the blanks and
    then one of those characters is a necessary condition of it, tested in a few steps. None for
    any other alternative, or a body whose first characters are unknown."""
    m = _PADDED.match(alternative)
    if m is None:
        return None
    blank, most, body = m.groups()
    firsts = first_class(body)
    return None if not firsts else (f"{blank}{blank}{{0,{most}}}+", firsts)


def _after_first(alternative: str) -> str | None:
    """``alternative`` without the character or set it opens with, or None when it opens otherwise."""
    if alternative.startswith("[") and not alternative.startswith("[^"):
        end = _set_end(alternative)
        rest = alternative[end:] if end > 0 else None
    elif alternative[:1] == "\\" and alternative[1:2] in (*_ESCAPED_LITERALS, "s", "d", "w"):
        rest = alternative[2:]
    elif alternative[:1] and alternative[0] not in "\\[(.^$|?*+{":
        rest = alternative[1:]
    else:
        return None
    return None if rest is None or rest[:1] in ("?", "*", "+", "{") or not rest else rest


def _opens_with(alternative: str, char: str) -> bool:
    """Does ``alternative`` open with the (escaped) character ``char``, not quantified?"""
    return alternative.startswith(char) and alternative[len(char) : len(char) + 1] not in ("?", "*", "+", "{")


def _alternatives(pattern: str) -> list[str]:
    """``pattern`` split at its top-level "|" (outside groups and sets)."""
    out, depth, in_set, i, start = [], 0, False, 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_set:
            in_set = c != "]"
        elif c == "[":
            in_set = True
            if pattern.startswith("]", i + 1) or pattern.startswith("^]", i + 1):
                i += 1 + (pattern[i + 1] == "^")  # a "]" first in a set is a character
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            out.append(pattern[start:i])
            start = i + 1
        i += 1
    out.append(pattern[start:])
    return out


def _set_end(pattern: str) -> int:
    """Where the set that opens ``pattern`` ends (after its "]"), or -1."""
    i = 1
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "]" and i > 1:
            return i + 1
        i += 1
    return -1


_ESCAPED_LITERALS = ("|", "{", "}", "[", "]", "(", ")", ".", "\\", " ", "<", ">")


def merged(leads: list[str]) -> str:
    """The alternation of every alternative of ``leads``, with fewer alternatives to try: those that
    differ only in the set they open with are one (``[ab]X|[cd]X`` -> ``[abcd]X``), and those that
    open with the same character share it (``eos>|eop>`` -> ``e(?:os>|op>)``). The regex engine
    tests an alternative's first character or set before entering it, a few instructions each:
    ~35 alternatives cost more than the rest of a rejected "<"."""
    by_tail: dict[str, list[str]] = {}
    by_char: dict[str, list[str]] = {}
    for alt in dict.fromkeys(a for lead in leads for a in _alternatives(lead)):
        end = _set_end(alt) if alt.startswith("[") and not alt.startswith("[^") else -1
        if end > 0 and alt[end : end + 1] not in ("?", "*", "+", "{"):
            by_tail.setdefault(alt[end:], []).append(alt[1 : end - 1])
            continue
        if alt[:1] == "\\" and alt[1:2] in _ESCAPED_LITERALS:
            char, rest = alt[:2], alt[2:]
        elif alt[:1] and alt[0] not in "\\[(.^$|?*+{":
            char, rest = alt[:1], alt[1:]
        else:
            char, rest = alt, ""  # anything else stays as it is
        if rest[:1] in ("?", "*", "+", "{"):
            char, rest = alt, ""  # a quantified first character
        by_char.setdefault(char, []).append(rest)
    out = [f"[{''.join(sets)}]{tail}" for tail, sets in by_tail.items()]
    for char, rests in by_char.items():
        out.append(char + (f"(?:{'|'.join(rests)})" if len(rests) > 1 else rests[0]))
    return "|".join(out)


def blanks_then(body: str, blanks: str = r"[ \t]", most: int = 3) -> str:
    """``blanks{0,most}+body`` as two alternatives that each start with a character set (``body``
    must not start with a blank)."""
    return f"{body}|{blanks}{blanks}{{0,{most - 1}}}+{body}"


_CATEGORIES = {sre_parse.CATEGORY_SPACE: r"\s", sre_parse.CATEGORY_DIGIT: r"\d", sre_parse.CATEGORY_WORD: r"\w"}


_Atom = tuple[Any, Any, bool]  # (LITERAL, code, ignore case) or (IN, set items, ignore case)


def _first_atoms(pattern: str) -> list[_Atom] | None:
    """The characters and sets a match of ``pattern`` can start with (a superset), or None when
    that is not certain (a pattern that can match the empty string, a construct not handled)."""
    try:
        parsed = sre_parse.parse(pattern)
    except Exception:  # an optimisation: never a reason to fail
        return None
    atoms: list[_Atom] = []
    return atoms if _atoms_of(list(parsed), atoms, bool(parsed.state.flags & re.IGNORECASE)) is False else None


def _atoms_of(items: list[tuple[Any, Any]], atoms: list[_Atom], icase: bool) -> bool | None:
    """Add what ``items`` (a sequence) can start with to ``atoms``: False when the sequence cannot
    match empty, True when it can, None when unsure."""
    for op, av in items:
        if op is sre_parse.LITERAL or op is sre_parse.IN:
            atoms.append((op, av, icase))
            return False
        if op is sre_parse.BRANCH:
            empty = False
            for alt in av[1]:
                got = _atoms_of(list(alt), atoms, icase)
                if got is None:
                    return None
                empty = empty or got
            if not empty:
                return False
        elif op in (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT, sre_parse.POSSESSIVE_REPEAT):
            lo, _, body = av
            got = _atoms_of(list(body), atoms, icase)
            if got is None:
                return None
            if lo > 0 and not got:
                return False
        elif op is sre_parse.SUBPATTERN:
            _, add_flags, del_flags, body = av
            inner = (icase or bool(add_flags & re.IGNORECASE)) and not del_flags & re.IGNORECASE
            got = _atoms_of(list(body), atoms, inner)
            if got is None:
                return None
            if not got:
                return False
        elif op is sre_parse.ASSERT and av[0] == 1:
            # a lookahead here: the character here is one its body starts with (when it cannot
            # match empty); what follows it adds nothing that is not already allowed
            probe: list[_Atom] = []
            if _atoms_of(list(av[1]), probe, icase) is False:
                atoms.extend(probe)
                return False
        elif op not in (sre_parse.ASSERT, sre_parse.ASSERT_NOT, sre_parse.AT):  # zero width: go on
            return None
    return True


def first_class(pattern: str) -> str | None:
    """The inside of a character class holding every character a match of ``pattern`` can start
    with (a superset), or None when that is not certain (see ``_first_atoms``; a negated or
    case-folded set; a case-folded non-ASCII character)."""
    parts: list[str] = []
    for op, av, icase in _first_atoms(pattern) or [(None, None, False)]:
        if op is sre_parse.LITERAL:
            folded = _folds(chr(av)) if icase else _class_char(chr(av))
            if folded is None:
                return None
            parts.append(folded)
            continue
        if op is not sre_parse.IN or icase:
            return None
        for iop, iav in av:
            if iop is sre_parse.LITERAL:
                parts.append(_class_char(chr(iav)))
            elif iop is sre_parse.RANGE:
                parts.append(f"{_class_char(chr(iav[0]))}-{_class_char(chr(iav[1]))}")
            elif iop is sre_parse.CATEGORY and iav in _CATEGORIES:
                parts.append(_CATEGORIES[iav])
            else:
                return None
    return "".join(dict.fromkeys(parts))


def _may_open_with(pattern: str, char: str) -> bool:
    """Can a match of ``pattern`` start with ``char`` (True when unsure, or when it can be empty)?"""
    atoms = _first_atoms(pattern)
    return atoms is None or any(_accepts(atom, char) for atom in atoms)


def _accepts(atom: _Atom, char: str) -> bool:
    op, av, icase = atom
    if op is sre_parse.LITERAL:
        return re.fullmatch(f"(?i:{re.escape(chr(av))})", char) is not None if icase else chr(av) == char
    if icase:
        return True  # unsure
    hit, negate = False, False
    for iop, iav in av:
        if iop is sre_parse.NEGATE:
            negate = True
        elif iop is sre_parse.LITERAL:
            hit = hit or chr(iav) == char
        elif iop is sre_parse.RANGE:
            hit = hit or iav[0] <= ord(char) <= iav[1]
        elif iop is sre_parse.CATEGORY and iav in _CATEGORIES:
            hit = hit or re.fullmatch(_CATEGORIES[iav], char) is not None
        else:
            return True  # unsure
    return hit != negate


def _class_char(c: str) -> str:
    return f"\\U{ord(c):08x}"


def _folds(c: str) -> str | None:
    """``c`` and every character a case-insensitive match of ``c`` accepts (ASCII letters: their
    other case and the four non-ASCII characters that fold to some; see ``_LEAD_FIRSTS``)."""
    if not c.isascii():
        return None
    pattern = re.compile(f"(?i:{re.escape(c)})")
    candidates = dict.fromkeys((c, c.lower(), c.upper(), *_ODD_FOLDS))
    return "".join(_class_char(x) for x in candidates if pattern.fullmatch(x))


_ODD_FOLDS = ("\u0130", "\u0131", "\u017f", "\u212a")


# --- compiling the scanner ------------------------------------------------------------------
# A set holding every non-ASCII character, as the leads write it ("[A-Z\u0080-\U0010ffff]"),
# costs the regex compiler ~4 ms: it marks the range's characters one by one in a Python loop
# until past U+FFFF. The scanner holds eight (~20 of its ~35 ms of compile time), compiled once
# per suite config and again for each scanner without some kinds. Written as its complement within
# ASCII ("[^\x00-@\[-\x7f]"), the same set compiles in microseconds. Exact only where case is not
# folded (under IGNORECASE a set is compared after case folding, and a non-ASCII character can
# fold to an ASCII one): a set in a case-folded scope is left as written, and so is every set of
# a pattern this reader does not follow: flags set for the whole pattern (``(?i)``, wherever it
# stands), verbose mode, comments (a ``\)`` does not end one) and conditionals.
_NON_ASCII_UP = 0x80  # a range from at most here to the last code point holds every non-ASCII one
_SCOPE_TOKENS = re.compile(
    r"""\\.                                   # an escaped character (never a set or a group)
      | \(\?([aiLmsux]*)(?:-([imsx]+))?:      # a group that sets or clears flags
      | \(                                    # any other group
      | \)
      | \[(\^?)\]?(?:\\.|[^\]\\])*\]          # a set (a "]" first in it is a character)
    """,
    re.VERBOSE | re.DOTALL,
)
_NOT_READ = re.compile(r"\(\?[aiLmsux]+\)|\(\?#|\(\?\(")  # whole-pattern flags, a comment, a conditional


def cheap_sets(pattern: str, flags: int = 0) -> str:
    """``pattern`` with each set that holds every non-ASCII character written as its complement
    within ASCII, where that matches the same characters (see above); unchanged otherwise."""
    if "10ffff" not in pattern.lower() or flags & (re.IGNORECASE | re.VERBOSE) or _NOT_READ.search(pattern):
        return pattern
    out: list[str] = []
    done = 0
    folded = [False]  # case folding in each open group (the innermost last)
    for m in _SCOPE_TOKENS.finditer(pattern):
        token = m.group()
        if m.group(1) is not None and "x" in m.group(1):
            return pattern  # verbose mode: not read here
        if token.startswith("[") and not m.group(3):
            if not folded[-1]:
                cheap = _complement_set(token)
                if cheap is not None:
                    out += [pattern[done : m.start()], cheap]
                    done = m.end()
        elif m.group(1) is not None:  # (?flags-flags:
            folded.append(("i" in m.group(1) or folded[-1]) and "i" not in (m.group(2) or ""))
        elif token == "(":
            folded.append(folded[-1])
        elif token == ")":
            if len(folded) == 1:
                return pattern  # unbalanced: not read here
            folded.pop()
    return "".join(out) + pattern[done:] if out else pattern


def _complement_set(token: str) -> str | None:
    """``[^...]`` naming the ASCII characters a non-negated set ``token`` lacks, when the set holds
    every non-ASCII character and only literals and ranges; None otherwise."""
    if "10ffff" not in token.lower():
        return None
    try:
        items = sre_parse.parse(token)
    except Exception:  # an optimisation: never a reason to fail
        return None
    if len(items) != 1 or items[0][0] is not sre_parse.IN:
        return None
    ascii_held = bytearray(_NON_ASCII_UP)
    all_non_ascii = False
    for op, av in items[0][1]:
        if op is sre_parse.LITERAL:
            if av < _NON_ASCII_UP:
                ascii_held[av] = 1
        elif op is sre_parse.RANGE:
            lo, hi = av
            if hi == sys.maxunicode and lo <= _NON_ASCII_UP:
                all_non_ascii = True
            for c in range(lo, min(hi, _NON_ASCII_UP - 1) + 1):
                ascii_held[c] = 1
        else:
            return None  # a category (\w, \s: their ASCII part depends on the flags) or a negation
    lacking = [c for c in range(_NON_ASCII_UP) if not ascii_held[c]]
    if not all_non_ascii or not lacking:
        return None
    return "[^" + "".join(f"\\x{c:02x}" for c in lacking) + "]"
