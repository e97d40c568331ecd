"""Plan samples per case from a golden: the gate's power to catch a drop, and what 80% needs.

``leader-eval plan SUITE --golden DIR`` reads the golden's per-case rates of a metric (``score``
by default) and simulates the gate's own decision for that metric: a golden run with the
golden's samples per case and a candidate run with the suite's (or ``--samples``), both drawn
from the per-case rates, the candidate's rates lowered so the suite value drops by ``d`` (every
case's rate scaled by ``(m - d) / m``, m the golden value). The gate fails the metric when the
weighted paired t-test over cases is significant at the level the gate really applies and the
drop exceeds the golden's tolerance.

The level: the gate tests its gating metrics as one Holm family with Tarone's refinement
(``golden.holm_alphas``). A rare-event metric whose golden events could never reach significance
(e.g. no hard fail, or one, in a few samples per case) takes no share; the others do. The plan
uses Holm's first-step level ``alpha / K``, the least any one metric is tested at, so the power
shown is a floor (a metric tested after another was rejected gets more). Samples per case for
80% power assume the golden is re-recorded with as many samples as the run (the golden's own
noise otherwise caps the power). Every figure is a seeded simulation: 2,000 draws per cell,
standard error at most 0.011.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leader_eval.errors import LeaderEvalError
from leader_eval.golden import CASE_FIELDS, tarone_family
from leader_eval.inert import inert
from leader_eval.metrics import GATING, METRICS
from leader_eval.stats import exact_count_test, t_quantile

__all__ = ["PowerPlan", "format_plan", "plan_power"]

DROPS = (0.05, 0.10, 0.20)
TARGET_POWER = 0.8
MAX_SAMPLES = 1024


@dataclass
class PowerPlan:
    metric: str
    golden_value: float
    tolerance: float
    n_cases: int
    golden_samples: int
    run_samples: int
    alpha: float
    level: float
    family: list[str]
    left_out: list[str]
    #: drop -> (power at run_samples, samples per case for TARGET_POWER or None when above MAX_SAMPLES)
    rows: dict[float, tuple[float, int | None]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    n_sim: int = 2000


def _case_arrays(golden: Mapping[str, Any], metric: str) -> tuple[np.ndarray, np.ndarray, int]:
    key = next((k for k, m in CASE_FIELDS.items() if m == metric), None)
    cases = golden.get("cases") or {}
    if key is None:
        raise LeaderEvalError(f"metric {metric!r} has no per-case golden values to plan from")
    recs = [rec for _, rec in sorted(cases.items()) if rec.get(key) is not None and rec.get("n_samples")]
    if len(recs) < 2:
        raise LeaderEvalError("the golden has fewer than 2 cases with per-case rates: nothing to plan from")
    p = np.array([float(r[key]) for r in recs])
    n = [int(r["n_samples"]) for r in recs]
    # golden files record unweighted case rates; weights live in the run, equal weights here
    return p, np.ones_like(p), int(np.median(n))


def _gate_level(golden: Mapping[str, Any], alpha: float) -> tuple[float, list[str], list[str]]:
    """Holm's first-step level for a run with the golden's own events (no regression)."""
    min_p: dict[str, float] = {}
    cases = golden.get("cases") or {}
    for name in GATING:
        spec = METRICS[name]
        if name not in (golden.get("metrics") or {}):
            continue
        if spec.test == "exact_count" and cases:
            counts = {cid: (spec.count(rec), int(rec.get("n_samples") or 0)) for cid, rec in cases.items()}
            # a run with no event: the most extreme outcome is "every event lands in the run"
            zero = {cid: (0, n) for cid, (_, n) in counts.items()}
            min_p[name] = exact_count_test(counts, zero).min_p_more
        else:
            min_p[name] = 0.0
    family = tarone_family(min_p, alpha)
    return alpha / max(1, len(family)), family, [m for m in min_p if m not in family]


def _power(
    p: np.ndarray,
    w: np.ndarray,
    n_golden: int,
    n_run: int,
    drop: float,
    level: float,
    tolerance: float,
    n_sim: int,
    rng: np.random.Generator,
) -> float:
    """Share of simulated (golden, run) pairs in which the gate fails the metric."""
    m = float(np.sum(w * p) / np.sum(w))
    q = p * max(0.0, m - drop) / m if m > 0 else p
    g = rng.binomial(n_golden, p, size=(n_sim, p.size)) / n_golden
    c = rng.binomial(n_run, q, size=(n_sim, p.size)) / n_run
    d = c - g
    sw = float(w.sum())
    diff = (d * w).sum(axis=1) / sw
    resid = w * (d - diff[:, None]) / sw
    n = p.size
    se = np.sqrt(n / (n - 1) * (resid * resid).sum(axis=1))
    crit = t_quantile(1.0 - level, n - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, diff / np.where(se > 0, se, 1.0), 0.0)
    significant = t < -crit
    # no spread: the gate's exact sign-flip fallback, one-sided p = 2^-n when all moved down
    significant |= (se == 0) & (diff < 0) & (0.5**n < level)
    practical = -diff > tolerance
    return float(np.mean(significant & practical))


def plan_power(
    golden: Mapping[str, Any],
    *,
    run_samples: int,
    metric: str = "score",
    alpha: float = 0.05,
    drops: Sequence[float] = DROPS,
    n_sim: int = 2000,
    seed: int = 0,
) -> PowerPlan:
    """The gate's power against ``golden`` for each drop, and samples per case for 80% power."""
    if metric not in METRICS or METRICS[metric].test != "paired_t":
        raise LeaderEvalError(f"plan covers metrics the paired t-test gates, not {metric!r}")
    if run_samples < 1:
        raise LeaderEvalError(f"samples per case must be >= 1, got {run_samples}")
    if not 0 < alpha < 0.5:
        raise LeaderEvalError(f"alpha must lie in (0, 0.5), got {alpha}")
    p, w, n_golden = _case_arrays(golden, metric)
    gm = (golden.get("metrics") or {}).get(metric) or {}
    tolerance = float(gm.get("tolerance", METRICS[metric].tolerance))
    level, family, left_out = _gate_level(golden, alpha)
    value = float(np.sum(w * p) / np.sum(w))
    plan = PowerPlan(metric, value, tolerance, p.size, n_golden, run_samples, alpha, level, family, left_out)
    plan.n_sim = n_sim
    for i, d in enumerate(drops):
        rng = np.random.default_rng([seed, i])
        now = _power(p, w, n_golden, run_samples, d, level, tolerance, n_sim, rng)
        plan.rows[d] = (now, _samples_for(p, w, d, level, tolerance, n_sim, seed + i))
        if d > value:
            plan.notes.append(f"a drop of {d:g} is more than the golden {metric} {value:.3f}: rates fall to 0")
    return plan


