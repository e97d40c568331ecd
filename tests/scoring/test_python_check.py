"""Users' own Python checks in the scorer: what they receive, how their verdict counts, and that
a check that raises or returns something else is a check error, never a pass."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from leader_eval.scoring.aggregate import case_result
from leader_eval.scoring.api import load_suite
from leader_eval.scoring.python_check import CheckNotBound, bind, coverage_problems
from leader_eval.scoring.scorer import SampleScore, case_scorer
from leader_eval.suite.load import Suite
from leader_eval.types import CheckContext, CheckVerdict, ModelInfo, Sample
from tests.conftest import MINIMAL_SUITE

OUTPUT = '{"tool": "send_message_to_chat", "arguments": {"message": "Hi team, please bring tools!"}}'


ROOT = Path(__file__).resolve().parents[2]


def _suite(checks: str) -> Suite:
    return load_suite(MINIMAL_SUITE + "checks:\n  python:\n" + checks)


def _bound(checks: str, **fns: Callable[[CheckContext], Any]) -> Suite:
    return bind(_suite(checks), {name: (fn, f"tests:{name}", "v1") for name, fn in fns.items()})


def _score(suite: Suite, text: str = OUTPUT, case: int = 0) -> SampleScore:
    c = suite.cases[case]
    scorer = case_scorer(suite, c, "json", ModelInfo(), [], "")
    return scorer.score(Sample(c.id, 0, 0, "k", "ok", text=text, stop_reason="stop"))


def _check(score: SampleScore, name: str) -> dict[str, Any]:
    return next(c for c in score.checks if c["check"] == f"python:{name}")


def test_a_check_receives_the_case_the_calls_the_raw_text_and_the_message() -> None:
    seen: list[CheckContext] = []

    def look(ctx: CheckContext) -> bool:
        seen.append(ctx)
        return True

    suite = _bound("    look: {options: {word: please}}\n", look=look)
    score = _score(suite)
    (ctx,) = seen
    assert ctx.case_id == suite.cases[0].id and ctx.case is suite.cases[0]
    assert ctx.text == OUTPUT and ctx.message == "Hi team, please bring tools!"
    assert [c.name for c in ctx.calls] == ["send_message_to_chat"] and ctx.protocol == "json"
    assert ctx.options == {"word": "please"}
    assert score.passed and _check(score, "look")["passed"]


def test_a_failed_check_fails_the_sample_under_its_own_name_and_is_hard_when_it_says_so() -> None:
    def polite(ctx: CheckContext) -> CheckVerdict:
        return CheckVerdict("sorry" in ctx.message, "impolite", f"no apology in {ctx.message!r}")

    soft = _score(_bound("    polite: {}\n", polite=polite))
    assert not soft.passed and soft.reason == "python:polite" and not soft.hard_fail
    assert _check(soft, "polite")["detail"].startswith("impolite: no apology in")
    # hard by the suite's setting, or by the verdict itself
    assert _score(_bound("    polite: {hard: true}\n", polite=polite)).hard_fail
    hard_verdict = _score(_bound("    p: {}\n", p=lambda ctx: CheckVerdict(False, "bad", hard=True)))
    assert hard_verdict.hard_fail
    assert not _score(_bound("    ok: {hard: true}\n", ok=lambda ctx: True)).hard_fail


def _boom(ctx: CheckContext) -> bool:
    raise KeyError("tone")


@pytest.mark.parametrize(
    ("fn", "says"),
    [
        (_boom, "raised KeyError: 'tone'"),
        (lambda ctx: 1, "returned builtins.int, not a bool or a CheckVerdict"),
        (lambda ctx: None, "returned builtins.NoneType, not a bool or a CheckVerdict"),
        (lambda ctx: "yes", "returned builtins.str"),
        (lambda ctx: CheckVerdict("yes"), "returned CheckVerdict(passed=str), not a bool"),  # type: ignore[arg-type]
        (lambda ctx: CheckVerdict(True, data={"x": {1, 2}}), "not JSON"),
        (lambda ctx: pytest.skip("not today"), "raised Skipped"),  # a BaseException: still an error
        (lambda ctx: sys.exit(0), "raised SystemExit"),
    ],
)
def test_a_check_that_raises_or_returns_a_wrong_type_is_a_check_error_never_a_pass(
    fn: Callable[[CheckContext], Any], says: str
) -> None:
    score = _score(_bound("    tone: {}\n", tone=fn))
    rec = _check(score, "tone")
    assert not score.passed and not rec["passed"]
    assert rec["reason"] == "check_error" and says in rec["detail"]
    assert "tests:tone" in rec["detail"]  # names where the check came from
    # counted apart in the case record, which the error rule reads
    counted = case_result(_suite("    tone: {}\n").cases[0], [score])
    assert counted["n_check_errors"] == 1 and counted["first_check_error"]["check"] == "python:tone"


def test_a_check_error_keeps_the_stack_down_to_the_users_code() -> None:
    rec = _check(_score(_bound("    tone: {}\n", tone=_boom)), "tone")
    frames = rec["data"]["traceback"]
    assert frames[-1].endswith("in _boom") and __file__ in frames[-1]
    assert not any("leader_eval/scoring/" in f for f in frames)  # the scorer's own frame is left out


def test_tags_choose_the_cases_a_check_runs_on() -> None:
    suite = _bound("    goal_only: {tags: [goal]}\n", goal_only=lambda ctx: False)
    tags = [set(c.tags) for c in suite.cases]
    for i, case_tags in enumerate(tags):
        names = [c["check"] for c in _score(suite, case=i).checks]
        assert ("python:goal_only" in names) == ("goal" in case_tags)


def test_a_suite_naming_a_check_is_never_scored_without_it() -> None:
    with pytest.raises(CheckNotBound, match="polite"):
        _score(_suite("    polite: {}\n"))


def test_the_documented_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from leader_eval.runs import trusted

    monkeypatch.setattr(trusted, "REGISTERED", trusted.Trusted())
    doc = Path(__file__).resolve().parents[2] / "docs" / "checks.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)
    assert blocks and "score_output(" in blocks[0] and "register_check(" in blocks[0]
    namespace: dict[str, object] = {}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{doc}:block{i + 1}", "exec"), namespace)
    assert "polite" in trusted.REGISTERED.checks


def test_a_check_that_would_check_nothing_is_named() -> None:
    """A typo in ``tags:`` or a check that would land on an episode judges nothing: said before
    sampling (lint prints it; a run refuses), never a run scored as if it had been checked."""
    typo = _suite("    tone: {tags: [gaol]}\n")
    (line,) = coverage_problems(typo)
    assert "checks.python.tone: tags ['gaol'] match no case" in line and line.startswith(f"{typo.path}:")
    assert coverage_problems(_suite("    tone: {tags: [goal]}\n")) == []


def test_a_check_that_would_land_on_an_episode_is_named(tmp_path: Path) -> None:
    src = ROOT / "suites" / "examples" / "teammate.yaml"
    path = tmp_path / "teammate.yaml"
    path.write_text(src.read_text() + "\nchecks:\n  python:\n    tone: {}\n")
    (line,) = coverage_problems(load_suite(path))
    assert "checks.python.tone: would apply to episode case" in line and "tags:" in line
