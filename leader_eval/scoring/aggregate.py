"""Aggregate sample scores into case results and suite metrics, each with n and a 95% CI.

Every metric (``metrics.METRICS``) is computed per case first (``Metric.case_value``: the share of
the case's scored samples), then averaged over cases with the cases' weights; its interval is a
bootstrap over cases (``stats``), because cases, not samples, are the independent units of a suite.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from leader_eval.bounded.numeric import np
from leader_eval.errors import LeaderEvalError
from leader_eval.scoring.episode import episode_case_metrics
from leader_eval.scoring.error_rule import first_sampler_error
from leader_eval.scoring.judge import PREFIX as JUDGE_PREFIX
from leader_eval.scoring.judge import judge_case_metrics
from leader_eval.scoring.scorer import SampleScore
from leader_eval.stats import metrics as metric_defs
from leader_eval.stats.core import Estimate, rate_ci, weighted_mean_ci
from leader_eval.stats.metrics import Metric, pass_at, pass_hat
from leader_eval.store.records import RunTotals, Summary
from leader_eval.suite.load import Case, Suite
from leader_eval.types import Reason, Sample

#: metric name -> (per-sample value, higher is better, description): a view of ``metrics.METRICS``
#: kept for readers of the old table; new code reads ``metrics.METRICS``
METRICS: dict[str, tuple[str, bool, str]] = {
    name: (m.sample_field or name, m.higher_is_better, m.description) for name, m in metric_defs.METRICS.items()
}


def case_results(cases: Sequence[Case], scores: Sequence[SampleScore]) -> list[dict[str, Any]]:
    """Each case's record (``case_result``) over its scores, in the order of ``cases``."""
    by_case: dict[str, list[SampleScore]] = defaultdict(list)
    for s in scores:
        by_case[s.case_id].append(s)
    return [case_result(case, by_case.get(case.id, [])) for case in cases]


def case_result(case: Case, ss: Sequence[SampleScore]) -> dict[str, Any]:
    """One case's record (a line of ``cases.json`` but its token counts) over its samples' scores
    in index order: a function of that case alone, so a run can aggregate a case as soon as its
    last sample is scored."""
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
    for name, spec in metric_defs.METRICS.items():
        rec[name] = spec.case_value(scored)
    rec.update(episode_case_metrics(scored))  # multi-turn cases only (leader_eval.scoring.episode)
    rec.update(check_errors(scored))
    rec.update(judge_case_metrics(scored))  # judged suites only (leader_eval.scoring.judge)
    return rec


def _one_case(spec: Metric, r: Mapping[str, Any], value: float) -> Estimate:
    """A one-case group's interval: Wilson over that case's samples, never a zero-width bootstrap.

    For pass@k / pass^k the Wilson bounds of the case's pass rate are mapped through
    ``1 - (1 - p)^k`` / ``p^k`` (both increase with p); the unbiased estimate may sit just
    outside them, so the ends are widened to include it."""
    n = int(r["n_scored"])
    if spec.k is None:
        est = rate_ci(round(value * n), n, n_cases=1)
        low, high = est.low, est.high
    else:
        p = rate_ci(int(r["n_passed"]), n, n_cases=1)
        k = spec.k
        if spec.kind == "at_least_one":
            low, high = 1 - (1 - p.low) ** k, 1 - (1 - p.high) ** k
        else:
            low, high = p.low**k, p.high**k
    note = f"one case: Wilson interval over its {n} samples; it says nothing about other cases"
    return Estimate(value, min(low, value), max(high, value), 1, n, 0.95, note)


def _estimate(spec: Metric, usable: Sequence[Mapping[str, Any]], values: Sequence[float], seed: int) -> Estimate:
    n_samples = sum(int(r["n_scored"]) for r in usable)
    if len(usable) == 1:
        return _one_case(spec, usable[0], float(values[0]))
    weights = [float(r["weight"]) for r in usable]
    return weighted_mean_ci([float(v) for v in values], weights, n_samples=n_samples, seed=seed)


