"""Aggregate sample scores into case results and suite metrics, each with n and a 95% CI.

Every metric is computed per case first (mean over the case's scored samples), then averaged over
cases with the cases' weights; its interval is a bootstrap over cases (``stats``), because cases,
not samples, are the independent units of a suite.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from leader_eval.checks.episode import EPISODE_METRICS, episode_case_metrics
from leader_eval.score import SampleScore
from leader_eval.stats import weighted_mean_ci
from leader_eval.suite import Case, Suite

#: metric name -> (per-sample value, higher is better, description)
METRICS: dict[str, tuple[str, bool, str]] = {
    "score": ("passed", True, "weighted mean of case pass rates (a sample passes only if no check fails)"),
    "hard_fail_rate": ("hard_fail", False, "share of samples with a hard-fail check"),
    "strict_format_rate": ("strict_format", True, "output is exactly the tool-call protocol"),
    "lenient_format_rate": ("lenient_format", True, "a call can be extracted somewhere (diagnostic only)"),
    "tool_accuracy": ("tool_correct", True, "the right tool(s) were called"),
    "leak_rate": ("leaked", False, "share of samples with any leak finding"),
}


def case_results(cases: Sequence[Case], scores: Sequence[SampleScore]) -> list[dict[str, Any]]:
    by_case: dict[str, list[SampleScore]] = defaultdict(list)
    for s in scores:
        by_case[s.case_id].append(s)
    out = []
    for case in cases:
        ss = by_case.get(case.id, [])
        scored = [s for s in ss if s.scored]
        reasons: dict[str, int] = defaultdict(int)
        for s in scored:
            if not s.passed and s.reason:
                reasons[s.reason] += 1
        rec: dict[str, Any] = {
            "case_id": case.id,
            "line": case.line,
            "tags": list(case.tags),
            "weight": case.weight,
            "split": case.split,
            "n_samples": len(ss),
            "n_scored": len(scored),
            "n_errors": sum(s.outcome == "error" for s in ss),
            "n_context_overflow": sum(s.outcome == "context_overflow" for s in ss),
            "n_passed": sum(s.passed for s in scored),
            "n_hard_fail": sum(s.hard_fail for s in scored),
            "reasons": dict(sorted(reasons.items())),
        }
        for name, (attr, _, _) in METRICS.items():
            rec[name] = (sum(bool(getattr(s, attr)) for s in scored) / len(scored)) if scored else None
        rec.update(episode_case_metrics(scored))  # multi-turn cases only (leader_eval.checks.episode)
        out.append(rec)
    return out


def _metrics(results: Sequence[Mapping[str, Any]], *, seed: int = 0) -> dict[str, Any]:
    usable = [r for r in results if r["n_scored"] > 0]
    n_samples = sum(r["n_scored"] for r in usable)
    metrics: dict[str, Any] = {}
    for name, (_, higher, desc) in METRICS.items():
        est = weighted_mean_ci(
            [float(r[name]) for r in usable], [float(r["weight"]) for r in usable], n_samples=n_samples, seed=seed
        )
        metrics[name] = {**est.to_dict(), "higher_is_better": higher, "description": desc}
    for name, (_, higher, gated, desc) in EPISODE_METRICS.items():
        have = [r for r in usable if r.get(name) is not None]
        if have:  # over the cases that have a value; n_samples counts the episodes behind them
            n = sum(int(r[f"n_{name}"]) for r in have)
            est = weighted_mean_ci(
                [float(r[name]) for r in have], [float(r["weight"]) for r in have], n_samples=n, seed=seed
            )
            metrics[name] = {**est.to_dict(), "higher_is_better": higher, "gated": gated, "description": desc}
    reasons: dict[str, int] = defaultdict(int)
    for r in usable:
        for k, v in r["reasons"].items():
            reasons[k] += v
    return {
        "metrics": metrics,
        "n_cases": len(results),
        "n_cases_scored": len(usable),
        "n_samples": sum(r["n_samples"] for r in results),
        "n_scored": n_samples,
        "n_hard_fail": sum(r["n_hard_fail"] for r in results),
        "n_errors": sum(r["n_errors"] for r in results),
        "n_context_overflow": sum(r["n_context_overflow"] for r in results),
        "reasons": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def summarize(suite: Suite, results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Suite metrics overall, per tag, and per split (held-out vs in-distribution) when both exist."""
    summary: dict[str, Any] = {"suite": suite.name, "overall": _metrics(results)}
    tags = sorted({t for r in results for t in r["tags"]})
    summary["by_tag"] = {t: _metrics([r for r in results if t in r["tags"]]) for t in tags}
    heldout = [r for r in results if r.get("split") == "heldout"]
    indist = [r for r in results if r.get("split") != "heldout"]
    if heldout and indist:
        summary["by_split"] = {"heldout": _metrics(heldout), "in_distribution": _metrics(indist)}
    return summary
