"""Adaptive sampling (``run --adaptive --budget B``): peeking never inflates false alarms, power
stays within 0.05 of the fixed-n gate, and the grid of docs/statistics.md uses <= 0.6 of the budget."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from leader_eval.cli.app import main
from leader_eval.decide.adaptive import AdaptiveDesign, gate_levels, nominal_levels, simulate
from leader_eval.errors import LeaderEvalError

ALPHA = 0.05
REPS = 3000
GRID = [(m, b, c) for m in (22, 100) for b in (0.3, 0.6, 0.9) for c in (0.0, -0.05, -0.15, -0.30)]


def _crossing_rate(levels: list[float], looks: list[int], reps: int, seed: int) -> float:
    """Monte Carlo share of no-change B-value paths that cross any look's boundary."""
    from statistics import NormalDist

    t = np.array(looks, dtype=float) / looks[-1]
    rng = np.random.default_rng(seed)
    inc = rng.normal(size=(reps, len(t))) * np.sqrt(np.diff(np.concatenate([[0.0], t])))
    z = inc.cumsum(axis=1) / np.sqrt(t)
    crit = np.array([NormalDist().inv_cdf(1 - c) for c in levels])
    return float((z > crit).any(axis=1).mean())


def test_boundaries_spend_exactly_alpha_over_all_looks() -> None:
    looks = [2, 3, 4, 5]
    levels = nominal_levels(looks, ALPHA)
    reps = 400_000
    se = math.sqrt(ALPHA * (1 - ALPHA) / reps)
    assert abs(_crossing_rate(levels, looks, reps, seed=3) - ALPHA) < 4 * se
    # testing at alpha at every look (naive peeking) would not: that is what the boundaries prevent
    assert _crossing_rate([ALPHA] * 4, looks, reps, seed=3) > ALPHA + 0.03
    assert levels == sorted(levels) and levels[-1] < ALPHA
    # a Holm family of K metrics: each metric's own sequence stays at alpha / m for every m <= K
    fam = gate_levels(looks, ALPHA, 5)
    for m in range(1, 6):
        assert _crossing_rate([c / m for c in fam], looks, reps, seed=4) <= ALPHA / m + 4 * se


@pytest.fixture(scope="module")
def grid() -> dict[tuple[int, float, float], object]:
    design = AdaptiveDesign(budget=5, family=1)
    return {
        cell: simulate(design, n_cases=cell[0], base=cell[1], change=cell[2], reps=REPS, seed=i)
        for i, cell in enumerate(GRID)
    }


def test_no_false_alarm_inflation_where_nothing_changed(grid) -> None:  # type: ignore[no-untyped-def]
    se = math.sqrt(ALPHA * (1 - ALPHA) / REPS)
    for (m, b, c), cell in grid.items():
        if c == 0:
            assert cell.adaptive_fail <= ALPHA + 2.5 * se, (m, b, cell)


def test_power_within_005_of_the_fixed_gate_in_every_regression_cell(grid) -> None:  # type: ignore[no-untyped-def]
    for (m, b, c), cell in grid.items():
        if c < 0:
            assert cell.adaptive_fail >= cell.fixed_fail - 0.05, (m, b, c, cell)


def test_mean_samples_at_most_06_of_the_budget_over_the_grid(grid) -> None:  # type: ignore[no-untyped-def]
    mean = sum(cell.mean_samples for cell in grid.values()) / len(grid)
    assert mean <= 0.6 * 5, mean
    assert all(1 <= cell.mean_samples <= 5 for cell in grid.values())


def test_bad_designs_are_one_line_errors() -> None:
    for kwargs in (
        {"budget": 0},
        {"budget": 5, "alpha": 0.7},
        {"budget": 5, "looks": (3, 2, 5)},
        {"budget": 5, "looks": (1, 4)},
    ):
        with pytest.raises(LeaderEvalError):
            AdaptiveDesign(**kwargs)  # type: ignore[arg-type]


def test_adaptive_needs_budget_and_a_golden(
    mini_suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(mini_suite), "--adaptive", "--out", str(tmp_path / "a"), "-q"]) == 2
    assert "--adaptive and --budget go together" in capsys.readouterr().err
    no_golden = ["--adaptive", "--budget", "3", "--golden", str(tmp_path / "none"), "--out", str(tmp_path / "a")]
    assert main(["run", str(mini_suite), *no_golden, "-q"]) == 2
    assert "no golden baseline 'main'" in capsys.readouterr().err
    for bad, why in ((["--samples", "2"], "--samples conflicts"), (["--alpha", "nan"], "alpha must lie in")):
        assert main(["run", str(mini_suite), *no_golden, *bad, "-q"]) == 2
        assert why in capsys.readouterr().err
    assert not (tmp_path / "a").exists()