def pass_k_values(ks: Sequence[int], results: Sequence[Mapping[str, Any]], *, seed: int = 0) -> dict[str, Any]:
    """pass@k and pass^k for each k over the cases' scored samples, with intervals over cases.

    Reported, never gated. A case with fewer than k scored samples has no pass@k: it is left out
    and counted (``n_cases_short``, ``cases_short``), never scored as 0."""
    usable = [r for r in results if r["n_scored"] > 0]
    out: dict[str, Any] = {}
    for k in ks:
        for spec in (pass_at(k), pass_hat(k)):
            have, values, short = [], [], []
            for r in usable:
                v = spec.from_counts(int(r["n_scored"]), int(r["n_passed"]))
                if v is None:
                    short.append(r["case_id"])
                else:
                    have.append(r)
                    values.append(v)
            est = _estimate(spec, have, values, seed) if have else weighted_mean_ci([], n_samples=0)
            entry = {**est.to_dict(), "k": k, "higher_is_better": True, "description": spec.description}
            entry["n_cases_short"] = len(short)
            entry["cases_short"] = short[:20]
            if short:
                more = f" and {len(short) - 5} more" if len(short) > 5 else ""
                shown = ", ".join(short[:5])
                extra = f"{len(short)} case(s) with fewer than {k} scored samples left out ({shown}{more})"
                entry["note"] = "; ".join(x for x in (entry["note"], extra) if x)
            out[spec.name] = entry
    return out


def default_ks(results: Sequence[Mapping[str, Any]], asked: Sequence[int] = ()) -> list[int]:
    """The k of pass@k / pass^k: the suite's ``pass_k`` list, else 1 and the samples per case."""
    if asked:
        return sorted({int(k) for k in asked})
    most = max((int(r.get("n_samples") or 0) for r in results), default=1)
    return sorted({1, max(1, most)})


def group_metrics(results: Sequence[Mapping[str, Any]], *, seed: int = 0, ks: Sequence[int] = (1,)) -> dict[str, Any]:
    """Metrics of one group of case records (overall, a tag, a split), each with its interval."""
    usable = [r for r in results if r["n_scored"] > 0]
    n_samples = sum(r["n_scored"] for r in usable)
    metrics: dict[str, Any] = {}
    for name, spec in metric_defs.METRICS.items():
        est = _estimate(spec, usable, [float(r[name]) for r in usable], seed) if usable else weighted_mean_ci([])
        metrics[name] = {**est.to_dict(), "higher_is_better": spec.higher_is_better, "description": spec.description}
    for name, spec in metric_defs.EPISODE_METRICS.items():
        have = [r for r in usable if r.get(name) is not None]
        if have:  # over the cases with episodes; n_samples counts the episodes behind the values
            n = sum(int(r[f"n_{name}"]) for r in have)
            est = weighted_mean_ci(
                [float(r[name]) for r in have], [float(r["weight"]) for r in have], n_samples=n, seed=seed
            )
            metrics[name] = {
                **est.to_dict(),
                "higher_is_better": spec.higher_is_better,
                "gated": spec.gating,
                "unit": spec.unit,
                "description": spec.description,
            }
    metrics.update(_judge_metrics(usable, seed))
    reasons: dict[str, int] = defaultdict(int)
    for r in usable:
        for k, v in r["reasons"].items():
            reasons[k] += v
    return {
        "metrics": metrics,
        "pass_k": pass_k_values(ks, results, seed=seed),
        "n_cases": len(results),
        "n_cases_scored": len(usable),
        "n_samples": sum(r["n_samples"] for r in results),
        "n_scored": n_samples,
        "n_hard_fail": sum(r["n_hard_fail"] for r in results),
        "n_errors": sum(r["n_errors"] for r in results),
        "n_context_overflow": sum(r["n_context_overflow"] for r in results),
        "reasons": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
        **_check_error_totals(results),
    }


