"""Suite regexes: found by walking the suite JSON Schema, refused at lint when catastrophic, and
run in bounded time with Python's own verdicts (issue 20 item 4)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leader_eval.bounded.limits import LimitExceeded
from leader_eval.bounded.regex import compile_suite_regex, finditer_bounded, regex_problem
from leader_eval.errors import SuiteError
from leader_eval.suite.load import load_suite
from leader_eval.suite.records import suite_schema
from tests.conftest import MINIMAL_SUITE


def _regex_keys(node: Any, root: dict[str, Any], path: str = "", seen: frozenset[str] = frozenset()) -> set[str]:
    if not isinstance(node, dict):
        return set()
    if node.get("format") == "regex":
        return {path}
    out: set[str] = set()
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and ref not in seen:
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part]
        out |= _regex_keys(target, root, path, seen | {ref})
    for key, sub in node.get("properties", {}).items():
        out |= _regex_keys(sub, root, f"{path}.{key}", seen)
    if isinstance(node.get("items"), dict):
        out |= _regex_keys(node["items"], root, path + "[]", seen)
    if isinstance(node.get("additionalProperties"), dict):
        out |= _regex_keys(node["additionalProperties"], root, path + ".*", seen)
    for key in ("oneOf", "anyOf", "allOf"):
        for sub in node.get(key, []):
            out |= _regex_keys(sub, root, path, seen)
    return out


MARK = "\\w*\\w*\\w*\\w*z"
# where each key the schema walk finds is put in MINIMAL_SUITE (a key the walk finds without a
# placement here fails the test: a new regex key must be shown to be linted)
PLACES = {
    ".render.placeholder_patterns[]": ("defaults:", f"render:\n  placeholder_patterns: ['{MARK}']\ndefaults:"),
    ".leakage.forbid[]": ("defaults:", f"leakage:\n  forbid: ['{MARK}']\ndefaults:"),
    ".cases[].expect.forbid[]": (
        "    expect:\n      calls:\n        - tool: send_message_to_chat\n  - id: goal",
        f"    expect:\n      forbid: ['{MARK}']\n      calls:\n        - tool: send_message_to_chat\n  - id: goal",
    ),
    ".cases[].expect.require[]": (
        "    expect:\n      calls:\n        - tool: send_message_to_chat\n  - id: goal",
        f"    expect:\n      require: ['{MARK}']\n      calls:\n        - tool: send_message_to_chat\n  - id: goal",
    ),
    ".cases[].expect.calls[].args.*.regex": ("message: {mentions_goal: true}", f"message: {{regex: '{MARK}'}}"),
}
EPISODE_KEYS = {
    ".fixtures[].match.*.regex",
    ".cases[].episode.goal.args.*.regex",
    ".cases[].episode.final.*.regex",
    ".cases[].episode.fixtures[].match.*.regex",
}


# a cases_from: entry's default expectation (the data rows' own are checked as cases: below)
CASES_FROM_KEYS = {
    ".cases_from[].expect.forbid[]",
    ".cases_from[].expect.require[]",
    ".cases_from[].expect.calls[].args.*.regex",
}


def test_the_schema_walk_finds_every_regex_key() -> None:
    schema = suite_schema()
    assert _regex_keys(schema, schema) == set(PLACES) | EPISODE_KEYS | CASES_FROM_KEYS


@pytest.mark.parametrize("where", ["row", "default"])
def test_a_catastrophic_pattern_from_a_data_file_is_refused_at_lint(tmp_path: Path, where: str) -> None:
    """A data row's ``expect`` and a ``cases_from:`` entry's default are linted like inline cases."""
    bad = {"forbid": ["(a+)+$"], "calls": [{"tool": "send_message_to_chat"}]}
    row = {"qid": "q1", "goal": "paint the barn", "expect": bad if where == "row" else None}
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    default = json.dumps(bad if where == "default" else {"calls": [{"tool": "send_message_to_chat"}]})
    head = MINIMAL_SUITE[: MINIMAL_SUITE.index("cases:")]
    text = head + (
        "cases_from:\n  - path: rows.jsonl\n"
        f"    map: {{id: qid, vars: {{current_goal: goal}}, expect: expect}}\n    expect: {default}\n"
    )
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(SuiteError, match="backtrack catastrophically") as err:
        load_suite(path)
    assert "rows.jsonl:1" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("key", sorted(PLACES))
@pytest.mark.parametrize("pattern", [MARK, "(a+)+$", "(a|aa)*b", "\\d+\\.?\\d*", "[a-z]*[a-z0-9]*!"])
def test_a_catastrophic_pattern_is_refused_at_lint_with_its_line(tmp_path: Path, key: str, pattern: str) -> None:
    old, new = PLACES[key]
    text = MINIMAL_SUITE.replace(old, new.replace(MARK, pattern.replace("\\", "\\\\") if False else pattern), 1)
    assert text != MINIMAL_SUITE
    path = tmp_path / "s.yaml"
    path.write_text(text)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if pattern in row)
    with pytest.raises(SuiteError, match="backtrack catastrophically") as err:
        load_suite(path)
    assert err.value.line == line and "\n" not in str(err.value)


CORPUS = [
    r"(?i)\bclick(ed|ing)?\b.{0,40}\b(button|icon|element)",
    r"\w+",
    r"(?i)k",
    r"(?i)i",
    r"foo$",
    r"(?m)^a.$",
    r"\bab\b",
    r"\Bb",
    r"(?<=a)b",
    r"(a)\1",
    r"x*",
    r"(?s)a.b",
    r"(?a)\w+",
    r"[^a-z]+",
    r"\W+",
    r"é+",
    r"\w*\w*z",
]
TEXTS = [
    "Click the Button",
    "kK\u212a iI\u0130\u0131",
    "foo\n",
    "a\nab\n",
    "ab ab, xab abx",
    "é É ab_1 \u0663 中",
    "a\x00b",
    "\ud800ab",
    "",
    "a" * 1000,
]


@pytest.mark.parametrize("pattern", CORPUS)
def test_bounded_matching_gives_pythons_answers(pattern: str) -> None:
    rx, py = compile_suite_regex(pattern), re.compile(pattern)
    for text in TEXTS:
        for pos, end in ((0, len(text)), (1, len(text)), (0, max(len(text) - 1, 0))):
            assert [m.span() for m in rx.finditer(text, pos, end)] == [m.span() for m in py.finditer(text, pos, end)]


@settings(max_examples=300, deadline=None)
@given(
    st.text(st.sampled_from("ab.\\\u0130\ud800 \n"), min_size=1, max_size=4).map(re.escape),
    st.text(st.sampled_from("ab.\\\u0130\ud800 \n"), max_size=30),
    st.integers(0, 31),
    st.integers(0, 31),
)
def test_a_literal_pattern_finds_what_pythons_matcher_finds(pattern: str, text: str, pos: int, end: int) -> None:
    """A pattern of literal characters alone (``require: [hi]``) is looked for with ``str.find``:
    the same leftmost, non-overlapping spans, and the same anchored match, at any bounds."""
    rx, py = compile_suite_regex(pattern), re.compile(pattern)
    assert [m.span() for m in rx.finditer(text, pos, end)] == [m.span() for m in py.finditer(text, pos, end)]
    got, want = rx.match(text, pos, end), py.match(text, pos, end)
    assert (got.span() if got else None) == (want.span() if want else None)


def test_a_pattern_lint_would_refuse_still_runs_in_linear_time() -> None:
    rx = compile_suite_regex(r"\w*\w*\w*\w*z")
    assert rx.linear and rx.search("a" * 100_000) is None


def test_a_json_schema_pattern_is_linted(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        MINIMAL_SUITE.replace("message: {type: string, minLength: 1}", "message: {type: string, pattern: '(a+)+$'}")
    )
    with pytest.raises(SuiteError, match="backtrack catastrophically"):
        load_suite(path)
    assert json.dumps


# --- patterns whose compiled program is huge: both engines write counted repeats out (RE2 ``x{n,m}``
# m times, the regex module ``x{n}`` n times) and each class as its ranges, so a short pattern can
# cost seconds and gigabytes to compile (``(?:a{1000}){1000}{1000}``: a MemoryError at 4 GB)
HUGE_SHAPES = {
    "one char": "a{10000000}",
    "nested counts": "(?:(?:a{1000}){1000}){1000}",
    "group count": "(?:ab){4294967294}",
    "unicode class": "\\w{1000}",
    "class sequence": "\\w" * 300,
    "optional part": "\\w{0,1000}",
    "unbounded minimum": "(?:ab){100000,}",
    "alternation": "(?:[^\\W\\d]|\\d\\w){500}",
    "inside lookahead": "x(?=(?:\\s\\S){100000})",
    "case-folded": "(?i)(?:k\\u212a){100000}",
    "atomic": "(?>(?:ab){200000})",
    "conditional": "(a)?(?(1)(?:b{1000}){1000}|c)",
}


@pytest.mark.parametrize("pattern", HUGE_SHAPES.values(), ids=HUGE_SHAPES.keys())
def test_a_pattern_too_large_to_compile_is_refused_before_any_engine_compiles_it(
    pattern: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from leader_eval.bounded import regex as suite_regex

    def no_compile(*_: object) -> None:
        raise AssertionError("the pattern reached an engine")

    monkeypatch.setattr(suite_regex, "_re2_compile", no_compile)
    monkeypatch.setattr(suite_regex, "compile_suite_regex", no_compile)
    why = suite_regex.regex_problem(pattern)
    assert why is not None and "too large" in why and "\n" not in why


@pytest.mark.parametrize("key", sorted(PLACES))
def test_a_too_large_pattern_is_refused_at_lint_with_its_line_in_every_key(tmp_path: Path, key: str) -> None:
    pattern = "(?:ab){4294967294}"
    old, new = PLACES[key]
    text = MINIMAL_SUITE.replace(old, new.replace(MARK, pattern), 1)
    path = tmp_path / "s.yaml"
    path.write_text(text)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if pattern in row)
    with pytest.raises(SuiteError, match="too large") as err:
        load_suite(path)
    assert err.value.line == line


@pytest.mark.parametrize(
    "pattern", ["[a-f0-9]{64}", ".{0,5000}", "(?:\\w+\\s){1,100}", "\\d{4}-\\d{2}-\\d{2}", "(?i)\\b\\w{2,50}\\b"]
)
def test_ordinary_counted_repeats_stay_accepted(pattern: str) -> None:
    from leader_eval.bounded.regex import regex_problem

    assert regex_problem(pattern) is None


CATASTROPHIC = [
    r"(a+)+$",
    r"(a*)*b",
    r"(\w+)*x",
    r"(a|aa)*b",
    r"(a|a)+",
    r"(.*a){20}",
    r"((ab)*)+c",
    r"(\d+\.?)+x",
    r"^(\w+\s?)*$",
    r"(x+x+)+y",
    r"(?:[a-z]+)+@",
]
SAFE = [
    r"(?i)\bclick(ed|ing)?\b.{0,40}\b(button|icon|element)",
    r"(?i)\bpot\b",
    r"<<[A-Z_]+>>",
    r"(\w+\s)+x",
    r"\[(?:PLACEHOLDER|TODO)\]",
    r"(ab|cd)+",
    r"[A-Z][a-z]+(?: [A-Z][a-z]+)*",
    r"\d{3}-\d{4}",
    r"(foo|bar)*baz",
    r"\{\{.*?\}\}",
    r"(?:\[[A-Z_]+\])+",
    r"(?i)(A|a)+$",
    r"([ab]|b)*c",
]  # single-character branches become a set


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_regex_is_refused(pattern: str) -> None:
    why = regex_problem(pattern)
    assert why and "backtrack catastrophically" in why


@pytest.mark.parametrize("pattern", SAFE)
def test_ordinary_regex_is_accepted(pattern: str) -> None:
    assert regex_problem(pattern) is None
    re.compile(pattern)


def test_suite_regex_runs_with_a_time_bound() -> None:
    """A pattern that slips past the static check still cannot hang the placeholder scan: RE2
    answers it in linear time, and one RE2 cannot run exactly is stopped by the time bound."""
    assert finditer_bounded(r"(a|aa)+c", "a" * 10_000) == []
    with pytest.raises(LimitExceeded, match="took over"):
        finditer_bounded(r"(?=(a|aa)+c)", "a" * 60 + "c" + "a" * 60)
    assert [m.group(0) for m in finditer_bounded(r"<<[A-Z]+>>", "x <<GOAL>> y")] == ["<<GOAL>>"]


def test_every_code_point_is_listed_once_in_order() -> None:
    from leader_eval.bounded.regex import _every_char

    chars = _every_char()
    assert len(chars) == 0x110000
    assert all(ord(chars[c]) == c for c in (0, 0x41, 0xFF, 0x100, 0xD800, 0xDFFF, 0xFFFF, 0x10000, 0x10FFFF))
    assert chars == "".join(map(chr, range(0x110000)))


@pytest.mark.parametrize(
    "klass", [r"[^\s<>]", r"[\s]", r"[\w\-.]", r"[^\d\sa-f]", r"[\S]", r"[^\W_]", r"[\D\s]", r"[^\w]"]
)
@pytest.mark.parametrize("flags", [re.UNICODE, re.ASCII])
def test_a_class_with_categories_holds_the_code_points_pythons_matcher_does(klass: str, flags: int) -> None:
    # the class's ranges are built from each category's alone; they must be what the matcher
    # itself accepts over every code point (the translation to RE2 and regex relies on them)
    import re._parser as sre_parse

    from leader_eval.bounded.regex import _char_ranges, _ranges_of

    (node,) = list(sre_parse.parse(klass, flags))
    assert _ranges_of(node, flags) == _char_ranges(node, flags)
