"""The gate: a run against its golden baseline, decided from parsed values, never text.

A metric fails only when it is worse than the golden by more than its tolerance *and* the
shortfall is statistically credible (``stats.regression_verdict``, one-sided): the paired
decision against the golden's per-case rates when the golden has them (``stats.decide_paired``
with the metric's declared test; it accounts for the golden run's own noise), else the golden
value lying beyond the current run's bootstrap-over-cases bound. The tested metrics
(``metrics.gated_metrics``) form one Holm-Tarone family, so a run of an unchanged model fails the
whole gate in at most ``alpha`` of runs. Improvements beyond tolerance pass and suggest
``--update-golden``. The suite's ``gate:`` section adds count budgets, floors and ceilings, and
the power guard (``gate_spec``, ``plan.power_guard``). A missing golden fails the gate unless
``--allow-missing-golden`` says this is a suite's first run (docs/design-0.3.md section 1).

The result is data (``GateResult``: one ``MetricRow`` per metric, floor, ceiling and budget, and
the messages); ``report.gate`` prints it as a table or Markdown. See docs/gating.md.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leader_eval.decide.golden import (
    CASE_MEAN_SLACK,
    DEFAULT_BASELINE,
    GoldenError,
    UpdateResult,
    check_golden_covers,
    golden_path,
    golden_without_cases,
    judge_drift,
    legacy_goldens,
    load_golden,
    load_run_suite,
    parse_tolerances,
    run_label,
    sampling_drift,
    update_golden,
)
from leader_eval.decide.plan import TARGET_POWER, power_guard
from leader_eval.decide.quarantine import active_quarantine
from leader_eval.runs.evaluate import planned_shortfall, read_run
from leader_eval.scoring.aggregate import group_metrics
from leader_eval.scoring.error_rule import error_verdict, is_stress_manifest
from leader_eval.stats.core import (
    Estimate,
    PairedComparison,
    PairedDecision,
    decide_paired,
    holm_alphas,
    regression_verdict,
    tarone_family,
)
from leader_eval.stats.metrics import ALL_METRICS, METRICS, gated_metrics, judges_gated, known_metric, table_order
from leader_eval.store.formats import SCORER_VERSION
from leader_eval.suite.gate_spec import BUDGETS, GateSpec, gate_problem, gate_spec

if TYPE_CHECKING:
    from leader_eval.runs.evaluate import Run
    from leader_eval.suite.load import Suite

# ``BUDGETS`` (count budgets a suite may declare under ``gate:``: budget key -> (metric whose events
# it counts, what an event is)) lives in ``gate_spec`` with the rest of the section's rules. A
# budget is a contract, not a test: one event more than the budget fails the gate.
# ``holm_alphas`` and ``tarone_family`` live in ``stats`` (one Holm-Tarone for every decision).


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
    #: "test": a metric tested against the golden; "budget": a declared count budget; "floor" /
    #: "ceiling": a declared absolute limit (``golden`` holds the limit)
    kind: str = "test"
    #: what the run's interval is when it is not an ordinary one (a one-case group's degenerate
    #: interval), as the report shows it
    note: str = ""
    #: the smallest p_value the metric's test could give with these data (Tarone; 0: unbounded),
    #: so a family of gates (``matrix.gate_family``) leaves out what cannot reach significance
    min_p: float = 0.0


@dataclass
class GateResult:
    """The gate's decision for one run against one golden file.

    ``status``: ``pass`` | ``fail`` (a metric regressed credibly, a floor, ceiling or budget is
    broken, or an underpowered gate in CI mode) | ``stale`` (suite content or scorer version
    changed) | ``incomplete`` (the run did not finish or misses golden cases) | ``errors`` (more
    sampler errors than ``--max-error-rate`` allows) | ``missing`` (no golden: a failure, a warning
    only with ``allow_missing``, ``--allow-missing-golden``).
    """

    suite: str
    label: str  # the run's label (it names the run, never the golden)
    golden_path: Path | None
    run_path: Path | None
    status: str
    rows: list[MetricRow] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    strict: bool = False
    alpha: float = 0.05
    update: UpdateResult | None = None
    #: metrics reported, never gated (pass@k, pass^k): name -> summary entry (value, low, high, note)
    reported: dict[str, Any] = field(default_factory=dict)
    baseline: str = DEFAULT_BASELINE
    #: a missing golden only warns (``--allow-missing-golden``: a suite's very first run)
    allow_missing: bool = False
    #: the command that creates the missing golden from a trusted run (the CLI's or pytest's)
    create_command: str = ""
    #: the power guard (``plan.power_guard``): the gate's power per tested metric for ``detect``
    power: list[Any] = field(default_factory=list)
    detect: float | None = None
    #: the tested metrics whose power is under 80% (the weakest first)
    underpowered: list[str] = field(default_factory=list)
    #: the suite's acknowledgement of an underpowered gate (``gate: underpowered:``)
    acknowledged: str | None = None
    #: CI mode refused the gate for these underpowered metrics (no floor, no acknowledgement)
    power_refused: list[str] = field(default_factory=list)
    #: rubric criteria whose judge errors passed their max_error_rate: a failure no row carries,
    #: which no adjustment across a model matrix's gates may withdraw (decide.matrix.gate_family)
    judge_errors_over: list[str] = field(default_factory=list)

    @property
    def exit_status(self) -> int:
        """0 pass, 1 fail (a missing golden fails unless ``allow_missing``; a written update is accepted)."""
        if self.status == "pass" or (self.update is not None and self.update.written):
            return 0
        if self.status == "missing":
            return 0 if self.allow_missing else 1
        return 1

    @property
    def improved(self) -> list[str]:
        return [r.metric for r in self.rows if r.verdict == "improved"]

    @property
    def failed(self) -> list[str]:
        return [r.metric for r in self.rows if r.verdict == "fail"]

    def power_note(self) -> str:
        """The headline's warning for an underpowered gate ('' when every tested metric has 80%)."""
        if not self.underpowered:
            return ""
        by = {p.metric: p for p in self.power}
        weakest = by[self.underpowered[0]]
        need = (
            f"80% needs {weakest.samples_needed} samples/case"
            if weakest.samples_needed is not None
            else "80% needs more than 1024 samples/case"
        )
        more = f" (+{len(self.underpowered) - 1} more metric(s))" if len(self.underpowered) > 1 else ""
        ack = f"; acknowledged: {self.acknowledged}" if self.acknowledged else ""
        return (
            f"UNDERPOWERED: {weakest.power:.0%} power to catch a {weakest.drop:g} drop in {weakest.metric}, "
            f"{need}{more}{ack}"
        )

    def record(self) -> dict[str, Any]:
        """What the run keeps of this verdict for the history page (``runs.history.record_gate``)."""
        return {
            "status": self.status,
            "exit_status": self.exit_status,
            "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00"),
            "strict": self.strict,
            "golden": self.golden_path.name if self.golden_path is not None else None,
            "failed": self.failed,
        }

    def headline(self) -> str:
        """One line: what the gate decided and why."""
        where = f"suite {self.suite}, baseline {self.baseline}, label {self.label}"
        warn = self.power_note()
        if self.update is not None and self.update.written:
            return f"gate ACCEPTED ({where}): golden rewritten from this run (was: {self.status})"
        if self.status == "pass":
            parts = []
            if self.improved:
                parts.append(f"improved {', '.join(self.improved)} beyond tolerance; consider --update-golden")
            if warn:
                parts.append(warn)
            return f"gate PASS ({where})" + (f": {'; '.join(parts)}" if parts else "")
        if self.status == "fail":
            tested = [r.metric for r in self.rows if r.verdict == "fail" and r.kind == "test"]
            over = [
                f"{r.metric} ({r.now:g} > {r.golden:g})"
                for r in self.rows
                if r.verdict == "fail" and r.kind == "budget"
            ]
            limits = [
                f"{r.metric} ({_f(r.now)} {'<' if r.kind == 'floor' else '>'} {r.golden:g})"
                for r in self.rows
                if r.verdict == "fail" and r.kind in ("floor", "ceiling")
            ]
            why = (
                ([f"credible regression in {', '.join(tested)}"] if tested else [])
                + ([f"beyond the suite's limit: {', '.join(limits)}"] if limits else [])
                + ([f"over budget: {', '.join(over)}"] if over else [])
            )
            if self.power_refused:
                why.append(
                    f"underpowered in CI mode ({warn.removeprefix('UNDERPOWERED: ')}); declare a floor for "
                    f"{', '.join(self.power_refused)} (gate: min:/max:) or acknowledge it (gate: underpowered: WHY)"
                )
            elif warn:
                why.append(warn)
            return f"gate FAIL ({where}): {'; '.join(why)}"
        if self.status == "missing":
            return self._missing_line(where)
        return f"gate FAIL ({where}): " + "; ".join(self.messages[:2])

    def _missing_line(self, where: str) -> str:
        """One line: the file that is missing and how to make it, from a trusted run (never from
        the candidate being gated, which is what the missing baseline was to judge)."""
        line = f"no golden baseline {self.baseline!r} at {self.golden_path}"
        legacy = legacy_goldens(self.golden_path) if self.golden_path is not None else []
        if legacy and self.golden_path is not None:
            old = legacy[0]
            line += (
                f"; {old.name} is a 0.2.0 golden (named by label): make it this baseline with "
                f"git mv {old} {self.golden_path}, or gate with --baseline {old.stem}"
            )
        else:
            line += f"; create it from a run of the model you trust: {self.create_command}"
        if self.allow_missing:
            return f"gate WARN ({where}): {line} (--allow-missing-golden: not gated)"
        return f"gate FAIL ({where}): {line}"


