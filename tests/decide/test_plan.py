"""``leader-eval plan``: the gate's power from a golden's per-case rates, and samples for 80%."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from leader_eval.decide.golden import load_golden
from leader_eval.decide.plan import DROPS, TARGET_POWER, gate_family, plan_power
from leader_eval.errors import LeaderEvalError
from leader_eval.stats.core import simulated_power

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "golden" / "leader_core" / "main.json"


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "leader_eval", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_plan_on_the_committed_golden_prints_power_and_samples_for_80_percent() -> None:
    out = _cli("plan", "suites/leader_core.yaml", "--golden", "golden")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "main.json" in lines[0] and "22 cases" in lines[0]
    # the level the gate really applies: Holm's first step over the metrics that take a share
    assert "gate level: one-sided alpha 0.05 / 3 = 0.01667" in out.stdout
    rows = {line.split()[0]: line.split() for line in lines if line[:4] in ("0.05", "0.10", "0.20")}
    assert set(rows) == {"0.05", "0.10", "0.20"}
    power = [float(rows[d][1]) for d in ("0.05", "0.10", "0.20")]
    need = [int(rows[d][2]) for d in ("0.05", "0.10", "0.20")]
    assert power == sorted(power) and power[-1] > power[0]
    assert need == sorted(need, reverse=True)  # bigger drops need fewer samples


def test_samples_for_80_percent_are_the_least_that_reach_it() -> None:
    golden = load_golden(GOLDEN)
    assert golden is not None
    plan = plan_power(golden, run_samples=3, n_sim=1000)
    assert set(plan.rows) == set(DROPS)
    p = [float(r["pass_rate"]) for _, r in sorted(golden["cases"].items())]

    def power(k: int, d: float) -> float:
        # other draws than the plan's own (seed 99): the figure must hold, not just be reproduced
        kw = {"drop": d, "level": plan.level, "tolerance": plan.tolerance, "test": plan.test, "n_sim": 1000}
        return simulated_power(p, k, k, seed=99, **kw)

    for d, (_, k) in sorted(plan.rows.items()):
        assert k is not None
        assert power(k, d) >= TARGET_POWER - 0.05
        if k > 1:
            assert power(k - 1, d) <= TARGET_POWER + 0.05


def test_no_drop_fires_at_most_the_level() -> None:
    """At a zero drop the simulated gate is the false-alarm rate: at most the level it tests at."""
    golden = load_golden(GOLDEN)
    assert golden is not None
    plan = plan_power(golden, run_samples=3, drops=(0.0,), n_sim=4000)
    false_alarm = plan.rows[0.0][0]
    assert false_alarm <= plan.level + 3 * (plan.level / 4000) ** 0.5


def test_plan_refuses_bad_input_with_one_line(tmp_path: Path) -> None:
    out = _cli("plan", str(ROOT / "suites" / "leader_core.yaml"), "--golden", str(tmp_path / "none"))
    assert out.returncode == 2 and "Traceback" not in out.stderr and len(out.stderr.splitlines()) == 1
    assert str(tmp_path / "none" / "leader_core" / "main.json") in out.stderr and "update-golden" in out.stderr
    d = tmp_path / "g" / "leader_core"
    d.mkdir(parents=True)
    (d / "a.json").write_text(GOLDEN.read_text(encoding="utf-8"), encoding="utf-8")
    one = json.loads(GOLDEN.read_text(encoding="utf-8"))
    first = sorted(one["cases"])[0]
    one["cases"] = {first: one["cases"][first]}
    for m in one["metrics"].values():
        m["n_cases"] = 1
    (d / "b.json").write_text(json.dumps(one), encoding="utf-8")
    for choose in ("--baseline", "--label"):  # --label: 0.2's name for the baseline, still read by plan
        out = _cli("plan", str(ROOT / "suites" / "leader_core.yaml"), "--golden", str(tmp_path / "g"), choose, "b")
        assert out.returncode == 2 and "fewer than 2 cases" in out.stderr and len(out.stderr.splitlines()) == 1
    # the golden named as a file: the same plan as by its directory; another suite's file refused
    out = _cli("plan", str(ROOT / "suites" / "leader_core.yaml"), "--golden", str(d / "a.json"))
    assert out.returncode == 0 and "22 cases" in out.stdout, out.stderr
    (d / "c.json").write_text(json.dumps({**json.loads(GOLDEN.read_text(encoding="utf-8")), "suite": "other"}))
    out = _cli("plan", str(ROOT / "suites" / "leader_core.yaml"), "--golden", str(d / "c.json"))
    assert out.returncode == 2 and "c.json:1: a golden file of suite 'other'" in out.stderr, out.stderr
    assert len(out.stderr.splitlines()) == 1
    with pytest.raises(LeaderEvalError, match="metrics the gate tests"):
        plan_power(load_golden(d / "a.json") or {}, run_samples=3, metric="lenient_format_rate")
    with pytest.raises(LeaderEvalError, match="no 'goal_rate'"):
        plan_power(load_golden(d / "a.json") or {}, run_samples=3, metric="goal_rate")


def test_plan_and_the_gate_family_count_every_gated_metric_of_an_episode_golden() -> None:
    """Defect 5 of issue 19: plan assumed a Holm family of the 5 sample metrics; an episode golden
    is gated on 8 (goal, loop and step-leak rates too), so its level was up to 1.9x too high."""
    golden = load_golden(ROOT / "golden" / "leader_episodes" / "main.json")
    assert golden is not None
    level, family, left_out = gate_family(golden, 0.05)
    assert {"goal_rate", "loop_rate", "step_leak_rate"} <= set(family) | set(left_out)
    assert len(family) + len(left_out) == 8
    assert level == pytest.approx(0.05 / len(family))
    plan = plan_power(golden, run_samples=2, metric="goal_rate", n_sim=200)
    assert plan.family == family and plan.test == "exact_count"
