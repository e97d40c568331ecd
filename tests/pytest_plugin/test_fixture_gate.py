"""The ``leader_eval`` fixture joins its suite's gate, paired on the cases it ran; a suite's
Python checks come from the session's trusted definitions (conftest.py's ``register_check``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leader_eval.runs.evaluate import run
from leader_eval.runs.options import RunOptions
from tests.conftest import MINIMAL_SUITE
from tests.support.scripted import ScriptedBackend, call

pytest_plugins = ["pytester"]

SUITE = (
    MINIMAL_SUITE.replace("samples: 2", "samples: 3")
    + """\
  - id: third
    tags: [goal]
    vars: {current_goal: fix the roof, request: "Ask Bo to bring a ladder."}
    expect:
      calls:
        - tool: send_message_to_chat
          args:
            message: {contains: Bo}
checks:
  python:
    polite: {}
"""
)
OUTPUT = call("send_message_to_chat", message="Hi Bo, please help: we plant a garden and fix the roof.")
CONFTEST = """
import leader_eval

@leader_eval.register_check("polite")
def polite(ctx):
    return leader_eval.CheckVerdict("please" in ctx.message, "impolite", ctx.message)
"""


@pytest.fixture
def recorded(pytester: pytest.Pytester) -> Path:
    """The suite in pytester's folder and a recorded run of it (3 cases x 3 samples, no model)."""
    (pytester.path / "mini.yaml").write_text(SUITE)
    plain = pytester.path / "plain.yaml"
    plain.write_text(SUITE.split("checks:\n", 1)[0])  # the samples do not depend on the checks
    out = pytester.path / "rec"
    run(plain, RunOptions(out=out, progress=False, seed=9), backend=ScriptedBackend([OUTPUT]))
    plain.unlink()
    return out


def test_the_fixture_joins_the_gate_paired_on_its_own_cases(pytester: pytest.Pytester, recorded: Path) -> None:
    pytester.makeconftest(CONFTEST)
    args = [f"--le-model=replay:{recorded}", "--le-golden-dir=golden", "-p", "no:cacheprovider"]
    made = pytester.runpytest_subprocess("mini.yaml", "--le-run-dir=a", "--le-update-golden", *args)
    assert made.ret == 0, made.stdout.str()
    golden = json.loads((pytester.path / "golden" / "mini" / "main.json").read_text())
    assert sorted(golden["cases"]) == ["goal", "hello", "third"]
    pytester.makepyfile(
        test_py_cases=f"""
        import pytest

        @pytest.mark.parametrize("case", ["goal", "third"])
        def test_case(leader_eval, request, case):
            record = leader_eval.evaluate(request, {str(pytester.path / "mini.yaml")!r}, case)
            assert record["n_scored"] == 3 and record["outputs"] == [{OUTPUT!r}] * 3
            (sample, *_) = record["samples"]
            assert sample["text"] == {OUTPUT!r} and sample["calls"][0]["name"] == "send_message_to_chat"
            assert any(c["check"] == "python:polite" and c["passed"] for c in sample["checks"])
        """
    )
    # it failed "run covers 1 of the golden's 3 cases: gate the full suite"
    gated = pytester.runpytest_subprocess("test_py_cases.py", "--le-run-dir=b", *args)
    out = gated.stdout.str()
    assert gated.ret == 0, out
    assert "subset: 2 of 3 cases (paired with the same cases of the golden)" in out and "run covers" not in out
    assert "gate PASS" in out
    score_row = next(line for line in out.splitlines() if line.startswith("score ^"))
    assert "unpaired" not in score_row
    # the same fixture cases with a check that now fails them: the gate sees the drop
    pytester.makeconftest(CONFTEST.replace('"please" in', '"sorry" in'))
    dropped = pytester.runpytest_subprocess("test_py_cases.py", "--le-run-dir=c", *args)
    text = dropped.stdout.str()
    assert dropped.ret == 1 and "gate FAIL" in text and "credible regression in score" in text, text
    assert "paired p=" in text and "over 2 cases" in text  # paired case by case with the golden


def test_a_suite_naming_an_undefined_check_is_a_collection_error(pytester: pytest.Pytester, recorded: Path) -> None:
    result = pytester.runpytest_subprocess("mini.yaml", f"--le-model=replay:{recorded}", "--le-run-dir=a")
    out = result.stdout.str()
    assert result.ret == 2, out
    assert "mini.yaml:" in out and "check function 'polite' is not defined" in out
    assert not (pytester.path / "a").exists()  # nothing sampled
