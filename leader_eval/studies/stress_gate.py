"""A suite's stress requirements (``gate: stress:``) judged on a sweep, with the gate's statistics.

Each case is one cluster: its value at a length is the mean over its (case, depth) columns
there, each column the mean over its samples (depths of one case are not independent evidence).
At the requirement's length ``L``:

- a **floor** (``min: {score: 0.5}``) is the weighted mean over cases with its 95% interval
  (``stats.weighted_mean_ci``, cases as clusters), judged like the gate's floors: ``judge: bound``
  (default) fails when the interval's upper end is under the floor, ``judge: point`` when the
  estimate is;
- a **largest drop** (``max_drop: {score: 0.15}``) is paired: per column, its value at the
  shortest scored length minus its value at ``L``; the mean drop and its interval over cases;
  ``bound`` fails when the interval's lower end is above the limit (the drop is credibly larger).

What cannot be judged fails, never passes: a length the sweep did not sample, a column that
overflowed the context or has no score at ``L``, a metric the sweep has no value for. And a
requirement that could not fail whatever the model did (too few columns: even every sample
failing at ``L`` leaves the interval above the floor) is **underpowered**: reported as such, and a
failure under ``strict`` (CI) unless the gate section's ``underpowered:`` acknowledges it, as the
gate's power guard does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from leader_eval.stats.core import Estimate, weighted_mean_ci
from leader_eval.stats.metrics import table_order
from leader_eval.suite.gate_spec import GateSpec, StressRequirement

__all__ = ["StressVerdict", "format_requirements", "judge_stress"]


@dataclass(frozen=True)
class StressVerdict:
    """One requirement on one metric at one length: ``pass`` | ``fail`` | ``underpowered``."""

    at: int
    metric: str
    kind: str  # "floor" | "max_drop"
    limit: float
    estimate: Estimate | None
    verdict: str
    explanation: str

    @property
    def failed(self) -> bool:
        return self.verdict == "fail"


class SweepCell(Protocol):
    """One (column, length) cell of a sweep (``studies.stress.Variant``)."""

    @property
    def status(self) -> str: ...


class Sweep(Protocol):
    """What a requirement is judged on (``studies.stress.StressResult``)."""

    @property
    def steps(self) -> list[int]: ...

    @property
    def columns(self) -> list[str]: ...

    @property
    def variants(self) -> list[Any]: ...

    def cell(self, column: str, step: int) -> Any: ...


Cell = Callable[[str, int], SweepCell | None]
Make = Callable[..., StressVerdict]


def _value(v: SweepCell | None, metric: str) -> float | None:
    """The cell's value of ``metric``, only where it was sampled and scored."""
    if v is None or v.status != "ok":
        return None
    x = getattr(v, metric, None)
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


def judge_stress(
    result: Sweep,
    spec: GateSpec,
    weights: Mapping[str, float] | None = None,
    *,
    strict: bool = False,
) -> list[StressVerdict]:
    """Every requirement of ``spec.stress`` judged on ``result``; ``weights``: case id -> weight."""
    case_of = {v.column: v.case_id for v in result.variants}
    out: list[StressVerdict] = []
    for req in spec.stress:
        out.extend(_judge(req, spec, result.steps, result.columns, result.cell, case_of, weights or {}, strict))
    return out