def gate(
    run: Run,
    golden: Mapping[str, Any] | None,
    *,
    strict: bool = False,
    alpha: float = 0.05,
    tolerances: Mapping[str, float] | None = None,
    golden_file: Path | None = None,
    label: str | None = None,
    today: date | None = None,
    baseline: str | None = None,
    allow_missing: bool = False,
    create_command: str | None = None,
    suite_gate: Mapping[str, Any] | None = None,
    power: bool = True,
) -> GateResult:
    """Gate ``run`` against a parsed golden document (None: no golden yet).

    Per metric of the golden: ``fail`` when the current value is worse than the golden by more
    than the tolerance and the shortfall is credible at ``alpha`` (one-sided; see
    ``stats.regression_verdict``); ``improved`` when better by more than the tolerance; else
    ``pass``. The run must be complete and cover the golden's cases, and the golden must have
    been made from the same suite content, or the gate fails saying so (another scorer version
    only warns: ``scorer_warning``).
    ``tolerances`` (e.g. from ``--tolerance``) override the golden file's. Cases on the golden's
    quarantine list (``active_quarantine``; ``today`` for its expiry, default the current date)
    are shown but cannot fail the gate.

    ``baseline``: the golden's baseline name (for the headline; default the golden's own, else
    the file's name). ``golden is None`` fails (status ``missing``) unless ``allow_missing``;
    ``create_command`` is the command the failure line shows. The run's sampling is compared
    with the golden's (``sampling_drift``) before any metric.

    The suite's ``gate:`` section (``suite_gate``; else the golden's copy, else the golden's
    ``budgets``) adds its count budgets, floors and ceilings (``gate_spec``) and the power guard:
    with ``power`` (default) the gate reports its power to catch a drop of ``detect`` in each
    tested metric (``plan.power_guard``); with ``strict`` (CI mode) a metric under 80% power
    without a floor or ceiling fails the gate unless the section acknowledges it.
    """
    ident = run.manifest["identity"]
    label = label or run_label(run)
    if baseline is None:
        baseline = str((golden or {}).get("baseline") or (golden_file.stem if golden_file else DEFAULT_BASELINE))
    gdir = golden_file.parent.parent if golden_file is not None else Path("golden")
    result = GateResult(
        suite=ident["suite"],
        label=label,
        golden_path=golden_file,
        run_path=getattr(run, "path", None),
        status="pass",
        strict=strict,
        alpha=alpha,
        baseline=baseline,
        allow_missing=allow_missing,
        create_command=create_command
        or f"leader-eval update-golden TRUSTED_RUN_DIR --golden {gdir} --baseline {baseline}",
    )
    result.reported = dict(run.summary.get("overall", {}).get("pass_k") or {})
    if golden is None:
        result.status = "missing"
        result.messages.append(f"no golden baseline {baseline!r} for suite {ident['suite']!r}")
        return result
    if not any(ALL_METRICS[n].gating for n in golden.get("metrics") or {} if n in ALL_METRICS):
        # load_golden refuses such a file; gate() is public and must refuse the document too (a
        # subset's golden, cut to its cases, keeps every metric: only this check applies to it)
        result.status = "incomplete"
        result.messages.append("refused golden: no gating metric, nothing the gate can test")
        return result
    spec = _gate_spec(suite_gate, golden, golden_file)
    stale = staleness(run, golden)
    if stale:
        result.status = "stale"
        result.messages.extend(stale)
        return result
    drift_notes, drift_failures = sampling_drift(run, golden, golden_file)
    if drift_failures:
        result.status = "stale"
        result.messages.extend(drift_failures + drift_notes)
        return result
    result.messages.extend(drift_notes)
    judge_changes = judge_drift(run, golden, golden_file)
    if judge_changes:
        result.status = "stale"
        result.messages.extend(judge_changes)
        return result
    warning = scorer_warning(run, golden)
    if warning:
        result.messages.append(warning)
    incomplete = _coverage_problem(run, golden)
    if incomplete:
        result.status = "incomplete"
        result.messages.append(incomplete)
        return result

    overrides = parse_tolerances(tolerances) if tolerances else {}
    current_metrics = run.summary["overall"]["metrics"]
    by_case = {c["case_id"]: c for c in run.cases}
    quarantined, notes = active_quarantine(golden, today=today, golden_file=golden_file)
    result.messages.extend(notes)
    if quarantined:
        # sampled and shown, but their scores cannot fail the gate: every metric, paired test and
        # budget is taken over the other cases (errors are not scores and keep counting)
        weights = {cid: float(c.get("weight", 1.0)) for cid, c in by_case.items()}
        by_case = {cid: c for cid, c in by_case.items() if cid not in quarantined}
        recomputed = group_metrics(list(by_case.values()))["metrics"]
        for name in judges_gated(current_metrics):  # whether a criterion gates is the run's, not the cases'
            if name in recomputed:
                recomputed[name]["gated"] = True
        current_metrics = recomputed
        golden = golden_without_cases(golden, quarantined, weights)
    # a criterion the golden gates must gate in the run too: a run whose judge lost its
    # calibration (a deleted record, a lowered kappa) would otherwise drop out of the family
    ungated = [n for n in judges_gated(golden["metrics"]) if n not in judges_gated(current_metrics)]
    if ungated:
        why = (run.summary.get("judges") or {}).get(ungated[0][len("judge:") :], {}).get("not_gated_because")
        result.status = "incomplete"
        result.messages.append(
            f"the golden gates {', '.join(ungated)} but this run does not ({why}): cannot pass; "
            "calibrate the judge (leader-eval judge-check) or re-baseline"
        )
        return result
    prepared = []
    uncompared = []
    for name in table_order(golden["metrics"]):  # score first, as every table; a golden's keys are sorted
        g = golden["metrics"][name]
        value = (current_metrics.get(name) or {}).get("value")
        if not isinstance(value, int | float) or not math.isfinite(value):  # absent, None or NaN
            if (name in ALL_METRICS and ALL_METRICS[name].gating) or name in judges_gated(golden["metrics"]):
                uncompared.append(name)  # e.g. every episode errored: nothing to compare is no pass
            else:
                result.messages.append(f"metric {name!r} is in the golden but not in the run: skipped")
            continue
        prepared.append(_prepare_metric(name, g, current_metrics[name], golden, by_case, overrides))
    if uncompared or not set(gated_metrics(current_metrics)) & set(golden["metrics"]):
        result.status = "incomplete"
        what = ", ".join(uncompared) if uncompared else "any gated metric"
        result.messages.append(f"the run has no value for {what} of the golden: nothing to compare, cannot pass")
        return result
    # one family of tests (``metrics.gated_metrics``): the gate fails if any gated metric regresses,
    # so each is tested at a Holm-adjusted level and the chance of a false alarm for the whole gate
    # stays at alpha; a metric whose test cannot reach significance (no events anywhere) takes no
    # share (Tarone)
    family_names = set(gated_metrics(current_metrics)) & set(golden["metrics"])
    gating = [p for p in prepared if p.current is not None and p.row.metric in family_names]
    p_worse = {p.row.metric: p.p_worse for p in gating}
    min_p = {p.row.metric: p.min_p for p in gating}
    levels = holm_alphas(p_worse, alpha, min_p=min_p)
    family = tarone_family(min_p, alpha)
    for p in prepared:
        result.rows.append(p.decide(levels.get(p.row.metric, alpha), family, p.row.metric in family_names))
    run_cases = [c for c in run.cases if c["case_id"] not in quarantined]
    result.rows.extend(_limit_rows(spec, current_metrics))
    result.rows.extend(_budget_rows(spec.budgets, run_cases))
    if power:
        order = list(ALL_METRICS)
        family_order = sorted(family_names, key=lambda n: (order.index(n) if n in order else len(order), n))
        _power_guard(result, run_cases, golden, spec, family_order)
    if any(r.verdict == "fail" for r in result.rows) or result.power_refused:
        result.status = "fail"
    for name, info in sorted((run.summary.get("judges") or {}).items()):
        if not info.get("gated"):
            result.messages.append(f"note: judge:{name} is reported, not gated: {info.get('not_gated_because')}")
        if info.get("errors_over_limit"):  # a judge that cannot answer in scale decides nothing
            result.status = "fail"
            result.judge_errors_over.append(name)
            result.messages.append(
                f"judge errors over the limit: criterion {name!r} {info.get('judge_errors')} error(s), "
                f"rate {info.get('judge_error_rate')} > max_error_rate {info.get('max_error_rate')}"
            )
    return result


