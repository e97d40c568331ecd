"""A stress sweep as curves: score and failure reasons against prompt length, with intervals.

One point per (length, depth): the chosen cases' variants at that length (and depth; ``all``
averages each case over its depths first). Cases are the clusters: a case's value is the mean
over its samples (and depths), and the interval is ``stats.weighted_mean_ci`` over cases. With a
single case there is no spread between cases to use; its samples are then the independent
draws and the interval is Wilson's over them (``stats.rate_ci``). An interval over cases is never
narrower than Wilson's over all the samples (clustering only adds uncertainty; cases that all
scored alike would otherwise get a zero-width band). Failure reasons are rates of samples with
that reason, estimated the same way.

The **first credible drop** is the shortest length whose failures exceed those at the shortest
scored length by more than chance, paired by variant column (the same case and depth at both
lengths): the stratified exact count test (``stats.exact_count_test``), Holm-adjusted over the
lengths compared, at 5%. A curve that cannot show a drop (too few samples) says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from leader_eval.stats.core import Estimate, exact_count_test, holm_adjusted, rate_ci, weighted_mean_ci

__all__ = ["ALL_DEPTHS", "Curve", "CurvePoint", "curves"]

#: the depth key of the points that average each case over its depths
ALL_DEPTHS = "all"
#: the level of the first-credible-drop test (Holm over the lengths compared)
DROP_ALPHA = 0.05


@dataclass(frozen=True)
class CurvePoint:
    length: int
    score: Estimate | None  # None: nothing scored at this length (overflow, or shorter than a case)
    reasons: dict[str, Estimate]
    n_cases: int
    n_samples: int
    n_overflow: int  # variant columns that overflowed the context here

    def to_dict(self) -> dict[str, Any]:
        return {
            "length": self.length,
            "score": self.score.to_dict() if self.score else None,
            "reasons": {k: e.to_dict() for k, e in self.reasons.items()},
            "n_cases": self.n_cases,
            "n_samples": self.n_samples,
            "n_overflow": self.n_overflow,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CurvePoint:
        return cls(
            length=int(d["length"]),
            score=Estimate.from_dict(d["score"]) if d.get("score") else None,
            reasons={k: Estimate.from_dict(e) for k, e in (d.get("reasons") or {}).items()},
            n_cases=int(d["n_cases"]),
            n_samples=int(d["n_samples"]),
            n_overflow=int(d.get("n_overflow", 0)),
        )


@dataclass(frozen=True)
class Curve:
    depth: str  # "start" | "middle" | "end" | "all" (no fact: "all" only)
    points: list[CurvePoint]
    first_drop: int | None  # the first length with credibly more failures than the base length
    drop_base: int | None  # the shortest scored length the drop is measured from
    drop_p: dict[int, float] = field(default_factory=dict)  # Holm-adjusted p-value per length

    def to_dict(self) -> dict[str, Any]:
        return {
            "depth": self.depth,
            "points": [p.to_dict() for p in self.points],
            "first_drop": self.first_drop,
            "drop_base": self.drop_base,
            "drop_p": {str(k): v for k, v in self.drop_p.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Curve:
        return cls(
            depth=str(d["depth"]),
            points=[CurvePoint.from_dict(p) for p in d["points"]],
            first_drop=d.get("first_drop"),
            drop_base=d.get("drop_base"),
            drop_p={int(k): float(v) for k, v in (d.get("drop_p") or {}).items()},
        )


def _estimate(per_case: Mapping[str, tuple[float, int, int]], weights: Mapping[str, float]) -> Estimate | None:
    """Cases as clusters; one case: Wilson over its samples. ``per_case``: (value, events, samples)."""
    if not per_case:
        return None
    ids = sorted(per_case)
    n_samples = sum(per_case[c][2] for c in ids)
    if len(ids) == 1:
        value, events, n = per_case[ids[0]]
        e = rate_ci(events, n, n_cases=1)
        # the case's own value (a mean score may be fractional) with Wilson's band over its samples
        return Estimate(
            value, min(e.low, value), max(e.high, value), 1, n, e.confidence, "one case: Wilson over its samples"
        )
    est = weighted_mean_ci(
        [per_case[c][0] for c in ids], [float(weights.get(c, 1.0)) for c in ids], n_samples=n_samples
    )
    # never narrower than the samples alone allow: cases that all scored alike (0.8 each) give the
    # bootstrap a zero-width interval, as if their samples had no noise
    pooled = rate_ci(sum(per_case[c][1] for c in ids), n_samples, n_cases=len(ids))
    if pooled.low < est.low or pooled.high > est.high:
        note = "widened to the Wilson interval over all samples" + (f" ({est.note})" if est.note else "")
        return Estimate(
            est.value,
            min(est.low, pooled.low),
            max(est.high, pooled.high),
            est.n_cases,
            n_samples,
            est.confidence,
            note,
        )
    return est


def _point(length: int, cells: Sequence[Any], weights: Mapping[str, float]) -> CurvePoint:
    scored = [v for v in cells if v.status == "ok" and v.score is not None and v.n_scored]
    by_case: dict[str, list[Any]] = {}
    for v in scored:
        by_case.setdefault(v.case_id, []).append(v)

    def per_case(value_of: Any, events_of: Any) -> dict[str, tuple[float, int, int]]:
        return {
            c: (sum(value_of(v) for v in vs) / len(vs), sum(events_of(v) for v in vs), sum(v.n_scored for v in vs))
            for c, vs in by_case.items()
        }

    score = _estimate(per_case(lambda v: float(v.score), lambda v: v.n_passed), weights)
    names = sorted({r for v in scored for r in v.reasons})
    reasons = {
        r: est
        for r in names
        if (
            est := _estimate(
                per_case(lambda v, r=r: v.reasons.get(r, 0) / v.n_scored, lambda v, r=r: v.reasons.get(r, 0)), weights
            )
        )
        is not None
    }
    return CurvePoint(
        length=length,
        score=score,
        reasons=reasons,
        n_cases=len(by_case),
        n_samples=sum(v.n_scored for v in scored),
        n_overflow=sum(v.status == "overflow" for v in cells),
    )


def _first_drop(steps: Sequence[int], cells: Sequence[Any]) -> tuple[int | None, int | None, dict[int, float]]:
    """Paired by column: failures at each length against the shortest length where columns scored."""

    def counts(step: int) -> dict[str, tuple[int, int]]:
        return {
            v.column: (v.n_scored - v.n_passed, v.n_scored)
            for v in cells
            if v.target == step and v.status == "ok" and v.n_scored
        }

    scored_steps = [s for s in sorted(steps) if counts(s)]
    if len(scored_steps) < 2:
        return None, scored_steps[0] if scored_steps else None, {}
    base = scored_steps[0]
    a = counts(base)
    raw = {s: exact_count_test(a, counts(s)).p_more for s in scored_steps[1:]}
    adjusted = holm_adjusted({str(s): p for s, p in raw.items()})
    p = {s: round(adjusted[str(s)], 6) for s in raw}
    first = next((s for s in scored_steps[1:] if p[s] < DROP_ALPHA), None)
    return first, base, p


def curves(steps: Sequence[int], variants: Sequence[Any], weights: Mapping[str, float]) -> list[Curve]:
    """One curve per depth the sweep has (sorted start, middle, end) and one over all variants."""
    depths = [d for d in ("start", "middle", "end") if any(v.depth == d for v in variants)]
    out = []
    for depth in [*depths, ALL_DEPTHS]:
        cells = [v for v in variants if depth == ALL_DEPTHS or v.depth == depth]
        points = [_point(s, [v for v in cells if v.target == s], weights) for s in steps]
        first, base, p = _first_drop(steps, cells)
        out.append(Curve(depth, points, first, base, p))
    return out
