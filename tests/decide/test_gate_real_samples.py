"""The gate on real recorded samples of the embedded model: false alarms and rare failures.

The pool: the 132 real outputs of SmolLM2 on ``leader_core`` in ``tests/corpus/real`` (runs a and
b, 3 samples per case each, so 6 per case), scored by the real pipeline. A simulated golden draws
6 and a candidate 3 samples per case from a case's pool with replacement, as the issue's
measurement did, and the project's own ``build_golden`` + ``gate`` decide. With no change the
gate must fail in at most alpha of draws; with a suite that declares ``max_hard_fails: 0`` one
hard-failing sample must fail it, and five new hard fails in five cases must fail the statistical
test even without a budget (the paired t-test over cases caught 24% of those).
"""

from __future__ import annotations

import math
import shutil
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from leader_eval.decide.gate import gate
from leader_eval.decide.golden import GoldenError, build_golden, update_golden
from leader_eval.report.gate import format_gate_table, gate_markdown
from leader_eval.runs.evaluate import Run
from leader_eval.scoring.scorer import SampleScore
from leader_eval.suite.load import Suite, load_suite
from tests.scoring.test_real_outputs import _scores
from tests.support.runs import run_from_scores

ROOT = Path(__file__).resolve().parents[2]
ALPHA = 0.05


@cache
def _pool() -> dict[str, tuple[SampleScore, ...]]:
    """case id -> its real scored samples (runs a and b of leader_core)."""
    out: dict[str, list[SampleScore]] = {}
    for sid, score in sorted(_scores().items()):
        if sid.split("/")[0] in ("a", "b"):
            out.setdefault(score.case_id, []).append(score)
    return {cid: tuple(v) for cid, v in out.items()}


def _suite(tmp: Path, gate_block: str = "") -> Suite:
    """The flagship suite (its case ids are the recorded ones), optionally with a ``gate:`` block."""
    d = tmp / f"suite{abs(hash(gate_block))}"
    if not d.exists():
        shutil.copytree(ROOT / "suites" / "templates", d / "templates")
        text = (ROOT / "suites" / "leader_core.yaml").read_text(encoding="utf-8")
        if gate_block:  # the test's own gate: section replaces the suite's (the last block of the file)
            text = text[: text.rindex("\n# The gate's contract")] + "\n"
        (d / "leader_core.yaml").write_text(text + gate_block, encoding="utf-8")
    return load_suite(d / "leader_core.yaml")


def _draw(suite: Suite, n: int, rng: np.random.Generator, seed: int) -> tuple[Run, list[SampleScore]]:
    pool = _pool()
    scores = []
    for case in suite.cases:
        have = pool[case.id]
        for j, i in enumerate(rng.integers(0, len(have), n)):
            scores.append(replace(have[int(i)], index=j))
    return run_from_scores(suite, scores, n=n, seed=seed, model_id="local:smollm2"), scores


def _with_hard_fails(suite: Suite, scores: list[SampleScore], case_ids: list[str], seed: int) -> Run:
    """The same samples, but the first sample of each named case is now a hard fail (empty output)."""
    targets = set(case_ids)
    out = []
    for s in scores:
        if s.case_id in targets and s.index == 0:
            s = replace(s, passed=False, hard_fail=True, reason="empty", strict_format=False, tool_correct=False)
        out.append(s)
    return run_from_scores(suite, out, n=max(s.index for s in out) + 1, seed=seed, model_id="local:smollm2")


def test_pool_is_the_real_recording() -> None:
    pool = _pool()
    assert len(pool) == 22 and all(len(v) == 6 for v in pool.values())
    # the premise of the rare-event tests: the embedded model never hard-failed in these runs
    assert not any(s.hard_fail for v in pool.values() for s in v)


@pytest.mark.slow
@pytest.mark.usefixtures("fast_stats")
def test_no_change_false_alarm_rate_stays_at_alpha(tmp_path: Path) -> None:
    """400 resampled golden/candidate pairs of the same recorded model, every tolerance 0 so the
    statistics alone decide: the whole gate (one Holm-Tarone family) fails in at most alpha of
    them, up to two standard errors of simulation, with and without the suite's floors."""
    suite = _suite(tmp_path)
    rng = np.random.default_rng(2026)
    zero = {"score": 0, "hard_fail_rate": 0, "strict_format_rate": 0, "tool_accuracy": 0, "leak_rate": 0}
    # the suite's floors and ceilings too (issue 19), judged on the bound: at the pool's value less
    # 0.10 (score 0.189, strict format 0.553, tool accuracy 0.333), ceilings 0.05 above its rates
    section = {
        "min": {"score": 0.089, "strict_format_rate": 0.453, "tool_accuracy": 0.233},
        "max": {"hard_fail_rate": 0.05, "leak_rate": 0.065},
    }
    n_sim = 400
    fails = with_floors = 0
    for i in range(n_sim):
        golden = build_golden(_draw(suite, 6, rng, seed=i)[0])
        run = _draw(suite, 3, rng, seed=10_000 + i)[0]
        fails += gate(run, golden, tolerances=zero).exit_status
        with_floors += gate(run, golden, tolerances=zero, suite_gate=section).exit_status
    bound = ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / n_sim)
    assert fails / n_sim <= bound, (fails, n_sim)
    assert with_floors / n_sim <= bound, (with_floors, n_sim)


