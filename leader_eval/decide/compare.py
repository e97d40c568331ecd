"""Compare checkpoints: is the difference between two runs real or noise?

``compare_runs`` takes two or more run directories (e.g. v4, v7). Runs that share a label, suite
content, scorer version and sampling identity (the manifest identity without the run seed) are
repeats of one stochastic measurement: they are pooled (their samples counted together per case)
and the spread of their headline values is shown. The first group is the baseline A; every other
group B is compared with it over the cases both scored:

- per metric, each group's value with its bootstrap-over-cases interval, and the paired
  difference B - A over cases with its interval and the one-sided p-value of the metric's own
  test (``stats.decide_paired``, the decision the gate and the checkpoint recommendation make);
  an episode metric is compared over the cases that have episodes, so a mixed suite keeps it;
  a rubric criterion (``judge:NAME``) every run has is compared over the cases with a verdict in
  every run, after the built-in metrics, and gates only where every run gates it (docs/judges.md);
- per-case flips (a case that passed in A and fails in B, and the reverse) with the reason the
  failing side fails; a case "passes" when most of its scored samples pass;
- pass@k (unbiased estimator) and pass^k (all k samples pass) per group;
- a one-line verdict naming each claimed metric with its own difference and p-value, and an exit
  status: 0 no credible regression, 1 a credible regression of some B vs A in a gated metric
  (``metric_family``, one Holm-Tarone family per direction), 2 bad input (raised as
  ``LeaderEvalError``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leader_eval.decide.golden import run_label
from leader_eval.errors import LeaderEvalError
from leader_eval.runs.evaluate import Run as RunType
from leader_eval.runs.evaluate import read_run
from leader_eval.scoring.aggregate import pass_k_values
from leader_eval.stats.core import (
    Estimate,
    PairedDecision,
    decide_paired,
    holm_alphas,
    pass_at_k,
    pass_hat_k,
    run_spread,
    weighted_mean_ci,
)
from leader_eval.stats.metrics import (
    EPISODE_METRICS,
    JUDGE_PREFIX,
    METRICS,
    gated_metrics,
    judges_gated,
    known_metric,
)
from leader_eval.store.formats import SCORER_VERSION

if TYPE_CHECKING:
    from leader_eval.runs.evaluate import Run


@dataclass
class PooledCase:
    case_id: str
    weight: float
    n_scored: int
    n_passed: int
    values: dict[str, float]  # metric -> pooled per-case value
    reasons: dict[str, int]  # failure reason -> count over the pooled samples
    #: metric -> the pooled observations behind its value (episodes for an episode metric)
    observations: dict[str, int] = field(default_factory=dict)

    @property
    def pass_rate(self) -> float:
        return self.values["score"]

    @property
    def passes(self) -> bool:
        """Most scored samples pass (with one sample per case: that sample passed)."""
        return self.n_passed * 2 > self.n_scored

    def count(self, metric: str) -> int:
        """Observations with the metric's event (rate x pooled observations)."""
        return round(self.values[metric] * self.n_of(metric))

    def n_of(self, metric: str) -> int:
        """The pooled observations behind ``metric``'s value (scored samples, or episodes)."""
        return self.observations.get(metric, self.n_scored)

    def top_reason(self) -> str | None:
        if not self.reasons:
            return None
        return sorted(self.reasons.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]


@dataclass
class RunGroup:
    """One configuration: a run, or repeats of it with different seeds, pooled."""

    name: str
    label: str
    runs: list[Run]
    suite: str
    suite_hash: str
    scorer_version: str
    cases: dict[str, PooledCase]
    estimates: dict[str, Estimate] = field(default_factory=dict)
    spread: dict[str, Any] = field(default_factory=dict)  # metric -> stats.run_spread over the runs
    run_values: dict[str, list[float]] = field(default_factory=dict)  # metric -> each run's value

    @property
    def seeds(self) -> list[int]:
        return [int(r.manifest["identity"].get("run_seed", 0)) for r in self.runs]