def _samples_for(
    p: np.ndarray, w: np.ndarray, drop: float, level: float, tol: float, n_sim: int, seed: int
) -> int | None:
    """Least k (golden and run at k samples per case) whose simulated power reaches the target."""

    def ok(k: int) -> bool:
        return _power(p, w, k, k, drop, level, tol, n_sim, np.random.default_rng([seed, k])) >= TARGET_POWER

    if not ok(MAX_SAMPLES):
        return None
    lo, hi = 0, 1
    while not ok(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def format_plan(plan: PowerPlan, *, source: str = "") -> str:
    """The power table for the terminal (plain text, one row per drop)."""
    from leader_eval.report import table

    left = f"; Tarone leaves out {', '.join(plan.left_out)} (their tests cannot reach it)" if plan.left_out else ""
    lines = [
        f"power plan for {plan.metric}{' from ' + source if source else ''}: golden {plan.golden_value:.3f} over "
        f"{plan.n_cases} cases, {plan.golden_samples} samples per case; tolerance {plan.tolerance:g}",
        f"gate level: one-sided alpha {plan.alpha:g} / {len(plan.family)} = {plan.level:.4g} "
        f"(Holm's first step over {', '.join(plan.family)}{left})",
        table(
            ["drop", f"power at {plan.run_samples} samples/case", "samples/case for 80% power"],
            [
                [f"{d:.2f}", f"{pw:.2f}", str(k) if k is not None else f"> {MAX_SAMPLES}"]
                for d, (pw, k) in sorted(plan.rows.items())
            ],
        ),
        f"(seeded simulation, {plan.n_sim} draws per cell; samples/case for 80% assumes the golden is re-recorded "
        "with as many samples as the run; power is a floor: a metric tested after another was rejected gets more)",
    ]
    lines.extend(f"note: {n}" for n in plan.notes)
    if not math.isfinite(plan.golden_value):
        lines.append("note: the golden value is not a number")
    return inert("\n".join(lines), multiline=True)  # a fragment from a suite, run or golden: one line, no escapes
