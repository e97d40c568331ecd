"""Broken episode definitions: one line ``FILE:LINE: ...``, exit 2, nothing sampled or written."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from leader_eval.cli.app import main
from leader_eval.errors import SuiteError
from leader_eval.suite.load import load_suite
from tests.support.episodes import EPISODE_SUITE, LOOKUP_FIXTURES, write_repo

SUITES = Path(__file__).resolve().parents[2] / "suites"


def _sub(old: str, new: str) -> Callable[[str], str]:
    def f(text: str) -> str:  # the first occurrence: the first case, or the suite-level key
        assert old in text, old
        return text.replace(old, new, 1)

    return f


def _line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


# (id, change to the suite, change to the fixture file, file the error names, the line's needle, words)
BROKEN = [
    (
        "unknown_tool_in_suite_fixture",
        _sub("  - file: fixtures/tools/lookup.yaml\n", "  - tool: lookup_typo\n    result: {answer: x}\n"),
        None,
        "suite",
        "tool: lookup_typo",
        ["unknown tool", "lookup_typo"],
    ),
    (
        "unknown_tool_in_fixture_file",
        None,
        _sub("- tool: lookup\n  match: {topic: weather}", "- tool: lookup_typo\n  match: {topic: weather}"),
        "fixture",
        "tool: lookup_typo",
        ["unknown tool", "lookup_typo"],
    ),
    (
        "result_breaks_returns_schema",
        None,
        _sub("result: {answer: sunny}", "result: {answer: 42}"),
        "fixture",
        "result: {answer: 42}",
        ["returns schema", "answer", "42"],
    ),
    (
        "sequence_result_breaks_returns_schema",
        None,
        _sub("{result: {answer: build a bridge}}", "{result: {reply: build a bridge}}"),
        "fixture",
        "{result: {reply: build a bridge}}",
        ["returns schema", "answer"],
    ),
    (
        "goal_tool_undeclared",
        _sub("        tool: send_message_to_chat\n", "        tool: send_message\n"),
        None,
        "suite",
        "tool: send_message\n",
        ["unreachable goal", "send_message"],
    ),
    (
        "goal_tool_forbidden",
        _sub("forbid_tools: [click_ui]", "forbid_tools: [click_ui, send_message_to_chat]"),
        None,
        "suite",
        "        tool: send_message_to_chat",
        ["unreachable goal", "forbidden"],
    ),
    (
        "sequence_needs_more_steps",
        _sub(
            "        args: {message: {mentions_goal: true}}\n",
            "        args: {message: {mentions_goal: true}}\n        after: [lookup]\n      max_steps: 1\n",
        ),
        None,
        "suite",
        "        tool: send_message_to_chat",
        ["unreachable goal", "need 2 steps", "max_steps is 1"],
    ),
    (
        "goal_tool_always_errors",
        _sub(
            "episode:\n      goal:",
            "episode:\n      fixtures:\n        - {tool: send_message_to_chat, error: down}\n      goal:",
        ),
        None,
        "suite",
        "        tool: send_message_to_chat",
        ["unreachable goal", "never let it succeed"],
    ),
    (
        "max_steps_zero",
        _sub("  max_steps: 3", "  max_steps: 0"),
        None,
        "suite",
        "  max_steps: 0",
        ["max_steps", "minimum"],
    ),
    (
        "fixture_file_does_not_parse",
        None,
        _sub("  result: {answer: sunny}", "  result: {answer: [sunny}"),
        "fixture",
        "  result: {answer: [sunny}",
        ["invalid YAML"],
    ),
    (
        "fixture_outside_root",
        _sub("file: fixtures/tools/lookup.yaml", "file: ../outside.yaml"),
        None,
        "suite",
        "file: ../outside.yaml",
        ["outside the suite root"],
    ),
    (
        "fixture_absolute_path",
        _sub("file: fixtures/tools/lookup.yaml", "file: /etc/passwd"),
        None,
        "suite",
        "file: /etc/passwd",
        ["absolute"],
    ),
    (
        "fixture_missing",
        _sub("file: fixtures/tools/lookup.yaml", "file: fixtures/tools/nope.yaml"),
        None,
        "suite",
        "file: fixtures/tools/nope.yaml",
        ["not found"],
    ),
    (
        "fixture_matches_unknown_argument",
        None,
        _sub("match: {topic: weather}", "match: {subject: weather}"),
        "fixture",
        "match: {subject: weather}",
        ["unknown argument", "subject"],
    ),
    (
        "fixture_without_result",
        None,
        _sub("  result: {answer: sunny}\n", ""),
        "fixture",
        "- tool: lookup\n  match: {topic: weather}",
        ["exactly one of result, error, sequence"],
    ),
    (
        "bad_regex_in_goal",
        _sub("args: {message: {mentions_goal: true}}", 'args: {message: {regex: "(unclosed"}}'),
        None,
        "suite",
        "args: {message: {regex:",
        ["invalid regular expression"],
    ),
    (
        "bad_regex_in_fixture_match",
        None,
        _sub("match: {topic: weather}", 'match: {topic: {regex: "[a-"}}'),
        "fixture",
        "match: {topic: {regex:",
        ["invalid regular expression"],
    ),
    (
        "template_breaks_on_an_error_result",
        _sub("[you called {{ r.tool }}] {{ r.text }}", "[you called {{ r.tool }}] {{ r.result }}"),
        None,
        "suite",
        "  - id: announce\n",
        ["case 'announce'", "result"],
    ),
    (
        "reserved_episode_var",
        _sub("vars: {current_goal: build a bridge}", "vars: {current_goal: build a bridge, episode: 1}"),
        None,
        "suite",
        "vars: {current_goal",
        ["reserved"],
    ),
]


@pytest.mark.parametrize(
    ("suite_change", "fixture_change", "which", "needle", "words"),
    [b[1:] for b in BROKEN],
    ids=[b[0] for b in BROKEN],
)
def test_broken_episode_is_one_line_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suite_change, fixture_change, which, needle, words
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (tmp_path / "outside.yaml").write_text("- {tool: lookup, result: {answer: x}}\n")
    suite_text = suite_change(EPISODE_SUITE) if suite_change else EPISODE_SUITE
    fixture_text = fixture_change(LOOKUP_FIXTURES) if fixture_change else LOOKUP_FIXTURES
    path = write_repo(root, suite_text, fixture_text)
    fixture_path = root / "fixtures" / "tools" / "lookup.yaml"
    target, text = (path, suite_text) if which == "suite" else (fixture_path, fixture_text)

    status = main(["lint", "--no-tokens", str(path)])
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert len(err.splitlines()) == 1, err
    m = re.match(r"error: (.+):(\d+): (.+)$", err)
    assert m, err
    assert Path(m.group(1)).resolve() == target.resolve()
    assert int(m.group(2)) == _line_of(text, needle), err
    for w in words:
        assert w in m.group(3), err

    # run refuses it before anything is sampled or written
    out = tmp_path / "run"
    assert main(["run", str(path), "--out", str(out), "-q"]) == 2
    assert not out.exists()


def test_the_flagship_and_the_test_suite_lint_clean() -> None:
    suite = load_suite(SUITES / "leader_episodes.yaml")
    episodes = [c for c in suite.cases if c.episode is not None]
    assert len(episodes) >= 10
    assert all(c.episode.max_steps <= 4 for c in episodes)
    assert suite.sampling["samples"] == 2


def test_fixture_files_are_part_of_the_suite_hash(tmp_path: Path) -> None:
    path = write_repo(tmp_path)
    before = load_suite(path).content_hash
    (tmp_path / "fixtures" / "tools" / "lookup.yaml").write_text(LOOKUP_FIXTURES.replace("sunny", "rainy"))
    assert load_suite(path).content_hash != before


def test_symlink_out_of_the_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    path = write_repo(root)
    secret = tmp_path / "secret.yaml"
    secret.write_text("- {tool: lookup, result: {answer: x}}\n")
    link = root / "fixtures" / "tools" / "lookup.yaml"
    link.unlink()
    os.symlink(secret, link)
    with pytest.raises(SuiteError, match="outside the suite root"):
        load_suite(path)
