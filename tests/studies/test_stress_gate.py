"""A suite's stress requirements (``gate: stress:``) are judged like the gate: floors and paired
drops with intervals over (case, depth) columns; what cannot be judged or cannot fail never passes."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest

from leader_eval.errors import SuiteError
from leader_eval.studies.stress import StressResult, Variant, stress
from leader_eval.studies.stress_gate import format_requirements, judge_stress
from leader_eval.suite.gate_spec import gate_spec
from leader_eval.suite.load import load_suite
from tests.studies.test_stress import RECALL, ScriptedBackend

SHORT, LONG = 1000, 40000


def _sweep(
    scores: dict[str, tuple[float | None, float | None]], steps: tuple[int, ...] = (SHORT, LONG)
) -> StressResult:
    """Columns ``case:depth`` with their score at SHORT and LONG (None: overflow there)."""
    variants = []
    for col, pair in scores.items():
        case, depth = col.split(":")
        for step, score in zip(steps, pair, strict=False):
            v = Variant(case, f"{case}@{step}:{depth}", step, depth, step, 0)
            if score is None:
                v.status = "overflow"
            else:
                v.score, v.n_scored = score, 4
            variants.append(v)
    return StressResult("s", "m", list(steps), variants, None, {}, 4, 0)


def _judge(scores: dict, section: dict, **kw: Any) -> list:
    return judge_stress(_sweep(scores), gate_spec({"stress": [section], **kw.pop("extra", {})}), **kw)


EIGHT = {f"c{i}:end": (1.0, 0.0) for i in range(8)}


def test_a_score_credibly_below_the_floor_fails_and_one_above_passes() -> None:
    (low,) = _judge(EIGHT, {"at": LONG, "min": {"score": 0.5}})
    assert low.verdict == "fail" and low.estimate.value == 0.0
    high = {f"c{i}:end": (1.0, 1.0) for i in range(8)}
    (ok,) = _judge(high, {"at": LONG, "min": {"score": 0.5}})
    assert ok.verdict == "pass"


def test_a_paired_drop_beyond_the_limit_fails() -> None:
    (drop,) = _judge(EIGHT, {"at": LONG, "max_drop": {"score": 0.2}})
    assert drop.verdict == "fail" and drop.estimate.value == 1.0
    steady = {f"c{i}:end": (0.5, 0.5) for i in range(8)}
    (ok,) = _judge(steady, {"at": LONG, "max_drop": {"score": 0.2}})
    assert ok.verdict == "pass"


def test_a_requirement_that_cannot_fail_is_underpowered_and_fails_in_ci_mode() -> None:
    one = {"c0:end": (1.0, 0.0)}
    (weak,) = _judge(one, {"at": LONG, "min": {"score": 0.5}})
    assert weak.verdict == "underpowered" and "cannot fail" in weak.explanation
    (ci,) = _judge(one, {"at": LONG, "min": {"score": 0.5}}, strict=True)
    assert ci.verdict == "fail" and "underpowered in CI mode" in ci.explanation
    (ack,) = _judge(one, {"at": LONG, "min": {"score": 0.5}}, strict=True, extra={"underpowered": "one long case"})
    assert ack.verdict == "underpowered" and "one long case" in ack.explanation


def test_what_cannot_be_judged_fails() -> None:
    overflow = {**EIGHT, "c9:end": (1.0, None)}
    (o,) = _judge(overflow, {"at": LONG, "min": {"score": 0.0}})
    assert o.verdict == "fail" and "c9:end" in o.explanation
    (m,) = _judge(EIGHT, {"at": 32000, "min": {"score": 0.0}})
    assert m.verdict == "fail" and "no length 32000" in m.explanation
    text = format_requirements([o, m])
    assert "FAIL: 2 of 2" in text


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("stress: {at: 40000}", "is not of type 'array'"),
        ("stress: [{at: 0, min: {score: 0.5}}]", "less than the minimum of 1"),
        ("stress: [{at: 40000}]", "give a floor (min) or a largest drop"),
        ("stress: [{at: 40000, min: {hard_fail_rate: 0.1}}]", "a sweep measures score"),
        ("stress: [{at: 40000, max_drop: {score: 2}}]", "greater than the maximum of 1"),
        ("stress: [{at: 40000, min: {score: 0.5}}, {at: 40000, min: {score: 0.4}}]", "two requirements"),
        # a hostile or mistyped length would fit filler for hours under --le-stress: refused at load
        ("stress: [{at: 1000000000000, min: {score: 0.5}}]", "over the largest sweep length"),
    ],
)
def test_a_bad_requirement_is_a_one_line_error_at_its_line(tmp_path: Path, section: str, message: str) -> None:
    text = RECALL.read_text(encoding="utf-8") + f"\ngate:\n  {section}\n"
    path = tmp_path / "s.yaml"
    path.write_text(text, encoding="utf-8")
    shutil.copytree(RECALL.parent / "templates", tmp_path / "templates")
    with pytest.raises(SuiteError) as err:
        load_suite(path)
    assert message in str(err.value) and f"{path}:" in str(err.value)


def test_a_declared_requirement_fails_a_sweep_whose_long_prompts_collapse(local_backend: Any, tmp_path: Path) -> None:
    suite = load_suite(RECALL)
    # the backend answers with no call at all: every sample fails, at every length
    backend = ScriptedBackend(local_backend, "I am not sure.")
    gated = dataclasses.replace(suite, gate={"stress": [{"at": 2500, "min": {"score": 0.9}}]})
    result = stress(gated, tokens=2500, steps=[900, 2500], samples=2, seed=0, out=tmp_path / "sweep", backend=backend,
                    depths=["start", "middle", "end"], plot=False, progress=False, cache=False)  # fmt: skip
    (req,) = result.requirements
    assert req.verdict == "fail" and req.at == 2500 and req.estimate is not None and req.estimate.value == 0.0
    assert '"requirements"' in (tmp_path / "sweep" / "stress.json").read_text(encoding="utf-8")


def test_depths_of_one_case_are_one_cluster() -> None:
    """Twelve depths of one case are not twelve cases: the requirement cannot fail, so it is
    underpowered (a failure in CI mode), never a pass on zero-width intervals."""
    depths = {f"only:d{i}": (1.0, 0.9) for i in range(12)}
    (floor,) = _judge(depths, {"at": LONG, "min": {"score": 0.5}}, strict=True)
    assert floor.verdict == "fail" and "one case" in floor.explanation


def test_a_sweep_with_no_column_fails() -> None:
    (req,) = _judge({}, {"at": LONG, "min": {"score": 0.5}})
    assert req.verdict == "fail"
