"""The gate of a pytest session: per suite, the controller's case records against the golden.

The records (one per case, sent by whichever worker scored it) are the source of truth, so a
serial run and ``-n N`` aggregate the same numbers, and a case whose record never arrived (a
crashed worker) makes the suite incomplete instead of silently passing.

Subsets. When the session selected only some of a suite's cases (``-k``, ``-m``, ``--deselect``,
``--le-case``), the golden is restricted to the same cases: each gating metric's golden value
becomes the weighted mean of the golden's per-case values over those cases, and the gate pairs
case by case as for a full run. The summary says ``subset: K of N cases``; a subset never
rewrites a golden.

The error rule (no false green): a sample that ended in a sampler error fails the suite's gate in
both modes unless the share of such samples is within ``--le-max-error-rate`` (default 0). A
context overflow counts as an error: the session's cases run at their own length (only the
stress item's sweep measures running out of context, and applies the rule there itself).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leader_eval.decide.gate import GateResult, gate
from leader_eval.decide.golden import check_golden_covers, golden_path, golden_without_cases, load_golden, update_golden
from leader_eval.decide.matrix import FamilyDecision, gate_family
from leader_eval.errors import LeaderEvalError
from leader_eval.inert import inert
from leader_eval.inert import markdown as md_text
from leader_eval.report.gate import format_gate_table, gate_markdown
from leader_eval.runs.evaluate import Run
from leader_eval.runs.judging import judge_summary
from leader_eval.scoring.aggregate import build_summary
from leader_eval.store.names import default_label
from leader_eval.store.run_store import REPORT, SESSION_SUMMARY, RunDir, write_json_atomic
from leader_eval.suite.load import load_suite

if TYPE_CHECKING:
    from leader_eval.pytest_plugin.state import GateKey, PluginState


@dataclass
class SuiteGate:
    """The gate's decision for one suite of the session, ready to report."""

    suite: str
    path: str  # the suite file
    status: int  # 0 pass, 1 fail
    lines: list[str]  # the terminal summary
    markdown: str = ""
    result: GateResult | None = None
    failing_cases: list[dict[str, Any]] = field(default_factory=list)  # case records with a failure
    not_gated: str = ""  # why the golden was not consulted (a shard), else empty
    label: str = ""  # the model's label in a model matrix, else ""
    #: the matrix's Holm across its models' gates (``decide.matrix.gate_family``), else None
    family: FamilyDecision | None = None


def session_run(key: GateKey, state: PluginState) -> tuple[Run, list[str]]:
    """A ``Run`` rebuilt from the session's case records of (suite, label), and what is missing from it."""
    meta = state.suite_meta[key]
    suite = load_suite(meta["path"])
    records = state.records.get(key, {})
    collected = state.collected.get(key, set())
    problems = []
    missing = sorted(collected - set(records))
    if missing:
        problems.append(
            f"run incomplete: {len(missing)} collected case(s) sent no result ({', '.join(missing[:5])})"
            " - a crashed worker or an error before scoring"
        )
    # a session that used only the leader_eval fixture never collected the suite file: its case
    # list comes from the suite, so the fixture's cases are a subset paired with the golden's
    meta.setdefault("all_cases", [c.id for c in suite.cases])
    run_dir = Path(meta["run_dir"]) if meta.get("run_dir") else None
    manifest: dict[str, Any] = RunDir(run_dir).read_manifest() if run_dir else {}
    run_dirs = sorted({str(r["run_dir"]) for r in records.values() if r.get("run_dir")})
    if len(run_dirs) > 1:
        manifest, problem = joined_manifest([Path(d) for d in run_dirs])
        if problem:
            problems.append(problem)
    if records and any(r.get("manifest_status") != "complete" for r in records.values()):
        problems.append("run incomplete: sampling did not finish")
    order = {c.id: i for i, c in enumerate(suite.cases)}
    results = sorted(records.values(), key=lambda r: order.get(r["case_id"], len(order)))
    summary = build_summary(suite, results).to_json()  # the suite's metrics: no run totals
    if suite.judges:
        # each criterion's judge, calibration and error rate, as a CLI run records them: without
        # it no criterion gates and judge errors over max_error_rate would pass (runs.judging)
        judgements: dict[str, Any] = {}
        for d in run_dirs or ([str(run_dir)] if run_dir else []):
            judgements.update(RunDir(Path(d)).read_judgements())
        judge_summary(suite, judgements, summary)
    if problems:
        manifest = {**manifest, "status": "incomplete"}
    return Run(run_dir or Path("."), manifest, [], [], list(results), summary), problems


