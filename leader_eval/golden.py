"""Golden baselines and the gate: the contract a new checkpoint must meet in CI.

A golden file (``golden/<suite>/<label>.json``) records one complete run's suite metrics with
their direction and tolerance, and per-case pass rates, keyed to the suite content hash and the
scorer version it was measured under. It is meant to be read in a pull request: keys sorted,
values rounded to 4 decimals, two-space indent, no timestamps.

The gate compares parsed values, never text. A metric fails only when it is worse than the golden
by more than its tolerance *and* the shortfall is statistically credible (``stats.regression_verdict``,
one-sided): a paired test over cases against the golden's per-case rates when the golden has them
(it accounts for the golden run's own noise), else the golden value lying beyond the current
run's bootstrap-over-cases bound. The gating metrics form one Holm family, so a run of an
unchanged model fails the whole gate in at most ``alpha`` of runs. Improvements beyond tolerance
pass and suggest ``--update-golden``. See docs/gating.md.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leader_eval.aggregate import METRICS
from leader_eval.error_rule import error_verdict, is_stress_manifest
from leader_eval.errors import LeaderEvalError
from leader_eval.report import table
from leader_eval.runner import SCORER_VERSION, default_label
from leader_eval.stats import Estimate, PairedComparison, paired_compare, regression_verdict
from leader_eval.store import write_json_atomic

if TYPE_CHECKING:
    from leader_eval.evaluate import Run
    from leader_eval.suite import Suite

GOLDEN_FORMAT = 1
DECIMALS = 4

#: default tolerance per metric (absolute, on the 0..1 scale); a golden file's own value wins,
#: and ``--tolerance score=0.05`` beats both
DEFAULT_TOLERANCES: dict[str, float] = {
    "score": 0.02,
    "hard_fail_rate": 0.01,
    "strict_format_rate": 0.02,
    "lenient_format_rate": 0.05,
    "tool_accuracy": 0.02,
    "leak_rate": 0.02,
}

#: metrics recorded and shown, but never failing the gate (docs/scoring.md: a lenient reading is a
#: diagnostic, never the headline)
DIAGNOSTIC_METRICS = frozenset({"lenient_format_rate"})

#: how far a golden value may sit from the mean of its rounded per-case rates and still be theirs
CASE_MEAN_SLACK = 5e-4

#: per-case values a golden file keeps, so the gate can pair the current run's cases with them for
#: every gating metric. Without pairing, the golden's own sampling noise is not accounted for and
#: a run of the very same model fails about 12% of the time at alpha 0.05 (measured; docs/gating.md).
CASE_FIELDS = {
    "pass_rate": "score",
    "hard_fail_rate": "hard_fail_rate",
    "strict_format_rate": "strict_format_rate",
    "tool_accuracy": "tool_accuracy",
    "leak_rate": "leak_rate",
}


class GoldenError(LeaderEvalError):
    """A golden file that cannot be read or a tolerance that cannot be parsed (exit status 2)."""


# ---------------------------------------------------------------------------------------------
# golden files


def golden_path(golden_dir: str | Path, suite: str, label: str) -> Path:
    """``<golden_dir>/<suite>/<label>.json``."""
    return Path(golden_dir) / _safe(suite) / f"{_safe(label)}.json"


def run_label(run: Run) -> str:
    """The run's label (``--label`` at run time), else one derived from its model id."""
    return str(run.manifest.get("label") or default_label(run.manifest["identity"]["model_id"]))


def portable_model_id(model_id: str) -> str:
    """A model id without machine-specific paths (``gguf:/home/me/m.gguf`` -> ``gguf:m.gguf``)."""
    if "://" in model_id:
        return model_id
    prefix, sep, rest = model_id.partition(":")
    if sep and "/" in rest:
        return f"{prefix}:{Path(rest).name}"
    return model_id