def _n_samples(run: Path) -> int:
    return sum(1 for line in (run / "samples.jsonl").read_text().splitlines() if line.strip())


@pytest.mark.model
def test_adaptive_run_records_why_it_stopped_and_resumes_and_replays(
    mini_suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    golden, base = tmp_path / "golden", tmp_path / "base"
    common = ["--max-tokens", "32", "-q"]
    assert main(["run", str(mini_suite), "--seed", "1", "--samples", "3", "--out", str(base), *common]) == 0
    assert main(["gate", str(base), "--golden", str(golden), "--update-golden"]) == 0
    out = tmp_path / "adaptive"
    adaptive = ["--adaptive", "--budget", "3", "--golden", str(golden), "--seed", "2", "--prices", "1,2,USD"]
    args = ["run", str(mini_suite), *adaptive, "--out", str(out), *common]
    status = main(args)
    text = capsys.readouterr().out
    assert status in (0, 1) and "adaptive: stopped at round" in text
    manifest = json.loads((out / "manifest.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    record = manifest["adaptive"]
    assert summary["adaptive"] == record
    n = record["stopped"]["samples_per_case"]
    assert record["stopped"]["decision"] in ("pass", "fail", "budget")
    assert record["looks"][-1]["samples_per_case"] == n and n in record["design"]["looks"]
    assert set(record["samples_per_case"].values()) == {n}  # every case the same number
    assert all(c["samples"] == n for c in manifest["identity"]["cases"].values())
    assert _n_samples(out) == 2 * n
    assert record["samples_saved_per_case"] == 3 - n
    # the cost saved against the fixed budget: the same per-sample cost for the samples not drawn
    cost = summary["usage"]["cost"]["total"]
    assert record["cost_saved_estimate"] == pytest.approx(cost * (3 / n - 1))
    # the same command again samples nothing new and reaches the same decision
    assert main(args) == status
    assert _n_samples(out) == 2 * n
    assert json.loads((out / "manifest.json").read_text())["adaptive"]["stopped"] == record["stopped"]
    # a replay of the adaptive run is an ordinary run of its n samples per case
    assert main(["run", str(mini_suite), "--model", f"replay:{out}", "--out", str(tmp_path / "r"), "-q"]) == 0
    assert _n_samples(tmp_path / "r") == 2 * n


@pytest.mark.model
def test_an_adaptive_run_interrupted_between_rounds_is_unfinished_then_resumes(
    mini_suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import leader_eval.decide.adaptive as adaptive
    from leader_eval.runs.options import RunOptions

    golden, base = tmp_path / "golden", tmp_path / "base"
    assert main(["run", str(mini_suite), "--seed", "1", "--samples", "3", "--out", str(base), "-q"]) == 0
    assert main(["gate", str(base), "--golden", str(golden), "--update-golden"]) == 0
    out = tmp_path / "a"
    options = RunOptions(seed=2, max_tokens=32, out=out, progress=False)
    design = AdaptiveDesign(budget=3, futility=0.0)  # never stops early: two cases cannot reach its levels
    real = adaptive._set_target

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(adaptive, "_set_target", interrupted)
    with pytest.raises(KeyboardInterrupt):
        adaptive.run_adaptive(mini_suite, options, design, golden_dir=str(golden))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and [x["decision"] for x in manifest["adaptive"]["looks"]] == [
        "continue"
    ]
    assert _n_samples(out) == 2 * 2
    # a plain gate on the unfinished run does not pass it
    assert main(["gate", str(out), "--golden", str(golden)]) == 1
    monkeypatch.setattr(adaptive, "_set_target", real)
    res = adaptive.run_adaptive(mini_suite, options, design, golden_dir=str(golden))
    assert [x["decision"] for x in res.record["looks"]] == ["continue", "budget"]
    assert res.record["stopped"] == {**res.record["stopped"], "round": 2, "samples_per_case": 3}
    assert _n_samples(out) == 2 * 3 and res.run.manifest["status"] == "complete"
