"""One decision everywhere (issue 19): the gate, compare, the checkpoint recommendation, adaptive
sampling and plan read one list of tested metrics and make one paired decision.

Defect 5: the adaptive gate and plan assumed a Holm family of 5 metrics where an episode suite is
gated on 8. Defect 6: the recommendation contradicted the comparison printed above it, the verdict
printed score's p beside a strict-format claim, and compare dropped the episode metrics of a mixed
suite that the gate does gate.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from leader_eval.decide.checkpoints import recommend_checkpoint
from leader_eval.decide.compare import compare_runs
from leader_eval.decide.gate import gate
from leader_eval.decide.golden import build_golden
from leader_eval.report import format_summary
from leader_eval.report.compare import format_compare
from leader_eval.report.gate import format_gate_table
from leader_eval.runs.evaluate import Run
from leader_eval.stats.core import exact_count_test
from leader_eval.stats.metrics import ALL_METRICS, EPISODE_METRICS, METRICS, gated_metrics
from tests.support.runs import make_run, make_suite

ROOT = Path(__file__).resolve().parents[2]
N = 6  # samples per case


def _run(label: str, cases: dict[str, dict[str, float]], *, n: int = N) -> Run:
    """A scored run from per-case metric values (each a share of ``n`` samples; episode metrics
    where given, with ``n`` episodes behind them)."""
    records = []
    for cid, values in cases.items():
        rec: dict[str, Any] = {"case_id": cid, "weight": 1.0, "n_scored": n, "n_samples": n, "reasons": {}}
        for m, spec in METRICS.items():
            rec[m] = values.get(m, values.get("score", 0.0) if spec.higher_is_better else 0.0)
        rec["n_passed"] = round(rec["score"] * n)
        for m in EPISODE_METRICS:
            if m in values:
                rec[m], rec[f"n_{m}"] = values[m], n
        records.append(rec)
    ident = {"suite": "s", "suite_hash": "sha256:x", "model_id": f"m-{label}", "protocol": "json", "run_seed": 1}
    manifest = {"identity": {**ident, "cases": {}}, "label": label, "run_id": label}
    return Run(Path(f"/nonexistent/{label}"), manifest, [], [], records, {})


IDS = [f"c{i:02d}" for i in range(24)]


def test_gated_metrics_is_the_one_family_of_every_decision() -> None:
    sample = gated_metrics(METRICS)
    assert sample == ("score", "hard_fail_rate", "strict_format_rate", "tool_accuracy", "leak_rate")
    episode = gated_metrics(ALL_METRICS)
    assert len(episode) == 8 and {"goal_rate", "loop_rate", "step_leak_rate"} <= set(episode)
    assert "lenient_format_rate" not in episode and "steps_to_goal" not in episode


def test_the_adaptive_gate_uses_the_real_family_size() -> None:
    """Defect 5: an episode suite's gate tests 8 metrics; the adaptive levels must be made for 8."""
    from leader_eval.decide.adaptive import family_size, gate_levels

    golden = json.loads((ROOT / "golden" / "leader_episodes" / "main.json").read_text(encoding="utf-8"))
    run_metrics = [*METRICS, "goal_rate", "loop_rate", "step_leak_rate", "steps_to_goal"]
    assert family_size(golden["metrics"], run_metrics) == 8
    assert family_size(golden["metrics"], METRICS) == 5  # a run without episodes
    core = json.loads((ROOT / "golden" / "leader_core" / "main.json").read_text(encoding="utf-8"))
    assert family_size(core["metrics"], run_metrics) == 5
    # a smaller family would hand the gate a larger level at every look
    looks = [2, 3, 4, 5]
    eight, five = gate_levels(looks, 0.05, 8), gate_levels(looks, 0.05, 5)
    assert all(e <= f for e, f in zip(eight, five, strict=True)) and any(
        e < f for e, f in zip(eight, five, strict=True)
    )


def test_the_compare_verdict_names_each_claim_with_its_own_p() -> None:
    base = {c: {"score": 0.5, "strict_format_rate": 1.0, "tool_accuracy": 0.5} for c in IDS}
    worse = {c: {"score": 0.5, "strict_format_rate": 0.5, "tool_accuracy": 0.5} for c in IDS}
    c = compare_runs([_run("step-300", base), _run("step-100", worse)])
    pair = c.pairs[0]
    strict = next(m for m in pair.metrics if m.metric == "strict_format_rate")
    score = next(m for m in pair.metrics if m.metric == "score")
    assert strict.verdict == "regression" and score.verdict == "no credible change"
    line = pair.verdict()
    assert line.startswith("step-100 credibly REGRESSES vs step-300 in strict_format_rate (-0.500, p=")
    claimed = re.search(r"strict_format_rate \(-0\.500, p=([0-9.e-]+)\)", line)
    assert claimed is not None and float(claimed.group(1)) == pytest.approx(strict.p_value, rel=1e-2)
    assert f"p={score.p_value:.3g}" not in line  # score's p is not the claim's