@dataclass
class MetricDiff:
    metric: str
    higher_is_better: bool
    a: Estimate
    b: Estimate
    diff: float  # b - a, paired over common cases
    low: float
    high: float
    p_value: float  # one-sided, for "b is worse than a"
    verdict: str  # "regression" | "improvement" | "no credible change"
    p_better: float = 1.0  # one-sided, for "b is better than a"
    test: str = "paired_t"  # the metric's declared test (metrics.Metric.test)
    #: in the family that decides the exit status (``metric_family``; default: the table says)
    gated: bool | None = None
    n_cases: int = 0  # cases paired for this metric (an episode metric: the cases with episodes)

    def __post_init__(self) -> None:
        if self.gated is None:
            spec = known_metric(self.metric)
            self.gated = bool(spec is not None and spec.gating)

    @property
    def claim_p(self) -> float:
        """The p-value of what the verdict claims (B worse, or B better)."""
        return self.p_better if self.verdict == "improvement" else self.p_value


@dataclass
class Flip:
    case_id: str
    a_rate: float
    b_rate: float
    direction: str  # "regressed" (passed in A, fails in B) | "fixed" (failed in A, passes in B)
    reason: str | None  # why the failing side fails (its most frequent reason)


@dataclass
class PairResult:
    a: RunGroup
    b: RunGroup
    n_cases: int
    metrics: list[MetricDiff]
    flips: list[Flip]
    pass_k: dict[int, tuple[float, float, float, float]]  # k -> (A pass@k, B pass@k, A pass^k, B pass^k)
    #: "pass@k" / "pass^k" -> (A, B) entries of ``aggregate.pass_k_values``: value, 95% interval
    #: over cases, and the cases with fewer than k samples (left out, counted)
    pass_k_ci: dict[str, tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict)

    @property
    def regression(self) -> bool:
        return any(m.verdict == "regression" and m.gated for m in self.metrics)

    @property
    def regressed(self) -> list[str]:
        """The gated metrics in which B credibly regresses vs A."""
        return [m.metric for m in self.metrics if m.verdict == "regression" and m.gated]

    @property
    def improved(self) -> list[str]:
        """The gated metrics in which B credibly improves on A."""
        return [m.metric for m in self.metrics if m.verdict == "improvement" and m.gated]

    def verdict(self) -> str:
        """One line; each claimed metric with its own difference and the p-value of its claim."""

        def claims(verdict: str) -> str:
            return ", ".join(
                f"{m.metric} ({m.diff:+.3f}, p={m.claim_p:.3g})"
                for m in self.metrics
                if m.verdict == verdict and m.gated
            )

        reg, imp = claims("regression"), claims("improvement")
        if reg:
            also = f"; improves in {imp}" if imp else ""
            return f"{self.b.name} credibly REGRESSES vs {self.a.name} in {reg}{also}"
        if imp:
            return f"{self.b.name} credibly improves on {self.a.name} in {imp}"
        score = next((m for m in self.metrics if m.metric == "score"), None)
        d = f" (score {score.diff:+.3f}, p={score.p_value:.3g})" if score else ""
        return f"no credible difference between {self.b.name} and {self.a.name}{d}"


@dataclass
class Comparison:
    groups: list[RunGroup]
    pairs: list[PairResult]
    alpha: float
    messages: list[str] = field(default_factory=list)

    @property
    def exit_status(self) -> int:
        """0 no credible regression, 1 a credible regression of some B vs the baseline A."""
        return 1 if any(p.regression for p in self.pairs) else 0

    def verdict(self) -> str:
        if not self.pairs:
            g = self.groups[0]
            return f"one configuration ({g.name}, {len(g.runs)} run(s) pooled): nothing to compare"
        return "; ".join(p.verdict() for p in self.pairs)


# ---------------------------------------------------------------------------------------------


