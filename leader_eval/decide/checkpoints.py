"""Checkpoints of one training run: their order and the checkpoint to ship.

Order: ``--order LABEL,...`` when given; otherwise the labels are checkpoints when every one is a
shared prefix followed by a number (``step-100``, ``ckpt2k``, ``v4``/``v7``), ordered by that
number; otherwise (``compare`` only) the order of the runs on the command line.

Recommendation: the *earliest* checkpoint that is not credibly worse than the best one in any
gated metric. "Best" is the highest (lowest, for a lower-is-better metric) point estimate of the
headline metric (``score``) over the cases every run scored, among the checkpoints the comparison
does not call a credible regression (below). Every other checkpoint is tested
against it on every gated metric (``compare.metric_family``: a rubric criterion only where every
run gates it) with the paired decision the gate
and ``compare`` make (``stats.decide_paired``: each metric's declared test, one-sided "this
checkpoint is worse than the best"); all of those tests are one Holm-Tarone family at ``alpha``
(``stats.holm_alphas``), so that with checkpoints of equal quality the chance of calling any of
them worse stays at most alpha. A checkpoint is also passed over when the comparison itself calls
it a credible regression on a gated metric (``B credibly REGRESSES vs A``, or ``B credibly
improves on A``, which makes A the worse one): the recommendation never contradicts the verdict
printed above it. The earliest remaining checkpoint is recommended; when none remains, none is.
"Not credibly worse" is not "as good": with few cases the test is weak and an early checkpoint
can pass it; the table shows each difference and its interval so that a reader can see how close
it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from leader_eval.decide.compare import Comparison, metric_cases, metric_family, paired_decision
from leader_eval.errors import LeaderEvalError
from leader_eval.stats.core import holm_alphas
from leader_eval.stats.metrics import ALL_METRICS

_NUMBERED = re.compile(r"^(?P<prefix>.*?)(?P<num>\d+(?:\.\d+)?)(?P<unit>[kKmM]?)$")
_UNITS = {"": 1.0, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6}


@dataclass(frozen=True)
class CheckpointRow:
    name: str
    value: float
    low: float
    high: float
    diff: float  # this checkpoint minus the best, paired over common cases (0 for the best)
    diff_low: float
    diff_high: float
    p_worse: float | None  # one-sided, in the headline metric; None for the best itself
    level: float | None  # Holm level this p-value was tested at
    credibly_worse: bool  # passed over: credibly worse than the best, or a regression in the comparison
    #: why it is passed over: "<metric> (p <p>)" per gated metric worse than the best, and the
    #: comparison's own verdicts against it
    worse_in: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckpointRecommendation:
    metric: str
    alpha: float
    order_source: str  # "--order" | "labels" | "command line"
    positions: list[float]  # x of each row (label numbers when labels carry them, else 0..n-1)
    rows: list[CheckpointRow]
    best: str
    #: the earliest checkpoint not passed over; None when every one is credibly worse somewhere
    recommended: str | None
    n_cases: int
    #: the gated metrics every checkpoint was tested on (one Holm family with the checkpoints)
    metrics: tuple[str, ...] = ()


def label_numbers(labels: Sequence[str]) -> list[float] | None:
    """Each label's checkpoint number when all labels are one prefix plus distinct numbers."""
    parsed = [_NUMBERED.match(lb) for lb in labels]
    if len(labels) < 2 or not all(parsed):
        return None
    prefixes = {m.group("prefix") for m in parsed if m}
    nums = [float(m.group("num")) * _UNITS[m.group("unit")] for m in parsed if m]
    if len(prefixes) != 1 or len(set(nums)) != len(nums):
        return None
    return nums