def test_the_recommendation_never_picks_what_the_comparison_calls_a_regression() -> None:
    """Defect 6: `step-100 credibly REGRESSES vs step-300 in strict_format_rate`, then `recommended
    checkpoint: step-100` (the recommendation read score only)."""
    good = {c: {"score": 0.5, "strict_format_rate": 1.0} for c in IDS}
    broken = {c: {"score": 0.5, "strict_format_rate": 0.4} for c in IDS}
    mid = {c: {"score": 0.5 if i % 6 else 0.3333, "strict_format_rate": 1.0} for i, c in enumerate(IDS)}
    c = compare_runs([_run("step-300", good), _run("step-100", broken), _run("step-200", mid)])
    assert "step-100 credibly REGRESSES vs step-300 in strict_format_rate" in c.verdict()
    rec = recommend_checkpoint(c)
    assert rec is not None and rec.recommended != "step-100"
    row = next(r for r in rec.rows if r.name == "step-100")
    assert row.credibly_worse and any("strict_format_rate" in why for why in row.worse_in)
    assert rec.best == "step-300" and rec.recommended == "step-200"
    assert set(rec.metrics) == set(gated_metrics(METRICS))
    out = format_compare(c)
    assert "recommended checkpoint: step-200" in out
    assert "credibly worse: strict_format_rate (p " in out  # vs the best, with its own p


def test_the_recommendation_can_be_none() -> None:
    a = {c: {"score": 0.5, "strict_format_rate": 1.0, "tool_accuracy": 0.0} for c in IDS}
    b = {c: {"score": 0.5, "strict_format_rate": 0.0, "tool_accuracy": 1.0} for c in IDS}
    rec = recommend_checkpoint(compare_runs([_run("v1", a), _run("v2", b)]))
    assert rec is not None and rec.recommended is None and all(r.credibly_worse for r in rec.rows)


def test_compare_keeps_the_episode_metrics_of_a_mixed_suite() -> None:
    """Defect 6: a suite of single-turn and episode cases lost goal/loop/step-leak rates in compare
    (each needed every case to have them), though the gate gates them over the episode cases."""
    half = IDS[:12]

    def mixed(goal: float) -> dict[str, dict[str, float]]:
        return {
            c: {"score": 0.5, **({"goal_rate": goal, "loop_rate": 0.0, "step_leak_rate": 0.0} if c in half else {})}
            for c in IDS
        }

    c = compare_runs([_run("v1", mixed(1.0)), _run("v2", mixed(0.3333))])
    pair = c.pairs[0]
    goal = next(m for m in pair.metrics if m.metric == "goal_rate")
    assert goal.gated and goal.n_cases == 12 and goal.verdict == "regression"
    assert {m.metric for m in pair.metrics} >= {"goal_rate", "loop_rate", "step_leak_rate"}
    assert c.exit_status == 1 and "goal_rate" in c.verdict()
    assert pair.a.estimates["goal_rate"].n_cases == 12


def test_each_metric_is_decided_by_its_declared_test_alone(tmp_path: Path) -> None:
    """One test per metric (never the smaller p of two): the gate's p for score is the exact count
    test's on the per-case counts, as the metric table declares."""
    suite = make_suite(tmp_path)
    p = np.random.default_rng(4).beta(2, 2, 24)
    golden = build_golden(make_run(suite, p, seed=1, n=6))
    run = make_run(suite, np.clip(p - 0.15, 0, 1), seed=2, n=3)
    row = next(r for r in gate(run, golden, power=False).rows if r.metric == "score")
    assert ALL_METRICS["score"].test == "exact_count"
    a = {cid: (round(rec["pass_rate"] * rec["n_samples"]), rec["n_samples"]) for cid, rec in golden["cases"].items()}
    b = {c["case_id"]: (int(c["n_passed"]), int(c["n_scored"])) for c in run.cases}
    assert row.p_value == pytest.approx(exact_count_test(a, b).p_less)
    assert "exact stratified count test" in row.explanation


def test_a_one_case_interval_carries_its_note_in_the_terminal_and_gate_tables(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, n_cases=1)
    golden = build_golden(make_run(suite, [0.5], seed=1, n=6))
    run = make_run(suite, [0.5], seed=2, n=6)
    note = run.summary["overall"]["metrics"]["score"]["note"]
    assert note.startswith("one case")
    table = format_gate_table(gate(run, golden, power=False))
    assert f"score: {note}" in table and " *" in table
    assert f"score: {note}" in format_summary(run)
