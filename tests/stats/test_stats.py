"""Tests for leader_eval.stats.core: exact formulas, and calibration measured by simulation.

The simulations use fixed seeds, so every run sees the same numbers; inside simulation loops the
bootstrap uses 1,000 resamples and the permutation test 2,000 sign patterns (the library defaults
are 2,000 and 10,000) to keep the file under a minute on two shared cores.

Simulation model (the same one docs/statistics.md reports): a population of cases whose true pass
probability is p ~ Beta(a, b); a suite draws N cases from it and k samples per case, each passing
with probability p. Case score = passes / k; suite score = weighted mean of case scores. The
estimand is the population suite score E[w p] / E[w]; with weights drawn independently of p it is
E[p] = a / (a + b).

``python tests/stats/test_stats.py`` reruns the larger simulations behind the figures in the docs.
"""

from __future__ import annotations

import itertools
import json
import math
import pickle
import sys
from collections.abc import Callable
from typing import Literal

import numpy as np
import pytest

from leader_eval.stats.core import (
    Estimate,
    PairedComparison,
    holm_adjusted,
    holm_alphas,
    paired_compare,
    pass_at_k,
    pass_hat_k,
    pool_runs,
    rate_ci,
    regression_verdict,
    run_spread,
    suite_estimate,
    tarone_family,
    weighted_mean_ci,
)

SIM_BOOT = 1000
SIM_PERM = 2000

# --------------------------------------------------------------------------------------------
# Simulation helpers (shared by the tests and the __main__ report)
# --------------------------------------------------------------------------------------------


def _case_scores(rng: np.random.Generator, p: np.ndarray, k: int) -> np.ndarray:
    return rng.binomial(k, p) / k


def coverage(
    n_cases: int, k: int, beta: tuple[float, float], weighted: bool, n_sims: int, seed: int, n_boot: int = SIM_BOOT
) -> float:
    """Fraction of simulated suites whose 95% interval contains the population suite score."""
    rng = np.random.default_rng(seed)
    a, b = beta
    truth = a / (a + b)
    hits = 0
    for i in range(n_sims):
        p = rng.beta(a, b, size=n_cases)
        scores = _case_scores(rng, p, k)
        w = rng.integers(1, 4, size=n_cases).astype(float) if weighted else None
        est = weighted_mean_ci(scores, w, n_samples=n_cases * k, n_boot=n_boot, seed=i)
        hits += est.low <= truth <= est.high
    return hits / n_sims


def gate_rates(
    n_cases: int,
    k: int,
    beta: tuple[float, float],
    drop: float,
    n_sims: int,
    seed: int,
    *,
    paired: bool,
    alpha: float = 0.05,
    n_boot: int = SIM_BOOT,
    n_perm: int = SIM_PERM,
    test: Literal["t", "sign_flip"] = "t",
) -> dict[str, float]:
    """Run the regression gate on simulated runs whose true score is ``drop`` below golden.

    Unpaired: the golden value is the population score itself (a fixed, known baseline) and each
    current run draws fresh cases. Paired: each simulation draws one suite, a golden run and a
    current run of the same cases; the golden value is the golden run's observed score and the
    paired comparison goes to the gate. ``drop`` scales every case's p by (m - drop) / m, so the
    population mean falls by exactly ``drop``.

    Paired runs also count what the unpaired rule would have said with the (noisy) golden run
    score as golden (``fail_unpaired``) and how often both rules fire (``fail_both``).
    """
    rng = np.random.default_rng(seed)
    a, b = beta
    m = a / (a + b)
    shrink = (m - drop) / m
    fails = improved = significant = fail_unpaired = fail_both = 0
    for i in range(n_sims):
        p = rng.beta(a, b, size=n_cases)
        current_scores = _case_scores(rng, p * shrink, k)
        current = weighted_mean_ci(current_scores, n_samples=n_cases * k, n_boot=n_boot, seed=i)
        comparison = None
        golden = m
        if paired:
            golden_scores = _case_scores(rng, p, k)
            golden = float(golden_scores.mean())
            ids = [f"c{j}" for j in range(n_cases)]
            comparison = paired_compare(
                dict(zip(ids, golden_scores.tolist(), strict=True)),
                dict(zip(ids, current_scores.tolist(), strict=True)),
                n_boot=n_boot,
                n_perm=n_perm,
                seed=i,
                test=test,
            )
            significant += comparison.p_value < alpha
        verdict, _ = regression_verdict(
            golden, current, higher_is_better=True, tolerance=0.0, paired=comparison, alpha=alpha
        )
        fails += verdict == "fail"
        improved += verdict == "improved"
        if paired:
            alone = regression_verdict(golden, current, higher_is_better=True, tolerance=0.0, alpha=alpha)[0]
            fail_unpaired += alone == "fail"
            fail_both += alone == "fail" and verdict == "fail"
    rates = {"fail": fails / n_sims, "improved": improved / n_sims, "p_below_alpha": significant / n_sims}
    if paired:
        rates |= {"fail_unpaired": fail_unpaired / n_sims, "fail_both": fail_both / n_sims}
    return rates