@pytest.mark.usefixtures("fast_stats")
def test_one_new_hard_fail_fails_a_suite_that_forbids_them(tmp_path: Path) -> None:
    suite = _suite(tmp_path, "gate:\n  max_hard_fails: 0\n")
    assert suite.gate == {"max_hard_fails": 0}
    rng = np.random.default_rng(7)
    golden_run, _ = _draw(suite, 6, rng, seed=1)
    res = update_golden(golden_run, tmp_path / "golden", suite=suite)
    assert res.written, res.reason
    golden = build_golden(golden_run, budgets=suite.gate)
    assert golden["budgets"] == {"max_hard_fails": 0}
    assert golden["metrics"]["hard_fail_rate"]["value"] == 0.0
    for seed in range(5):
        clean, scores = _draw(suite, 3, rng, seed=100 + seed)
        assert gate(clean, golden).rows[-1].verdict == "pass"  # the budget row, with no hard fail
        case = suite.cases[seed * 4].id
        bad = _with_hard_fails(suite, scores, [case], seed=200 + seed)
        result = gate(bad, golden)
        assert result.exit_status == 1, [r.explanation for r in result.rows]
        budget = next(r for r in result.rows if r.metric == "max_hard_fails")
        assert budget.verdict == "fail" and budget.now == 1 and case in budget.explanation
    table = format_gate_table(result)
    assert "over budget: max_hard_fails (1 > 0)" in table.splitlines()[0] and "budget" in table
    assert "**FAIL**" in gate_markdown(result)
    # a budget the gate cannot read is an error naming the file, never a skipped check
    for budgets in ({"max_hard_fail": 0}, {"max_hard_fails": -1}, {"max_hard_fails": "0"}, [0]):
        with pytest.raises(GoldenError, match=r"^g\.json:1: "):
            gate(bad, {**golden, "budgets": budgets}, golden_file=Path("g.json"))


@pytest.mark.usefixtures("fast_stats")
def test_one_new_hard_fail_without_a_budget_is_noise_but_five_are_caught(tmp_path: Path) -> None:
    """Without a budget, one event against a zero-event golden cannot be told from chance (the
    exact count test's p is 1/3); five new hard-failing samples in five cases give p = (1/3)^5,
    and the gate fails on hard_fail_rate in every draw."""
    suite = _suite(tmp_path)
    rng = np.random.default_rng(11)
    caught_one = caught_five = 0
    for i in range(20):
        golden = build_golden(_draw(suite, 6, rng, seed=i)[0])
        _, scores = _draw(suite, 3, rng, seed=1000 + i)
        one = gate(_with_hard_fails(suite, scores, [suite.cases[i].id], seed=2000 + i), golden)
        caught_one += "hard_fail_rate" in one.failed
        five_ids = [c.id for c in suite.cases[i % 17 : i % 17 + 5]]
        five = gate(_with_hard_fails(suite, scores, five_ids, seed=3000 + i), golden)
        caught_five += "hard_fail_rate" in five.failed
        row = next(r for r in five.rows if r.metric == "hard_fail_rate")
        assert row.p_value == pytest.approx(3.0**-5), row.explanation
    assert caught_one == 0
    assert caught_five == 20


@pytest.mark.usefixtures("fast_stats")
def test_metrics_without_events_take_no_share_of_alpha(tmp_path: Path) -> None:
    """Golden and run without a hard fail: hard_fail_rate's test cannot reach any level, so it is
    left out of the Holm family and the others share alpha among fewer metrics."""
    suite = _suite(tmp_path)
    rng = np.random.default_rng(3)
    golden = build_golden(_draw(suite, 6, rng, seed=1)[0])
    result = gate(_draw(suite, 3, rng, seed=2)[0], golden)
    hard = next(r for r in result.rows if r.metric == "hard_fail_rate")
    assert "takes no share of alpha" in hard.explanation
    score = next(r for r in result.rows if r.metric == "score")
    family = int(score.explanation.split("a family of ")[1].split(" ")[0]) if "a family of" in score.explanation else 1
    assert family <= 4