def joined_manifest(run_dirs: list[Path]) -> tuple[dict[str, Any], str | None]:
    """One manifest for case records that came from several runs of one suite (each call of the
    ``leader_eval`` fixture samples its case in a run of its own, and a session may also run the
    suite file): the first run's, with every run's planned cases. Runs of another suite content,
    model or protocol cannot be gated together: that is the problem returned."""
    manifests = [RunDir(d).read_manifest() for d in run_dirs]
    first = manifests[0]
    ident = first["identity"]
    cases: dict[str, Any] = {}
    for m in manifests:
        other = m["identity"]
        for key in ("suite_hash", "model_id", "protocol"):
            if other.get(key) != ident.get(key):
                return first, (
                    f"the session's cases came from runs with different {key} "
                    f"({ident.get(key)} in {run_dirs[0]}, {other.get(key)} in {run_dirs[manifests.index(m)]}): "
                    "they cannot be gated together"
                )
        cases.update(other.get("cases") or {})
    joined = {
        **first,
        "identity": {**ident, "cases": dict(sorted(cases.items()))},
        "joined_runs": [str(d) for d in run_dirs],
    }
    return joined, None


def subset_golden(golden: dict[str, Any], case_ids: set[str], weights: dict[str, float]) -> dict[str, Any] | None:
    """The golden restricted to ``case_ids`` (the same restriction the gate applies to quarantined
    cases: per-case records kept, paired metrics' values their weighted mean over the kept cases),
    or None when the golden has no per-case values for them."""
    gcases = golden.get("cases") or {}
    if not set(gcases) & case_ids:
        return None
    return golden_without_cases(golden, set(gcases) - case_ids, weights)


def error_problem(records: dict[str, dict[str, Any]], max_error_rate: float) -> str | None:
    """Why the suite fails the error rule (``leader_eval.scoring.error_rule``, the CLI's), or None.

    The session's cases run at their own length (a sweep is the stress item's, judged there), so a
    context overflow is an error here, as it is to the CLI's gate for a run that is not a sweep:
    a case marked ``stress:`` whose prompt does not fit was never measured."""
    from leader_eval.scoring.error_rule import error_verdict, format_first_check_error

    def total(key: str) -> int:
        return sum(int(r.get(key) or 0) for r in records.values())

    counts = {
        "n_samples": total("n_samples"),
        "n_errors": total("n_errors"),
        "n_context_overflow": total("n_context_overflow"),
        "n_scored": total("n_scored"),
        "n_check_errors": total("n_check_errors"),
    }
    verdict = error_verdict(counts, max_error_rate, overflow_is_error=True)
    if not verdict.failed:
        return None
    first = next(
        # a server's error text: one inert line in the gate's table, summary and annotations
        (f"{r['case_id']}: {inert(r['first_error'])}" for r in records.values() if r.get("first_error")),
        "",
    ) or next(
        (
            format_first_check_error({"case_id": r["case_id"], **r["first_check_error"]}, r.get("run_dir") or "RUN_DIR")
            for r in records.values()
            if isinstance(r.get("first_check_error"), dict)
        ),
        "",
    )
    return verdict.message() + (f" (--le-max-error-rate); first: {first}" if first else " (--le-max-error-rate)")