# --------------------------------------------------------------------------------------------
# pass@k and pass^k
# --------------------------------------------------------------------------------------------


def _brute_force(n: int, c: int, k: int, all_pass: bool) -> float:
    """Average over every k-subset of n samples (c of which pass) of any/all passing."""
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    agg: Callable[[tuple[bool, ...]], bool] = all if all_pass else any
    return sum(agg(s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_and_pass_hat_k_match_subset_enumeration(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(_brute_force(n, c, k, all_pass=False), abs=1e-12)
            assert pass_hat_k(n, c, k) == pytest.approx(_brute_force(n, c, k, all_pass=True), abs=1e-12)


def test_pass_at_k_edge_cases() -> None:
    assert pass_at_k(10, 0, 3) == 0.0
    assert pass_at_k(10, 10, 3) == 1.0
    assert pass_hat_k(10, 0, 3) == 0.0
    assert pass_hat_k(10, 10, 3) == 1.0
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)  # pass@1 is the plain pass rate
    assert pass_hat_k(5, 2, 1) == pytest.approx(0.4)
    # Large n stays finite and exact where the binomials themselves would overflow a float.
    assert pass_at_k(100_000, 5, 1000) == pytest.approx(1 - math.comb(99_995, 1000) / math.comb(100_000, 1000))
    assert type(pass_at_k(4, 1, 2)) is float and type(pass_hat_k(4, 1, 2)) is float


def test_pass_at_k_of_no_pass_or_one_is_numpys_product_bit_for_bit() -> None:
    # a case of one sample (c <= 1) is computed without numpy: the product it stands for
    for n in range(1, 120):
        for c in (0, 1):
            for k in range(1, n + 1):
                want = 1.0 if n - c < k else float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=float)))
                assert pass_at_k(n, c, k) == want
    assert repr(pass_at_k(np.int64(5), np.int64(1), np.int64(2))) == repr(pass_at_k(5, 1, 2)) == "0.4"
    with pytest.raises(TypeError):
        pass_at_k(5, 1.0, 2)  # type: ignore[arg-type]


@pytest.mark.parametrize(("n", "c", "k"), [(3, 1, 4), (3, 1, 0), (3, 4, 1), (3, -1, 1), (0, 0, 1)])
def test_pass_at_k_rejects_impossible_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


# --------------------------------------------------------------------------------------------
# Estimates: shape, edge cases, determinism
# --------------------------------------------------------------------------------------------


def test_estimate_holds_builtin_types_and_round_trips() -> None:
    est = weighted_mean_ci(np.array([0.2, 0.5, 0.9, 1.0, 0.0, 0.7]), np.array([1, 2, 1, 1, 3, 1]), n_samples=18)
    d = est.to_dict()
    assert {type(v) for k, v in d.items() if k not in ("n_cases", "n_samples", "note")} == {float}
    assert type(d["n_cases"]) is int and type(d["n_samples"]) is int
    assert (d["n_cases"], d["n_samples"]) == (6, 18)
    assert Estimate.from_dict(json.loads(json.dumps(d))) == est
    assert pickle.loads(pickle.dumps(est)) == est
    assert est.low <= est.value <= est.high
    assert est.value == pytest.approx((0.2 + 1.0 + 0.9 + 1.0 + 0.0 + 0.7) / 9)


def test_same_inputs_and_seed_give_identical_estimate() -> None:
    rng = np.random.default_rng(7)
    scores = rng.binomial(3, rng.beta(4, 1, size=30)) / 3
    weights = rng.integers(1, 4, size=30)
    first = weighted_mean_ci(scores, weights, seed=11)
    assert weighted_mean_ci(list(scores), list(weights), seed=11) == first
    other_seed = weighted_mean_ci(scores, weights, seed=12)
    assert other_seed.value == first.value and (other_seed.low, other_seed.high) != (first.low, first.high)


