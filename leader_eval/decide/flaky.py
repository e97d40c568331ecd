"""Flaky cases: outcomes that are genuinely uncertain at a checkpoint, and runs that disagree.

``leader-eval flaky RUN_DIR...`` reads several runs of one checkpoint (same suite content, model,
scorer and sampling; different seeds) and, per case, pools its scored samples:

- **flaky**: the 95% Clopper-Pearson interval of the pooled pass rate lies inside (0.05, 0.95).
  The case neither almost always passes nor almost always fails at this checkpoint, so a single
  run's pass or fail of it says little; the exact interval never claims that on too few samples.
- **overdispersed**: the runs disagree more than binomial noise explains. Pearson's chi-square
  test of one pass rate across the runs (a runs x {pass, fail} table, runs - 1 degrees of
  freedom), p-values Holm-adjusted over the cases tested. Identical seeds draw identical samples,
  so disagreement beyond chance signals server nondeterminism, seed leakage or a changed
  environment between runs, not the model. With expected counts under 5 the chi-square p-value
  is approximate; the report says so.

Bad input (fewer than two runs, runs of different suites, models, scorer versions or sampling)
raises ``LeaderEvalError`` (exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leader_eval.errors import LeaderEvalError
from leader_eval.runs.evaluate import Run as RunType
from leader_eval.runs.evaluate import read_run
from leader_eval.stats.core import chi2_sf, clopper_pearson, holm_adjusted

if TYPE_CHECKING:
    from leader_eval.runs.evaluate import Run

__all__ = ["FLAKY_HIGH", "FLAKY_LOW", "CaseFlakiness", "FlakyReport", "find_flaky"]

#: a case is flaky when its pooled pass rate's interval lies inside (FLAKY_LOW, FLAKY_HIGH)
FLAKY_LOW, FLAKY_HIGH = 0.05, 0.95


@dataclass
class CaseFlakiness:
    case_id: str
    passed: list[int]  # per run
    scored: list[int]  # per run
    rate: float
    low: float
    high: float
    flaky: bool
    chi2: float | None  # None when the case has one run with samples or no spread to test
    p_value: float | None
    p_holm: float | None = None
    overdispersed: bool = False
    approximate: bool = False  # some expected count under 5

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


@dataclass
class FlakyReport:
    runs: list[str]
    seeds: list[int]
    cases: list[CaseFlakiness]
    alpha: float = 0.05
    messages: list[str] = field(default_factory=list)

    @property
    def flaky(self) -> list[CaseFlakiness]:
        return [c for c in self.cases if c.flaky]

    @property
    def overdispersed(self) -> list[CaseFlakiness]:
        return [c for c in self.cases if c.overdispersed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "seeds": self.seeds,
            "alpha": self.alpha,
            "cases": [c.to_dict() for c in self.cases],
            "messages": self.messages,
        }


def _identity(run: Run) -> str:
    ident = {k: v for k, v in run.manifest["identity"].items() if k != "run_seed"}
    return json.dumps([ident, str(run.manifest.get("scorer_version"))], sort_keys=True, default=str)


def find_flaky(runs: Sequence[Run | str | Path], *, alpha: float = 0.05, confidence: float = 0.95) -> FlakyReport:
    """Flaky and overdispersed cases over runs of one checkpoint (see the module doc)."""

    loaded = [r if isinstance(r, RunType) else read_run(r) for r in runs]
    if len(loaded) < 2:
        raise LeaderEvalError("flaky needs at least two runs of one checkpoint (RUN_DIR RUN_DIR [...])")
    first = loaded[0]
    for r in loaded[1:]:
        if _identity(r) != _identity(first):
            ident, base = r.manifest["identity"], first.manifest["identity"]
            what = [k for k in sorted(set(ident) | set(base)) if k != "run_seed" and ident.get(k) != base.get(k)]
            if str(r.manifest.get("scorer_version")) != str(first.manifest.get("scorer_version")):
                what.append("scorer_version")
            raise LeaderEvalError(
                f"{r.path}: not a run of the same checkpoint and suite as {first.path} "
                f"(differs in {', '.join(what) or 'identity'}): flaky compares seeds of one checkpoint"
            )
    seeds = [int(r.manifest["identity"].get("run_seed", 0)) for r in loaded]
    messages = []
    if len(set(seeds)) < len(seeds):
        messages.append("some runs share a seed: with a deterministic sampler they repeat each other's samples")
    order: list[str] = []
    per_case: dict[str, list[tuple[int, int]]] = {}
    for i, r in enumerate(loaded):
        for c in r.cases:
            cid = c["case_id"]
            if cid not in per_case:
                order.append(cid)
                per_case[cid] = [(0, 0)] * len(loaded)
            per_case[cid][i] = (int(c.get("n_passed") or 0), int(c.get("n_scored") or 0))
    cases = [_one_case(cid, per_case[cid], confidence) for cid in order]
    _holm(cases, alpha)
    return FlakyReport([str(r.path) for r in loaded], seeds, cases, alpha, messages)


def _one_case(cid: str, counts: list[tuple[int, int]], confidence: float) -> CaseFlakiness:
    passed = [p for p, _ in counts]
    scored = [n for _, n in counts]
    total, n = sum(passed), sum(scored)
    if n == 0:
        nan = float("nan")
        return CaseFlakiness(cid, passed, scored, nan, nan, nan, False, None, None)
    low, high = clopper_pearson(total, n, confidence)
    chi2 = p_value = None
    approximate = False
    used = [(p, k) for p, k in counts if k > 0]
    rate = total / n
    if len(used) >= 2 and 0 < total < n:
        chi2 = 0.0
        for p, k in used:
            for observed, expected in ((p, k * rate), (k - p, k * (1 - rate))):
                chi2 += (observed - expected) ** 2 / expected
                approximate |= expected < 5
        p_value = chi2_sf(chi2, len(used) - 1)
    return CaseFlakiness(
        cid, passed, scored, rate, low, high, low > FLAKY_LOW and high < FLAKY_HIGH, chi2, p_value,
        approximate=approximate,
    )  # fmt: skip


def _holm(cases: Sequence[CaseFlakiness], alpha: float) -> None:
    """Holm-adjusted p-values over the cases with a test (``stats.holm_adjusted``); overdispersed
    when below ``alpha``."""
    adjusted = holm_adjusted({c.case_id: c.p_value for c in cases if c.p_value is not None})
    for c in cases:
        if c.case_id in adjusted:
            c.p_holm = adjusted[c.case_id]
            c.overdispersed = c.p_holm < alpha
