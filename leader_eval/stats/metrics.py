"""Every metric the library computes, defined once.

A :class:`Metric` says what a number means and how every stage treats it: how one case's value is
computed from its scored samples, how case values become a suite value (the weighted mean over
cases, with the bootstrap-over-cases interval of ``stats.weighted_mean_ci``), which direction is
better, the default gate tolerance, whether it gates or is only reported, the key under which a
golden file keeps its per-case value, and which test the gate and ``compare`` use for a shortfall.
``aggregate``, ``golden`` (build), ``gate``, ``compare`` and the report read this table; adding a
metric means adding one entry to :data:`METRICS`. Which metrics a run is tested on is derived
here, at the point of use, by :func:`gated_metrics`: the gate, ``compare``, the checkpoint
recommendation, adaptive sampling and ``plan`` all call it, so their Holm families agree.

Parametrised metrics (``pass@k``, ``pass^k``) are made by :func:`pass_at` / :func:`pass_hat` for
any k >= 1; :func:`metric` resolves their names. They are reported, never gated: they are
functions of the same pass/fail samples that ``score`` already gates.

Bounds: every value is a proportion in [0, 1]; a case without a scored sample has no value
(``None``), and for ``pass@k`` neither does a case with fewer than k scored samples.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from leader_eval.stats.core import pass_at_k, pass_hat_k

__all__ = [
    "ALL_METRICS",
    "EPISODE_METRICS",
    "JUDGE_PREFIX",
    "METRICS",
    "Metric",
    "gated_metrics",
    "judge_metric",
    "judges_gated",
    "known_metric",
    "metric",
    "pass_at",
    "pass_hat",
]

#: what one observation of the metric is (episodes and steps come with multi-turn suites)
Unit = Literal["sample", "episode", "step", "judgement"]
#: how the gate, compare and the recommendation test a shortfall against the baseline, case by
#: case (``stats.decide_paired``; one test per metric, never the smaller p of two):
#: ``exact_count`` the exact stratified count test (``stats.exact_count_test``) for metrics whose
#: observations are 0/1 (a sample passed, an episode reached its goal): exact for any mix of case
#: rates, where the paired t-test over per-case rates exceeds its level on such data (measured
#: 0.068 at 0.05 and 0.016 at 0.01, 22 cases of low rates; docs/statistics.md) and sees nothing
#: against a baseline of zero events; ``paired_t`` the paired t-test over per-case values
#: (``stats.paired_compare``) for metrics whose per-case value is not a share of 0/1 observations
Test = Literal["paired_t", "exact_count"]

_CASE_MEAN = "weighted mean over cases of the case's share of scored samples"
_CI = "bootstrap over cases (BCa, small-sample expanded); Wilson when every case value is 0 or 1"


@dataclass(frozen=True)
class Metric:
    """One metric: its meaning and how each stage of the pipeline treats it."""

    name: str
    description: str
    higher_is_better: bool
    #: default gate tolerance, absolute on the 0..1 scale (a golden file's own value wins)
    tolerance: float
    #: ``SampleScore`` attribute; the case value is the share of scored samples where it is true
    sample_field: str | None = None
    unit: Unit = "sample"
    #: False: computed and shown, never failing the gate or compare's exit status
    gating: bool = True
    #: key of the per-case value in a golden file's ``cases`` (None: not kept, cannot pair)
    case_field: str | None = None
    test: Test = "paired_t"
    aggregation: str = _CASE_MEAN
    ci: str = _CI
    #: k of a parametrised metric (pass@k, pass^k)
    k: int | None = None
    #: ``at_least_one`` (pass@k) or ``all`` (pass^k) for parametrised metrics
    kind: str = "rate"
    #: an episode metric's key in an episode's data (``checks.episode``); its value per episode is
    #: a number, or None to leave the episode out (steps to goal of an episode that missed it)
    episode_key: str | None = None
    #: the value is a proportion in [0, 1] (a suite may set a floor or ceiling on it)
    proportion: bool = True

    @property
    def direction(self) -> str:
        return "higher" if self.higher_is_better else "lower"

    def case_value(self, scored: Sequence[Any]) -> float | None:
        """The case's value from its scored samples (``SampleScore``), None without any.

        For ``pass@k`` / ``pass^k``: None when the case has fewer than ``k`` scored samples (the
        estimator needs k of them); callers show such cases as too short, never as 0.
        """
        if not scored:
            return None
        if self.episode_key is not None:
            values = self.episode_values(scored)
            return sum(values) / len(values) if values else None
        if self.k is not None:
            return self.from_counts(len(scored), sum(bool(s.passed) for s in scored))
        assert self.sample_field is not None
        return sum(bool(getattr(s, self.sample_field)) for s in scored) / len(scored)

    def episode_values(self, scored: Sequence[Any]) -> list[float]:
        """The per-episode values of an episode metric over ``scored`` (non-episode samples have none)."""
        out = []
        for s in scored:
            data = next((c.get("data") or {} for c in s.checks if c.get("check") == "episode"), None)
            v = None if data is None else data.get(str(self.episode_key))
            if v is not None:
                out.append(float(v))
        return out

    def from_counts(self, n: int, passed: int) -> float | None:
        """pass@k / pass^k of a case with ``n`` scored samples of which ``passed`` passed."""
        if self.k is None:
            raise ValueError(f"{self.name} is not a parametrised metric")
        if n < self.k:
            return None
        fn = pass_at_k if self.kind == "at_least_one" else pass_hat_k
        return fn(int(n), int(passed), self.k)

    def observations(self, record: Mapping[str, Any]) -> int:
        """How many observations a case record's value rests on: its scored samples, or for an
        episode metric its episodes (``n_<name>`` in a run's case record; a golden keeps the scored
        samples, one episode each)."""
        if (self.episode_key is not None or self.unit == "judgement") and record.get(f"n_{self.name}") is not None:
            return int(record[f"n_{self.name}"])
        return int(record.get("n_scored", record.get("n_samples", 0)) or 0)

    def count(self, record: Mapping[str, Any]) -> int:
        """How many of a case record's observations had the event (rate x observations).

        Rates are stored rounded to 4 decimals in golden files; rounding back is exact for up
        to 5,000 samples per case.
        """
        n = self.observations(record)
        value = record.get(self.case_field or self.name, record.get(self.name))
        return 0 if value is None or n == 0 else round(float(value) * n)


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "score",
            "weighted mean of case pass rates (a sample passes only if no check fails)",
            higher_is_better=True,
            tolerance=0.02,
            sample_field="passed",
            case_field="pass_rate",
            test="exact_count",
        ),
        Metric(
            "hard_fail_rate",
            "share of samples with a hard-fail check",
            higher_is_better=False,
            tolerance=0.01,
            sample_field="hard_fail",
            case_field="hard_fail_rate",
            test="exact_count",
        ),
        Metric(
            "strict_format_rate",
            "output is exactly the tool-call protocol",
            higher_is_better=True,
            tolerance=0.02,
            sample_field="strict_format",
            case_field="strict_format_rate",
            test="exact_count",
        ),
        Metric(
            "lenient_format_rate",
            "a call can be extracted somewhere (diagnostic only)",
            higher_is_better=True,
            tolerance=0.05,
            sample_field="lenient_format",
            gating=False,
        ),
        Metric(
            "tool_accuracy",
            "the right tool(s) were called",
            higher_is_better=True,
            tolerance=0.02,
            sample_field="tool_correct",
            case_field="tool_accuracy",
            test="exact_count",
        ),
        Metric(
            "leak_rate",
            "share of samples with any leak finding",
            higher_is_better=False,
            tolerance=0.02,
            sample_field="leaked",
            case_field="leak_rate",
            test="exact_count",
        ),
    )
}

#: metrics of multi-turn cases (docs/episodes.md): a case without episodes has no value, a suite
#: without any has none of them; the golden keeps and the gate pairs them by case like the others
EPISODE_METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "goal_rate",
            "share of episodes that reached their goal",
            higher_is_better=True,
            tolerance=0.02,
            unit="episode",
            case_field="goal_rate",
            episode_key="goal_reached",
            test="exact_count",
            aggregation="weighted mean over episode cases of the case's share of episodes",
        ),
        Metric(
            "loop_rate",
            "share of episodes that made one call loop_k times",
            higher_is_better=False,
            tolerance=0.02,
            unit="episode",
            case_field="loop_rate",
            episode_key="looped",
            test="exact_count",
            aggregation="weighted mean over episode cases of the case's share of episodes",
        ),
        Metric(
            "step_leak_rate",
            "share of an episode's steps with a leak finding",
            higher_is_better=False,
            tolerance=0.02,
            unit="step",
            case_field="step_leak_rate",
            episode_key="step_leak_rate",
            aggregation="weighted mean over episode cases of the mean over episodes of leaked steps / steps",
        ),
        Metric(
            "steps_to_goal",
            "mean steps to the goal over the episodes that reached it (reported; n counts them)",
            higher_is_better=False,
            tolerance=0.0,
            unit="episode",
            gating=False,
            episode_key="steps_to_goal",
            aggregation="weighted mean over cases with an episode that reached the goal of its mean steps",
            ci="bootstrap over cases (not a proportion: no Wilson interval)",
            proportion=False,
        ),
    )
}

#: every metric a run can report (the sample metrics, then the episode metrics)
ALL_METRICS: dict[str, Metric] = {**METRICS, **EPISODE_METRICS}


def gated_metrics(present: Iterable[str]) -> tuple[str, ...]:
    """The metrics a run is tested on, in table order: one Holm family, its size this list's length.

    ``present``: the metric names a run (its summary's ``metrics``), a golden (its ``metrics``) or
    both sides of a comparison have; the gating metrics among them. A run's summary always has
    every sample metric and an episode metric only when it has episodes, so an episode suite's
    family is 8 and a single-turn suite's 5. The gate, ``compare``, the checkpoint
    recommendation, adaptive sampling and ``plan`` all derive their family here, never from a
    copied list.
    """
    have = set(present)
    built_in = tuple(name for name, m in ALL_METRICS.items() if m.gating and name in have)
    return built_in + judges_gated(present)


def judges_gated(present: Iterable[str]) -> tuple[str, ...]:
    """The rubric criteria (``judge:NAME``) among ``present`` that gate: those whose entry (a run
    summary's or a golden's metric object) says ``gated: true``, which a run sets only for a judge
    calibrated to the suite's ``min_agreement`` (docs/judges.md). Sorted by name."""
    if not isinstance(present, Mapping):
        return ()
    return tuple(
        sorted(
            name
            for name, entry in present.items()
            if isinstance(name, str)
            and name.startswith(JUDGE_PREFIX)
            and isinstance(entry, Mapping)
            and entry.get("gated") is True
        )
    )


def known_metric(name: str) -> Metric | None:
    """The metric of the table or a rubric criterion's (``judge:NAME``); None for any other name."""
    if name in ALL_METRICS:
        return ALL_METRICS[name]
    if name.startswith(JUDGE_PREFIX) and len(name) > len(JUDGE_PREFIX):
        return judge_metric(name[len(JUDGE_PREFIX) :])
    return None


def table_order(names: Iterable[str]) -> list[str]:
    """``names`` in the metric table's order (score first), names outside the table after them, sorted:
    every table of metrics (gate, compare, report, history) lists them so, never alphabetically."""
    have = set(names)
    return [n for n in ALL_METRICS if n in have] + sorted(have - set(ALL_METRICS))


def pass_at(k: int) -> Metric:
    """pass@k: the chance that at least one of k samples of a case passes (unbiased estimator)."""
    _check_k(k)
    return Metric(
        f"pass@{k}",
        f"chance that at least one of {k} samples of a case passes",
        higher_is_better=True,
        tolerance=0.0,
        gating=False,
        k=k,
        kind="at_least_one",
        aggregation="weighted mean over cases with >= k scored samples of the unbiased per-case pass@k",
        ci="bootstrap over cases; Wilson over the case's samples when a group has one case",
    )


def pass_hat(k: int) -> Metric:
    """pass^k: the chance that all of k samples of a case pass (reliability)."""
    _check_k(k)
    return Metric(
        f"pass^{k}",
        f"chance that all {k} samples of a case pass",
        higher_is_better=True,
        tolerance=0.0,
        gating=False,
        k=k,
        kind="all",
        aggregation="weighted mean over cases with >= k scored samples of the unbiased per-case pass^k",
        ci="bootstrap over cases; Wilson over the case's samples when a group has one case",
    )


#: a rubric criterion's metric is ``judge:<criterion>`` (the suite's ``judges:`` names it)
JUDGE_PREFIX = "judge:"


def judge_metric(criterion: str) -> Metric:
    """The metric of one rubric criterion: the weighted mean over cases of the case's mean verdict
    (pass = 1, fail = 0; an integer score scaled to [0, 1] from its range), over the samples that
    got a verdict. Judge errors are counted beside it, never in it (docs/judges.md).

    ``gating`` is False here: whether a criterion gates is decided per run, from its calibration
    record (``gated`` in the run's metric entry; ``judges_gated``), never by the table."""
    name = JUDGE_PREFIX + criterion
    return Metric(
        name,
        f"mean verdict of the rubric judge {criterion!r} (0..1)",
        higher_is_better=True,
        tolerance=0.05,
        unit="judgement",
        gating=False,
        case_field=name,
        aggregation="weighted mean over cases with a verdict of the case's mean verdict",
        ci="bootstrap over cases (BCa, small-sample expanded)",
    )


_PARAM = re.compile(r"pass([@^])([1-9][0-9]*)")


def metric(name: str) -> Metric:
    """The metric called ``name`` (``score``, ``pass@3``, ...); KeyError naming the known ones."""
    if name in ALL_METRICS:
        return ALL_METRICS[name]
    m = _PARAM.fullmatch(name)
    if m:
        return pass_at(int(m.group(2))) if m.group(1) == "@" else pass_hat(int(m.group(2)))
    if name.startswith(JUDGE_PREFIX) and len(name) > len(JUDGE_PREFIX):
        return judge_metric(name[len(JUDGE_PREFIX) :])
    raise KeyError(f"unknown metric {name!r} (known: {', '.join(METRICS)}, pass@K, pass^K, judge:NAME)")


def _check_k(k: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