def test_suite_estimate_averages_samples_per_case_then_weights_cases() -> None:
    samples = {"b": [1, 0, 1], "a": [1, 1, 1, 1], "c": [0, 0]}
    est = suite_estimate(samples, {"a": 1.0, "b": 2.0, "c": 1.0})
    assert est.value == pytest.approx((1.0 + 2 * (2 / 3) + 0.0) / 4)
    assert (est.n_cases, est.n_samples) == (3, 9)
    assert suite_estimate(dict(reversed(list(samples.items())))) == suite_estimate(samples)
    with pytest.raises(ValueError, match="no samples"):
        suite_estimate({"a": []})


def test_t_quantiles_match_tables() -> None:
    from leader_eval.stats.core import _t_ppf

    for df, q in ((1, 12.706205), (4, 2.776445), (19, 2.093024), (59, 2.000995), (1000, 1.962339)):
        assert _t_ppf(0.975, df) == pytest.approx(q, abs=1e-5)


def test_degenerate_inputs_say_so() -> None:
    empty = weighted_mean_ci([])
    assert math.isnan(empty.value) and empty.n_cases == 0 and empty.note == "no cases"
    one = weighted_mean_ci([0.4], n_samples=5)
    assert (one.value, one.low, one.high, one.n_samples) == (0.4, 0.4, 0.4, 5) and "one case" in one.note
    flat = weighted_mean_ci([0.5] * 10)
    assert (flat.low, flat.high) == (0.5, 0.5) and "zero width" in flat.note


@pytest.mark.parametrize("weighted", ["none", "unit", "whole"])
def test_binary_case_scores_given_as_lists_estimate_as_the_arrays_do(weighted: str) -> None:
    """Lists of 0/1 scores with whole-number weights are counted without numpy; the estimate is
    the arrays' bit for bit (value, ends, effective n in the note), for every size and mix (unit
    weights, the usual suite's, are counted by sets and sums: the same numbers)."""
    rng = np.random.default_rng(7)
    for trial in range(400):
        n = int(rng.integers(0, 40))
        scores = [int(v) if trial % 2 else float(v) for v in rng.integers(0, 2, n)]
        weights = {
            "none": None,
            "unit": [1 if trial % 3 else 1.0] * n,
            "whole": [float(w) for w in rng.choice([1, 2, 3, 10, 4096, 65536], n)],
        }[weighted]
        arrays = weighted_mean_ci(np.asarray(scores, dtype=float), None if weights is None else np.asarray(weights))
        lists = weighted_mean_ci(scores, weights)
        assert repr(lists) == repr(arrays)
    # what is not a count goes the arrays' way, errors included
    assert weighted_mean_ci([0.0, 0.5, 1.0]).note == weighted_mean_ci(np.array([0.0, 0.5, 1.0])).note
    assert weighted_mean_ci([0, 1, 1], [1.5, 1.0, 2.0]) == weighted_mean_ci(
        np.array([0, 1, 1]), np.array([1.5, 1.0, 2.0])
    )
    with pytest.raises(ValueError):
        weighted_mean_ci([0, 1], [1.0, 0.0])
    with pytest.raises(ValueError):
        weighted_mean_ci([0, 1], [1.0])
    with pytest.raises(ValueError):
        weighted_mean_ci([0, 1], seed=-1)  # what numpy's generator refuses is refused
    with pytest.raises(TypeError):
        weighted_mean_ci([1], seed="x")  # type: ignore[arg-type]


def test_all_passing_binary_cases_get_a_nondegenerate_wilson_interval() -> None:
    # 20/20 cases passing must not read as certainty: Wilson gives about [0.84, 1].
    est = weighted_mean_ci([1.0] * 20)
    assert est.value == 1.0 and est.high == 1.0
    assert est.low == pytest.approx(20 / (20 + 1.959964**2), abs=1e-6)
    assert "Wilson" in est.note


def test_invalid_inputs_are_rejected() -> None:
    with pytest.raises(ValueError):
        weighted_mean_ci([0.1, 0.2], [1.0])
    with pytest.raises(ValueError):
        weighted_mean_ci([0.1, 0.2], [1.0, 0.0])
    with pytest.raises(ValueError):
        weighted_mean_ci([0.1, float("nan")])
    with pytest.raises(ValueError):
        weighted_mean_ci([0.1, 0.2], confidence=1.0)