def compare_runs(
    runs: Sequence[Run | str | Path],
    *,
    alpha: float = 0.05,
    ks: Sequence[int] | None = None,
    seed: int = 0,
    across_suites: bool = False,
) -> Comparison:
    """Compare runs (``Run`` objects or run directories); the first configuration is the baseline.

    Runs with the same label, suite hash, scorer version and sampling identity (different seeds)
    are pooled. Raises ``LeaderEvalError`` (exit 2) for bad input: fewer than two runs, an
    unreadable or unscored run, or runs of different suite content or scorer versions.
    ``ks``: the k of pass@k / pass^k (default 1 and the smallest per-case sample count).
    ``across_suites``: allow runs of different suite content (scaffold variants with the same
    case ids, e.g. with and without a goal line); the difference is reported, not refused.
    """
    loaded = _load(runs)
    messages: list[str] = []
    groups = _group(loaded, messages)
    hashes = {(g.suite, g.suite_hash) for g in groups}
    if len(hashes) > 1 and across_suites:
        # comparing prompt/scaffold variants of one suite (same case ids): legitimate, but say so
        messages.append(
            "runs scored different suite content ("
            + ", ".join(f"{g.name}: {g.suite_hash}" for g in groups)
            + "): this compares suite variants, not only checkpoints"
        )
    elif len(hashes) > 1:
        raise LeaderEvalError(
            "runs scored different suite content ("
            + ", ".join(f"{g.name}: {g.suite} {g.suite_hash}" for g in groups)
            + "): compare runs of one suite version"
        )
    versions = {g.scorer_version for g in groups}
    if len(versions) > 1:
        raise LeaderEvalError(
            f"runs were scored by different scorer versions ({', '.join(sorted(versions))}): "
            "re-score them (leader-eval run SUITE --model replay:RUN_DIR) before comparing"
        )
    common = sorted(set.intersection(*(set(g.cases) for g in groups)))
    if not common:
        raise LeaderEvalError("the runs share no scored case")
    every = set().union(*(set(g.cases) for g in groups))
    if len(every) != len(common):
        messages.append(f"comparing the {len(common)} cases every run scored ({len(every) - len(common)} left out)")
    cases_of = metric_cases(groups, common)
    messages.extend(_ungated_judge_notes(groups, cases_of))
    messages.extend(_judge_changes(groups))
    for g in groups:
        _estimate(g, cases_of, seed)
    if ks is None:
        kmax = min(g.cases[c].n_scored for g in groups for c in common)
        ks = sorted({1, kmax})
    pairs = [_pair(groups[0], b, cases_of, alpha, ks, seed) for b in groups[1:]]
    return Comparison(groups, pairs, alpha, messages)


def _load(runs: Sequence[Run | str | Path]) -> list[Run]:

    if len(runs) < 2:
        raise LeaderEvalError("compare needs at least two runs (RUN_A RUN_B [RUN_C ...])")
    out: list[Run] = []
    seen: set[str] = set()
    for r in runs:
        run = r if isinstance(r, RunType) else read_run(r)
        # a run id is the suite, the start second and the seed: runs of a model matrix (or CI jobs
        # of several checkpoints at one --seed) can share it, so what was sampled is part of the key
        key = f"{run.manifest.get('run_id') or Path(run.path).resolve()} {pool_key(run)}"
        if key in seen:
            continue  # the same run twice would double its samples in a pool
        seen.add(key)
        if not run.cases or not any(c.get("n_scored") for c in run.cases):
            raise LeaderEvalError(f"{run.path}: run has no scored case (score it first)")
        out.append(run)
    if len(out) < 2:
        raise LeaderEvalError("compare needs at least two different runs")
    return out


def pool_key(run: Run) -> str:
    """What makes runs repeats of one measurement: label, suite, scorer, identity minus the seed."""
    ident = {k: v for k, v in run.manifest["identity"].items() if k != "run_seed"}
    return json.dumps(
        [run_label(run), str(run.manifest.get("scorer_version", SCORER_VERSION)), ident], sort_keys=True, default=str
    )


