"""Adaptive sampling for the gate: sample in rounds, stop as soon as more samples cannot change the decision.

Design (a group-sequential test with alpha spending, applied to the gate's own statistics):

- Rounds: every case gets the same number of samples per round (``looks``, default a first look
  at 40% of the budget ``B``, then one sample per case per round). Stopping is decided for the run as a whole from the
  gate's family of paired tests, never per case on that case's own outcomes (which would bias
  its estimate).
- Efficacy (the gate fails): at look ``k`` the real ``gate.gate`` runs at the nominal level
  ``c_k`` of a Lan-DeMets O'Brien-Fleming-type spending function
  ``alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t))``, computed exactly on the canonical joint
  distribution of the looks' z statistics (recursive numerical integration). The information
  fraction is taken as ``t_k = n_k / B``. The golden's own noise is a variance term that more
  candidate samples do not shrink, so the true fractions are larger and the true correlations
  between looks higher than assumed; by Slepian's inequality the chance of crossing any boundary
  under no regression is then at most the one computed, so peeking cannot inflate false alarms
  (up to the normal approximation of the gate's test statistic).
- Multiplicity: the gate tests its metrics as one Holm family at the level it is given. Any false
  alarm of Holm at level ``A`` needs some true-null metric with ``p <= A / m`` (``m`` the true
  nulls in the family), so the level handed to the gate at look ``k`` is
  ``min over m = 1..K of m * c_k(alpha / m)``: each metric's own sequential test then stays at
  ``alpha / m`` and the union over the ``m`` true nulls at ``alpha``. ``K`` is the number of
  metrics the gate tests on this run (``metrics.gated_metrics``: 8 on an episode suite, 5
  otherwise; an upper bound on the Tarone family the gate uses).
- A declared count budget (``max_hard_fails``) that is exceeded stays exceeded with more
  samples: the run stops and fails at once.
- Futility (the gate passes): after look ``k``, for every metric of the family, the conditional
  probability under the current trend that the final look would both reach significance and
  show a drop beyond the tolerance is bounded by ``min(CP_significance, CP_tolerance)``; when
  that bound is below ``futility`` (default 0.01) for every metric, sampling stops with a pass.
  Futility stopping is non-binding: it can only turn a rejection into an acceptance, so it never
  raises the false-alarm rate; its cost is power, measured in ``docs/statistics.md``.

Bounds: ``1 <= looks[0] < ... < looks[-1] = B <= 1000``; at most 20 looks; ``0 < alpha < 0.5``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from statistics import NormalDist
from typing import Any

from leader_eval.bounded.numeric import np
from leader_eval.decide.gate import apply_error_rule, gate
from leader_eval.decide.golden import check_golden_suite, golden_path, load_golden, parse_tolerances
from leader_eval.errors import LeaderEvalError
from leader_eval.runs.evaluate import run
from leader_eval.stats.core import gate_statistic
from leader_eval.stats.metrics import METRICS, gated_metrics
from leader_eval.store.run_store import MANIFEST, SUMMARY, RunDir, run_dir_lock, write_json_atomic
from leader_eval.suite.load import Suite, load_suite

__all__ = [
    "AdaptiveDesign",
    "AdaptiveResult",
    "Look",
    "SimCell",
    "conditional_power",
    "family_size",
    "gate_levels",
    "nominal_levels",
    "run_adaptive",
    "simulate",
    "spent",
]

_N = NormalDist()
_MAX_LOOKS = 20
_GRID = 1201  # points of the integration grid per look (error well below 1e-5 of alpha)


def spent(t: float, alpha: float) -> float:
    """Alpha spent by information fraction ``t`` (Lan-DeMets, O'Brien-Fleming type)."""
    if t <= 0:
        return 0.0
    return min(alpha, 2.0 - 2.0 * _N.cdf(_N.inv_cdf(1.0 - alpha / 2.0) / math.sqrt(min(t, 1.0))))


def _sf(x: np.ndarray) -> np.ndarray:
    return 0.5 * np.vectorize(math.erfc)(x / math.sqrt(2.0))


@lru_cache(maxsize=256)
def _nominal(fractions: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    """One-sided nominal p-value boundaries whose joint crossing probability under no change is
    ``alpha``, spent by ``spent`` at ``fractions`` (independent increments of the B-value process)."""
    levels: list[float] = []
    prev_t = 0.0
    grid: np.ndarray | None = None
    dens: np.ndarray | None = None  # sub-density of B(t_{k-1}) on the not-yet-stopped region
    for t in fractions:
        target = spent(t, alpha) - spent(prev_t, alpha)
        if grid is None or dens is None:
            z = _N.inv_cdf(1.0 - max(target, 1e-300))
            levels.append(1.0 - _N.cdf(z))
            b = z * math.sqrt(t)
            grid = np.linspace(-8.0 * math.sqrt(t), b, _GRID)
            dens = np.exp(-0.5 * grid**2 / t) / math.sqrt(2 * math.pi * t)
        else:
            sd = math.sqrt(t - prev_t)
            dx = grid[1] - grid[0]
            wts = dens * dx
            wts[0] *= 0.5
            wts[-1] *= 0.5

            def cross(b: float, wts: np.ndarray = wts, grid: np.ndarray = grid, sd: float = sd) -> float:
                return float(np.sum(wts * _sf((b - grid) / sd)))

            lo, hi = -10.0 * math.sqrt(t), 12.0 * math.sqrt(t)
            if target <= 0 or cross(hi) >= target:
                b = hi
            else:
                for _ in range(60):
                    mid = (lo + hi) / 2
                    if cross(mid) > target:
                        lo = mid
                    else:
                        hi = mid
                b = hi
            levels.append(1.0 - _N.cdf(b / math.sqrt(t)))
            new = np.linspace(-8.0 * math.sqrt(t), b, _GRID)
            kern = np.exp(-0.5 * ((new[:, None] - grid[None, :]) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
            dens, grid = kern @ wts, new
        prev_t = t
    return tuple(levels)


def nominal_levels(looks: Sequence[int], alpha: float) -> list[float]:
    """The nominal one-sided level of each look (``looks``: samples per case at each look)."""
    fractions = tuple(n / looks[-1] for n in looks)
    return list(_nominal(fractions, float(alpha)))


def gate_levels(looks: Sequence[int], alpha: float, family: int) -> list[float]:
    """The ``alpha`` handed to the gate (its Holm family) at each look: ``min_m m * c_k(alpha/m)``."""
    per_m = [nominal_levels(looks, alpha / m) for m in range(1, max(1, family) + 1)]
    return [min((m + 1) * levels[k] for m, levels in enumerate(per_m)) for k in range(len(looks))]


def conditional_power(p_worse: float, t: float, final_level: float, drop: float, tolerance: float, se: float) -> float:
    """Upper bound, under the current trend, on the chance that the final look fails this metric.

    ``p_worse``: the one-sided p-value now; ``drop``: the shortfall now (positive = worse);
    ``se``: its standard error now; ``t``: the information fraction now.
    """
    if t >= 1.0:
        return 0.0
    z = _N.inv_cdf(min(max(1.0 - p_worse, 1e-12), 1 - 1e-12))
    z_final = _N.inv_cdf(1.0 - final_level)
    cp_sig = 1.0 - _N.cdf((z_final - z / math.sqrt(t)) / math.sqrt(1.0 - t))
    sd = se * math.sqrt(t * (1.0 - t))
    cp_tol = (1.0 if drop > tolerance else 0.0) if sd <= 0 else 1.0 - _N.cdf((tolerance - drop) / sd)
    return min(cp_sig, cp_tol)


@dataclass
class Look:
    """What one round's look decided."""

    round: int
    samples_per_case: int
    level: float  # the alpha handed to the gate at this look
    decision: str  # "fail" (efficacy), "pass" (futility), "continue", "budget" (last look)
    statistic: dict[str, float] = field(default_factory=dict)  # metric -> one-sided p now
    conditional_power: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "samples_per_case": self.samples_per_case,
            "level": self.level,
            "decision": self.decision,
            "p_worse": dict(self.statistic),
            "conditional_power": dict(self.conditional_power),
        }


@dataclass(frozen=True)
class AdaptiveDesign:
    """A group-sequential plan: the looks (samples per case), alpha and the futility threshold."""

    budget: int
    alpha: float = 0.05
    futility: float = 0.01
    family: int = 3
    looks: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.budget, int) or not 1 <= self.budget <= 1000:
            raise LeaderEvalError(f"--budget must be a whole number of samples per case in 1..1000, got {self.budget}")
        if not 0 < self.alpha < 0.5:
            raise LeaderEvalError(f"alpha must lie in (0, 0.5), got {self.alpha}")
        if not 0 <= self.futility < 1:
            raise LeaderEvalError(f"futility threshold must lie in [0, 1), got {self.futility}")
        looks = self.looks or _default_looks(self.budget)
        if list(looks) != sorted(set(looks)) or looks[0] < 1 or looks[-1] != self.budget or len(looks) > _MAX_LOOKS:
            raise LeaderEvalError(f"looks must rise strictly from >= 1 to the budget {self.budget}, got {list(looks)}")
        object.__setattr__(self, "looks", tuple(looks))

    @property
    def levels(self) -> list[float]:
        return gate_levels(self.looks, self.alpha, self.family)

    def fraction(self, k: int) -> float:
        return self.looks[k] / self.budget

    def futile(self, k: int, rows: Mapping[str, tuple[float, float, float, float]]) -> dict[str, float]:
        """Conditional power per metric at look ``k`` from ``rows``: metric -> (p_worse, drop, tol, se)."""
        final = self.levels[-1]
        return {
            name: conditional_power(p, self.fraction(k), final, drop, tol, se)
            for name, (p, drop, tol, se) in rows.items()
        }


def _default_looks(budget: int) -> tuple[int, ...]:
    """First look at 40% of the budget, then one sample per case per round (at most ``_MAX_LOOKS``
    looks, evenly spread beyond that). A first look at one sample per case stops too often on
    noise: it cost up to 0.06 of power in the simulation grid, this schedule 0.04 at most."""
    first = max(1, math.ceil(0.4 * budget))
    looks = list(range(first, budget + 1))
    if len(looks) > _MAX_LOOKS:
        looks = sorted({first + round((budget - first) * i / (_MAX_LOOKS - 1)) for i in range(_MAX_LOOKS)})
    return tuple(looks)


# --------------------------------------------------------------------------------------------
# Operating characteristics by simulation (tests, bench and docs/statistics.md use it)


@dataclass(frozen=True)
class SimCell:
    """One scenario's figures: share of runs the gate failed, and mean samples per case used."""

    n_cases: int
    base: float
    change: float
    fixed_fail: float
    adaptive_fail: float
    mean_samples: float


def family_size(golden_metrics: Iterable[str], run_metrics: Iterable[str]) -> int:
    """The size of the Holm family the gate tests a run on (``metrics.gated_metrics`` of the metrics
    both the golden and the run have): 8 on an episode suite, 5 on a single-turn one."""

    return max(1, len(gated_metrics(set(golden_metrics) & set(run_metrics))))


def _score_test() -> str:
    """The test the gate declares for the headline metric (``metrics.Metric.test``)."""

    return METRICS["score"].test


def case_rates(
    rng: np.random.Generator, reps: int, n_cases: int, base: float, change: float, concentration: float
) -> tuple[np.ndarray, np.ndarray]:
    """Simulated per-case pass rates: ``p_i ~ Beta(base * c, (1 - base) * c)`` per replicate, and
    the same rates scaled so the suite rate moves by ``change`` (clipped to [0, 1])."""
    p = rng.beta(base * concentration, (1 - base) * concentration, size=(reps, n_cases))
    mean = p.mean(axis=1, keepdims=True)
    return p, np.clip(p * np.maximum(0.0, mean + change) / mean, 0.0, 1.0)


def simulate(
    design: AdaptiveDesign,
    *,
    n_cases: int,
    base: float,
    change: float,
    tolerance: float = 0.05,
    reps: int = 400,
    seed: int = 0,
    concentration: float = 4.0,
) -> SimCell:
    """Run the fixed-n gate and the adaptive one on the same simulated runs.

    Per replicate: case pass rates ``p_i ~ Beta(base * c, (1 - base) * c)``; a golden of
    ``budget`` samples per case; a candidate whose rates are scaled so the suite rate moves by
    ``change``; each sample a Bernoulli outcome. The gate statistic is the gate's own
    (``stats.gate_statistic`` with the headline metric's declared test; one metric in the family;
    a fail needs significance and a drop beyond ``tolerance``).
    """

    rng = np.random.default_rng(seed)
    b = design.budget
    p, q = case_rates(rng, reps, n_cases, base, change, concentration)
    g = rng.binomial(b, p)
    test = _score_test()
    x = (rng.random((reps, n_cases, b)) < q[:, :, None]).cumsum(axis=2)
    levels = design.levels
    stopped = np.zeros(reps, dtype=bool)
    failed = np.zeros(reps, dtype=bool)
    used = np.full(reps, float(b))
    fixed_fail = np.zeros(reps, dtype=bool)
    for k, n in enumerate(design.looks):
        stat = gate_statistic(g, b, x[:, :, n - 1], n, test=test)
        diff, se, pw = stat.diff, stat.se, stat.p_worse
        drop = -diff
        fail_now = (pw < levels[k]) & (drop > tolerance)
        if n == b:
            fixed_fail = (pw < design.alpha) & (drop > tolerance)
            new = ~stopped
            failed |= new & fail_now
            used[new] = n
            stopped |= new
            break
        cp = np.array(
            [
                conditional_power(float(pw[i]), n / b, levels[-1], float(drop[i]), tolerance, float(se[i]))
                for i in range(reps)
            ]
        )
        stop = ~stopped & (fail_now | (cp < design.futility))
        failed |= stop & fail_now
        used[stop] = n
        stopped |= stop
    return SimCell(n_cases, base, change, float(fixed_fail.mean()), float(failed.mean()), float(used.mean()))


# --------------------------------------------------------------------------------------------
# The controller: rounds of ``evaluate.run`` on one run directory, the gate after each


@dataclass
class AdaptiveResult:
    """The run as it stopped, the gate's decision at the stopping look, and the record."""

    run: Any  # evaluate.Run
    gate: Any  # gate.GateResult
    record: dict[str, Any]


def _z95_se(low: float | None, high: float | None) -> float:
    if low is None or high is None:
        return 0.0
    return max(0.0, (float(high) - float(low)) / (2 * _N.inv_cdf(0.975)))


def _trend_rows(gate_result: Any) -> dict[str, tuple[float, float, float, float]]:
    """Per tested metric: (one-sided p now, drop now (positive = worse), tolerance, its se)."""
    rows: dict[str, tuple[float, float, float, float]] = {}
    for r in gate_result.rows:
        if r.kind != "test" or r.verdict == "info" or r.p_value is None or r.delta is None:
            continue
        drop = -float(r.delta) if r.direction == "higher" else float(r.delta)
        rows[r.metric] = (float(r.p_value), drop, float(r.tolerance), _z95_se(r.delta_low, r.delta_high))
    return rows


def _set_target(out: Any, n: int) -> None:
    """Raise the run's per-case target to ``n``: the same run, extended (its samples stay)."""

    with run_dir_lock(out):
        rundir = RunDir(out)
        manifest = rundir.read_manifest()
        for case in manifest["identity"]["cases"].values():
            case["samples"] = n
        rundir.write_manifest(manifest)


def _savings(summary: Mapping[str, Any], design: AdaptiveDesign, used: int) -> dict[str, Any]:
    """What the fixed budget would have cost on top (same per-sample cost and tokens)."""
    scale = design.budget / used - 1.0
    out: dict[str, Any] = {"samples_saved_per_case": design.budget - used}
    tokens = summary.get("tokens") or {}
    out["tokens_saved_estimate"] = round((tokens.get("prompt", 0) + tokens.get("completion", 0)) * scale)
    cost = (summary.get("usage") or {}).get("cost")
    if isinstance(cost, Mapping) and isinstance(cost.get("total"), int | float):
        out["cost_saved_estimate"] = float(cost["total"]) * scale
        out["fixed_budget_cost_estimate"] = float(cost["total"]) * (scale + 1.0)
        if cost.get("currency"):
            out["currency"] = cost["currency"]
    return out


def run_adaptive(
    suite: Any,
    options: Any,
    design: AdaptiveDesign,
    *,
    golden_dir: str = "golden",
    tolerances: Mapping[str, float] | Sequence[str] | None = None,
    max_error_rate: float = 0.0,
    across_suites: bool = False,
    baseline: str = "main",
) -> AdaptiveResult:
    """Sample ``suite`` in rounds (``design.looks``) into one run directory, gating after each.

    Stops at the first look where the gate fails at that look's level (efficacy, or a declared
    budget exceeded), where no gated metric could still fail by the last look (futility), where
    the gate cannot decide (stale, incomplete, sampler errors), or at the budget. The record
    (``adaptive`` in the manifest and the summary) lists every look: samples per case, the level,
    each metric's one-sided p-value and conditional power, and the decision. Re-running the same
    command resumes at the round that was interrupted; a finished adaptive run is not extended.
    ``across_suites``: gate against a golden made from other content of the same suite (a scaffold
    variant with the same case ids, as ``compare --across-suites``); the record names both hashes.
    ``baseline``: the golden every look is gated against (``golden/<suite>/<baseline>.json``).
    """
    from dataclasses import replace
    from pathlib import Path

    suite = suite if isinstance(suite, Suite) else load_suite(suite)
    path = golden_path(golden_dir, suite.name, baseline)
    if load_golden(path) is None:  # before anything is sampled: every look gates against it
        raise LeaderEvalError(
            f"{path}: no golden baseline {baseline!r}: --adaptive gates against a golden "
            f"(create it from a trusted run: leader-eval update-golden TRUSTED_RUN_DIR --baseline {baseline})"
        )
    tols = parse_tolerances(tolerances) if tolerances else {}
    looks: list[dict[str, Any]] = []
    start = 0
    out = Path(options.out) if options.out is not None else None
    if out is not None and RunDir(out).exists():
        previous = RunDir(out).read_manifest().get("adaptive") or {}
        if previous.get("looks") and previous.get("design", {}).get("looks") != list(design.looks):
            raise LeaderEvalError(f"{out / MANIFEST}:1: an adaptive run with other looks; choose another --out")
        looks = list(previous.get("looks") or [])
        # a finished run re-gates its last look and samples nothing new; else resume the next round
        start = len(looks) - 1 if looks and looks[-1]["decision"] != "continue" else len(looks)
    result = gate_result = None
    for k in range(start, len(design.looks)):
        n = design.looks[k]
        if out is not None and RunDir(out).exists():
            _set_target(out, n)
        result = run(suite, replace(options, samples=n, out=out))
        out = result.path
        golden = load_golden(path)
        if golden is None:
            raise LeaderEvalError(f"{path}: no golden baseline {baseline!r}: --adaptive gates against a golden")
        check_golden_suite(path, golden, suite.name)
        other_content = None
        if across_suites and golden.get("suite_hash") != result.manifest["identity"]["suite_hash"]:
            other_content = golden.get("suite_hash")
            golden = {**golden, "suite_hash": result.manifest["identity"]["suite_hash"]}
        design = replace(design, family=family_size(golden.get("metrics") or {}, result.summary["overall"]["metrics"]))
        level = design.levels[k]
        # the power guard speaks of a fixed-n gate; the sequential design has its own figures
        gate_result = gate(
            result,
            golden,
            alpha=level,
            tolerances=tols,
            golden_file=path,
            baseline=baseline,
            suite_gate=suite.gate,
            power=False,
        )
        apply_error_rule(gate_result, result, max_error_rate)
        trend = _trend_rows(gate_result)
        cp = design.futile(k, trend) if k + 1 < len(design.looks) else {}
        if gate_result.status not in ("pass", "fail"):
            decision = "undecided"  # stale, incomplete, errors: more samples cannot mend that
        elif gate_result.status == "fail":
            decision = "fail"
        elif k + 1 == len(design.looks):
            decision = "budget"
        elif all(v < design.futility for v in cp.values()):
            decision = "pass"
        else:
            decision = "continue"
        look = Look(k + 1, n, level, decision, {m: v[0] for m, v in trend.items()}, cp).to_dict()
        looks = [*looks[:k], look]
        record = {
            "design": {
                "budget": design.budget,
                "looks": list(design.looks),
                "alpha": design.alpha,
                "futility": design.futility,
                "family": design.family,
                "spending": "Lan-DeMets O'Brien-Fleming type, information fraction n/budget",
                "levels": design.levels,
            },
            "looks": looks,
            "samples_per_case": {c["case_id"]: int(c.get("n_samples", n)) for c in result.cases},
            "stopped": {"round": k + 1, "samples_per_case": n, "decision": decision, "why": _why(look, design)},
            **_savings(result.summary, design, n),
        }
        if other_content is not None:
            record["across_suites"] = {"golden_suite_hash": other_content}
        rundir = RunDir(result.path)
        manifest = rundir.read_manifest()
        manifest["adaptive"] = record
        if decision == "continue":
            # until the next round is in, the run is unfinished: a plain `gate` on it says so
            # instead of deciding on a round the sequential design has not finished with
            manifest["status"] = "interrupted"
            manifest["stopped_by"] = "adaptive: between rounds (re-run the command to resume)"
        else:
            manifest.pop("stopped_by", None)
        rundir.write_manifest(manifest)
        result.manifest = manifest
        result.summary["adaptive"] = record
        write_json_atomic(result.path / SUMMARY, result.summary)
        if decision != "continue":
            return AdaptiveResult(result, gate_result, record)
    raise AssertionError("unreachable: the last look always decides")  # pragma: no cover


def _why(look: Mapping[str, Any], design: AdaptiveDesign) -> str:
    d = look["decision"]
    ps = ", ".join(f"{m} p={p:.3g}" for m, p in sorted(look["p_worse"].items()))
    if d == "fail":
        return f"efficacy: the gate fails at this look's level {look['level']:.3g} ({ps})"
    if d == "pass":
        cps = ", ".join(f"{m} {v:.3g}" for m, v in sorted(look["conditional_power"].items()))
        return f"futility: conditional power of a fail by the last look below {design.futility:g} ({cps})"
    if d == "budget":
        return f"budget: {design.budget} samples per case reached; gate at level {look['level']:.3g} ({ps})"
    return "undecided: the gate cannot decide on this run (stale, incomplete or sampler errors)"
