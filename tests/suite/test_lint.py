"""Lint reports every error of a file in one pass, each at its ``FILE:LINE``; a value a case
inherits is blamed where it is written; an expectation the tool's schema refuses (a case that
can never pass) is an error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from leader_eval.cli.app import main
from leader_eval.errors import SuiteError, SuiteErrors
from leader_eval.suite.load import load_suite
from tests.support.episodes import EPISODE_SUITE, write_repo

SUITE = """\
name: support
protocol: json
sampling: {temperature: 0.7, max_tokens: 48, samples: 1}
scaffold:
  messages:
    - role: system
      content: "You are {{ agent_name }}. Goal: {{ current_goal }}. Tools: {{ tools_json }}"
    - role: user
      content: "{{ request }}"
tools:
  - name: send_message
    parameters:
      type: object
      properties:
        channel: {enum: [general, support]}
        text: {type: string, maxLength: 40}
        priority: {type: integer, minimum: 1, maximum: 5}
        tags: {type: array, items: {type: string}}
        ticket: {$ref: "#/$defs/ticket"}
      required: [channel, text]
      $defs:
        ticket: {type: string, pattern: "^T-[0-9]+$"}
  - name: lookup
    parameters: {type: object, properties: {query: {type: string}}}
defaults:
  vars: {agent_name: Mira, current_goal: help customers}
cases:
  - id: greet
    vars: {request: "Say hi in general."}
    expect:
      calls:
        - tool: send_message
          args: {channel: general}
  - id: escalate
    vars: {request: "Escalate ticket T-1."}
    expect:
      calls:
        - tool: send_message
          args: {channel: support, ticket: T-1}
"""


def _line_of(text: str, needle: str, nth: int = 1) -> int:
    at = -1
    for _ in range(nth):
        at = text.index(needle, at + 1)
    return text[:at].count("\n") + 1


def _lint(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, list[str]]:
    status = main(["lint", "--no-tokens", str(path)])
    captured = capsys.readouterr()
    return status, captured.err.strip().splitlines()


def _errors(lines: list[str], path: Path) -> list[tuple[int, str]]:
    out = []
    for line in lines:
        m = re.match(rf"error: {re.escape(str(path))}:(\d+): (.+)$", line)
        assert m, line
        out.append((int(m.group(1)), m.group(2)))
    return out


# --- every error in one pass ------------------------------------------------------------------

FIVE_WRONG = (
    SUITE.replace(
        "  vars: {agent_name: Mira, current_goal: help customers}\n",
        "  vars: {agent_name: Mira, current_goal: help customers}\nleakage:\n  forbid: ['(unclosed']\n",
    ).replace("args: {channel: general}", "args: {channel: random}")
    + """\
  - id: weighty
    weight: heavy
    vars: {request: "x"}
  - id: greet
    vars: {request: "again"}
  - id: typo
    vars: {request: "look it up"}
    expect:
      calls:
        - tool: lookpu