def test_rate_ci_is_the_wilson_interval() -> None:
    est = rate_ci(3, 10)
    # Reference values of the 95% Wilson interval for 3/10.
    assert (est.value, est.low, est.high) == pytest.approx((0.3, 0.10779, 0.60322), abs=1e-5)
    assert (est.n_samples, est.n_cases) == (10, 10)
    assert rate_ci(0, 50).low == 0.0 and rate_ci(50, 50).high == 1.0
    assert rate_ci(3, 30, n_cases=10).n_cases == 10
    assert math.isnan(rate_ci(0, 0).value)
    with pytest.raises(ValueError):
        rate_ci(4, 3)


# --------------------------------------------------------------------------------------------
# Coverage of the suite-score interval
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n_cases", "beta", "weighted"),
    [
        (20, (2.0, 2.0), False),  # mean 0.5, unweighted
        (20, (4.0, 1.0), True),  # mean 0.8, skewed, weights 1-3: the hard small-suite case
        (50, (2.0, 2.0), False),
        (50, (4.0, 1.0), True),
    ],
)
def test_suite_interval_covers_population_score_93_to_97_percent(
    n_cases: int, beta: tuple[float, float], weighted: bool
) -> None:
    cov = coverage(n_cases, k=3, beta=beta, weighted=weighted, n_sims=1000, seed=100 + n_cases)
    print(f"coverage N={n_cases} k=3 Beta{beta} weighted={weighted}: {cov:.3f}")
    assert 0.93 <= cov <= 0.97


@pytest.mark.parametrize("n_cases", [20, 50])
def test_binary_case_scores_interval_has_exact_95_percent_average_coverage(n_cases: int) -> None:
    # With one 0/1 result per case the suite score is Binomial(n, p) / n, so coverage can be
    # computed exactly: sum the probability of every outcome whose interval contains p.
    intervals = [weighted_mean_ci([1.0] * x + [0.0] * (n_cases - x)) for x in range(n_cases + 1)]
    grid = np.linspace(0.05, 0.95, 91)
    cov = [
        sum(
            math.comb(n_cases, x) * p**x * (1 - p) ** (n_cases - x)
            for x, e in enumerate(intervals)
            if e.low <= p <= e.high
        )
        for p in grid
    ]
    print(f"binary N={n_cases}: mean coverage {np.mean(cov):.4f}, min {min(cov):.4f}")
    assert 0.945 <= float(np.mean(cov)) <= 0.96
    assert min(cov) >= 0.92  # Wilson dips; a percentile bootstrap covers 0.88 at p = 0.9 (n = 20)


# --------------------------------------------------------------------------------------------
# Paired comparison
# --------------------------------------------------------------------------------------------


def test_paired_compare_uses_common_cases_and_orders_b_minus_a() -> None:
    a = {"x": 0.0, "y": 0.5, "z": 1.0, "only_a": 0.0}
    b = {"x": 1.0, "y": 1.0, "z": 1.0, "only_b": 0.0}
    pc = paired_compare(a, b, {"x": 2.0, "y": 1.0, "z": 1.0})
    assert pc.n_cases == 3
    assert (pc.a, pc.b) == pytest.approx((1.5 / 4, 1.0))
    assert pc.diff == pytest.approx(pc.b - pc.a)
    assert pc.low <= pc.diff <= pc.high
    # Two cases differ, both the same way: exact p = 2 of 4 sign patterns are as extreme.
    assert paired_compare(a, b, {"x": 2.0, "y": 1.0, "z": 1.0}, test="sign_flip").p_value == pytest.approx(0.5)
    assert PairedComparison.from_dict(json.loads(json.dumps(pc.to_dict()))) == pc
    with pytest.raises(ValueError, match="no cases in common"):
        paired_compare({"a": 1.0}, {"b": 1.0})
    with pytest.raises(ValueError, match="no weight"):
        paired_compare(a, b, {"x": 1.0})


def test_paired_t_test_matches_textbook_value() -> None:
    # Differences 1..5: t = 3 / (1.5811 / sqrt 5) = 4.2426 on 4 df, two-sided p = 0.013236.
    pc = paired_compare({str(i): 0.0 for i in range(5)}, {str(i): float(i + 1) for i in range(5)})
    assert pc.test == "t" and pc.p_value == pytest.approx(0.013236, abs=2e-6)
    assert pc.diff == 3.0


def test_paired_t_test_with_identical_differences_falls_back_to_exact_sign_flip() -> None:
    a = {str(i): 0.0 for i in range(4)}
    same = paired_compare(a, {str(i): 0.5 for i in range(4)})
    assert (same.p_value, same.test) == (pytest.approx(2 / 2**4), "sign_flip_exact")
    assert paired_compare(a, a).p_value == 1.0