def failing_cases(records: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Case records with a failed scored sample, or with errors and no scored sample."""
    out = []
    for rec in records.values():
        failed = int(rec.get("n_scored") or 0) - int(rec.get("n_passed") or 0)
        if failed > 0 or (rec.get("n_samples") and not rec.get("n_scored")):
            out.append(rec)
    return out


@dataclass
class Prepared:
    """A suite's gate decided but not yet reported (a matrix adjusts its models' gates between)."""

    key: GateKey
    run: Run
    problems: list[str]
    notes: list[str]
    subset: bool
    result: GateResult


def prepare_suite(key: GateKey, state: PluginState) -> Prepared | SuiteGate:
    """Gate one suite's run of one model against its golden (see the module docstring): the
    decision, or the finished ``SuiteGate`` when nothing could be gated."""
    suite_name, model_label = key
    o = state.options
    meta = state.suite_meta[key]
    try:
        run, problems = session_run(key, state)
    except LeaderEvalError as err:
        return SuiteGate(suite_name, meta["path"], 1, [f"{suite_name}: {err}"], label=model_label)
    if not state.records.get(key) or "identity" not in run.manifest:
        why = "; ".join(problems) or "its cases failed before scoring (see their reports)"
        head = f"shard {o.shard[0]}/{o.shard[1]} FAIL" if o.shard else "gate FAIL"
        who = f"suite {suite_name}, label {model_label}" if model_label else f"suite {suite_name}"
        return SuiteGate(suite_name, meta["path"], 1, [f"{head} ({who}): no case was scored: {why}"], label=model_label)
    if run.path != Path("."):
        # what the controller aggregated: must equal the worker's summary.json for the same samples
        write_json_atomic(run.path / SESSION_SUMMARY, run.summary)
    records = state.records.get(key, {})
    if o.shard is not None:
        return shard_suite(suite_name, state, run, problems)
    selected = set(state.collected.get(key, set())) | set(records)
    all_cases = list(meta.get("all_cases") or [])
    subset = bool(all_cases) and selected != set(all_cases)
    label = model_label or o.sampling.get("label") or default_label(run.manifest["identity"]["model_id"])
    path = golden_path(o.golden_dir, suite_name, o.baseline)
    golden = load_golden(path)
    check_golden_covers(path, golden, run)  # a golden short of the run's cases would hide them
    notes: list[str] = []
    if subset:
        notes.append(f"subset: {len(selected)} of {len(all_cases)} cases (paired with the same cases of the golden)")
        if golden is not None:
            weights = {cid: float(r.get("weight", 1.0)) for cid, r in records.items()}
            restricted = subset_golden(golden, selected, weights)
            if restricted is None:
                problems.append("the golden has no per-case values for these cases: gate the full suite")
            else:
                golden = restricted
    # the suite's gate: section wins over the golden's copy; floors and ceilings are contracts on
    # the whole suite's values, so a subset (-m, -k, --le-case) is not held to them
    suite_gate = dict(load_suite(meta["path"]).gate)
    if subset and ("min" in suite_gate or "max" in suite_gate):
        suite_gate = {k: v for k, v in suite_gate.items() if k not in ("min", "max")}
        notes.append("subset: the suite's floors and ceilings apply to the full suite only")
    result = gate(
        run,
        golden,
        strict=o.golden_strict,
        tolerances=o.tolerances or None,
        golden_file=path,
        label=label,
        baseline=o.baseline,
        allow_missing=o.allow_missing_golden,
        create_command=(
            f"pytest {_shown_path(meta['path'])} --le-model TRUSTED_MODEL --le-update-golden "
            f"--le-golden-dir {o.golden_dir} --le-baseline {o.baseline}"
        ),
        suite_gate=suite_gate,
    )
    return Prepared(key, run, problems, notes, subset, result)


def finish_suite(prepared: Prepared, state: PluginState, *, interrupted: bool) -> SuiteGate:
    """The error rule, the golden's update and the reports of a decided gate."""
    o = state.options
    suite_name, model_label = prepared.key
    meta = state.suite_meta[prepared.key]
    records = state.records.get(prepared.key, {})
    run, problems, notes, result = prepared.run, prepared.problems, prepared.notes, prepared.result
    errors = error_problem(records, o.max_error_rate)
    if errors:
        problems.append(errors)
    if problems:
        if result.status != "fail":
            result.status = "incomplete"
        result.messages[:0] = problems
    lines = [f"{suite_name}: {n}" for n in notes]
    if o.update_golden:
        if interrupted or problems:
            why = "interrupted" if interrupted else "incomplete or errored"
            lines.append(f"{suite_name}: golden not updated: the run was {why}")
        elif prepared.subset:
            lines.append(f"{suite_name}: golden not updated: not every case of the suite ran (a subset)")
        elif run.manifest.get("joined_runs"):
            # a golden is made from one run (its seed, its sampling identity), never from pieces
            lines.append(
                f"{suite_name}: golden not updated: the cases came from {len(run.manifest['joined_runs'])} "
                "separate runs (the leader_eval fixture): update it from one run of the suite file"
            )
        else:
            suite = load_suite(meta["path"])
            result.update = update_golden(
                run, o.golden_dir, baseline=o.baseline, suite=suite, tolerances=o.tolerances or None
            )
            lines.append(f"{suite_name}: {result.update.reason}")
    lines.append(format_gate_table(result))
    markdown = gate_markdown(result)
    if run.path != Path("."):
        _record_verdict(run.path, result, lines, suite_name)
        report_line, link = _run_report(run.path)
        lines.append(f"{suite_name}: {report_line}")
        markdown = markdown.rstrip("\n") + "\n\n" + link if link else markdown
    if notes:
        head, _, rest = markdown.partition("\n")
        markdown = head + "\n\n" + "".join(f"_{n}_\n" for n in notes) + rest
    return SuiteGate(
        suite_name,
        meta["path"],
        result.exit_status,
        lines,
        markdown,
        result,
        failing_cases(records),
        label=model_label,
    )


