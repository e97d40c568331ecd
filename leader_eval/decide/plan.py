"""Plan samples per case from a golden: the gate's power to catch a drop, and what 80% needs.

``leader-eval plan SUITE --golden DIR`` reads the golden's per-case rates of a metric (``score``
by default) and simulates the gate's own decision for that metric (``stats.simulated_power``, the
one simulation of the gate statistic): a golden run with the golden's samples per case and a
candidate run with the suite's (or ``--samples``), both drawn from the per-case rates, the
candidate's rates worsened so the suite value drops by ``d`` (``stats.worsened_rates``). The gate
fails the metric when the metric's declared test (``metrics.Metric.test``: the exact stratified
count test for 0/1 observations, the paired t-test otherwise) is significant at the level the gate
really applies and the drop exceeds the golden's tolerance.

The level: the gate tests the run's gated metrics (``metrics.gated_metrics``: 5 on a single-turn
suite, 8 on an episode suite) as one Holm family with Tarone's refinement (``stats.holm_alphas``).
A count-test metric whose golden events could never reach significance (e.g. no hard fail, or
one, in a few samples per case) takes no share; the others do. The plan uses Holm's first-step
level ``alpha / K``, the least any one metric is tested at, so the power shown is a floor (a
metric tested after another was rejected gets more). Samples per case for 80% power assume the
golden is re-recorded with as many samples as the run (the golden's own noise otherwise caps the
power). Every figure is a seeded simulation: 2,000 draws per cell, standard error at most 0.011.

The gate's power guard (``gate.gate``) reports these same numbers for the suite's ``detect``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from leader_eval.bounded.monotone import last_true
from leader_eval.bounded.numeric import np
from leader_eval.errors import LeaderEvalError
from leader_eval.stats.core import exact_count_test, simulated_power, tarone_family
from leader_eval.stats.metrics import ALL_METRICS, Metric, gated_metrics, known_metric

__all__ = ["MAX_SAMPLES", "MetricPower", "PowerPlan", "gate_family", "metric_power", "plan_power", "power_guard"]

DROPS = (0.05, 0.10, 0.20)
TARGET_POWER = 0.8
MAX_SAMPLES = 1024
N_SIM = 2000
#: most simulated case draws (draws x cases) per cell
SIM_CELLS = 400_000
#: power_guard's recent answers (a pure function of its inputs; the adaptive gate and pytest's
#: gate of several suites ask again with the same golden)
_GUARD_CACHE: dict[str, tuple[MetricPower, ...]] = {}


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
    n_sim: int = N_SIM
    test: str = "exact_count"


@dataclass(frozen=True)
class MetricPower:
    """The gate's power for one metric against one drop (the power guard's row)."""

    metric: str
    drop: float
    power: float
    level: float
    run_samples: int
    #: samples per case (golden and run) for TARGET_POWER; None above MAX_SAMPLES or not searched
    samples_needed: int | None
    searched: bool


def _spec(name: str) -> Metric:
    """A gated metric's definition: the table's, or a rubric criterion's (``judge:NAME``)."""
    spec = known_metric(name)
    if spec is None:
        raise KeyError(name)
    return spec