def test_sign_flip_exact_p_value_matches_enumeration() -> None:
    rng = np.random.default_rng(3)
    diffs = rng.normal(0.1, 0.3, size=10)
    a = {str(i): 0.5 for i in range(10)}
    b = {str(i): 0.5 + float(diffs[i]) for i in range(10)}
    pc = paired_compare(a, b, test="sign_flip")
    diffs = np.array([b[str(i)] - 0.5 for i in range(10)])
    sums = [abs(float(np.dot(signs, diffs))) for signs in itertools.product((-1, 1), repeat=10)]
    expected = np.mean(np.array(sums) >= abs(diffs.sum()) - 1e-12)
    assert pc.test == "sign_flip_exact" and pc.p_value == pytest.approx(expected)


def test_paired_compare_is_deterministic_and_detects_a_clear_difference() -> None:
    rng = np.random.default_rng(4)
    p = rng.beta(4, 1, size=100)
    a = {f"c{i}": float(s) for i, s in enumerate(rng.binomial(3, p) / 3)}
    b = {f"c{i}": float(s) for i, s in enumerate(rng.binomial(3, p * 0.7) / 3)}
    first = paired_compare(a, b, seed=1)
    assert paired_compare(a, b, seed=1) == first
    assert first.p_value < 0.001 and first.high < 0
    mc = paired_compare(a, b, test="sign_flip", n_perm=2000, seed=1)
    assert mc.test == "sign_flip_mc" and mc.p_value == pytest.approx(1 / 2001)
    assert paired_compare(a, b, test="sign_flip", n_perm=2000, seed=1) == mc


def test_no_real_difference_paired_p_below_005_in_3_to_7_percent_and_gate_false_alarm() -> None:
    # Same cases, golden run and current run from the same per-case pass probabilities.
    rates = gate_rates(50, 3, (4.0, 1.0), 0.0, n_sims=1500, seed=21, paired=True)
    print(f"no difference, paired, N=50 k=3: {rates}")
    assert 0.03 <= rates["p_below_alpha"] <= 0.07
    assert 0.03 <= rates["fail"] <= 0.07


# --------------------------------------------------------------------------------------------
# Regression gate
# --------------------------------------------------------------------------------------------


def _est(value: float, low: float, high: float, n: int = 30) -> Estimate:
    return Estimate(value, low, high, n, n * 3)


def test_gate_rules_on_hand_made_estimates() -> None:
    # 95% interval [0.70, 0.80] around 0.75; one-sided 95% upper bound ~ 0.75 + 0.05 * 1.645 / 1.96.
    cur = _est(0.75, 0.70, 0.80)
    assert regression_verdict(0.85, cur, higher_is_better=True, tolerance=0.0)[0] == "fail"
    assert regression_verdict(0.79, cur, higher_is_better=True, tolerance=0.0)[0] == "pass"  # inside the bound
    assert regression_verdict(0.85, cur, higher_is_better=True, tolerance=0.12)[0] == "pass"  # within tolerance
    assert regression_verdict(0.65, cur, higher_is_better=True, tolerance=0.0)[0] == "improved"
    # Lower is better (e.g. hard-fail rate): the same numbers mean the opposite.
    assert regression_verdict(0.85, cur, higher_is_better=False, tolerance=0.0)[0] == "improved"
    assert regression_verdict(0.65, cur, higher_is_better=False, tolerance=0.0)[0] == "fail"
    # The one-sided bound at alpha=0.05 sits inside the 95% interval: golden 0.795 is inside the
    # interval but beyond 0.75 + 0.05 * 0.839 = 0.792, so the one-sided gate flags it.
    assert regression_verdict(0.795, cur, higher_is_better=True, tolerance=0.0)[0] == "fail"
    # An Estimate computed at 1 - 2*alpha is used as is.
    cur90 = Estimate(0.75, 0.70, 0.80, 30, 90, confidence=0.90)
    assert regression_verdict(0.795, cur90, higher_is_better=True, tolerance=0.0)[0] == "pass"
    _, why = regression_verdict(0.85, cur, higher_is_better=True, tolerance=0.0)
    assert "0.75" in why and "0.85" in why and "\n" not in why