def shard_suite(suite_name: str, state: PluginState, run: Run, problems: list[str]) -> SuiteGate:
    """One shard of a suite (``--le-shard I/N``): never compared with the golden, as N gates would
    multiply false alarms (``leader-eval merge`` then ``leader-eval gate`` decide once); the
    error rule and an incomplete run still fail it, since a sampler error is never a pass."""
    from leader_eval.report.terminal import metrics_table

    o = state.options
    assert o.shard is not None
    index, count = o.shard
    records = state.records.get((suite_name, ""), {})
    errors = error_problem(records, o.max_error_rate)
    if errors:
        problems.append(errors)
    not_gated = f"shard {index}/{count}: not gated; merge the shards and run `leader-eval gate`"
    lines = [f"{suite_name}: {not_gated}", f"{suite_name}: this shard's run: {run.path}"]
    lines += [f"{suite_name}: shard FAIL: {p}" for p in problems]
    lines.append(f"{suite_name}: this shard's metrics ({len(records)} cases; the gate reads the merged run):")
    lines.append(metrics_table(run.summary["overall"]))
    merge = f"leader-eval merge SHARD_RUN_DIRS --out merged && leader-eval gate merged --golden {o.golden_dir}"
    lines.append(f"{suite_name}: once every shard ran: {merge}")
    markdown = "\n".join(
        [
            f"### leader-eval {suite_name}: shard {index}/{count}, not gated",
            "",
            *(f"- **FAIL**: {md_text(p)}" for p in problems),  # they may quote a server's error
            f"Run {md_text(run.path)}: merge the shards and run `leader-eval gate` on the merged run.",
        ]
    )
    report_line, link = _run_report(run.path)
    lines.append(f"{suite_name}: {report_line}")
    if link:
        markdown += "\n\n" + link
    status = 1 if problems else 0
    path = state.suite_meta[(suite_name, "")]["path"]
    return SuiteGate(suite_name, path, status, lines, markdown, None, failing_cases(records), not_gated)


