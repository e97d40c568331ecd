"""Adaptive compare: peeking keeps each direction's false alarms at alpha, stopping saves samples,
and a real run records its looks and resumes without resampling."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from leader_eval.cli.app import main
from leader_eval.decide.adaptive import AdaptiveDesign
from leader_eval.decide.adaptive_compare import RECORD, simulate_compare, split_config
from leader_eval.errors import LeaderEvalError
from leader_eval.suite.load import load_suite


def test_peeking_keeps_false_alarms_at_alpha_in_each_direction() -> None:
    design = AdaptiveDesign(budget=10, family=1)
    reps = 4000
    sim_error = 3 * math.sqrt(0.05 * 0.95 / reps)
    for n_cases, base, seed in ((30, 0.5, 1), (12, 0.8, 2)):
        cell = simulate_compare(design, n_cases=n_cases, base=base, change=0.0, reps=reps, seed=seed)
        assert cell["worse"] <= 0.05 + sim_error, cell
        assert cell["better"] <= 0.05 + sim_error, cell


class _FullAlphaEveryLook(AdaptiveDesign):
    """Naive peeking: every look tested at the full alpha (what the spending function prevents)."""

    @property
    def levels(self) -> list[float]:
        return [self.alpha] * len(self.looks)


def test_naive_peeking_at_full_alpha_would_inflate_what_the_design_prevents() -> None:
    reps = 2000
    kw = {"n_cases": 30, "base": 0.5, "change": 0.0, "reps": reps, "seed": 3}
    spent = simulate_compare(AdaptiveDesign(budget=10, family=1, futility=0.0), **kw)
    naive = simulate_compare(_FullAlphaEveryLook(budget=10, family=1, futility=0.0), **kw)
    assert naive["worse"] > spent["worse"] + 3 * math.sqrt(0.05 * 0.95 / reps)


def test_stopping_saves_samples_on_a_large_true_difference() -> None:
    design = AdaptiveDesign(budget=10, family=1)
    worse = simulate_compare(design, n_cases=30, base=0.6, change=-0.3, reps=400, seed=4)
    assert worse["worse"] >= 0.95  # found, in the right direction
    assert worse["mean_samples"] <= 0.6 * design.budget
    better = simulate_compare(design, n_cases=30, base=0.3, change=0.3, reps=400, seed=5)
    assert better["better"] >= 0.95 and better["worse"] == 0.0
    assert better["mean_samples"] <= 0.6 * design.budget


def test_config_is_suite_and_optional_model(tmp_path: Path) -> None:
    assert split_config("suites/x.yaml@local:smollm2") == ("suites/x.yaml", "local:smollm2")
    assert split_config("suites/x.yaml") == ("suites/x.yaml", None)
    odd = tmp_path / "a@b.yaml"
    odd.write_text("x")
    assert split_config(str(odd)) == (str(odd), None)  # an existing path is a suite, '@' and all
    with pytest.raises(LeaderEvalError):
        split_config("suites/x.yaml@")


def _n_samples(run: Path) -> int:
    return sum(1 for line in (run / "samples.jsonl").read_text().splitlines() if line.strip())


@pytest.mark.model
def test_real_adaptive_compare_records_looks_and_resumes_without_resampling(
    mini_suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp"
    args = ["compare-adaptive", "--a", str(mini_suite), "--b", f"{mini_suite}@local:smollm2", "--budget", "2"]
    args += ["--seed", "1", "--max-tokens", "16", "--out", str(out), "-q"]
    status = main(args)
    text = capsys.readouterr().out
    assert status in (0, 1) and "adaptive compare: stopped at round" in text
    record = json.loads((out / RECORD).read_text())
    stop = record["stopped"]
    n = stop["samples_per_case"]
    assert stop["decision"] in ("efficacy", "futility", "budget") and stop["why"]
    assert [look["samples_per_case"] for look in record["looks"]] == record["design"]["looks"][: stop["round"]]
    assert all(look["decision"] == "continue" for look in record["looks"][:-1])
    assert record["looks"][-1]["decision"] == stop["decision"]
    for side in ("a", "b"):
        assert set(record["samples_per_case"][side].values()) == {n}  # both sides, every case the same
        assert _n_samples(out / side) == 2 * n
    assert record["exit_status"] == status
    # the same command again samples nothing new and reaches the same decision
    assert main(args) == status
    assert json.loads((out / RECORD).read_text())["stopped"] == stop
    assert all(_n_samples(out / side) == 2 * n for side in ("a", "b"))
    # another design into the same directory is refused, nothing sampled
    assert main([*args[:6], "3", *args[7:]]) == 2
    assert all(_n_samples(out / side) == 2 * n for side in ("a", "b"))


def test_bad_input_samples_nothing(mini_suite: Path, tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    other = tmp_path / "other.yaml"
    other.write_text(mini_suite.read_text().replace("Say hello to the team.", "Say hello to everyone.", 1))
    base = ["compare-adaptive", "--a", str(mini_suite), "--seed", "1", "--out", str(out), "-q"]
    assert main([*base, "--b", str(tmp_path / "missing.yaml"), "--budget", "2"]) == 2
    assert load_suite(other).content_hash != load_suite(mini_suite).content_hash
    assert main([*base, "--b", str(other), "--budget", "2"]) == 2  # different content, no --across-suites
    assert main([*base, "--b", str(mini_suite), "--budget", "1001"]) == 2
    assert main([*base, "--b", str(mini_suite), "--budget", "2", "--futility", "1.5"]) == 2
    assert not (out / "a").exists() and not (out / RECORD).exists()


def _pair(*diffs: tuple[str, float, float, float, float, str]) -> object:
    from types import SimpleNamespace

    from leader_eval.decide.compare import MetricDiff
    from leader_eval.stats.metrics import ALL_METRICS

    est = SimpleNamespace(value=0.5, low=0.4, high=0.6)
    return SimpleNamespace(
        metrics=[
            MetricDiff(m, ALL_METRICS[m].higher_is_better, est, est, d, lo, hi, p, v)  # type: ignore[arg-type]
            for m, d, lo, hi, p, v in diffs
        ]
    )


def test_only_a_decision_metric_stops_and_a_trend_either_way_keeps_sampling() -> None:
    from leader_eval.decide.adaptive_compare import look_decision

    design = AdaptiveDesign(budget=6, family=1)
    flat = ("score", 0.0, -0.01, 0.01, 0.5, "no credible change")
    # the lenient format rate is a diagnostic: its "improvement" never stops the comparison
    info = ("lenient_format_rate", 0.3, 0.2, 0.4, 0.0001, "improvement")
    assert look_decision(_pair(flat, info), design, 0)[0] == "futility"
    assert look_decision(_pair(("score", -0.3, -0.4, -0.2, 0.0001, "regression")), design, 0)[0] == "efficacy"
    assert look_decision(_pair(("score", 0.3, 0.2, 0.4, 0.9999, "improvement")), design, 0)[0] == "efficacy"
    # a strong trend in either direction, not yet significant at this look: keep sampling
    for d in (0.1, -0.1):
        trend = ("score", d, d - 0.1, d + 0.1, 0.5 - d, "no credible change")
        decision, _, cp = look_decision(_pair(trend), design, 0)
        assert decision == "continue" and max(cp.values()) >= design.futility
    assert look_decision(_pair(flat), design, len(design.looks) - 1)[0] == "budget"