def test_gate_with_paired_comparison_follows_the_paired_test() -> None:
    cur = _est(0.75, 0.60, 0.90)  # wide interval: unpaired, golden 0.85 would pass
    assert regression_verdict(0.85, cur, higher_is_better=True, tolerance=0.0)[0] == "pass"
    worse = PairedComparison("score", 0.85, 0.75, -0.10, -0.15, -0.05, 0.04, 30)
    assert regression_verdict(0.85, cur, higher_is_better=True, tolerance=0.0, paired=worse)[0] == "fail"
    weak = PairedComparison("score", 0.85, 0.75, -0.10, -0.2, 0.01, 0.12, 30)
    assert regression_verdict(0.85, cur, higher_is_better=True, tolerance=0.0, paired=weak)[0] == "pass"
    assert regression_verdict(0.85, cur, higher_is_better=True, tolerance=0.2, paired=worse)[0] == "pass"


def test_gate_refuses_empty_estimate_and_does_not_judge_one_case() -> None:
    with pytest.raises(ValueError):
        regression_verdict(0.5, weighted_mean_ci([]), higher_is_better=True, tolerance=0.0)
    verdict, why = regression_verdict(0.9, weighted_mean_ci([0.1]), higher_is_better=True, tolerance=0.0)
    assert verdict == "pass" and "too few" in why


def test_no_real_difference_unpaired_gate_false_alarm_3_to_7_percent() -> None:
    # Golden = the true population score; the current run is a fresh draw of 50 cases x 3.
    rates = gate_rates(50, 3, (4.0, 1.0), 0.0, n_sims=2000, seed=31, paired=False)
    print(f"no difference, unpaired, N=50 k=3: {rates}")
    assert 0.03 <= rates["fail"] <= 0.07
    assert 0.03 <= rates["improved"] <= 0.07


@pytest.mark.parametrize("paired", [False, True])
def test_power_twenty_point_drop_on_200_cases(paired: bool) -> None:
    rates = gate_rates(200, 3, (4.0, 1.0), 0.20, n_sims=150, seed=41, paired=paired)
    assert rates["fail"] >= 0.99


def test_power_five_point_drop_grows_with_cases() -> None:
    # Reported, not a calibration target: the demo's 20 cases x 3 samples rarely sees 5 points.
    power = {n: gate_rates(n, 3, (4.0, 1.0), 0.05, n_sims=300, seed=51, paired=True)["fail"] for n in (20, 60)}
    print(f"power, 5-point drop, paired, k=3: {power}")
    assert power[20] < power[60]


# --------------------------------------------------------------------------------------------
# Repeated runs

# --------------------------------------------------------------------------------------------
# One family of tests: Holm's step-down procedure with Tarone's refinement
# --------------------------------------------------------------------------------------------


def test_holm_levels_reproduce_step_down_decisions() -> None:
    levels = holm_alphas({"a": 0.001, "b": 0.02, "c": 0.3}, 0.05)
    assert levels == pytest.approx({"a": 0.05 / 3, "b": 0.05 / 2, "c": 0.05})
    # after the first non-rejection, every later hypothesis keeps that level
    levels = holm_alphas({"a": 0.001, "b": 0.03, "c": 0.04}, 0.05)
    assert levels["b"] == pytest.approx(0.025) and levels["c"] == pytest.approx(0.025)
    # a hypothesis without a p-value (unpaired interval test) gets Bonferroni's share
    levels = holm_alphas({"a": 0.001, "b": None}, 0.05)
    assert levels["b"] == pytest.approx(0.025) and levels["a"] == pytest.approx(0.025)


def test_holm_tarone_leaves_out_tests_that_cannot_reach_their_share() -> None:
    # hard_fail's test can give no p below 1/3 (one event, 6 vs 3 samples): it takes no share,
    # so the two others are tested at alpha / 2 at Holm's first step, not alpha / 3
    p = {"score": 0.03, "tool": 0.2, "hard": 1 / 3}
    levels = holm_alphas(p, 0.05, min_p={"hard": 1 / 3})
    assert levels["score"] == pytest.approx(0.025) and levels["tool"] == pytest.approx(0.025)
    assert tarone_family({"score": 0.0, "tool": 0.0, "hard": 1 / 3}, 0.05) == ["score", "tool"]
    # a test that can reach alpha / 3 keeps its share
    levels = holm_alphas(p, 0.05, min_p={"hard": 0.004})
    assert levels["score"] == pytest.approx(0.05 / 3)
    # after a rejection the family shrinks again: score rejected at 0.025, tool then gets 0.05
    levels = holm_alphas({"score": 0.001, "tool": 0.04, "hard": 1.0}, 0.05, min_p={"hard": 1.0})
    assert levels["tool"] == pytest.approx(0.05)
    # every testable hypothesis is an unpaired one: the count test that cannot reach alpha / K
    # keeps a valid (positive) level it cannot reject at
    levels = holm_alphas({"score": None, "hard": 1.0}, 0.05, min_p={"hard": 1.0})
    assert levels == pytest.approx({"score": 0.05, "hard": 0.05})