def _shown_path(path: str) -> str:
    """``path`` relative to the working directory when under it: the command it goes into is read in
    the step summary on GitHub, where the runner's absolute path means nothing."""
    import os

    try:
        return Path(path).resolve().relative_to(Path(os.getcwd()).resolve()).as_posix()
    except ValueError:
        return str(path)


def _record_verdict(run_dir: Path, result: GateResult, lines: list[str], suite_name: str) -> None:
    """Keep the verdict in the run (the history page reads it); a failure to write it is a line, never the gate's."""
    from leader_eval.runs.history import record_gate

    try:
        record_gate(run_dir, result.baseline, result.record())
    except (OSError, LeaderEvalError) as err:
        lines.append(f"{suite_name}: warning: the verdict was not recorded in the run: {inert(str(err))}")


def _run_report(run_dir: Path) -> tuple[str, str]:
    """Write the run's report.html (as ``leader-eval run`` does); a report failure never fails the gate."""
    from leader_eval.report import report_markdown_link, write_run_report

    try:
        path = write_run_report(run_dir)
    except (OSError, ValueError, LeaderEvalError) as err:
        return f"{REPORT} not written: {err}", ""
    return f"report {path}", report_markdown_link(run_dir)


def gate_session(state: PluginState, *, interrupted: bool) -> list[SuiteGate]:
    """Gate every suite the session ran, once per model; a matrix's gates of one suite are one
    family (``decide.matrix.gate_family``: Holm across the models' gates at the gate's alpha)."""
    decided: list[Prepared | SuiteGate] = []
    # a matrix's gates in the entries' order (the first entry first), one-model sessions by suite
    order = {label: i for i, label in enumerate(state.models or {})}
    for key in sorted(set(state.collected) | set(state.records), key=lambda k: (k[0], order.get(k[1], -1), k[1])):
        if key not in state.suite_meta:
            continue
        decided.append(_guarded(key, state, lambda k=key: prepare_suite(k, state)))
    families: dict[GateKey, FamilyDecision] = {}
    if state.options.matrix:
        for suite_name in sorted({d.key[0] for d in decided if isinstance(d, Prepared)}):
            family = {d.key[1]: d.result for d in decided if isinstance(d, Prepared) and d.key[0] == suite_name}
            alpha = next(iter(family.values())).alpha
            for label, decision in gate_family(family, alpha=alpha).items():
                families[(suite_name, label)] = decision
    out = []
    for d in decided:
        if isinstance(d, SuiteGate):
            out.append(d)
            continue
        g = _guarded(d.key, state, lambda d=d: finish_suite(d, state, interrupted=interrupted))
        assert isinstance(g, SuiteGate)
        g.family = families.get(d.key)
        out.append(g)
    for suite_name in sorted({key[0] for key in families}):
        mine = [g for g in out if g.suite == suite_name]
        mine[0].lines.insert(0, matrix_line(mine))
    return out


def matrix_line(gates: list[SuiteGate]) -> str:
    """The terminal's line for a model matrix of one suite: each model's verdict and Holm level."""
    parts = []
    for g in gates:
        verdict = (g.result.status if g.result is not None else "error").upper()
        fam = f" (gate p {g.family.p_gate:.3g}, level {g.family.level:.3g})" if g.family is not None else ""
        parts.append(f"{g.label} {verdict}{fam}")
    alpha = next((g.result.alpha for g in gates if g.result is not None), 0.05)
    return (
        f"{gates[0].suite}: model matrix of {len(gates)}, each against the baseline, Holm across the models' "
        f"gates at alpha {alpha:g}: " + "; ".join(parts)
    )


def _guarded(key: GateKey, state: PluginState, step: Any) -> Any:
    """``step()``; a bug in the gate must fail the suite, never pass it or crash pytest."""
    try:
        return step()
    except LeaderEvalError:
        raise
    except Exception as exc:
        what = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        line = f"gate ERROR (suite {key[0]}): the gate could not decide ({what}); please report this"
        return SuiteGate(key[0], state.suite_meta[key]["path"], 1, [line], label=key[1])