def _group(runs: Sequence[Run], messages: list[str]) -> list[RunGroup]:
    by_key: dict[str, list[Run]] = {}
    for r in runs:
        by_key.setdefault(pool_key(r), []).append(r)
    groups = []
    names: dict[str, int] = defaultdict(int)
    for members in by_key.values():
        first = members[0]
        label = run_label(first)
        names[label] += 1
        name = label if names[label] == 1 else f"{label}#{names[label]}"
        if names[label] == 2:
            messages.append(f"two configurations share label {label!r} (different sampling): shown as {name}")
        ident = first.manifest["identity"]
        groups.append(
            RunGroup(
                name=name,
                label=label,
                runs=list(members),
                suite=ident["suite"],
                suite_hash=ident["suite_hash"],
                scorer_version=str(first.manifest.get("scorer_version", SCORER_VERSION)),
                cases=_pool_cases(members),
            )
        )
    return groups


def _pool_cases(runs: Sequence[Run]) -> dict[str, PooledCase]:
    acc: dict[str, dict[str, Any]] = {}
    for run in runs:
        for c in run.cases:
            n = int(c.get("n_scored") or 0)
            if n == 0:
                continue
            a = acc.setdefault(
                c["case_id"],
                {
                    "weight": float(c.get("weight", 1.0)),
                    "n": 0,
                    "passed": 0,
                    "sums": defaultdict(float),
                    "episode_sums": defaultdict(float),
                    "episodes": defaultdict(int),
                    "reasons": defaultdict(int),
                },
            )
            a["n"] += n
            a["passed"] += int(c.get("n_passed", round(float(c["score"]) * n)))
            for m in METRICS:
                a["sums"][m] += float(c[m]) * n
            # multi-turn cases: pooled over the episodes behind each value; a rubric criterion over
            # the verdicts behind it (``n_judge:NAME``; scoring.judge.judge_case_metrics)
            for m in (*EPISODE_METRICS, *(k for k in c if k.startswith(JUDGE_PREFIX))):
                if c.get(m) is not None and int(c.get(f"n_{m}") or 0) > 0:
                    a["episode_sums"][m] += float(c[m]) * int(c[f"n_{m}"])
                    a["episodes"][m] += int(c[f"n_{m}"])
            for k, v in (c.get("reasons") or {}).items():
                a["reasons"][k] += int(v)
    return {
        cid: PooledCase(
            cid,
            a["weight"],
            a["n"],
            a["passed"],
            {
                **{m: a["sums"][m] / a["n"] for m in METRICS},
                **{m: a["episode_sums"][m] / k for m, k in a["episodes"].items() if k},
            },
            dict(a["reasons"]),
            {m: k for m, k in a["episodes"].items() if k},
        )
        for cid, a in acc.items()
    }


def metric_cases(groups: Sequence[RunGroup], common: Sequence[str]) -> dict[str, list[str]]:
    """Each metric to compare and the common cases it is compared over: every sample metric over
    all of them; each episode metric over the cases that have episodes in every group (a mixed
    suite keeps its episode metrics, as the gate does), left out when no case has them; then each
    rubric criterion every run has (``judge:NAME`` in its summary), sorted, over the cases with a
    verdict in every group, left out when no case has one."""
    out: dict[str, list[str]] = {m: list(common) for m in METRICS}
    for m in (*EPISODE_METRICS, *_shared_judges(groups)):
        have = [c for c in common if all(m in g.cases[c].values for g in groups)]
        if have:
            out[m] = have
    return out


def _run_metrics(run: Run) -> Mapping[str, Any]:
    metrics = (run.summary.get("overall") or {}).get("metrics")
    return metrics if isinstance(metrics, Mapping) else {}


def _shared_judges(groups: Sequence[RunGroup]) -> list[str]:
    """The rubric criteria in every run's summary metrics, judged by one judge in all of them,
    sorted: verdicts of two judges are not one measurement (``_judge_changes`` says so)."""
    names = [{m for m in _run_metrics(r) if m.startswith(JUDGE_PREFIX)} for g in groups for r in g.runs]
    shared = sorted(set.intersection(*names)) if names else []
    return [m for m in shared if len(_judges_of(groups, m)) == 1 and _judges_of(groups, m) != {""}]


def _judges_of(groups: Sequence[RunGroup], metric: str) -> set[str]:
    """The distinct judge identities behind ``metric`` in the runs ("" where a run records none)."""
    name = metric[len(JUDGE_PREFIX) :]
    out = set()
    for g in groups:
        for r in g.runs:
            info = (r.summary.get("judges") or {}).get(name) or {}
            judge = info.get("judge") if isinstance(info, Mapping) else None
            out.add(json.dumps(judge, sort_keys=True) if judge else "")
    return out