def test_holm_adjusted_p_values_make_the_decisions_of_holm_levels() -> None:
    # flaky's adjusted p-values and the gate's levels walk one step-down order (holm_steps):
    # adjusted p < alpha exactly where p < its level, for any family without min_p
    rng = np.random.default_rng(5)
    for _ in range(200):
        k = int(rng.integers(1, 9))
        p = {
            f"h{i}": float(x) for i, x in enumerate(rng.choice([0.001, 0.004, 0.01, 0.02, 0.2, 0.6], k) * rng.random(k))
        }
        adjusted, levels = holm_adjusted(p), holm_alphas(p, 0.05)
        assert {n: adjusted[n] < 0.05 for n in p} == {n: p[n] < levels[n] for n in p}
    assert holm_adjusted({"a": 0.01, "b": 0.04, "c": 0.03}) == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06})
    assert holm_adjusted({"a": 0.5, "b": 0.9}) == {"a": 1.0, "b": 1.0}


# --------------------------------------------------------------------------------------------


def test_pool_runs_and_run_spread() -> None:
    runs = [{"a": 1.0, "b": 0.0}, {"b": 1.0, "a": 1.0}, {"a": 0.5, "b": 0.5}]
    assert pool_runs(runs) == {"a": pytest.approx(2.5 / 3), "b": pytest.approx(0.5)}
    with pytest.raises(ValueError, match="different cases"):
        pool_runs([{"a": 1.0}, {"b": 1.0}])
    spread = run_spread([0.91, 0.93, 0.95])
    assert spread == {"mean": pytest.approx(0.93), "std": pytest.approx(0.02), "min": 0.91, "max": 0.95, "n": 3}
    assert all(type(v) in (float, int) for v in spread.values())
    assert run_spread([0.9])["std"] == 0.0


# --------------------------------------------------------------------------------------------
# The larger simulations behind docs/statistics.md
# --------------------------------------------------------------------------------------------


def _report() -> None:  # pragma: no cover - run by hand
    sims = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    print(f"coverage of the 95% interval ({sims} simulated suites each, n_boot={SIM_BOOT})")
    for n in (20, 50):
        for k in (1, 3):
            for beta in ((2.0, 2.0), (4.0, 1.0), (8.0, 1.0), (0.5, 0.5)):
                for weighted in (False, True):
                    cov = coverage(n, k, beta, weighted, sims, seed=1000 + n)
                    print(f"  N={n:3d} k={k} Beta{beta} weighted={weighted!s:5}: {cov:.3f}", flush=True)
    print(f"paired tests with no difference: two-sided p < 0.05 rate ({sims} simulations each)")
    for n in (10, 20, 50):
        for k in (1, 3, 10):
            for beta in ((4.0, 1.0), (0.5, 0.5)):
                tests: tuple[Literal["t", "sign_flip"], ...] = ("t", "sign_flip")
                rate = {
                    test: gate_rates(n, k, beta, 0.0, sims, seed=3000 + n, paired=True, test=test)["p_below_alpha"]
                    for test in tests
                }
                print(f"  N={n:3d} k={k:2d} Beta{beta}: {rate}", flush=True)
    print("gate, alpha=0.05, tolerance=0")
    for beta, k, drop, n_list in (
        ((4.0, 1.0), 3, 0.0, (20, 50, 60)),
        ((4.0, 1.0), 3, 0.05, (20, 60, 200)),
        ((4.0, 1.0), 3, 0.10, (20, 60)),
        ((4.0, 1.0), 3, 0.20, (20, 200)),
        ((0.5, 0.5), 10, 0.0, (50,)),
        ((0.5, 0.5), 10, 0.05, (50,)),
    ):
        for n in n_list:
            for paired in (False, True):
                r = gate_rates(n, k, beta, drop, sims, seed=2000 + n, paired=paired)
                shown = {key: round(v, 4) for key, v in r.items()}
                print(f"  Beta{beta} k={k:2d} drop={drop:.2f} N={n:3d} paired={paired!s:5}: {shown}", flush=True)


if __name__ == "__main__":  # pragma: no cover
    _report()


def test_two_and_three_cases_give_a_valid_interval() -> None:
    # small suites are common while writing one; the interval widens, it never errors
    for scores in ([0.2, 0.4], [0.5, 0.5, 1.0], [0.0, 1.0]):
        est = weighted_mean_ci(scores)
        assert est.low <= est.value <= est.high
        assert min(scores) <= est.low and est.high <= max(scores)