"""
)


def test_lint_reports_every_error_of_a_file_each_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "support.yaml"
    path.write_text(FIVE_WRONG)
    status, lines = _lint(capsys, path)
    assert status == 2
    found = _errors(lines, path)
    expected = [
        (_line_of(FIVE_WRONG, "(unclosed"), "invalid regular expression"),
        (_line_of(FIVE_WRONG, "args: {channel: random}"), "random"),
        (_line_of(FIVE_WRONG, "weight: heavy"), "weight"),
        (_line_of(FIVE_WRONG, "- id: greet", nth=2), "duplicate case id"),
        (_line_of(FIVE_WRONG, "- tool: lookpu"), "unknown tool 'lookpu'"),
    ]
    assert [line for line, _ in found] == sorted(line for line, _ in expected), lines
    for (line, words), (got_line, message) in zip(sorted(expected), found, strict=True):
        assert got_line == line and words in message, (line, words, message)

    # everywhere else it stays one line: the first error, and how many more there are
    out = tmp_path / "run"
    assert main(["run", str(path), "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "and 4 more errors: leader-eval lint lists them all" in err[0], err
    assert not out.exists()
    with pytest.raises(SuiteErrors) as info:
        load_suite(path)
    assert len(info.value.errors) == 5 and str(info.value).count("\n") == 0


def test_several_schema_errors_are_all_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = SUITE.replace("protocol: json", "protocol: jsn").replace(
        "sampling: {temperature: 0.7,", "sampling: {temperature: hot,"
    )
    path = tmp_path / "s.yaml"
    path.write_text(text)
    status, lines = _lint(capsys, path)
    assert status == 2
    assert [line for line, _ in _errors(lines, path)] == [2, 3]


def test_a_broken_scaffold_is_one_line_not_one_per_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = SUITE.replace('content: "{{ request }}"', 'content: "{{ request.nope() }}"')
    path = tmp_path / "s.yaml"
    path.write_text(text)
    status, lines = _lint(capsys, path)
    assert status == 2 and len(lines) == 1, lines
    [(line, message)] = _errors(lines, path)
    assert line == _line_of(text, "- id: greet") and "(the same in case 'escalate' line" in message


# --- an error a case inherits is reported where the value is written -------------------------


@pytest.mark.parametrize(
    ("value", "words"),
    [("'[INSERT NAME]'", "placeholder"), ("''", "is empty"), ("'{{ agent }}'", "placeholder")],
    ids=["placeholder", "blank", "template_syntax_in_a_value"],
)
def test_an_inherited_default_is_blamed_at_the_defaults_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, words: str
) -> None:
    text = SUITE.replace("vars: {agent_name: Mira,", f"vars: {{agent_name: {value},")
    path = tmp_path / "s.yaml"
    path.write_text(text)
    status, lines = _lint(capsys, path)
    assert status == 2 and len(lines) == 1, lines
    [(line, message)] = _errors(lines, path)
    assert line == _line_of(text, "  vars: {agent_name:")
    assert message.startswith("defaults: vars: agent_name: ") and words in message, message
    assert "inherited by 2 cases: 'greet', 'escalate'" in message


def test_a_case_that_overrides_the_default_is_not_blamed_on_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = SUITE.replace("vars: {agent_name: Mira,", "vars: {agent_name: '[INSERT NAME]',").replace(
        'vars: {request: "Say hi in general."}', 'vars: {request: "Say hi in general.", agent_name: Bo}'
    )
    path = tmp_path / "s.yaml"
    path.write_text(text)
    status, lines = _lint(capsys, path)
    [(_, message)] = _errors(lines, path)
    assert status == 2 and "inherited by 1 case: 'escalate'" in message, message


def test_an_inherited_episode_default_is_blamed_at_the_suite_level_episode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    text = EPISODE_SUITE.replace("forbid_tools: [click_ui]", "forbid_tools: [click_uii]")
    path = write_repo(root, text)
    status, lines = _lint(capsys, path)
    assert status == 2 and len(lines) == 1, lines
    [(line, message)] = _errors(lines, path)
    # the key sits in the suite-level episode: block, not in the cases that inherit it
    assert line == _line_of(text, "forbid_tools: [click_uii]"), message
    assert "'click_uii' is not a declared tool" in message and "(the same in case 'announce_garden'" in message


# --- an expectation the tool's schema refuses can never pass --------------------------------

NEVER = [
    ("outside_the_enum", "{channel: random}", ["channel", "random", "general"]),
    ("wrong_type_for_the_enum", "{channel: 3}", ["channel"]),
    ("over_max_length", "{text: " + "x" * 41 + "}", ["text", "too long"]),
    ("wrong_type", "{priority: high}", ["priority", "integer"]),
    ("over_the_maximum", "{priority: 9}", ["priority", "maximum"]),
    ("bool_for_an_integer", "{priority: true}", ["priority"]),
    ("pattern_through_a_ref", "{ticket: X-1}", ["ticket", "does not match"]),
    ("one_of_all_outside_an_enum", "{channel: {one_of: [random, ops]}}", ["channel", "no value"]),
    ("one_of_all_over_the_maximum", "{priority: {one_of: [7, 8]}}", ["priority", "every one"]),
    ("min_on_a_string", "{text: {min: 2}}", ["'min' needs a number"]),
    ("regex_on_an_integer", "{priority: {regex: '^1'}}", ["'regex' needs a string"]),
    ("regex_no_enum_member_matches", "{channel: {regex: '^ops'}}", ["no value", "channel"]),
    ("contains_no_enum_member", "{channel: {contains: sales}}", ["no value", "channel"]),
    ("mentions_goal_on_an_integer", "{priority: {mentions_goal: true}}", ["'mentions_goal' needs a string"]),
    ("absent_but_required", "{channel: {present: false}}", ["required", "present: false"]),
    ("normalized_but_no_member_equal", "{channel: {equals: Random, normalize: true}}", ["no value"]),
    ("array_item_type", "{tags: {equals: [1]}}", ["tags", "not of type"]),
]

POSSIBLE = [
    ("an_enum_member", "{channel: support}"),
    ("normalized_to_a_member", "{channel: {equals: GENERAL, normalize: true}}"),
    ("one_of_with_one_member", "{channel: {one_of: [random, general]}}"),
    ("an_integer_as_float", "{priority: 2.0}"),
    ("within_bounds", "{priority: {min: 2, max: 4}}"),
    ("regex_an_enum_member_matches", "{channel: {regex: '^gen'}}"),
    ("optional_absent", "{priority: {present: false}}"),
    ("normalized_free_text", "{text: {equals: HELLO, normalize: true}}"),
    ("pattern_through_a_ref", "{ticket: T-42}"),
    ("contains_on_an_array", "{tags: {contains: urgent}}"),
    ("mentions_goal_on_a_string", "{text: {mentions_goal: true}}"),
]


def _with_args(args: str) -> str:
    return SUITE.replace("args: {channel: general}", f"args: {args}")


@pytest.mark.parametrize(("args", "words"), [n[1:] for n in NEVER], ids=[n[0] for n in NEVER])
def test_an_expectation_outside_the_schema_is_refused_at_its_line(tmp_path: Path, args: str, words: list[str]) -> None:
    text = _with_args(args)
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    err = info.value
    assert err.line == _line_of(text, f"args: {args}"), str(err)
    assert "case 'greet' can never pass: send_message: " in err.message, str(err)
    for w in words:
        assert w in err.message, (w, str(err))


@pytest.mark.parametrize("args", [p[1] for p in POSSIBLE], ids=[p[0] for p in POSSIBLE])
def test_an_expectation_some_valid_call_meets_loads(tmp_path: Path, args: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(_with_args(args))
    assert [c.id for c in load_suite(path).cases] == ["greet", "escalate"]


def test_an_episode_goal_outside_the_schema_is_an_unreachable_goal(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    text = EPISODE_SUITE.replace(
        "message: {type: string, minLength: 1}", "message: {type: string, minLength: 1}\n        level: {enum: [1, 2]}"
    ).replace("args: {message: {mentions_goal: true}}", "args: {message: {mentions_goal: true}, level: 3}", 1)
    path = write_repo(root, text)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    assert info.value.line == _line_of(text, "level: 3}")
    assert "case 'announce': unreachable goal: send_message_to_chat: no value" in info.value.message


def test_once_a_file_fails_rendering_the_rest_is_bounded_in_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from leader_eval.suite import lint

    monkeypatch.setattr(lint, "MAX_RENDER_SECONDS_AFTER_AN_ERROR", 0.0)
    text = SUITE.replace('vars: {request: "Say hi in general."}', 'vars: {request: ""}')
    path = tmp_path / "s.yaml"
    path.write_text(text)
    result = lint.lint_file(path)
    assert [type(e) for e in result.errors] == [SuiteError, SuiteError]
    first, stopped = result.errors
    assert "'request' is empty" in str(first)
    assert str(stopped).endswith("1 more case(s) not rendered: lint stopped after 0 s")
    assert stopped.line == _line_of(text, "- id: escalate")  # type: ignore[attr-defined]


def test_episode_cases_after_a_left_out_case_are_still_checked_at_their_own_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    # case 1 fails the schema, case 2 repeats an id, case 3 is an episode with an undeclared goal
    extra = """\
  - id: broken
    weight: heavy
    vars: {current_goal: x}
  - id: announce
    vars: {current_goal: y}
  - id: third
    vars: {current_goal: z}
    episode:
      goal: {tool: nope}