def checkpoint_order(
    names: Sequence[str], order: Sequence[str] | None = None, *, fallback: bool = False
) -> tuple[list[str], list[float], str] | None:
    """(names in checkpoint order, x positions, where the order came from), or None when the names
    are not recognisably checkpoints and ``fallback`` is off. ``order`` must name every run."""
    if order:
        unknown = [o for o in order if o not in names]
        missing = [n for n in names if n not in order]
        if unknown or missing:
            raise LeaderEvalError(
                f"--order: {'unknown label(s) ' + ', '.join(unknown) if unknown else ''}"
                f"{'; ' if unknown and missing else ''}{'missing label(s) ' + ', '.join(missing) if missing else ''}"
                f" (the runs' labels: {', '.join(names)})"
            )
        ordered = list(dict.fromkeys(order))
        nums = label_numbers(ordered)
        if nums is None or sorted(nums) != nums:
            nums = [float(i) for i in range(len(ordered))]
        return ordered, nums, "--order"
    nums = label_numbers(names)
    if nums is not None:
        pairs = sorted(zip(nums, names, strict=True))
        return [n for _, n in pairs], [x for x, _ in pairs], "labels"
    if fallback:
        return list(names), [float(i) for i in range(len(names))], "command line"
    return None


def recommend_checkpoint(
    comparison: Comparison,
    order: Sequence[str] | None = None,
    *,
    metric: str = "score",
    fallback: bool = False,
) -> CheckpointRecommendation | None:
    """The recommendation for the comparison's run groups (None when they are not checkpoints)."""
    groups = {g.name: g for g in comparison.groups}
    if len(groups) < 2:
        return None
    found = checkpoint_order(list(groups), order, fallback=fallback)
    if found is None:
        return None
    names, positions, source = found
    higher = ALL_METRICS[metric].higher_is_better
    common = sorted(set.intersection(*(set(g.cases) for g in groups.values())))
    cases_of = metric_cases(list(groups.values()), common)
    family = metric_family(list(groups.values()), cases_of)
    est = {n: groups[n].estimates[metric] for n in names}
    # the comparison's own verdicts: never recommend what it calls a credible regression
    worse: dict[str, list[str]] = {n: [] for n in names}
    for pair in comparison.pairs:
        if pair.regressed and pair.b.name in worse:
            worse[pair.b.name].append(f"the comparison: regresses vs {pair.a.name} in {', '.join(pair.regressed)}")
        if pair.improved and pair.a.name in worse:
            worse[pair.a.name].append(f"the comparison: {pair.b.name} improves on it in {', '.join(pair.improved)}")
    # the best is the highest estimate among the checkpoints the comparison does not fault; the
    # earliest of equal estimates is the best: a tie never favours a later checkpoint
    pool = [n for n in names if not worse[n]] or names
    best = max(pool, key=lambda n: (est[n].value if higher else -est[n].value, -names.index(n)))
    b = groups[best]
    decisions = {}
    for n in names:
        if n == best:
            continue
        for m in dict.fromkeys((metric, *family)):
            decisions[n, m] = paired_decision(b, groups[n], m, cases_of[m])
    tested = [k for k in decisions if k[1] in family]
    levels = holm_alphas(
        {_key(n, m): decisions[n, m].p_worse for n, m in tested},
        comparison.alpha,
        min_p={_key(n, m): decisions[n, m].min_p_worse for n, m in tested},
    )
    for n, m in tested:
        if decisions[n, m].p_worse < levels[_key(n, m)]:
            worse[n].insert(0, f"{m} (p {decisions[n, m].p_worse:.3g})")
    rows = []
    for n in names:
        e = est[n]
        if n == best:
            rows.append(
                CheckpointRow(n, e.value, e.low, e.high, 0.0, 0.0, 0.0, None, None, bool(worse[n]), tuple(worse[n]))
            )
            continue
        d = decisions[n, metric]
        pc = d.comparison
        level = levels.get(_key(n, metric), comparison.alpha)
        rows.append(
            CheckpointRow(
                n, e.value, e.low, e.high, pc.diff, pc.low, pc.high, d.p_worse, level, bool(worse[n]), tuple(worse[n])
            )
        )
    recommended = next((r.name for r in rows if not r.credibly_worse), None)
    return CheckpointRecommendation(
        metric, comparison.alpha, source, positions, rows, best, recommended, len(common), tuple(family)
    )


def _key(name: str, metric: str) -> str:
    """One hypothesis of the recommendation's family (a checkpoint, a metric) as a unique string."""
    return json.dumps([name, metric])
