"""Judge metrics and the gate: only a judge calibrated to the suite's min_agreement gates; a
different judge against a golden is refused naming both; judge errors over the limit fail.

The judges are test doubles (``ScriptedBackend``) whose verdict is a function of the judged text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from leader_eval.decide.gate import gate
from leader_eval.decide.golden import build_golden
from leader_eval.runs.evaluate import Run, run
from leader_eval.runs.options import RunOptions
from leader_eval.runs.trusted import NamedModel, Trusted
from leader_eval.store.calibration import ENV, write_record
from tests.support.scripted import ScriptedBackend, call

SUITE = """\
name: judged_gate
protocol: json
sampling: {temperature: 0.7, max_tokens: 64, samples: 4, seed: 3}
scaffold:
  messages:
    - role: user
      content: "{{ request }}"
tools:
  - name: send
    parameters: {type: object, properties: {message: {type: string}}, required: [message]}
judges:
  polite:
    model_role: grader
    rubric: The message is polite.
    judged: {argument: send.message}
    min_agreement: 0.6
  helpful:
    model_role: grader
    rubric: The message helps.
    judged: {argument: send.message}
    min_agreement: 0.6
cases:
""" + "".join(f"  - id: c{i}\n    vars: {{request: r{i}}}\n    expect: {{calls: [{{tool: send}}]}}\n" for i in range(6))

LEADER = [call("send", message="Thanks, please bring wood."), call("send", message="Please bring rope.")]


def _verdict(prompt: str, seed: int) -> str:
    return '{"verdict": "pass"}'


def _run(tmp_path: Path, out: str, judge_id: str = "test:judge-a", reply: Any = _verdict) -> Run:
    (tmp_path / "s.yaml").write_text(SUITE)
    judge = ScriptedBackend([], pick=reply, model_id=judge_id)
    trusted = Trusted(models={"grader": NamedModel("grader", {"model": judge_id, "backend": judge}, "test")})
    opts = RunOptions(out=tmp_path / out, progress=False, cache=False, trusted=trusted)
    return run(tmp_path / "s.yaml", opts, backend=ScriptedBackend(LEADER))


@pytest.fixture(autouse=True)
def calibration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "calibration"
    monkeypatch.setenv(ENV, str(folder))
    return folder


def test_a_judge_metric_gates_only_with_a_calibration_record_at_min_agreement(
    tmp_path: Path, calibration: Path
) -> None:
    first = _run(tmp_path, "r1")
    judges = first.summary["judges"]
    assert not judges["polite"]["gated"] and "no calibration record" in judges["polite"]["not_gated_because"]
    assert first.summary["overall"]["metrics"]["judge:polite"]["gated"] is False
    identity = judges["polite"]["judge"]
    write_record(calibration, "polite", identity, {"agreement": {"kappa": 0.8, "low": 0.7, "high": 0.9}})
    helpful_identity = {**identity, "rubric_sha256": judges["helpful"]["rubric_sha256"]}
    write_record(calibration, "helpful", helpful_identity, {"agreement": {"kappa": 0.4, "low": 0.2, "high": 0.6}})

    second = _run(tmp_path, "r2")
    judges = second.summary["judges"]
    assert judges["polite"]["gated"] and judges["polite"]["calibration"]["kappa"] == 0.8
    assert not judges["helpful"]["gated"] and "below min_agreement" in judges["helpful"]["not_gated_because"]
    golden = build_golden(second)
    assert "judge:polite" in golden["metrics"] and "judge:helpful" not in golden["metrics"]
    assert golden["judges"]["polite"]["judge"]["model_id"] == "test:judge-a"

    result = gate(_run(tmp_path, "r3"), golden, power=False)
    rows = {r.metric: r for r in result.rows}
    assert result.status == "pass" and rows["judge:polite"].verdict == "pass"
    assert "judge:helpful" not in rows  # reported in the run, never gated

    # the calibrated criterion now fails the gate when the judge says the messages got rude
    rude = _run(tmp_path, "r4", reply=lambda p, s: '{"verdict": "fail"}')
    result = gate(rude, golden, power=False)
    assert result.status == "fail" and {r.metric: r for r in result.rows}["judge:polite"].verdict == "fail"


def test_a_different_judge_against_the_golden_is_refused_naming_both(tmp_path: Path) -> None:
    golden = build_golden(_run(tmp_path, "r1", judge_id="test:judge-a"))
    result = gate(_run(tmp_path, "r2", judge_id="test:judge-b"), golden, power=False)
    assert result.status == "stale" and result.exit_status == 1
    line = next(m for m in result.messages if "judge changed" in m)
    assert "re-baseline" in line and "test:judge-a" in line and "test:judge-b" in line


def test_judge_errors_over_the_limit_fail_the_gate(tmp_path: Path) -> None:
    golden = build_golden(_run(tmp_path, "r1"))
    flaky = _run(tmp_path, "r2", reply=lambda p, s: '{"verdict": "pass"}' if s % 2 else "sure, it passes")
    result = gate(flaky, golden, power=False)
    assert result.status == "fail"
    assert any("judge errors over the limit" in m and "'polite'" in m for m in result.messages)


def test_a_criterion_the_golden_gates_cannot_drop_out_when_its_calibration_is_gone(
    tmp_path: Path, calibration: Path
) -> None:
    identity = _run(tmp_path, "r0").summary["judges"]["polite"]["judge"]
    record = write_record(calibration, "polite", identity, {"agreement": {"kappa": 0.9}})
    golden = build_golden(_run(tmp_path, "r1"))
    assert "judge:polite" in golden["metrics"]
    record.unlink()
    result = gate(_run(tmp_path, "r2", reply=lambda p, s: '{"verdict": "fail"}'), golden, power=False)
    assert result.status == "incomplete" and result.exit_status == 1
    assert any("golden gates judge:polite but this run does not" in m for m in result.messages)


def test_the_pytest_session_run_carries_the_judges_like_a_cli_run(tmp_path: Path) -> None:
    """pytest rebuilds a suite's run from its case records: without the judges' entry no
    criterion gated there, and judge errors over max_error_rate passed (review finding)."""
    from leader_eval.pytest_plugin.config import PluginOptions
    from leader_eval.pytest_plugin.gate import session_run
    from leader_eval.pytest_plugin.state import PluginState

    bad = _run(tmp_path, "r2", reply=lambda p, s: "I think it is polite, pass!")
    assert any(v["errors_over_limit"] for v in bad.summary["judges"].values())
    state = PluginState(options=PluginOptions.__new__(PluginOptions))
    key = (bad.summary.get("suite") or "judged", "")
    state.suite_meta[key] = {"path": str(tmp_path / "s.yaml"), "run_dir": str(bad.path)}
    for rec in bad.cases:
        state.records[key][rec["case_id"]] = {**rec, "run_dir": str(bad.path), "manifest_status": "complete"}
        state.collected[key].add(rec["case_id"])
    rebuilt, problems = session_run(key, state)
    assert not problems
    assert rebuilt.summary["judges"] == bad.summary["judges"]
