"""Adaptive compare: sample two configurations in rounds, stop once more samples cannot change the verdict.

The gate's group-sequential design (``leader_eval.decide.adaptive``) applied to ``compare``:

- Rounds: configurations A and B (a suite and a model each) get the same samples per case at
  every look (``AdaptiveDesign.looks``, default first look at 40% of the budget, then one sample
  per case per round), into two run directories ``OUT/a`` and ``OUT/b`` that are extended, never
  restarted. Stopping is decided for the comparison as a whole, never per case.
- Efficacy: after look ``k`` the real ``compare_runs`` (paired test over cases, Holm-Tarone
  across the decision metrics) runs at the level ``gate_levels(looks, alpha, family)[k]``: the
  Lan-DeMets O'Brien-Fleming-type nominal level, made valid for a Holm family of ``family``
  metrics as in the gate. A credible difference in either direction stops the comparison. Each
  direction is its own sequential test at ``alpha``, exactly as the fixed-n ``compare`` tests
  "B worse" and "B better" each at ``alpha``: peeking raises neither false-alarm rate.
- Futility: for every decision metric and both directions, the conditional power under the
  current trend that the last look reaches significance (``adaptive.conditional_power`` with no
  tolerance); when every one is below ``futility`` (default 0.01) the comparison stops with "no
  credible difference". Non-binding: it can only turn a difference into none.
- Undecided: a run with sampler errors stops at once (more samples do not mend a broken sampler;
  a sampler error is never counted as a pass or a fail of the comparison).

The record (``adaptive_compare.json`` in ``OUT``) lists the design, every look (samples per case,
level, one-sided p-values per metric and direction, conditional powers, decision), the samples
used per case on each side and why it stopped. Re-running the same command reuses the recorded
samples: a finished comparison re-decides its last look without sampling; an interrupted one
resumes at the next round. Bounds: those of ``AdaptiveDesign`` (budget 1..1000, at most 20 looks).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import NormalDist
from typing import Any

from leader_eval.decide.adaptive import AdaptiveDesign, Look, _score_test, _set_target, case_rates, conditional_power
from leader_eval.decide.compare import compare_runs
from leader_eval.errors import LeaderEvalError
from leader_eval.runs.evaluate import run
from leader_eval.stats.core import gate_statistic
from leader_eval.store.names import default_label
from leader_eval.store.run_store import ADAPTIVE_COMPARE, RunDir, read_json_file, write_json_atomic
from leader_eval.suite.load import Suite, load_suite

__all__ = ["RECORD", "AdaptiveComparison", "compare_adaptive", "look_decision", "simulate_compare", "split_config"]

RECORD = ADAPTIVE_COMPARE
_N = NormalDist()
_Z975 = _N.inv_cdf(0.975)


@dataclass
class AdaptiveComparison:
    """The comparison at the stopping look and the record written to ``OUT/adaptive_compare.json``."""

    comparison: Any  # compare.Comparison
    record: dict[str, Any]
    path: Path


def split_config(text: str) -> tuple[str, str | None]:
    """``SUITE[@MODEL]`` -> (suite, model or None). A path that exists as given is a suite alone."""
    if "@" in text and not Path(text).exists():
        suite, model = text.split("@", 1)
        if not suite or not model:
            raise LeaderEvalError(f"{text!r}: expected SUITE[@MODEL], e.g. suites/leader_core.yaml@local:smollm2")
        return suite, model
    return text, None


def look_decision(pair: Any, design: AdaptiveDesign, k: int) -> tuple[str, dict[str, float], dict[str, float]]:
    """(decision, compare's one-sided p (B worse) per metric, conditional power per ``metric:direction``).

    ``pair``: the ``compare.PairResult`` of this look (already tested at this look's level).
    """
    decisive = [m for m in pair.metrics if m.gated]
    ps = {m.metric: float(m.p_value) for m in decisive}  # compare's own one-sided p (B worse)
    rows: dict[str, tuple[float, float, float]] = {}  # metric:direction -> (p, shift that way, se)
    for m in decisive:
        # the trend as a z statistic from the paired difference and its interval: one rule for
        # both directions and for the exact-count metrics (whose test p is one-sided only)
        worse_shift = -m.diff if m.higher_is_better else m.diff
        width = m.high - m.low
        se = width / (2 * _Z975) if math.isfinite(width) and width > 0 else 0.0
        for direction, shift in (("worse", worse_shift), ("better", -worse_shift)):
            z = shift / se if se > 0 else 0.0
            rows[f"{m.metric}:{direction}"] = (1.0 - _N.cdf(z), shift, se)
    if any(m.verdict in ("regression", "improvement") for m in decisive):
        return "efficacy", ps, {}
    if k + 1 == len(design.looks):
        return "budget", ps, {}
    final = design.levels[-1]
    t = design.fraction(k)
    cp = {key: conditional_power(p, t, final, shift, -math.inf, se) for key, (p, shift, se) in rows.items()}
    return ("futility" if cp and all(v < design.futility for v in cp.values()) else "continue"), ps, cp


def simulate_compare(
    design: AdaptiveDesign,
    *,
    n_cases: int,
    base: float,
    change: float,
    reps: int = 400,
    seed: int = 0,
    concentration: float = 4.0,
) -> dict[str, float]:
    """Operating characteristics of the paired statistic with peeking, one metric, both directions.

    Per replicate: case pass rates ``p_i ~ Beta(base * c, (1 - base) * c)``; B's rates scaled so
    the suite rate moves by ``change``; A and B each draw Bernoulli samples per case. At every look
    the gate statistic (``stats.gate_statistic`` with the headline metric's declared test,
    one-sided each way, at the look's level) and the futility rule decide, as ``look_decision``
    does. Returns the share of replicates that stopped claiming "B
    worse", "B better", and the mean samples per case used.
    """
    from leader_eval.bounded.numeric import np

    rng = np.random.default_rng(seed)
    n_max = design.budget
    p, q = case_rates(rng, reps, n_cases, base, change, concentration)
    xa = (rng.random((reps, n_cases, n_max)) < p[:, :, None]).cumsum(axis=2)
    xb = (rng.random((reps, n_cases, n_max)) < q[:, :, None]).cumsum(axis=2)
    levels = design.levels
    stopped = np.zeros(reps, dtype=bool)
    worse = np.zeros(reps, dtype=bool)
    better = np.zeros(reps, dtype=bool)
    used = np.full(reps, float(n_max))
    for k, n in enumerate(design.looks):
        stat = gate_statistic(xa[:, :, n - 1], n, xb[:, :, n - 1], n, test=_score_test())
        diff, se, p_worse, p_better = stat.diff, stat.se, stat.p_worse, stat.p_better
        w_now, b_now = p_worse < levels[k], p_better < levels[k]
        if k + 1 == len(design.looks):
            stop = ~stopped
        else:
            t = design.fraction(k)
            cp = np.array(
                [
                    max(
                        conditional_power(float(pw), t, levels[-1], float(-dd), -math.inf, float(s)),
                        conditional_power(float(pb), t, levels[-1], float(dd), -math.inf, float(s)),
                    )
                    for pw, pb, dd, s in zip(p_worse, p_better, diff, se, strict=True)
                ]
            )
            stop = ~stopped & (w_now | b_now | (cp < design.futility))
        worse |= stop & w_now
        better |= stop & b_now & ~w_now
        used[stop] = n
        stopped |= stop
    return {"worse": float(worse.mean()), "better": float(better.mean()), "mean_samples": float(used.mean())}


def _why(look: Mapping[str, Any], design: AdaptiveDesign, verdict: str) -> str:
    d = look["decision"]
    if d == "efficacy":
        return f"efficacy: a credible difference at this look's level {look['level']:.3g}: {verdict}"
    if d == "futility":
        top = max(look["conditional_power"].values(), default=0.0)
        return (
            f"futility: conditional power of a credible difference by the last look below {design.futility:g} "
            f"(max {top:.3g})"
        )
    if d == "budget":
        return f"budget: {design.budget} samples per case reached; compared at level {look['level']:.3g}: {verdict}"
    return "undecided: a run has sampler errors; more samples cannot mend that (fix the sampler, re-run)"


def _errors(run: Any) -> int:
    return sum(int(c.get("n_errors") or 0) for c in run.cases)


def compare_adaptive(
    a: tuple[Any, Any],
    b: tuple[Any, Any],
    design: AdaptiveDesign,
    out: Path,
    *,
    across_suites: bool = False,
) -> AdaptiveComparison:
    """Sample (suite, RunOptions) ``a`` and ``b`` in rounds into ``out/a`` and ``out/b``; compare after each.

    Both options' ``samples`` and ``out`` are set here. Raises ``LeaderEvalError`` when ``out``
    holds an adaptive comparison with other looks (choose another ``out``).
    """

    out = Path(out)
    path = out / RECORD
    looks: list[dict[str, Any]] = []
    start = 0
    if path.exists():
        previous = read_json_file(path, "adaptive comparison record")
        if not isinstance(previous, dict):
            raise LeaderEvalError(f"{path}:1: unreadable adaptive comparison record: not a JSON object")
        if (
            previous.get("design", {}).get("looks") != list(design.looks)
            or previous.get("design", {}).get("alpha") != design.alpha
        ):
            raise LeaderEvalError(f"{path}:1: an adaptive comparison with another design; choose another --out")
        looks = list(previous.get("looks") or [])
        start = len(looks) - 1 if looks and looks[-1]["decision"] != "continue" else len(looks)
    # both suites load (and must be comparable) before either side samples: bad input samples nothing
    suites = [s if isinstance(s, Suite) else load_suite(s) for s in (a[0], b[0])]
    if suites[0].content_hash != suites[1].content_hash and not across_suites:
        raise LeaderEvalError(
            f"{suites[1].path}:1: suite content differs from {suites[0].path} "
            "(pass --across-suites to compare scaffold variants with the same case ids)"
        )
    a, b = (suites[0], a[1]), (suites[1], b[1])
    labels = [opts.label or default_label(opts.model) for _, opts in (a, b)]
    if labels[0] == labels[1]:
        # compare pools runs of one label and sampling identity: keep the two sides apart by name
        a = (a[0], replace(a[1], label=f"A-{labels[0]}"))
        b = (b[0], replace(b[1], label=f"B-{labels[1]}"))
    for k in range(start, len(design.looks)):
        n = design.looks[k]
        runs = []
        for side, (suite, options) in (("a", a), ("b", b)):
            side_out = out / side
            if RunDir(side_out).exists():
                _set_target(side_out, n)
            runs.append(run(suite, replace(options, samples=n, out=side_out)))
        errors = {side: _errors(r) for side, r in zip("ab", runs, strict=True)}
        probe = compare_runs(runs, alpha=design.alpha, across_suites=across_suites)
        family = sum(1 for m in probe.pairs[0].metrics if m.gated)  # metrics.gated_metrics of both runs
        design = replace(design, family=max(1, family))
        level = design.levels[k]
        comparison = compare_runs(runs, alpha=level, across_suites=across_suites)
        pair = comparison.pairs[0]
        ps: dict[str, float]
        cp: dict[str, float]
        if any(errors.values()):
            decision, ps, cp = "undecided", {}, {}
        else:
            decision, ps, cp = look_decision(pair, design, k)
        look = Look(k + 1, n, level, decision, ps, cp).to_dict()
        look["verdict"] = pair.verdict()
        looks = [*looks[:k], look]
        record = {
            "design": {
                "budget": design.budget,
                "looks": list(design.looks),
                "alpha": design.alpha,
                "futility": design.futility,
                "family": design.family,
                "spending": "Lan-DeMets O'Brien-Fleming type, information fraction n/budget, per direction",
                "levels": design.levels,
            },
            "a": {"run": str(runs[0].path), "label": pair.a.name},
            "b": {"run": str(runs[1].path), "label": pair.b.name},
            "looks": looks,
            "samples_per_case": {
                side: {c["case_id"]: int(c.get("n_samples", n)) for c in r.cases}
                for side, r in zip("ab", runs, strict=True)
            },
            "sampler_errors": errors,
            "stopped": {
                "round": k + 1,
                "samples_per_case": n,
                "decision": decision,
                "why": _why(look, design, pair.verdict()),
            },
            "samples_saved_per_case": design.budget - n,
            "verdict": pair.verdict(),
            "exit_status": comparison.exit_status,
        }
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, record)
        if decision != "continue":
            return AdaptiveComparison(comparison, record, path)
    raise AssertionError("unreachable: the last look always decides")  # pragma: no cover