def _judge_changes(groups: Sequence[RunGroup]) -> list[str]:
    """One note per criterion every run has but not from one judge: it is not compared."""
    names = [{m for m in _run_metrics(r) if m.startswith(JUDGE_PREFIX)} for g in groups for r in g.runs]
    shared = sorted(set.intersection(*names)) if names else []
    return [
        f"{m} is not compared: the runs were judged by different judges (or one recorded none); "
        "re-judge them with one judge to compare"
        for m in shared
        if len(_judges_of(groups, m)) != 1 or _judges_of(groups, m) == {""}
    ]


def _gated_judges(g: RunGroup) -> set[str]:
    """The criteria every run of ``g`` gates (``metrics.judges_gated`` of each run's summary)."""
    return set.intersection(*(set(judges_gated(_run_metrics(r))) for r in g.runs))


def metric_family(groups: Sequence[RunGroup], names: Iterable[str]) -> tuple[str, ...]:
    """The family that decides among ``groups`` (``metrics.gated_metrics`` of the metrics compared,
    ``names``): a rubric criterion in it only where every run of every group gates it (its summary
    entry says ``gated: true``), so a criterion gated in one run and not the other is reported."""
    gated = set.intersection(*(_gated_judges(g) for g in groups)) if groups else set()
    return gated_metrics({m: {"gated": m in gated} for m in names})


def _ungated_judge_notes(groups: Sequence[RunGroup], names: Iterable[str]) -> list[str]:
    """One note per compared criterion that some run does not gate: it is reported, not gated."""
    notes = []
    for m in names:
        if not m.startswith(JUDGE_PREFIX) or m in metric_family(groups, [m]):
            continue
        gating = [g.name for g in groups if m in _gated_judges(g)]
        # the run's own reason (summary "judges"; e.g. no calibration record), from the first run that says
        reasons = [((r.summary.get("judges") or {}).get(m[len(JUDGE_PREFIX) :]) or {}) for g in groups for r in g.runs]
        why = next((str(i["not_gated_because"]) for i in reasons if i.get("not_gated_because")), None)
        where = f"gated in {', '.join(gating)} only" if gating else "gated in no run"
        notes.append(f"{m} is reported, not gated ({where})" + (f": {why}" if why else ""))
    return notes


def paired_decision(a: RunGroup, b: RunGroup, metric: str, ids: Sequence[str], *, seed: int = 0) -> PairedDecision:
    """Group ``b`` against group ``a`` on ``metric`` over the cases ``ids`` (``stats.decide_paired``
    with the metric's declared test; ``a``'s case weights): the decision ``compare`` makes per pair
    and the checkpoint recommendation makes against the best checkpoint."""
    spec = known_metric(metric)
    if spec is None:
        raise LeaderEvalError(f"unknown metric {metric!r}")
    return decide_paired(
        {c: (a.cases[c].values[metric], a.cases[c].n_of(metric)) for c in ids},
        {c: (b.cases[c].values[metric], b.cases[c].n_of(metric)) for c in ids},
        {c: a.cases[c].weight for c in ids},
        metric=metric,
        higher_is_better=spec.higher_is_better,
        test=spec.test,
        seed=seed,
    )


def _estimate(g: RunGroup, cases_of: Mapping[str, Sequence[str]], seed: int) -> None:
    for m, ids in cases_of.items():
        cases = [g.cases[c] for c in ids]
        g.estimates[m] = weighted_mean_ci(
            [c.values[m] for c in cases], [c.weight for c in cases], n_samples=sum(c.n_of(m) for c in cases), seed=seed
        )
        vals = [r.summary.get("overall", {}).get("metrics", {}).get(m, {}).get("value") for r in g.runs]
        g.run_values[m] = [float(v) for v in vals if v is not None]
        if len(g.runs) > 1 and len(g.run_values[m]) > 1:
            g.spread[m] = run_spread(g.run_values[m])