# --------------------------------------------------------------------------------------------
# exact stratified count test (rare events)


def _enumerated_count_p(a: dict[str, tuple[int, int]], b: dict[str, tuple[int, int]]) -> tuple[float, float]:
    """P(S >= obs), P(S <= obs) by enumerating every placement of each case's events."""
    from itertools import combinations, product

    per_case = []
    for cid in sorted(a):
        (xa, na), (xb, nb) = a[cid], b[cid]
        total = na + nb
        # sample slots 0..nb-1 belong to run B; every set of xa + xb event slots is equally likely
        per_case.append([sum(i < nb for i in c) for c in combinations(range(total), xa + xb)])
    obs = sum(x for x, _ in b.values())
    more = less = count = 0
    for combo in product(*per_case):
        s = sum(combo)
        count += 1
        more += s >= obs
        less += s <= obs
    return more / count, less / count


def test_exact_count_test_matches_enumeration() -> None:
    from leader_eval.stats.core import exact_count_test

    a = {"x": (0, 4), "y": (1, 3), "z": (2, 4), "w": (0, 2)}
    b = {"x": (1, 2), "y": (2, 3), "z": (0, 2), "w": (0, 2)}
    test = exact_count_test(a, b)
    more, less = _enumerated_count_p(a, b)
    assert test.p_more == pytest.approx(more) and test.p_less == pytest.approx(less)
    assert (test.events_a, test.events_b, test.n_cases) == (3, 3, 4)
    # one new event against a zero-event baseline of 6 vs 3 samples: its chance is 3/9
    one = exact_count_test({"c": (0, 6)}, {"c": (1, 3)})
    assert one.p_more == pytest.approx(1 / 3) and one.min_p_more == pytest.approx(1 / 3)
    # no event anywhere: the test can reach nothing
    none = exact_count_test({"c": (0, 6), "d": (0, 6)}, {"c": (0, 3), "d": (0, 3)})
    assert (none.p_more, none.p_less, none.min_p_more) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="7 events in 3 samples"):
        exact_count_test({"c": (0, 6)}, {"c": (7, 3)})


def test_exact_count_test_holds_its_level_when_case_rates_differ() -> None:
    """Cases with very different event rates (one always fails, most never): under no change the
    one-sided test rejects at 5% in at most 5% of simulated pairs (it is exact, so conservative)."""
    from leader_eval.stats.core import exact_count_test

    rng = np.random.default_rng(5)
    rates = np.r_[np.zeros(15), np.full(4, 0.05), np.full(2, 0.3), [1.0]]
    rejections = 0
    n_sim = 2000
    for _ in range(n_sim):
        ga = rng.binomial(6, rates)
        gb = rng.binomial(3, rates)
        t = exact_count_test(
            {f"c{i}": (int(x), 6) for i, x in enumerate(ga)}, {f"c{i}": (int(x), 3) for i, x in enumerate(gb)}
        )
        rejections += t.p_more < 0.05
    assert rejections / n_sim <= 0.05 + 2 * (0.05 * 0.95 / n_sim) ** 0.5


def test_exact_count_test_uses_its_normal_approximation_beyond_the_enumeration_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counts too large to enumerate are referred to the same statistic's normal approximation
    (never refused, never another test): a hostile golden cannot hang the gate, and the answer is
    close to the exact one where both can be computed."""
    import leader_eval.stats.core
    from leader_eval.stats.core import exact_count_test

    # a golden claiming a billion samples per case costs nothing: the support follows the run's samples
    huge = exact_count_test({"c": (500_000_000, 1_000_000_000)}, {"c": (2, 3)})
    assert 0 < huge.p_more <= 1 and huge.method == "exact"
    rng = np.random.default_rng(8)
    a = {f"c{i}": (int(x), 30) for i, x in enumerate(rng.binomial(30, 0.4, 40))}
    b = {f"c{i}": (int(x), 20) for i, x in enumerate(rng.binomial(20, 0.33, 40))}
    exact = exact_count_test(a, b)
    monkeypatch.setattr(leader_eval.stats.core, "EXACT_COUNT_WORK", 10)
    approx = exact_count_test(a, b)
    assert (exact.method, approx.method) == ("exact", "normal")
    assert approx.p_less == pytest.approx(exact.p_less, abs=0.003) and exact.p_less < 0.05
    assert approx.p_more == pytest.approx(exact.p_more, abs=0.003)
    assert 0 <= approx.min_p_less <= 1e-6 and approx.events_b == exact.events_b