def _judge(
    req: StressRequirement,
    spec: GateSpec,
    steps: Sequence[int],
    columns: list[str],
    cell: Cell,
    case_of: Mapping[str, str],
    weights: Mapping[str, float],
    strict: bool,
) -> list[StressVerdict]:
    rows: list[StressVerdict] = []
    wanted = [("floor", m, req.floors[m]) for m in table_order(req.floors)] + [
        ("max_drop", m, req.max_drops[m]) for m in table_order(req.max_drops)
    ]
    for kind, metric, limit in wanted:

        def verdict(v: str, why: str, est: Estimate | None = None) -> StressVerdict:
            return StressVerdict(req.at, metric, kind, limit, est, v, why)  # noqa: B023

        if req.at not in steps:
            rows.append(verdict("fail", f"the sweep has no length {req.at} (lengths: {', '.join(map(str, steps))})"))
            continue
        at_l: dict[str, float] = {}
        missing: list[str] = []
        for col in columns:
            value = _value(cell(col, req.at), metric)
            if value is None:
                missing.append(col)
            else:
                at_l[col] = value
        if missing:
            rows.append(
                verdict(
                    "fail",
                    f"cannot judge {metric} at {req.at}: no score for {', '.join(missing[:3])}"
                    + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
                    + " (context overflow or nothing sampled): a requirement that cannot be checked is not met",
                )
            )
            continue
        cols = sorted(at_l)
        cases = sorted({case_of.get(c, c) for c in cols})
        w = [float(weights.get(c, 1.0)) for c in cases]
        if not cols:
            rows.append(verdict("fail", f"the sweep has no column at {req.at}: nothing to judge"))
            continue
        if len(cases) < 2:
            # one cluster has no spread to build an interval from: its zero-width interval would
            # let one lucky or unlucky case decide, however many depths it was swept at
            why = f"one case ({cases[0]}) at {req.at}: an interval over cases needs two or more"
            rows.append(_underpowered(verdict, None, spec, strict, why))
            continue
        if kind == "floor":
            est = weighted_mean_ci(_per_case(at_l, cols, cases, case_of), w)
            judged = est.value if spec.judge == "point" else est.high
            worst = weighted_mean_ci([0.0] * len(cases), w).high  # every sample failing at L
            if spec.judge == "bound" and worst >= limit:
                why = (
                    f"even a {metric} of 0 at {req.at} over {len(cases)} case(s) has a 95% upper end of "
                    f"{worst:.3g} >= the floor {limit:g}"
                )
                rows.append(_underpowered(verdict, est, spec, strict, why))
                continue
            beyond = judged < limit
            what = "the estimate" if spec.judge == "point" else "the upper end"
            why = (
                f"{metric} at {req.at}: {est.value:.4g} [{est.low:.4g}, {est.high:.4g}] against the floor "
                f"{limit:g} (judge: {spec.judge}; {what} {judged:.4g} {'<' if beyond else '>='} {limit:g})"
            )
            rows.append(verdict("fail" if beyond else "pass", why, est))
            continue
        shortest = _shortest(steps, req.at, cols, cell, metric)
        if shortest is None:
            rows.append(verdict("fail", f"cannot judge the drop of {metric} to {req.at}: no shorter scored length"))
            continue
        base_len, base = shortest
        drops = {c: base[c] - at_l[c] for c in cols}
        est = weighted_mean_ci(_per_case(drops, cols, cases, case_of), w)
        judged = est.value if spec.judge == "point" else est.low
        best = weighted_mean_ci([1.0] * len(cases), w).low  # the largest drop there can be
        if spec.judge == "bound" and best <= limit:
            why = (
                f"even a drop of 1 from {base_len} to {req.at} over {len(cases)} case(s) has a 95% lower end of "
                f"{best:.3g} <= the limit {limit:g}"
            )
            rows.append(_underpowered(verdict, est, spec, strict, why))
            continue
        beyond = judged > limit
        what = "the estimate" if spec.judge == "point" else "the lower end"
        why = (
            f"drop of {metric} from {base_len} to {req.at}: {est.value:.4g} [{est.low:.4g}, {est.high:.4g}] "
            f"against the largest drop {limit:g} (judge: {spec.judge}; {what} {judged:.4g} "
            f"{'>' if beyond else '<='} {limit:g})"
        )
        rows.append(verdict("fail" if beyond else "pass", why, est))
    return rows


def _per_case(
    values: Mapping[str, float], cols: list[str], cases: list[str], case_of: Mapping[str, str]
) -> list[float]:
    """Each case's mean over its columns (its depths), in ``cases`` order."""
    sums: dict[str, list[float]] = {c: [] for c in cases}
    for col in cols:
        sums[case_of.get(col, col)].append(values[col])
    return [sum(v) / len(v) for v in (sums[c] for c in cases)]


def _shortest(
    steps: Sequence[int], at: int, cols: list[str], cell: Cell, metric: str
) -> tuple[int, dict[str, float]] | None:
    """The shortest length below ``at`` where every column has a value (pairs need both ends)."""
    for step in sorted(steps):
        if step >= at:
            return None
        values = {}
        for col in cols:
            value = _value(cell(col, step), metric)
            if value is None:
                break
            values[col] = value
        else:
            return step, values
    return None


def _underpowered(make: Make, est: Estimate | None, spec: GateSpec, strict: bool, why: str) -> StressVerdict:
    if strict and not spec.underpowered:
        text = f"underpowered in CI mode: {why}; sample more cases or depths, or acknowledge it with gate: underpowered"
        return make("fail", text, est)
    ack = f" (acknowledged: {spec.underpowered})" if spec.underpowered else ""
    return make("underpowered", f"cannot fail: {why}{ack}", est)


def format_requirements(verdicts: Sequence[StressVerdict]) -> str:
    """One line per requirement, then the verdict (empty when the suite declares none)."""
    if not verdicts:
        return ""
    lines = ["stress requirements (gate: stress:):"]
    for v in verdicts:
        lines.append(f"  {v.verdict.upper():<12} at {v.at}: {v.kind} {v.metric} {v.limit:g}: {v.explanation}")
    failed = sum(v.failed for v in verdicts)
    weak = sum(v.verdict == "underpowered" for v in verdicts)
    if failed:
        lines.append(f"FAIL: {failed} of {len(verdicts)} stress requirement(s) not met")
    else:
        lines.append(
            f"PASS: {len(verdicts) - weak} of {len(verdicts)} stress requirement(s) met"
            + (f"; {weak} could not fail (underpowered: --strict fails them)" if weak else "")
        )
    return "\n".join(lines)