def _gate_spec(suite_gate: Mapping[str, Any] | None, golden: Mapping[str, Any], golden_file: Path | None) -> GateSpec:
    """The ``gate:`` section in force: the suite's, else the golden's copy, else the golden's budgets.

    The golden's copies are checked whichever wins: a budget or floor the gate cannot read is an
    error, never skipped (a misspelled ``max_hard_fail`` silently not enforced is a false green)."""
    where = f"{golden_file or 'golden'}:1"
    budgets = golden.get("budgets") or {}
    if not isinstance(budgets, Mapping):
        raise GoldenError(f"{where}: 'budgets' must be an object such as {{\"max_hard_fails\": 0}}")
    for key, limit in sorted(budgets.items()):
        if key not in BUDGETS:
            raise GoldenError(f"{where}: unknown budget {key!r} (known: {', '.join(BUDGETS)})")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise GoldenError(f"{where}: budget {key}: expected a whole number >= 0, got {limit!r}")
    copy = golden.get("gate")
    if copy is not None:
        problem = gate_problem(copy)
        if problem is not None:
            raise GoldenError(f"{where}: refused golden file: its copy of the suite's {problem[1]}")
    if suite_gate is not None:
        problem = gate_problem(suite_gate)
        if problem is not None:
            raise GoldenError(f"suite gate section: {problem[1]}")
        return gate_spec(suite_gate)
    return gate_spec(copy if copy is not None else dict(budgets))


