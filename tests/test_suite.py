"""Every kind of broken suite: one line naming file and line, exit 2, nothing sampled or written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from leader_eval.cli import main
from leader_eval.errors import SuiteError
from leader_eval.suite import load_suite, suite_schema
from tests.conftest import MINIMAL_SUITE, SUITES


def _replace(old: str, new: str, count: int = 1, nth: int = 1):
    def f(text: str) -> str:
        assert old in text, old
        if nth == 1:
            return text.replace(old, new, count)
        parts = text.split(old)
        return old.join(parts[:nth]) + new + old.join(parts[nth:])

    return f


# (id, mutation, expected line, words the message must contain)
BROKEN = [
    ("bad_yaml", _replace("protocol: json", "protocol: [json"), 4, ["invalid YAML"]),
    ("wrong_type", _replace("samples: 2}", "samples: two}"), 4, ["sampling/samples", "'two'"]),
    (
        "unknown_tool",
        _replace("- tool: send_message_to_chat", "- tool: send_mesage", nth=2),
        36,
        ["unknown tool", "send_mesage"],
    ),
    (
        "invalid_tool_schema",
        _replace(
            "      type: object\n      properties:\n        message",
            "      type: objekt\n      properties:\n        message",
        ),
        18,
        ["not a valid JSON Schema"],
    ),
    ("duplicate_case_id", _replace("- id: goal", "- id: hello"), 31, ["duplicate case id", "hello"]),
    ("template_syntax", _replace('"{{ request }}"', '"{{ request }"'), 13, ["template syntax error"]),
    (
        "missing_variable",
        _replace("current_goal: plant a garden, ", ""),
        31,
        ["missing template variable", "current_goal"],
    ),
    ("unknown_key", _replace("protocol: json", "protocl: json"), 3, ["protocl"]),
    (
        "invalid_regex",
        _replace(
            "    expect:\n      calls:\n        - tool: send_message_to_chat\n  - id: goal",
            "    expect:\n      forbid: ['(unclosed']\n      calls:\n        - tool: send_message_to_chat\n  - id: goal",
        ),
        29,
        ["invalid regular expression"],
    ),
    ("template_file_missing", _replace('content: "{{ request }}"', "file: nope.j2"), 13, ["template file", "nope.j2"]),
    (
        "duplicate_yaml_key",
        _replace("protocol: json\n", "protocol: json\nprotocol: hermes\n"),
        4,
        ["duplicate key", "protocol"],
    ),
    ("empty_variable", _replace('request: "Say hello to the team."', 'request: ""'), 26, ["request", "empty"]),
    (
        "placeholder_left",
        _replace('request: "Say hello to the team."', 'request: "[INSERT greeting here]"'),
        26,
        ["placeholder", "[INSERT greeting here]"],
    ),
    (
        "unknown_argument",
        _replace("message: {mentions_goal: true}", "messge: {mentions_goal: true}"),
        38,
        ["no argument", "messge"],
    ),
    ("bad_protocol", _replace("protocol: json", "protocol: xml"), 3, ["protocol", "'xml'"]),
]


@pytest.mark.parametrize(("name", "mutate", "line", "words"), BROKEN, ids=[b[0] for b in BROKEN])
def test_lint_reports_file_line_and_exits_2(tmp_path: Path, capsys, name, mutate, line, words) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(mutate(MINIMAL_SUITE))
    status = main(["lint", "--no-tokens", str(path)])
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert len(err.splitlines()) == 1, err
    m = re.match(rf"error: {re.escape(str(path))}:(\d+): (.*)", err)
    assert m, err
    assert int(m.group(1)) == line, err
    for w in words:
        assert w in m.group(2), err


@pytest.mark.model
@pytest.mark.parametrize(("name", "mutate", "line", "words"), BROKEN, ids=[b[0] for b in BROKEN])
def test_run_on_broken_suite_samples_nothing(tmp_path: Path, capsys, name, mutate, line, words) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(mutate(MINIMAL_SUITE))
    out = tmp_path / "run"
    status = main(["run", str(path), "--out", str(out), "--seed", "1", "-q"])
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert f"{path}:{line}:" in err
    assert not out.exists()


def test_missing_goal_names_template_location(tmp_path: Path, capsys) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(_replace("current_goal: plant a garden, ", "")(MINIMAL_SUITE))
    assert main(["lint", "--no-tokens", str(path)]) == 2
    err = capsys.readouterr().err
    assert "'current_goal'" in err and "(used at " in err and ":9)" in err


def test_flagship_and_example_suites_are_valid() -> None:
    for p in [SUITES / "leader_core.yaml", *sorted((SUITES / "examples").glob("*.yaml"))]:
        suite = load_suite(p)
        assert suite.cases


def test_flagship_suite_covers_failure_modes() -> None:
    suite = load_suite(SUITES / "leader_core.yaml")
    assert len(suite.cases) >= 20
    tags = {t for c in suite.cases for t in c.tags}
    assert {"action_channel", "leakage", "goal", "pause", "planning"} <= tags
    # every case must supply the goal: the scaffold shows it and a blank would fake a failure
    assert all(c.vars.get("current_goal") for c in suite.cases)


def test_content_hash_changes_with_template_file(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    tpl = tmp_path / "templates" / "sys.j2"
    tpl.write_text("You are {{ agent_name }}. Goal: {{ current_goal }}.")
    path = tmp_path / "s.yaml"
    path.write_text(
        MINIMAL_SUITE.replace(
            "      content: |\n        You are {{ agent_name }}. Current goal: {{ current_goal }}.\n",
            "      file: sys.j2\n      # was inline\n",
        ).replace(
            '        Tools: {{ tools_json }}\n        Reply with one JSON object like {"tool": "send_message_to_chat", "arguments": {"message": "hi"}}.\n',
            "",
        )
    )
    h1 = load_suite(path).content_hash
    tpl.write_text("You are {{ agent_name }}. The goal: {{ current_goal }}.")
    assert load_suite(path).content_hash != h1


def test_schema_is_published_and_is_draft_2020_12() -> None:
    schema = suite_schema()
    assert schema["$schema"].endswith("2020-12/schema")
    assert "cases" in schema["required"]


def test_suite_error_is_one_line() -> None:
    err = SuiteError("a.yaml", 3, "bad\nthing")
    assert str(err) == "a.yaml:3: bad thing"