def check_errors(scored: Sequence[SampleScore]) -> dict[str, Any]:
    """A case's Python check errors (``scoring.python_check``): ``n_check_errors``, the samples
    where a user check raised or returned a wrong type, and the first of them; nothing when none
    (the records of runs without user checks keep their keys)."""
    first: dict[str, Any] | None = None
    n = 0
    for s in scored:
        err = next((c for c in s.checks if c.get("reason") == Reason.CHECK_ERROR), None)
        if err is None:
            continue
        n += 1
        if first is None:
            data = err.get("data") or {}
            first = {"index": s.index, "check": err["check"], "target": data.get("target"), "error": data.get("error")}
    return {"n_check_errors": n, "first_check_error": first} if n else {}


def _check_error_totals(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    n = sum(int(r.get("n_check_errors") or 0) for r in results)
    if not n:
        return {}
    first = next(r for r in results if r.get("n_check_errors"))
    return {
        "n_check_errors": n,
        "first_check_error": {"case_id": first["case_id"], **(first.get("first_check_error") or {})},
    }


def _judge_metrics(usable: Sequence[Mapping[str, Any]], seed: int) -> dict[str, Any]:
    """Each criterion's metric (``judge:NAME``) over the cases with a verdict, with its judge
    errors and unjudged samples counted beside it (docs/judges.md)."""
    out: dict[str, Any] = {}
    names = sorted(k for k in set().union(*usable) if k.startswith(JUDGE_PREFIX))  # each key once
    for key in names:
        name = key[len(JUDGE_PREFIX) :]
        spec = metric_defs.judge_metric(name)
        have = [r for r in usable if r.get(key) is not None]
        errors = sum(int(r.get(f"judge_errors:{name}", 0)) for r in usable)
        missing = sum(int(r.get(f"judge_missing:{name}", 0)) for r in usable)
        n = sum(int(r[f"n_{key}"]) for r in have)
        est = weighted_mean_ci(
            [float(r[key]) for r in have], [float(r["weight"]) for r in have], n_samples=n, seed=seed
        )
        out[key] = {
            **est.to_dict(),
            "higher_is_better": True,
            "gated": spec.gating,
            "unit": spec.unit,
            "description": spec.description,
            "n_judged": n,
            "n_judge_errors": errors,
            "n_not_judged": missing,
            "judge_error_rate": errors / (n + errors) if n + errors else 0.0,
        }
    return out


class SuiteName(Protocol):
    """What ``summarize`` needs of a suite: its name and its ``pass_k`` list (``merge`` has only
    what the shards recorded of a suite whose file is not at hand)."""

    @property
    def name(self) -> str: ...

    @property
    def pass_k(self) -> Sequence[int]: ...


def summarize(suite: Suite | SuiteName, results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Suite metrics overall, per tag, and per split (held-out vs in-distribution) when both exist.

    Each group also reports pass@k and pass^k (``pass_k``) for the suite's ``pass_k`` list, else
    k = 1 and the samples per case; a group of one case shows Wilson intervals over its samples."""
    ks = default_ks(results, getattr(suite, "pass_k", ()))
    summary: dict[str, Any] = {"suite": suite.name, "overall": group_metrics(results, ks=ks)}
    tags = sorted({t for r in results for t in r["tags"]})
    summary["by_tag"] = {t: group_metrics([r for r in results if t in r["tags"]], ks=ks) for t in tags}
    heldout = [r for r in results if r.get("split") == "heldout"]
    indist = [r for r in results if r.get("split") != "heldout"]
    if heldout and indist:
        summary["by_split"] = {
            "heldout": group_metrics(heldout, ks=ks),
            "in_distribution": group_metrics(indist, ks=ks),
        }
    return summary


def build_summary(
    suite: Suite | SuiteName,
    cases: Sequence[Mapping[str, Any]],
    *,
    manifest: Mapping[str, Any] | None = None,
    samples: Sequence[Sample] = (),
    prices: Mapping[str, Any] | None = None,
    token_totals: tuple[int, int] | None = None,
    retries: int | None = None,
    unreadable: Mapping[str, Sequence[int]] | None = None,
) -> Summary:
    """``summary.json``: the one author of it (a run's scoring, ``merge`` without the suite file,
    a pytest session's aggregate of case records).

    ``cases`` are the case records (``case_results`` with each case's ``prompt_tokens`` and
    ``completion_tokens``). Without ``manifest`` the summary is the suite's metrics alone (a
    pytest session). With it, the run's totals: its id, model and label from the manifest; token
    totals (``token_totals``, else summed over ``samples``) and per case; the backends' retries
    (``retries``, else summed over the samples' timings); usage and cost (``usage_summary`` with
    ``prices``); the first sampler error; and the lines that could not be read."""
    metrics = summarize(suite, cases)
    out = Summary(metrics["suite"], metrics["overall"], metrics["by_tag"], metrics.get("by_split"))
    if manifest is None:
        return out
    if token_totals is None:
        token_totals = (sum(s.prompt_tokens for s in samples), sum(s.completion_tokens for s in samples))
    out.run = RunTotals(
        run_id=manifest.get("run_id"),
        model_id=manifest["identity"]["model_id"],
        label=manifest.get("label"),
        tokens={
            "prompt": token_totals[0],
            "completion": token_totals[1],
            "per_case": {r["case_id"]: [r.get("prompt_tokens", 0), r.get("completion_tokens", 0)] for r in cases},
        },
        retries=int(sum(s.timings.get("retries", 0) for s in samples)) if retries is None else retries,
        usage=usage_summary(samples, prices),
    )
    if unreadable:
        # counted where the run's readers look: show lists them (FILE:LINE was logged as read)
        out.unreadable = {name: list(lines[:1000]) for name, lines in sorted(unreadable.items())}
    # the cause of a failed run, on screen (error_rule.first_sampler_error)
    out.first_error = first_sampler_error(samples)
    return out


def _quantiles(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    x = sorted(float(v) for v in values)
    if not all(map(math.isfinite, x)):  # NaN sorts anywhere, infinities interpolate: numpy's answers
        a = np.asarray(values, dtype=float)
        with np.errstate(invalid="ignore"):  # inf - inf while interpolating: NaN is the answer
            ends = {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)), "max": float(a.max())}
    else:
        ends = {"p50": _percentile(x, 50), "p95": _percentile(x, 95), "max": x[-1]}
    return {
        "p50": ends["p50"],
        "p95": ends["p95"],
        # fsum is exactly rounded, so the mean does not depend on the samples' order (a merged
        # run lists them shard by shard, an unsharded one as they finished)
        "mean": math.fsum(values) / len(values),
        "max": ends["max"],
    }


def _percentile(ordered: Sequence[float], q: int) -> float:
    """``numpy.percentile(ordered, q)`` of sorted values, operation for operation (its default,
    linear interpolation between order statistics: p95 of 20 values lies between the 19th and
    20th, never beyond the largest), so a summary reads the same whether numpy is loaded or not.
    NaN is the caller's to keep out."""
    n = len(ordered)
    virtual = (n - 1) * (q / 100)
    if virtual >= n - 1:
        return ordered[-1]
    below = math.floor(virtual)
    t = virtual - below
    a, b = ordered[below], ordered[below + 1]
    # numpy's lerp: from the nearer end, so t = 1 gives b exactly
    return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t


def usage_summary(samples: Sequence[Any], prices: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a run cost: per-sample latency and token counts (p50, p95, mean, max) and, with
    ``prices`` (``prompt_per_million``, ``completion_per_million``, optional ``currency``), an
    estimate of the money spent.

    Latency is the backend's ``total_s`` (request to last token, retries included) of every
    sample that has one; token counts are the backend's, over samples that reached it (errors
    without a reply count 0 tokens and are left out of the token quantiles). A replayed run
    reports the recorded figures, which is what the recorded run cost.
    """
    latency = [float(s.timings["total_s"]) for s in samples if isinstance(s.timings.get("total_s"), int | float)]
    replied = [s for s in samples if s.outcome != "error" or s.prompt_tokens or s.completion_tokens]
    prompt = [int(s.prompt_tokens) for s in replied]
    completion = [int(s.completion_tokens) for s in replied]
    out: dict[str, Any] = {
        "n_samples": len(samples),
        "latency_s": _quantiles(latency),
        "prompt_tokens": {**(_quantiles(prompt) or {}), "total": sum(prompt)},
        "completion_tokens": {**(_quantiles(completion) or {}), "total": sum(completion)},
    }
    if prices:
        p_in = float(prices.get("prompt_per_million", 0.0))
        p_out = float(prices.get("completion_per_million", 0.0))
        cost_in, cost_out = sum(prompt) * p_in / 1e6, sum(completion) * p_out / 1e6
        out["cost"] = {
            "currency": str(prices.get("currency", "USD")),
            "prompt": cost_in,
            "completion": cost_out,
            "total": cost_in + cost_out,
            "per_sample": (cost_in + cost_out) / len(samples) if samples else 0.0,
            "prices_per_million": {"prompt": p_in, "completion": p_out},
        }
    return out


def parse_prices(text: str) -> dict[str, Any]:
    """``"0.2,0.8"`` or ``"0.2,0.8,EUR"`` (per million prompt, completion tokens) -> prices."""

    parts = [p.strip() for p in str(text).split(",")]
    try:
        if len(parts) not in (2, 3):
            raise ValueError
        p_in, p_out = float(parts[0]), float(parts[1])
        if not (math.isfinite(p_in) and math.isfinite(p_out)) or p_in < 0 or p_out < 0:
            raise ValueError
    except ValueError:
        raise LeaderEvalError(
            f"--prices {text!r}: expected PROMPT,COMPLETION[,CURRENCY] per million tokens, e.g. 0.2,0.8,USD"
        ) from None
    out: dict[str, Any] = {"prompt_per_million": p_in, "completion_per_million": p_out}
    if len(parts) == 3 and parts[2]:
        out["currency"] = parts[2][:8]
    return out


def format_pass_k(entries: Mapping[str, Any]) -> str:
    """One line for a group's ``pass_k`` entries: value [interval], short cases, one-case groups."""
    parts = []
    for name, e in entries.items():
        value = e.get("value")
        if value is None or value != value:  # NaN: every case has fewer than k samples
            parts.append(f"{name} n/a ({e.get('n_cases_short', 0)} case(s) with fewer than {e.get('k')} samples)")
            continue
        short = f", {e['n_cases_short']} case(s) short of {e['k']} samples" if e.get("n_cases_short") else ""
        one = ", within one case (Wilson over its samples)" if e.get("n_cases") == 1 else ""
        parts.append(f"{name} {value:.3f} [{e['low']:.3f}, {e['high']:.3f}]{short}{one}")
    return "; ".join(parts)


def format_usage(usage: Mapping[str, Any]) -> str:
    """One line: latency and completion-token p50/p95, and the cost estimate when priced."""
    lat = usage.get("latency_s")
    comp = usage.get("completion_tokens") or {}
    parts = [f"latency p50 {lat['p50']:.2f}s p95 {lat['p95']:.2f}s" if lat else "latency n/a"]
    if "p50" in comp:
        parts.append(f"completion tokens p50 {comp['p50']:g} p95 {comp['p95']:g}")
    cost = usage.get("cost")
    if cost:
        parts.append(f"cost {cost['currency']} {cost['total']:.4g} ({cost['per_sample']:.3g} per sample)")
    return "; ".join(parts)