def _limit_rows(spec: GateSpec, current_metrics: Mapping[str, Any]) -> list[MetricRow]:
    """One row per floor (``min:``) or ceiling (``max:``) the suite declares.

    ``judge: bound`` (default) fails a floor when the run is credibly below it: the upper end of
    its 95% interval is under the floor (a checkpoint sitting exactly on the floor fails in at
    most 2.5% of runs; one just under it passes until the samples show it). ``judge: point``
    fails when the estimate is below (catches a checkpoint just under the floor; one sitting on
    it fails in about half of its runs). Ceilings are the mirror image. A metric the run has no
    value for fails its limit: a contract that cannot be checked is not met."""
    rows = []
    for kind, limits in (("floor", spec.floors), ("ceiling", spec.ceilings)):
        for name in table_order(limits):
            limit = limits[name]
            cur = current_metrics.get(name) or {}
            value, low, high = cur.get("value"), cur.get("low"), cur.get("high")
            floor = kind == "floor"
            sign = "<" if floor else ">"
            if not isinstance(value, int | float) or math.isnan(float(value)):
                verdict = "fail"
                why = f"fail: the run has no value of {name} to hold to its {kind} {limit:g}"
                value = low = high = None
            else:
                if spec.judge == "point":
                    judged, what = float(value), "the estimate"
                else:
                    end = high if floor else low
                    judged = float(end if isinstance(end, int | float) else value)
                    what = f"the 95% interval's {'upper' if floor else 'lower'} end"
                beyond = judged < limit if floor else judged > limit
                verdict = "fail" if beyond else "pass"
                rel = sign if beyond else (">=" if floor else "<=")
                why = (
                    f"{verdict}: {name} {float(value):.4g} [{_f(low)}, {_f(high)}] against the suite's {kind} "
                    f"{limit:g} (judge: {spec.judge}; {what} {judged:.4g} {rel} {limit:g})"
                )
            note = str(cur.get("note") or "")
            rows.append(
                MetricRow(
                    metric=name,
                    direction="higher" if floor else "lower",
                    tolerance=0.0,
                    golden=float(limit),
                    now=value,
                    now_low=low,
                    now_high=high,
                    delta=None if value is None else float(value) - float(limit),
                    delta_low=None,
                    delta_high=None,
                    p_value=None,
                    paired=False,
                    verdict=verdict,
                    explanation=why,
                    kind=kind,
                    note=note if note.startswith("one case") else "",
                )
            )
    return rows


