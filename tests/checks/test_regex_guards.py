"""``cheap_sets``: the scanner's sets that hold every non-ASCII character, written as their
complement within ASCII where that matches the same characters, and left as written elsewhere."""

from __future__ import annotations

import re

import pytest

from leader_eval.checks._regex_guards import cheap_sets
from leader_eval.checks.leakage import LeakConfig, compile_leak_config

EVERY_CHARACTER = "".join(map(chr, range(0x110000)))
# a set, or an escaped character (skipped: "\[" opens no set)
_SET = re.compile(r"\\.|(\[\^?\]?(?:\\.|[^\]\\])*\])", re.DOTALL)


def _sets(pattern: str) -> list[str]:
    return [m.group(1) for m in _SET.finditer(pattern) if m.group(1)]


def _held(a_set: str) -> list[str]:
    return re.compile(a_set).findall(EVERY_CHARACTER)


def test_each_set_of_the_scanner_holds_the_same_characters_as_written() -> None:
    """Every set the built-in scanner's pattern holds, compared over every code point: the ones
    rewritten hold exactly what they held (surrogates and U+10FFFF included), and the scanners
    written both ways find the same matches."""
    cfg = compile_leak_config(
        LeakConfig(
            special_tokens=("<|im_end|>", "<think>"),
            markers=("[NO CHAT]",),
            placeholder_names=("current_goal", "agent_name"),
            tool_names=("pause",),
        )
    )
    from leader_eval.checks import leakage

    written = leakage._group_by_first_char(list(cfg.entries), list(cfg.leads))
    rewritten = cfg.scanner.pattern
    assert rewritten == cheap_sets(written) and rewritten != written
    before, after = _sets(written), _sets(rewritten)
    assert len(before) == len(after)
    changed = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    assert changed and all(a.startswith("[^") and "10ffff" in b.lower() for b, a in changed)
    for b, a in dict.fromkeys(changed):
        assert _held(a) == _held(b)
    # and in place: the two scanners find the same matches, also on the characters that fold to
    # ASCII (a set rewritten inside a case-folded scope would differ on them)
    plain = re.compile(written)
    folding = "\u212a\u017f\u0130\u0131\u1e9e\ufb05\u2126\u00b5\u03c3\u0345"
    for char in [*map(chr, range(0x180)), *folding, "\udc80", "\U0010ffff"]:
        for text in (f"<{char}x>", f"[{char}]", f"{{{char}}}", f"< {char}>", f"<{char}", f"[{char} y]", f"<|{char}|>"):
            got = [(m.span(), m.lastgroup) for m in cfg.scanner.finditer(text)]
            assert got == [(m.span(), m.lastgroup) for m in plain.finditer(text)], text


@pytest.mark.parametrize(
    ("pattern", "flags"),
    [
        ("(?i:x[A-Z\\u0080-\\U0010ffff])", 0),  # case folded: the set is compared after folding
        ("(?i)x[A-Z\\u0080-\\U0010ffff]", 0),
        ("x[A-Z\\u0080-\\U0010ffff]", re.IGNORECASE),
        ("(?x: x [A-Z\\u0080-\\U0010ffff] )", 0),  # verbose mode: not read
        ("(a)?(?(1)[A-Z\\u0080-\\U0010ffff]|b)", 0),  # a conditional: not read
        # flags for the whole pattern wherever they stand, comments ("\\)" does not end one)
        ("(?s)(?i)[a-z\\x80-\\U0010ffff]", 0),
        ("(?#c)(?i)[a-z\\x80-\\U0010ffff]", 0),
        ("(?i:(?#\\))[a-z\\x80-\\U0010ffff](?#\\)(())", 0),
        ("(?s)(?x)a#[\n[b\\x80-\\U0010ffff]", 0),
        ("[\\w\\u0080-\\U0010ffff]", 0),  # a category: its ASCII part depends on the flags
        ("[^A-Z\\u0080-\\U0010ffff]", 0),  # already negated
        ("[\\x00-\\U0010ffff]", 0),  # every character: no complement to write
        ("[A-Z\\u0100-\\U0010ffff]", 0),  # not every non-ASCII character
    ],
)
def test_a_set_is_left_as_written_where_the_rewrite_is_not_exact_or_not_read(pattern: str, flags: int) -> None:
    assert cheap_sets(pattern, flags) == pattern


@pytest.mark.parametrize(
    "pattern",
    [
        "x[A-Z_\\u0080-\\U0010ffff]y",
        "(?i:a)(?-i:[\\]\\x60-\\U0010ffff])",  # folding ended in its own scope; "]" and "`" in the set
        "(?i:a(?-i:[A-Za-z\\U00000080-\\U0010ffff]))b",
        "\\[x\\(?[a\\u0080-\\U0010ffff]\\)",  # escaped brackets and parentheses open nothing
    ],
)
def test_a_set_holding_every_non_ascii_character_matches_the_same_texts_rewritten(pattern: str) -> None:
    cheap = cheap_sets(pattern)
    assert cheap != pattern and "10ffff" not in cheap.lower()
    probes = ["", "x", "xAy", "x\u212ay", "x\u017fy", "xay", "x]", "a]", "a`", "aK", "ak", "a\u0130", "[x[a\udc80"]
    probes += [f"x{chr(c)}y" for c in range(0x200)] + [f"a{chr(c)}b" for c in range(0x200)]
    for text in probes:
        assert [m.span() for m in re.finditer(cheap, text)] == [m.span() for m in re.finditer(pattern, text)], text