def parse_tolerances(items: Iterable[str] | Mapping[str, float] | None) -> dict[str, float]:
    """``["score=0.05", "hard_fail_rate=0"]`` (CLI / ini, commas allowed) -> ``{"score": 0.05, ...}``."""
    if items is None:
        return {}
    raw: list[tuple[str, Any]]
    if isinstance(items, Mapping):
        raw = [(str(k), v) for k, v in items.items()]
    else:
        raw = []
        for item in items:
            for part in str(item).split(","):
                if not part.strip():
                    continue
                key, sep, text = part.partition("=")
                if not sep:
                    raise GoldenError(f"tolerance {part.strip()!r}: expected METRIC=VALUE, e.g. score=0.05")
                raw.append((key.strip(), text.strip()))
    out: dict[str, float] = {}
    for name, value in raw:
        if name not in METRICS:
            raise GoldenError(f"tolerance for unknown metric {name!r} (known: {', '.join(METRICS)})")
        try:
            tol = float(value)
        except (TypeError, ValueError):
            raise GoldenError(f"tolerance {name}={value!r}: not a number") from None
        if not 0 <= tol <= 1:
            raise GoldenError(f"tolerance {name}={tol}: must lie in [0, 1]")
        out[name] = tol
    return out


def build_golden(
    run: Run, *, label: str | None = None, tolerances: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """The golden document for ``run`` (rounded; key order is fixed when written)."""
    tolerances = {**DEFAULT_TOLERANCES, **(tolerances or {})}
    ident = run.manifest["identity"]
    metrics = run.summary["overall"]["metrics"]
    out_metrics: dict[str, Any] = {}
    for name, (_, higher, _) in METRICS.items():
        m = metrics.get(name)
        if m is None or m.get("value") is None:
            continue
        out_metrics[name] = {
            "value": _round(m["value"]),
            "low": _round(m.get("low")),
            "high": _round(m.get("high")),
            "direction": "higher" if higher else "lower",
            "tolerance": _round(tolerances.get(name, 0.0)),
            "n_samples": int(m.get("n_samples") or 0),
            "n_cases": int(m.get("n_cases") or 0),
        }
    cases: dict[str, Any] = {}
    for c in run.cases:
        if not c.get("n_scored"):
            continue
        rec: dict[str, Any] = {"n_samples": int(c["n_scored"])}
        for key, metric in CASE_FIELDS.items():
            rec[key] = _round(c[metric])
        cases[c["case_id"]] = rec
    return {
        "format": GOLDEN_FORMAT,
        "suite": ident["suite"],
        "suite_hash": ident["suite_hash"],
        "scorer_version": str(run.manifest.get("scorer_version", SCORER_VERSION)),
        "label": label or run_label(run),
        "model_id": portable_model_id(str(ident["model_id"])),
        "created_from": run.manifest.get("run_id"),
        "metrics": out_metrics,
        "cases": cases,
    }


def load_golden(path: str | Path) -> dict[str, Any] | None:
    """A golden file's parsed content, or None when there is none.

    A golden that could pass a run it should fail is refused (``GoldenError``, exit status 2,
    ``FILE:LINE: what``): not JSON or not UTF-8, a wrong shape, a metric value, bound or
    tolerance that is null, NaN, infinite or outside [0, 1], no per-case rates, or fewer
    per-case rates than the cases its metrics were measured on (a golden of an interrupted run).
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise GoldenError(f"{p}:1: cannot read golden file: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
        data = json.loads(text)
    except UnicodeDecodeError as exc:
        raise GoldenError(f"{p}:1: golden file is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except ValueError as exc:
        raise GoldenError(f"{p}:{getattr(exc, 'lineno', 1)}: unreadable golden file: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("metrics"), dict):
        raise GoldenError(f"{p}:1: not a golden file (no 'metrics' object)")
    problem = golden_problem(data)
    if problem is not None:
        needle, what = problem
        raise GoldenError(f"{p}:{_line_of(text, needle)}: refused golden file: {what}")
    return data


def golden_problem(golden: Mapping[str, Any]) -> tuple[str, str] | None:
    """(a key near the problem, what is wrong) for a golden that must not be gated against, else None."""

    def rate(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= 1

    for key in ("suite", "suite_hash", "scorer_version"):
        if not isinstance(golden.get(key), str | int) or isinstance(golden.get(key), bool):
            return f'"{key}"', f"{key!r} is missing or not a string"
    metrics = golden["metrics"]
    if not metrics:
        return '"metrics"', "no metrics (a golden of a run that scored nothing)"
    for name, m in metrics.items():
        if not isinstance(m, Mapping):
            return f'"{name}"', f"metric {name!r} is not an object"
        if not rate(m.get("value")):
            return f'"{name}"', f"metric {name!r} value is {m.get('value')!r}, not a number in [0, 1]"
        for field_name in ("tolerance", "low", "high"):
            if field_name in m and not (rate(m[field_name]) or (field_name != "tolerance" and m[field_name] is None)):
                return f'"{name}"', f"metric {name!r} {field_name} is {m.get(field_name)!r}, not a number in [0, 1]"
        if m.get("direction", "higher") not in ("higher", "lower"):
            return f'"{name}"', f"metric {name!r} direction is {m.get('direction')!r}, not 'higher' or 'lower'"
    cases = golden.get("cases")
    if not isinstance(cases, Mapping) or not cases:
        return '"cases"', "no per-case rates (a golden of a run that scored no case)"
    for cid, rec in cases.items():
        if not isinstance(rec, Mapping):
            return f'"{cid}"', f"case {cid!r} is not an object"
        n = rec.get("n_samples")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            return f'"{cid}"', f"case {cid!r} n_samples is {n!r}: every case of a golden must have scored samples"
        for key in CASE_FIELDS:
            if key in rec and not rate(rec[key]):
                return f'"{cid}"', f"case {cid!r} {key} is {rec[key]!r}, not a number in [0, 1]"
    for name, m in metrics.items():
        n_cases = m.get("n_cases")
        if isinstance(n_cases, int) and not isinstance(n_cases, bool) and n_cases > len(cases):
            return (
                '"cases"',
                f"metric {name!r} was measured on {n_cases} cases but the golden holds rates for {len(cases)}"
                " (missing cases)",
            )
    return None


def _line_of(text: str, needle: str) -> int:
    at = text.find(needle)
    return text.count("\n", 0, at) + 1 if at >= 0 else 1


def write_golden(path: str | Path, golden: Mapping[str, Any]) -> None:
    """Write atomically (write then rename): keys sorted, indent 2, trailing newline.

    A document ``load_golden`` would refuse (NaN, nulls, no cases) is never written."""
    problem = golden_problem(golden) if isinstance(golden.get("metrics"), Mapping) else ("", "no 'metrics' object")
    if problem is not None:
        raise GoldenError(f"{path}: golden not written: {problem[1]}")
    try:
        write_json_atomic(Path(path), golden, indent=2, sort_keys=True)
    except OSError as exc:
        raise GoldenError(f"{path}: cannot write golden file: {exc.strerror or exc}") from None


@dataclass
class UpdateResult:
    """What ``update_golden`` did: ``written`` is False when it refused (``reason`` says why)."""

    path: Path
    written: bool
    reason: str


def update_refusal(
    run: Run,
    *,
    suite: Suite | None = None,
    suite_case_ids: Sequence[str] | None = None,
    max_error_rate: float = 0.0,
) -> str | None:
    """Why ``run`` must not become a golden baseline, or None when it may.

    A golden must come from the suite's full case set, sampled to the last planned sample, by a
    run that finished: never from an interrupted run (status not ``complete``), a ``--tags`` /
    ``--limit`` selection, or a suite file edited since the run. Every case must have scored
    samples, every metric a finite value, and the run must pass the error rule at
    ``max_error_rate`` (``error_rule``): a run of a server that was down is not a baseline.
    """
    status = run.manifest.get("status")
    if status != "complete":
        return f"run status is {status!r}, not 'complete' (interrupted?): golden files left unchanged"
    ident = run.manifest["identity"]
    planned: Mapping[str, Any] = ident.get("cases", {})
    if suite_case_ids is None:
        if suite is None:
            suite = _load_run_suite(run)
            if suite is None:
                return (
                    f"cannot load the suite at {run.manifest.get('suite', {}).get('path')!r} to check that the "
                    "full case set ran: golden files left unchanged"
                )
        if suite.content_hash != ident["suite_hash"]:
            return (
                f"suite {suite.name!r} changed since the run (hash {ident['suite_hash']} -> {suite.content_hash}): "
                "re-run it before updating the golden"
            )
        suite_case_ids = [c.id for c in suite.cases]
    missing_cases = sorted(set(suite_case_ids) - set(planned))
    if missing_cases:
        return (
            f"run covers {len(planned)} of {len(set(suite_case_ids))} cases of suite {ident['suite']!r} "
            f"(missing {', '.join(missing_cases[:5])}{', ...' if len(missing_cases) > 5 else ''}): "
            "only a full-suite run can update the golden"
        )
    # per-case sample counts (errors and context overflows count: they were sampled); a Run rebuilt
    # from case records alone (the pytest plugin's) has no per-sample records
    have = {c["case_id"]: int(c.get("n_samples") or 0) for c in run.cases}
    if not have:
        for s in run.samples or run.scores:
            have[s.case_id] = have.get(s.case_id, 0) + 1
    short = [cid for cid, spec in planned.items() if have.get(cid, 0) < int(spec.get("samples", 0))]
    if short:
        return f"samples missing for {len(short)} case(s) ({', '.join(sorted(short)[:5])}): golden files left unchanged"
    if not run.summary.get("overall"):
        return "run has no summary (not scored): golden files left unchanged"
    return _measurement_refusal(run, planned, max_error_rate)


def _measurement_refusal(run: Run, planned: Mapping[str, Any], max_error_rate: float) -> str | None:
    """Why the run's numbers cannot be a baseline: errors, unscored cases, NaN metrics."""
    verdict = error_verdict(run.summary, max_error_rate, overflow_is_error=not is_stress_manifest(run.manifest))
    if verdict.failed:
        return f"{verdict.message()}: golden files left unchanged"
    scored = {c["case_id"]: int(c.get("n_scored") or 0) for c in run.cases}
    unscored = sorted(cid for cid in planned if scored.get(cid, 0) < 1)
    if unscored:
        return f"{len(unscored)} case(s) have no scored sample ({', '.join(unscored[:5])}): golden files left unchanged"
    metrics = run.summary["overall"].get("metrics") or {}
    bad = sorted(
        name
        for name in METRICS
        if not isinstance((metrics.get(name) or {}).get("value"), int | float)
        or not math.isfinite(float(metrics[name]["value"]))
    )
    if bad:
        return f"metric(s) {', '.join(bad)} have no finite value: golden files left unchanged"
    return None


def update_golden(
    run: Run,
    golden_dir: str | Path = "golden",
    *,
    label: str | None = None,
    suite: Suite | None = None,
    suite_case_ids: Sequence[str] | None = None,
    tolerances: Mapping[str, float] | None = None,
    max_error_rate: float = 0.0,
) -> UpdateResult:
    """Write ``golden/<suite>/<label>.json`` from ``run``, or refuse and leave every file untouched.

    Refuses (``written=False``) unless ``update_refusal`` finds nothing: the run completed and
    sampled every case of the suite (``suite`` / ``suite_case_ids``; by default the suite is
    loaded from the path recorded in the manifest). Tolerances: ``tolerances`` beats the ones
    in the existing golden file (a reviewer may have edited them), which beat the defaults.
    The file is written atomically (write then rename) and only if its content changes.
    """
    label = label or run_label(run)
    path = golden_path(golden_dir, run.manifest["identity"]["suite"], label)
    reason = update_refusal(run, suite=suite, suite_case_ids=suite_case_ids, max_error_rate=max_error_rate)
    if reason is not None:
        return UpdateResult(path, False, reason)
    old = load_golden(path)
    kept = {k: m["tolerance"] for k, m in (old or {}).get("metrics", {}).items() if "tolerance" in m}
    new = build_golden(run, label=label, tolerances={**kept, **(tolerances or {})})
    if old is not None and _without(old, "created_from") == _without(new, "created_from"):
        return UpdateResult(path, False, "golden already matches this run: unchanged")
    write_golden(path, new)
    return UpdateResult(path, True, f"{'updated' if old else 'created'} {path}")


# ---------------------------------------------------------------------------------------------
# the gate


@dataclass
class MetricRow:
    """One metric of the gate table."""

    metric: str
    direction: str  # "higher" | "lower" is better
    tolerance: float
    golden: float
    now: float | None
    now_low: float | None
    now_high: float | None
    delta: float | None
    delta_low: float | None
    delta_high: float | None
    p_value: float | None  # one-sided p that the run is worse than the golden (paired test), else None
    paired: bool
    verdict: str  # "pass" | "fail" | "improved" | "info" (diagnostic, never fails)
    explanation: str


@dataclass
class GateResult:
    """The gate's decision for one run against one golden file.

    ``status``: ``pass`` | ``fail`` (a metric regressed credibly) | ``stale`` (suite content or
    scorer version changed) | ``incomplete`` (the run did not finish or misses golden cases) |
    ``errors`` (more sampler errors than ``--max-error-rate`` allows) | ``missing`` (no golden
    yet: a warning unless strict).
    """

    suite: str
    label: str
    golden_path: Path | None
    run_path: Path | None
    status: str
    rows: list[MetricRow] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    strict: bool = False
    alpha: float = 0.05
    update: UpdateResult | None = None

    @property
    def exit_status(self) -> int:
        """0 pass, 1 fail (a missing golden fails only when strict; a written update is accepted)."""
        if self.status == "pass" or (self.update is not None and self.update.written):
            return 0
        if self.status == "missing":
            return 1 if self.strict else 0
        return 1

    @property
    def improved(self) -> list[str]:
        return [r.metric for r in self.rows if r.verdict == "improved"]

    @property
    def failed(self) -> list[str]:
        return [r.metric for r in self.rows if r.verdict == "fail"]

    def headline(self) -> str:
        """One line: what the gate decided and why."""
        where = f"suite {self.suite}, label {self.label}"
        if self.update is not None and self.update.written:
            return f"gate ACCEPTED ({where}): golden rewritten from this run (was: {self.status})"
        if self.status == "pass":
            line = f"gate PASS ({where})"
            if self.improved:
                line += f": improved {', '.join(self.improved)} beyond tolerance; consider --update-golden"
            return line
        if self.status == "fail":
            return f"gate FAIL ({where}): credible regression in {', '.join(self.failed)}"
        if self.status == "missing":
            verb = "FAIL" if self.strict else "WARN"
            return f"gate {verb} ({where}): no golden baseline at {self.golden_path}; create it with --update-golden"
        return f"gate FAIL ({where}): " + "; ".join(self.messages[:2])


def gate(
    run: Run,
    golden: Mapping[str, Any] | None,
    *,
    strict: bool = False,
    alpha: float = 0.05,
    tolerances: Mapping[str, float] | None = None,
    golden_file: Path | None = None,
    label: str | None = None,
) -> GateResult:
    """Gate ``run`` against a parsed golden document (None: no golden yet).

    Per metric of the golden: ``fail`` when the current value is worse than the golden by more
    than the tolerance and the shortfall is credible at ``alpha`` (one-sided; see
    ``stats.regression_verdict``); ``improved`` when better by more than the tolerance; else
    ``pass``. The run must be complete and cover the golden's cases, and the golden must have
    been made from the same suite content and scorer version, or the gate fails saying which.
    ``tolerances`` (e.g. from ``--tolerance``) override the golden file's.
    """
    ident = run.manifest["identity"]
    label = label or run_label(run)
    result = GateResult(
        suite=ident["suite"],
        label=label,
        golden_path=golden_file,
        run_path=getattr(run, "path", None),
        status="pass",
        strict=strict,
        alpha=alpha,
    )
    if golden is None:
        result.status = "missing"
        result.messages.append(f"no golden baseline for suite {ident['suite']!r}, label {label!r}")
        return result
    stale = staleness(run, golden)
    if stale:
        result.status = "stale"
        result.messages.extend(stale)
        return result
    incomplete = _coverage_problem(run, golden)
    if incomplete:
        result.status = "incomplete"
        result.messages.append(incomplete)
        return result

    overrides = parse_tolerances(tolerances) if tolerances else {}
    current_metrics = run.summary["overall"]["metrics"]
    by_case = {c["case_id"]: c for c in run.cases}
    prepared = []
    for name, g in golden["metrics"].items():
        if name not in current_metrics:
            result.messages.append(f"metric {name!r} is in the golden but not in the run: skipped")
            continue
        prepared.append(_prepare_metric(name, g, current_metrics[name], golden, by_case, overrides))
    # one family of tests: the gate fails if any gating metric regresses, so each is tested at a
    # Holm-adjusted level and the chance of a false alarm for the whole gate stays at alpha
    gating = [p for p in prepared if p.current is not None and p.row.metric not in DIAGNOSTIC_METRICS]
    levels = holm_alphas({p.row.metric: p.p_worse for p in gating}, alpha)
    for p in prepared:
        result.rows.append(p.decide(levels.get(p.row.metric, alpha), len(gating)))
    if any(r.verdict == "fail" for r in result.rows):
        result.status = "fail"
    return result


def holm_alphas(p_worse: Mapping[str, float | None], alpha: float) -> dict[str, float]:
    """The level at which to test each hypothesis of a family so that the chance of any false
    rejection stays at most ``alpha`` (Holm's step-down procedure).

    ``p_worse``: each hypothesis's one-sided p-value, or None when it has none (an unpaired
    interval test): those get Bonferroni's ``alpha / k``, and the known ones share the rest of
    ``alpha`` by Holm. Testing a hypothesis at its returned level and rejecting when
    ``p < level`` reproduces Holm's decisions (after the first non-rejection every later
    hypothesis gets that same level, which its larger p-value cannot beat).
    """
    k = len(p_worse)
    if k == 0:
        return {}
    known = sorted((p, name) for name, p in p_worse.items() if p is not None)
    out = {name: alpha / k for name, p in p_worse.items() if p is None}
    budget = alpha * len(known) / k
    stop: float | None = None
    for rank, (p, name) in enumerate(known):
        level = budget / (len(known) - rank)
        if stop is None and p >= level:
            stop = level
        out[name] = level if stop is None else stop
    return out


def staleness(run: Run, golden: Mapping[str, Any]) -> list[str]:
    """Messages saying why a golden no longer applies to ``run`` (empty when it does)."""
    ident = run.manifest["identity"]
    out = []
    if golden.get("suite_hash") != ident["suite_hash"]:
        out.append(f"golden is stale: suite content changed (hash {golden.get('suite_hash')} -> {ident['suite_hash']})")
    run_scorer = str(run.manifest.get("scorer_version", SCORER_VERSION))
    if str(golden.get("scorer_version")) != run_scorer:
        out.append(f"golden is stale: scorer version changed ({golden.get('scorer_version')} -> {run_scorer})")
    if out:
        out.append("re-run the suite and review a new golden with --update-golden")
    return out


def gate_run_dir(
    run_dir: str | Path,
    golden_dir: str | Path = "golden",
    *,
    label: str | None = None,
    update: bool = False,
    strict: bool = False,
    alpha: float = 0.05,
    tolerances: Iterable[str] | Mapping[str, float] | None = None,
    suite: Suite | None = None,
    max_error_rate: float = 0.0,
) -> GateResult:
    """``leader-eval gate RUN_DIR [--golden DIR] [--update-golden] [--strict]`` as a function.

    Reads the run, gates it against ``<golden_dir>/<suite>/<label>.json`` and, with ``update``,
    then rewrites that golden from the run when ``update_golden`` allows it (the gate's result
    is still the one against the old golden; ``result.update`` says what was written). Exit
    status: ``result.exit_status`` (bad input raises ``LeaderEvalError``, exit 2).
    """
    from leader_eval.evaluate import read_run

    run = read_run(run_dir)
    tols = parse_tolerances(tolerances)
    label = label or run_label(run)
    path = golden_path(golden_dir, run.manifest["identity"]["suite"], label)
    result = gate(run, load_golden(path), strict=strict, alpha=alpha, tolerances=tols, golden_file=path, label=label)
    apply_error_rule(result, run, max_error_rate)
    if update:
        # the comparison above is against the old golden and stays in the table; a written update
        # means the user accepted this run as the new baseline, so the exit status is 0
        result.update = update_golden(
            run, golden_dir, label=label, suite=suite, tolerances=tols or None, max_error_rate=max_error_rate
        )
    return result


def apply_error_rule(result: GateResult, run: Run, max_error_rate: float = 0.0) -> None:
    """Fail the gate (status ``errors``) when the run's sampler errors exceed ``max_error_rate``:
    a passing table over the samples that did not error would be a false green."""
    verdict = error_verdict(run.summary, max_error_rate, overflow_is_error=not is_stress_manifest(run.manifest))
    if not verdict.failed:
        return
    if result.status in ("pass", "missing"):
        result.status = "errors"
    result.messages.insert(0, verdict.message())


@dataclass
class _Prepared:
    """One metric between pairing and the verdict (the verdict needs the whole family's p-values)."""

    row: MetricRow
    golden: float
    higher: bool
    current: Estimate | None
    paired: PairedComparison | None
    note: str

    @property
    def p_worse(self) -> float | None:
        """One-sided p-value that the run is worse than the golden (paired), else None."""
        if self.paired is None:
            return None
        worse = self.paired.diff < 0 if self.higher else self.paired.diff > 0
        return self.paired.p_value / 2 if worse else 1 - self.paired.p_value / 2

    def decide(self, level: float, family: int) -> MetricRow:
        row = self.row
        if self.current is None:
            return row
        verdict, explanation = regression_verdict(
            self.golden,
            self.current,
            higher_is_better=self.higher,
            tolerance=row.tolerance,
            paired=self.paired,
            alpha=level,
        )
        notes = [self.note] if self.note else []
        if family > 1 and row.metric not in DIAGNOSTIC_METRICS:
            notes.append(f"Holm level {level:.3g} in a family of {family} gating metrics")
        row.verdict = "info" if row.metric in DIAGNOSTIC_METRICS else verdict
        row.explanation = explanation + (f" ({'; '.join(notes)})" if notes else "")
        return row


def _prepare_metric(
    name: str,
    g: Mapping[str, Any],
    cur: Mapping[str, Any],
    golden: Mapping[str, Any],
    by_case: Mapping[str, Mapping[str, Any]],
    overrides: Mapping[str, float],
) -> _Prepared:
    higher = g.get("direction", "higher" if METRICS.get(name, ("", True))[1] else "lower") == "higher"
    tol = float(overrides.get(name, g.get("tolerance", DEFAULT_TOLERANCES.get(name, 0.0))))
    gval = float(g["value"])
    row = MetricRow(
        metric=name,
        direction="higher" if higher else "lower",
        tolerance=tol,
        golden=gval,
        now=cur.get("value"),
        now_low=cur.get("low"),
        now_high=cur.get("high"),
        delta=None,
        delta_low=None,
        delta_high=None,
        p_value=None,
        paired=False,
        verdict="fail",
        explanation="",
    )
    if row.now is None or math.isnan(float(row.now)) or not cur.get("n_cases"):
        row.now = None
        row.verdict = "info" if name in DIAGNOSTIC_METRICS else "fail"
        row.explanation = "no scored sample in this run"
        return _Prepared(row, gval, higher, None, None, "")
    current = Estimate.from_dict(cur)
    paired, note = _paired_with_golden(name, gval, golden, by_case)
    row.delta = current.value - gval
    prepared = _Prepared(row, gval, higher, current, paired, note)
    if paired is not None:
        row.paired = True
        row.delta_low, row.delta_high, row.p_value = paired.low, paired.high, prepared.p_worse
    else:
        row.delta_low, row.delta_high = current.low - gval, current.high - gval
    return prepared


def _paired_with_golden(
    name: str, golden_value: float, golden: Mapping[str, Any], by_case: Mapping[str, Mapping[str, Any]]
) -> tuple[PairedComparison | None, str]:
    """Pair the golden's per-case rates with the run's over the cases both scored (diff = now - golden).

    Returns (None, why) when there is nothing to pair, or when the golden's per-case rates no
    longer average to its value: someone edited the value to demand more, and pairing with the
    old per-case rates would test the old value instead (the unpaired rule then decides).
    """
    key = next((k for k, m in CASE_FIELDS.items() if m == name), None)
    gcases = golden.get("cases") or {}
    if key is None or not gcases:
        return None, ""
    recs = {cid: rec for cid, rec in gcases.items() if rec.get(key) is not None}
    w_all = {cid: float(by_case.get(cid, {}).get("weight", 1.0)) for cid in recs}
    if recs and sum(w_all.values()) > 0:
        mean = sum(w_all[cid] * float(rec[key]) for cid, rec in recs.items()) / sum(w_all.values())
        if abs(mean - golden_value) > CASE_MEAN_SLACK:
            return None, f"golden value {golden_value:.4g} differs from its per-case mean {mean:.4g}: unpaired test"
    common = sorted(cid for cid in recs if by_case.get(cid, {}).get("n_scored"))
    if len(common) < 2:
        return None, ""
    a = {cid: float(recs[cid][key]) for cid in common}
    b = {cid: float(by_case[cid][name]) for cid in common}
    weights = {cid: float(by_case[cid].get("weight", 1.0)) for cid in common}
    return paired_compare(a, b, weights=weights, metric=name), ""


def _coverage_problem(run: Run, golden: Mapping[str, Any]) -> str | None:
    status = run.manifest.get("status")
    if status != "complete":
        return f"run is not complete (status {status!r}): an interrupted run cannot pass the gate"
    gcases = set((golden.get("cases") or {}).keys())
    ran = set(run.manifest["identity"].get("cases", {}))
    missing = sorted(gcases - ran)
    if missing:
        return (
            f"run covers {len(gcases) - len(missing)} of the golden's {len(gcases)} cases "
            f"(missing {', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}): gate the full suite"
        )
    return None


# ---------------------------------------------------------------------------------------------
# formatting


def _f(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def _signed(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.3f}"


def _rows(result: GateResult) -> list[list[str]]:
    rows = []
    for r in result.rows:
        arrow = "^" if r.direction == "higher" else "v"
        ci = f"[{_signed(r.delta_low)}, {_signed(r.delta_high)}]"
        p = f"{r.p_value:.3f}" if r.p_value is not None else "unpaired"
        rows.append(
            [
                f"{r.metric} {arrow}",
                _f(r.golden),
                f"{_f(r.now)} [{_f(r.now_low)}, {_f(r.now_high)}]",
                f"{_signed(r.delta)} {ci}",
                f"±{r.tolerance:g}",
                p,
                r.verdict.upper() if r.verdict == "fail" else r.verdict,
            ]
        )
    return rows


_HEADERS = ["metric", "golden", "now [95% CI]", "delta [95% CI]", "tolerance", "p (worse)", "verdict"]


def format_gate_table(result: GateResult) -> str:
    """The terminal summary: headline, the table (metric, golden, now, delta with CI, verdict), notes."""
    lines = [result.headline()]
    if result.rows:
        lines.append(table(_HEADERS, _rows(result)))
    lines.extend(f"  {m}" for m in result.messages if m not in result.headline())
    for r in result.rows:
        if r.verdict in ("fail", "improved"):
            lines.append(f"  {r.metric}: {r.explanation}")
    if result.golden_path is not None:
        lines.append(f"golden: {result.golden_path}")
    if result.update is not None:
        lines.append(("updated golden: " if result.update.written else "golden not updated: ") + result.update.reason)
    return "\n".join(lines)


def gate_markdown(result: GateResult) -> str:
    """The same summary as Markdown, for a pull request comment or ``$GITHUB_STEP_SUMMARY``."""
    icon = {"pass": "✅", "fail": "❌", "stale": "❌", "incomplete": "❌", "errors": "❌"}.get(
        result.status, "❌" if result.strict else "⚠️"
    )
    lines = [f"### {icon} {_md(result.headline())}", ""]
    if result.rows:
        lines.append("| " + " | ".join(_HEADERS) + " |")
        lines.append("|" + "|".join(["---"] * len(_HEADERS)) + "|")
        for row in _rows(result):
            cells = [_md(c) for c in row]
            if cells[-1] in ("FAIL", "improved"):
                cells[-1] = f"**{cells[-1]}**"
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    notes = [m for m in result.messages if m not in result.headline()]
    notes += [f"`{r.metric}`: {r.explanation}" for r in result.rows if r.verdict in ("fail", "improved")]
    if result.update is not None:
        notes.append(("updated golden: " if result.update.written else "golden not updated: ") + result.update.reason)
    lines.extend(f"- {_md(n) if not n.startswith('`') else n}" for n in notes)
    if result.golden_path is not None:
        lines.append(
            f"\n<sub>golden `{result.golden_path}`; alpha {result.alpha:g} (one-sided); delta = now − golden</sub>"
        )
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------------------------------------
# helpers


def _round(v: Any) -> Any:
    return None if v is None else round(float(v), DECIMALS)


def _safe(name: str) -> str:
    # one path component: a label or suite name must never climb out of the golden directory
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "unnamed"


def _without(d: Mapping[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != key}


def _load_run_suite(run: Run) -> Suite | None:
    from leader_eval.suite import load_suite

    path = (run.manifest.get("suite") or {}).get("path")
    if not path:
        return None
    try:
        return load_suite(path)
    except (OSError, LeaderEvalError):
        return None


def _md(text: str) -> str:
    return text.replace("|", "\\|")