def _power_guard(
    result: GateResult,
    run_cases: Sequence[Mapping[str, Any]],
    golden: Mapping[str, Any],
    spec: GateSpec,
    family: Sequence[str],
) -> None:
    """The power guard: the gate's power to catch a drop of ``spec.detect`` per tested metric
    (``plan.power_guard``, plan's numbers), a note, and in CI mode the refusal of an underpowered
    metric that no floor or ceiling covers, unless the suite acknowledges it."""
    scored = sorted(int(c.get("n_scored") or 0) for c in run_cases if c.get("n_scored"))
    if not scored or not family:
        return
    run_samples = scored[len(scored) // 2]
    result.detect = spec.detect
    result.acknowledged = spec.underpowered
    result.power = power_guard(golden, run_samples=run_samples, alpha=result.alpha, detect=spec.detect, metrics=family)
    if not result.power:
        return
    weak = sorted((p for p in result.power if p.power < TARGET_POWER), key=lambda p: p.power)
    result.underpowered = [p.metric for p in weak]
    level = result.power[0].level
    parts = []
    for p in result.power:
        need = ""
        if p.power < TARGET_POWER:
            need = f" (80% needs {p.samples_needed if p.samples_needed is not None else '> 1024'} samples/case)"
        less = f" of {p.drop:.3g} (all it can fall)" if p.drop < spec.detect else ""
        parts.append(f"{p.metric} {p.power:.0%}{less}{need}")
    result.messages.append(
        f"power to catch a {spec.detect:g} drop (gate: detect) at Holm level {level:.3g} with {run_samples} "
        f"samples/case: {', '.join(parts)}"
    )
    if result.strict and not spec.underpowered:
        result.power_refused = [m for m in result.underpowered if spec.limit(m) is None]


def _budget_rows(budgets: Mapping[str, int], run_cases: Sequence[Mapping[str, Any]]) -> list[MetricRow]:
    """One row per count budget in force (the suite's ``gate:``, else the golden's copy)."""
    rows = []
    for key, limit in sorted(budgets.items()):
        metric_name, what = BUDGETS[key]
        spec = METRICS[metric_name]
        count = sum(spec.count(c) for c in run_cases if c.get("n_scored"))
        where = [f"{c['case_id']} ({spec.count(c)})" for c in run_cases if c.get("n_scored") and spec.count(c)]
        over = count > int(limit)
        explanation = f"{'fail' if over else 'pass'}: {count} {what} against the suite's budget {key}: {limit}" + (
            f" ({', '.join(where[:5])}{', ...' if len(where) > 5 else ''})" if where else ""
        )
        rows.append(
            MetricRow(
                metric=key,
                direction="lower",
                tolerance=0.0,
                golden=float(limit),
                now=float(count),
                now_low=None,
                now_high=None,
                delta=float(count - int(limit)),
                delta_low=None,
                delta_high=None,
                p_value=None,
                paired=False,
                verdict="fail" if over else "pass",
                explanation=explanation,
                kind="budget",
            )
        )
    return rows


def staleness(run: Run, golden: Mapping[str, Any]) -> list[str]:
    """Messages saying why a golden no longer applies to ``run`` (empty when it does)."""
    ident = run.manifest["identity"]
    out = []
    if golden.get("suite_hash") != ident["suite_hash"]:
        out.append(f"golden is stale: suite content changed (hash {golden.get('suite_hash')} -> {ident['suite_hash']})")
    if out:
        out.append("re-run the suite and review a new golden with --update-golden")
    return out


def scorer_warning(run: Run, golden: Mapping[str, Any]) -> str | None:
    """A warning when the golden was scored by another scorer version than the run (the gate still
    decides: a scorer change that moves scores comes with regenerated goldens; docs/gating.md)."""
    run_scorer = str(run.manifest.get("scorer_version", SCORER_VERSION))
    if str(golden.get("scorer_version")) == run_scorer:
        return None
    return (
        f"warning: scorer version changed ({golden.get('scorer_version')} -> {run_scorer}): a difference may come "
        "from the checks, not the model; review and re-create the golden with --update-golden"
    )


def gate_run_dir(
    run_dir: str | Path,
    golden_dir: str | Path = "golden",
    *,
    baseline: str = DEFAULT_BASELINE,
    update: bool = False,
    strict: bool = False,
    allow_missing: bool = False,
    alpha: float = 0.05,
    tolerances: Iterable[str] | Mapping[str, float] | None = None,
    suite: Suite | None = None,
    max_error_rate: float = 0.0,
) -> GateResult:
    """``leader-eval gate RUN_DIR [--golden DIR] [--baseline NAME] [--update-golden] [--strict]``
    as a function.

    Reads the run, gates it against ``<golden_dir>/<suite>/<baseline>.json`` (whatever model made
    the run) and, with ``update``, then rewrites that golden from the run when ``update_golden``
    allows it (the gate's result is still the one against the old golden; ``result.update`` says
    what was written). A missing golden fails unless ``allow_missing``. Exit status:
    ``result.exit_status`` (bad input raises ``LeaderEvalError``, exit 2).
    """

    run = read_run(run_dir)
    tols = parse_tolerances(tolerances)
    path = golden_path(golden_dir, run.manifest["identity"]["suite"], baseline)
    golden = load_golden(path)
    check_golden_covers(path, golden, run)
    # the suite's own gate: section wins over the golden's copy, when the suite is the run's
    gate_suite = suite if suite is not None else load_run_suite(run)
    same = gate_suite is not None and gate_suite.content_hash == run.manifest["identity"]["suite_hash"]
    suite_gate = dict(gate_suite.gate) if same and gate_suite is not None else None
    result = gate(
        run,
        golden,
        strict=strict,
        alpha=alpha,
        tolerances=tols,
        golden_file=path,
        baseline=None if Path(golden_dir).suffix == ".json" else baseline,
        allow_missing=allow_missing,
        suite_gate=suite_gate,
    )
    apply_error_rule(result, run, max_error_rate)
    if update:
        # the comparison above is against the old golden and stays in the table; a written update
        # means the user accepted this run as the new baseline, so the exit status is 0
        result.update = update_golden(
            run, golden_dir, baseline=baseline, suite=suite, tolerances=tols or None, max_error_rate=max_error_rate
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
    #: one-sided p-value that the run is worse than the golden (the metric's declared test)
    p_worse: float | None = None
    #: the smallest p_worse the test could give with these data (Tarone; 0 when unbounded)
    min_p: float = 0.0

    def decide(self, level: float, family: Sequence[str], tested: bool) -> MetricRow:
        """The row's verdict at its Holm ``level``; ``tested``: the metric is in the gate's family
        (``metrics.gated_metrics``), else it is shown and never fails (``info``)."""
        row = self.row
        row.min_p = self.min_p
        if self.current is None:
            if not tested:
                row.verdict = "info"
            return row
        verdict, explanation = regression_verdict(
            self.golden,
            self.current,
            higher_is_better=self.higher,
            tolerance=row.tolerance,
            paired=self.paired,
            # a level of 0 (no share of alpha left, holm_alphas) can reject nothing; the smallest
            # positive float keeps that meaning where regression_verdict refuses alpha 0
            alpha=max(level, sys.float_info.min),
        )
        notes = [self.note] if self.note else []
        if tested:
            if row.metric not in family:
                notes.append(
                    f"its test cannot reach significance here (smallest possible p {self.min_p:.3g}), so it takes "
                    f"no share of alpha; a family of {len(family)} gating metric(s)"
                )
            elif len(family) > 1:
                notes.append(f"Holm level {level:.3g} in a family of {len(family)} gating metrics")
        row.verdict = verdict if tested else "info"
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
    spec = known_metric(name)
    higher = g.get("direction", spec.direction if spec else "higher") == "higher"
    tol = float(overrides.get(name, g.get("tolerance", spec.tolerance if spec else 0.0)))
    gval = float(g["value"])
    note = str(cur.get("note") or "")
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
        # the report shows a one-case group's interval note; so do the gate's tables
        note=note if note.startswith("one case") else "",
    )
    if row.now is None or math.isnan(float(row.now)) or not cur.get("n_cases"):
        row.now = None
        # a diagnostic metric is recorded and shown, never failing the gate (docs/scoring.md: a
        # lenient reading is a diagnostic, never the headline)
        row.verdict = "info" if spec is not None and not spec.gating else "fail"
        row.explanation = "no scored sample in this run"
        return _Prepared(row, gval, higher, None, None, "")
    current = Estimate.from_dict(cur)
    decision, why = _paired_with_golden(name, gval, higher, golden, by_case)
    row.delta = current.value - gval
    prepared = _Prepared(row, gval, higher, current, None, why)
    if decision is None:
        row.delta_low, row.delta_high = current.low - gval, current.high - gval
        return prepared
    prepared.paired = decision.comparison
    prepared.note = "; ".join(x for x in (why, decision.note) if x)
    prepared.p_worse = decision.p_worse
    prepared.min_p = decision.min_p_worse
    row.paired = True
    row.delta_low, row.delta_high = decision.comparison.low, decision.comparison.high
    row.p_value = decision.p_worse
    return prepared


def _paired_with_golden(
    name: str,
    golden_value: float,
    higher: bool,
    golden: Mapping[str, Any],
    by_case: Mapping[str, Mapping[str, Any]],
) -> tuple[PairedDecision | None, str]:
    """The metric's paired decision (``stats.decide_paired``, its declared test) over the cases
    both scored: the golden's per-case rates and samples against the run's (diff = now - golden).

    Returns (None, why) when there is nothing to pair, or when the golden's per-case rates no
    longer average to its value: someone edited the value to demand more, and pairing with the
    old per-case rates would test the old value instead (the unpaired rule then decides).
    """
    spec = known_metric(name)
    key = spec.case_field if spec is not None else None
    gcases = golden.get("cases") or {}
    if spec is None or key is None or not gcases:
        return None, ""
    recs = {cid: rec for cid, rec in gcases.items() if rec.get(key) is not None}
    w_all = {cid: float(by_case.get(cid, {}).get("weight", 1.0)) for cid in recs}
    if recs and sum(w_all.values()) > 0:
        mean = sum(w_all[cid] * float(rec[key]) for cid, rec in recs.items()) / sum(w_all.values())
        if abs(mean - golden_value) > CASE_MEAN_SLACK:
            return None, f"golden value {golden_value:.4g} differs from its per-case mean {mean:.4g}: unpaired test"
    common = sorted(cid for cid in recs if by_case.get(cid, {}).get("n_scored") and by_case[cid].get(name) is not None)
    # one case pairs too under the exact count test (one stratum: Fisher's test over its samples);
    # the t-test over cases needs two
    if len(common) < (1 if spec.test == "exact_count" else 2):
        return None, ""
    a = {cid: (float(recs[cid][key]), int(recs[cid].get("n_samples") or 0)) for cid in common}
    b = {cid: (float(by_case[cid][name]), spec.observations(by_case[cid])) for cid in common}
    weights = {cid: float(by_case[cid].get("weight", 1.0)) for cid in common}
    decision = decide_paired(a, b, weights, metric=name, higher_is_better=higher, test=spec.test)
    return decision, ""


def _coverage_problem(run: Run, golden: Mapping[str, Any]) -> str | None:
    status = run.manifest.get("status")
    if status != "complete":
        return f"run is not complete (status {status!r}): an interrupted run cannot pass the gate"

    short = planned_shortfall(run)
    if short:
        return short
    gcases = set((golden.get("cases") or {}).keys())
    ran = set(run.manifest["identity"].get("cases", {}))
    missing = sorted(gcases - ran)
    if missing:
        return (
            f"run covers {len(gcases) - len(missing)} of the golden's {len(gcases)} cases "
            f"(missing {', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}): gate the full suite"
        )
    return None


def _f(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"