def _pair(
    a: RunGroup,
    b: RunGroup,
    cases_of: Mapping[str, Sequence[str]],
    alpha: float,
    ks: Sequence[int],
    seed: int,
) -> PairResult:
    common = cases_of["score"]
    decisions = {m: paired_decision(a, b, m, ids, seed=seed) for m, ids in cases_of.items()}
    # exit 1 means "some gated metric regressed": one family (metrics.gated_metrics) per direction,
    # Holm-Tarone-adjusted (stats.holm_alphas), so two runs of the same model are flagged in at most
    # alpha of comparisons; the same decision the gate and the checkpoint recommendation make; a
    # rubric criterion is in the family only where both sides gate it
    family = metric_family((a, b), decisions)
    worse = holm_alphas(
        {m: decisions[m].p_worse for m in family}, alpha, min_p={m: decisions[m].min_p_worse for m in family}
    )
    better = holm_alphas(
        {m: decisions[m].p_better for m in family}, alpha, min_p={m: decisions[m].min_p_better for m in family}
    )
    diffs = []
    for m, d in decisions.items():
        if d.p_worse < worse.get(m, alpha):
            verdict = "regression"
        elif d.p_better < better.get(m, alpha):
            verdict = "improvement"
        else:
            verdict = "no credible change"
        pc = d.comparison
        diffs.append(
            MetricDiff(
                m,
                d.higher_is_better,
                a.estimates[m],
                b.estimates[m],
                pc.diff,
                pc.low,
                pc.high,
                d.p_worse,
                verdict,
                p_better=d.p_better,
                test=d.test,
                gated=m in family,
                n_cases=len(cases_of[m]),
            )
        )
    flips = []
    for c in common:
        ca, cb = a.cases[c], b.cases[c]
        if ca.passes and not cb.passes:
            flips.append(Flip(c, ca.pass_rate, cb.pass_rate, "regressed", cb.top_reason()))
        elif cb.passes and not ca.passes:
            flips.append(Flip(c, ca.pass_rate, cb.pass_rate, "fixed", ca.top_reason()))
    flips.sort(key=lambda f: (f.direction != "regressed", -abs(f.b_rate - f.a_rate), f.case_id))
    pk = {k: (*_pass_k(a, common, k), *_pass_k(b, common, k)) for k in ks}
    # reorder to (A pass@k, B pass@k, A pass^k, B pass^k)
    pass_k = {k: (v[0], v[2], v[1], v[3]) for k, v in pk.items()}
    va, vb = _pass_k_ci(a, common, ks, seed), _pass_k_ci(b, common, ks, seed)
    return PairResult(a, b, len(common), diffs, flips, pass_k, {name: (va[name], vb[name]) for name in va})


def _pass_k_ci(g: RunGroup, common: Sequence[str], ks: Sequence[int], seed: int) -> dict[str, Any]:
    records = [
        {"case_id": c, "n_scored": g.cases[c].n_scored, "n_passed": g.cases[c].n_passed, "weight": g.cases[c].weight}
        for c in common
    ]
    return pass_k_values(ks, records, seed=seed)


def one_sided_p(diff: float, p_two_sided: float, *, higher_is_better: bool) -> float:
    """One-sided p-value for "B is worse than A" from a symmetric two-sided test of diff = B - A."""
    worse = diff < 0 if higher_is_better else diff > 0
    half = p_two_sided / 2
    return half if worse else 1 - half


def _pass_k(g: RunGroup, common: Sequence[str], k: int) -> tuple[float, float]:
    """Weighted mean over cases of pass@k and pass^k (cases with fewer than k samples are skipped)."""
    num_at = num_hat = den = 0.0
    for c in common:
        pc = g.cases[c]
        if pc.n_scored < k:
            continue
        num_at += pc.weight * pass_at_k(pc.n_scored, pc.n_passed, k)
        num_hat += pc.weight * pass_hat_k(pc.n_scored, pc.n_passed, k)
        den += pc.weight
    return (num_at / den, num_hat / den) if den else (float("nan"), float("nan"))