def _case_arrays(golden: Mapping[str, Any], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(per-case rates, per-case golden samples) of ``metric`` in sorted case order."""
    spec = known_metric(metric)
    key = spec.case_field if spec is not None else None
    cases = golden.get("cases") or {}
    if key is None:
        raise LeaderEvalError(f"metric {metric!r} has no per-case golden values to plan from")
    recs = [rec for _, rec in sorted(cases.items()) if rec.get(key) is not None and rec.get("n_samples")]
    if len(recs) < 2:
        raise LeaderEvalError("the golden has fewer than 2 cases with per-case rates: nothing to plan from")
    p = np.array([float(r[key]) for r in recs])
    n = np.array([int(r["n_samples"]) for r in recs])
    return p, n


def gate_family(golden: Mapping[str, Any], alpha: float) -> tuple[float, list[str], list[str]]:
    """(Holm's first-step level, the family that takes a share, the metrics Tarone leaves out)
    for a run with the golden's own events (no regression)."""
    min_p: dict[str, float] = {}
    cases = golden.get("cases") or {}
    for name in gated_metrics(golden.get("metrics") or {}):
        spec = _spec(name)
        key = spec.case_field or name
        if spec.test == "exact_count" and cases:
            counts = {
                cid: (spec.count(rec), int(rec.get("n_samples") or 0)) for cid, rec in cases.items() if key in rec
            }
            # a run with no event: the most extreme outcome is "every event lands in the golden"
            # (higher is better) or "in the run" (lower is better)
            zero = {cid: (0, n) for cid, (_, n) in counts.items()}
            test = exact_count_test(counts, zero)
            min_p[name] = test.min_p_less if spec.higher_is_better else test.min_p_more
        else:
            min_p[name] = 0.0
    family = tarone_family(min_p, alpha)
    return alpha / max(1, len(family)), family, [m for m in min_p if m not in family]


def metric_power(
    golden: Mapping[str, Any],
    metric: str,
    *,
    run_samples: int,
    drop: float,
    level: float,
    tolerance: float | None = None,
    n_sim: int = N_SIM,
    seed: int = 0,
    search: bool = True,
    always: bool = False,
) -> MetricPower:
    """The gate's power to catch ``drop`` in ``metric`` at ``level``, and (``search``) the samples
    per case that reach ``TARGET_POWER`` when it is below (``always``: whatever the power)."""
    spec = _spec(metric)
    p, n_golden = _case_arrays(golden, metric)
    # bounded work for a suite of many cases (where the power is high anyway): at least 200 draws
    n_sim = min(n_sim, max(200, SIM_CELLS // p.size))
    if tolerance is None:
        gm = (golden.get("metrics") or {}).get(metric) or {}
        tolerance = float(gm.get("tolerance", spec.tolerance))

    def power(n_g: Any, n_r: int, key: int) -> float:
        return simulated_power(
            p,
            n_g,
            n_r,
            drop=drop,
            level=level,
            tolerance=tolerance,
            test=spec.test,
            higher_is_better=spec.higher_is_better,
            n_sim=n_sim,
            # keyed by the drop, so the guard's figure for detect 0.10 is plan's row for 0.10
            seed=[seed, round(drop * 1_000_000), key],
        )

    now = power(n_golden, run_samples, 0)
    needed: int | None = None
    searched = search and (always or now < TARGET_POWER)
    if searched:
        needed = _samples_for(lambda k: power(k, k, k) >= TARGET_POWER)
    return MetricPower(metric, drop, now, level, run_samples, needed, searched)


def power_guard(
    golden: Mapping[str, Any],
    *,
    run_samples: int,
    alpha: float,
    detect: float,
    metrics: Sequence[str] | None = None,
    n_sim: int = N_SIM,
) -> list[MetricPower]:
    """The gate's power guard: for each tested metric, the power to catch a drop of ``detect`` at
    Holm's first-step level, with the samples per case for 80% where it is below (``plan``'s
    numbers). ``metrics``: the metrics to check (default ``gated_metrics`` of the golden). A metric
    Tarone leaves out of the family is checked too: its test cannot reach the level on the
    golden's events, and the simulation shows what that costs (often all of its power)."""
    key = json.dumps(
        [golden.get("cases"), golden.get("metrics"), run_samples, alpha, detect, metrics, n_sim], sort_keys=True
    )
    if key in _GUARD_CACHE:
        return list(_GUARD_CACHE[key])
    level, family, left_out = gate_family(golden, alpha)
    names = list(metrics if metrics is not None else (*family, *left_out))
    out = []
    for name in names:
        spec = _spec(name)
        gm = (golden.get("metrics") or {}).get(name) or {}
        try:
            p, _ = _case_arrays(golden, name)
        except LeaderEvalError:
            continue  # no per-case rates for it (an edited golden): the unpaired rule gates it
        tolerance = float(gm.get("tolerance", spec.tolerance))
        value = float(np.mean(p))
        room = value if spec.higher_is_better else 1.0 - value
        if room <= tolerance:
            # already at its worst end (a score of 0): no drop beyond the tolerance is possible, so
            # there is nothing for the gate to catch in it
            continue
        drop = min(detect, room)
        out.append(metric_power(golden, name, run_samples=run_samples, drop=drop, level=level, n_sim=n_sim))
    if len(_GUARD_CACHE) >= 64:
        _GUARD_CACHE.pop(next(iter(_GUARD_CACHE)))
    _GUARD_CACHE[key] = tuple(out)
    return out


def plan_power(
    golden: Mapping[str, Any],
    *,
    run_samples: int,
    metric: str = "score",
    alpha: float = 0.05,
    drops: Sequence[float] = DROPS,
    n_sim: int = N_SIM,
    seed: int = 0,
) -> PowerPlan:
    """The gate's power against ``golden`` for each drop, and samples per case for 80% power."""
    spec = ALL_METRICS.get(metric)
    if spec is None or not spec.gating or spec.case_field is None:
        gated = ", ".join(gated_metrics(ALL_METRICS))
        raise LeaderEvalError(f"plan covers the metrics the gate tests ({gated}), not {metric!r}")
    if run_samples < 1:
        raise LeaderEvalError(f"samples per case must be >= 1, got {run_samples}")
    if not 0 < alpha < 0.5:
        raise LeaderEvalError(f"alpha must lie in (0, 0.5), got {alpha}")
    if metric not in (golden.get("metrics") or {}):
        raise LeaderEvalError(f"the golden has no {metric!r} (a suite without episodes has no episode metrics)")
    p, n_golden = _case_arrays(golden, metric)
    gm = (golden.get("metrics") or {}).get(metric) or {}
    tolerance = float(gm.get("tolerance", spec.tolerance))
    level, family, left_out = gate_family(golden, alpha)
    value = float(np.mean(p))
    plan = PowerPlan(
        metric, value, tolerance, p.size, int(np.median(n_golden)), run_samples, alpha, level, family, left_out
    )
    plan.n_sim = n_sim
    plan.test = spec.test
    for d in drops:
        row = metric_power(
            golden,
            metric,
            run_samples=run_samples,
            drop=d,
            level=level,
            tolerance=tolerance,
            n_sim=n_sim,
            seed=seed,
            always=True,
        )
        plan.rows[d] = (row.power, row.samples_needed)
        worse_room = value if spec.higher_is_better else 1 - value
        if d > worse_room:
            plan.notes.append(f"a drop of {d:g} is more than {metric} can fall from {value:.3f}: rates reach their end")
    return plan


def _samples_for(ok: Any) -> int | None:
    """Least k in 1..MAX_SAMPLES with ``ok(k)`` (power non-decreasing in k), None when even the most fails."""
    if not ok(MAX_SAMPLES):
        return None
    return last_true(lambda k: not ok(k), MAX_SAMPLES - 1) + 1