"""
    text = EPISODE_SUITE.replace("cases:\n", "cases:\n" + extra, 1)
    path = write_repo(root, text)
    status, lines = _lint(capsys, path)
    assert status == 2
    found = _errors(lines, path)
    assert found[0] == (_line_of(text, "weight: heavy"), found[0][1]) and "weight" in found[0][1]
    assert (_line_of(text, "goal: {tool: nope}"), "case 'third': unreachable goal: tool 'nope' is not declared") in [
        (line, message.split(" (tools:")[0]) for line, message in found
    ], lines
    first = _line_of(text, "- id: announce")
    assert (_line_of(text, "- id: announce", nth=2), f"duplicate case id 'announce' (first at line {first})") in found
    assert len(found) == 3, lines


def test_a_file_with_thousands_of_errors_prints_a_bounded_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from leader_eval.suite.lint import MAX_PRINTED_ERRORS

    bad = "".join(f"  - id: c{i}\n    weight: heavy\n" for i in range(MAX_PRINTED_ERRORS + 50))
    path = tmp_path / "s.yaml"
    path.write_text(SUITE + bad)
    status, lines = _lint(capsys, path)
    assert status == 2 and len(lines) == MAX_PRINTED_ERRORS + 1
    assert lines[-1] == f"error: {path}: 50 more errors not shown"
