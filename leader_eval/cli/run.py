"""``leader-eval run SUITE``: sample a suite on a model, score it and record the run; with ``--adaptive``,
rounds of samples gated against the golden."""

from __future__ import annotations

import argparse
import gc
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from leader_eval.cli.output import print_report_path, split_values, write_markdown
from leader_eval.errors import LeaderEvalError
from leader_eval.inert import inert
from leader_eval.report import format_summary
from leader_eval.runs import evaluate, event_loop
from leader_eval.runs.evaluate import Run
from leader_eval.runs.model_spec import ModelEntry, model_entries
from leader_eval.runs.options import run_options
from leader_eval.runs.trusted import assemble
from leader_eval.scoring.aggregate import parse_prices
from leader_eval.scoring.error_rule import error_verdict, format_first_check_error
from leader_eval.suite.load import load_suite


def run(args: argparse.Namespace) -> int:
    event_loop.loop_factory()  # a bad LEADER_EVAL_EVENT_LOOP: before a suite is read (--suite-root, a matrix)
    # the sampling options are the shared table's (leader_eval.runs.options), as in the pytest plugin
    entries = model_entries(vars(args))
    extra = {
        "tags": split_values(args.tags),
        "case_ids": split_values(args.case),
        "limit": args.limit,
        "progress": not args.quiet,
        "trusted": getattr(args, "trusted", None) or assemble(),
    }
    if len(entries) > 1:
        return _run_matrix(args, entries, extra)
    options = run_options(entries[0].values, out=Path(args.out) if args.out else None, **extra)
    suite: object = args.suite
    if args.suite_root:
        suite = load_suite(args.suite, root=args.suite_root)
    if args.prices:
        prices = parse_prices(args.prices)
        options = replace(options, extra_manifest={**options.extra_manifest, "prices": prices})
    if args.shard:
        # imported where a command uses them: a plain run needs none (~10 ms of every run's start)
        from leader_eval.runs.merge import shard_options

        options = shard_options(options, args.shard, suite)  # type: ignore[arg-type]
    if args.adaptive or args.budget is not None or args.across_suites:
        return _run_adaptive(args, suite, options)
    try:
        result = evaluate.run(suite, options)  # type: ignore[arg-type]
    except KeyboardInterrupt:
        print("\ninterrupted: every finished sample is kept; re-run the same command to resume", file=sys.stderr)
        return 130
    # the run's records live until the command exits: the collections while the report is made
    # need not walk them again (CPython's own: a caller that froze objects itself is left alone)
    if gc.isenabled() and not gc.get_freeze_count():
        gc.freeze()
    print(format_summary(result))
    print_report_path(result)
    verdict = error_verdict(result.summary, args.max_error_rate)
    if verdict.failed:
        print(verdict.message(), file=sys.stderr)
        first_check = format_first_check_error(result.summary["overall"].get("first_check_error"), result.path)
        if first_check:
            print(first_check, file=sys.stderr)
        return 1
    over = judge_errors_over_limit(result.summary)
    for line in over:
        print(line, file=sys.stderr)
    return 1 if over else 0


def judge_errors_over_limit(summary: dict[str, Any]) -> list[str]:
    """One line per rubric criterion whose judge errors (unparseable, out of scale, timed out)
    exceed its ``max_error_rate`` (default 0): the run fails as the gate would, never a pass."""
    out = []
    for name, info in sorted((summary.get("judges") or {}).items()):
        if isinstance(info, dict) and info.get("errors_over_limit"):
            out.append(
                f"judge {name}: {info.get('judge_errors')} judge error(s), rate {info.get('judge_error_rate')} > "
                f"max_error_rate {info.get('max_error_rate')} (leader-eval show RUN_DIR lists them)"
            )
    return out


def _run_matrix(args: argparse.Namespace, entries: list[ModelEntry], extra: dict[str, Any]) -> int:
    """``run --model A --model B ...``: every entry with paired seeds, then one comparison."""
    from leader_eval.decide.matrix import run_matrix
    from leader_eval.report.compare import compare_markdown, format_compare

    for flag, value in (("--adaptive", args.adaptive), ("--shard", args.shard), ("--budget", args.budget)):
        if value:
            raise LeaderEvalError(f"{flag} samples one model: drop it or give --model once")
    suite = load_suite(args.suite, root=args.suite_root)
    if args.prices:
        extra["extra_manifest"] = {"prices": parse_prices(args.prices)}
    status = 0

    def done(label: str, result: Run) -> None:
        nonlocal status
        print(f"== {label}")
        print(format_summary(result))
        print_report_path(result)
        verdict = error_verdict(result.summary, args.max_error_rate)
        if verdict.failed:
            print(verdict.message(), file=sys.stderr)
            status = 1
        for line in judge_errors_over_limit(result.summary):
            print(line, file=sys.stderr)
            status = 1

    try:
        res = run_matrix(
            suite, entries, extra=extra, out=Path(args.out) if args.out else None, alpha=args.alpha, on_run=done
        )
    except KeyboardInterrupt:
        print("\ninterrupted: every finished sample is kept; re-run the same command to resume", file=sys.stderr)
        return 130
    print(f"== matrix: {len(res.runs)} models, run seed {res.runs[0].manifest['identity']['run_seed']}")
    print(format_compare(res.comparison))
    write_markdown(compare_markdown(res.comparison), None)  # the CI step summary shows the matrix
    return max(status, res.comparison.exit_status)


def _run_adaptive(args: argparse.Namespace, suite: object, options: object) -> int:
    """``run --adaptive --budget B``: rounds of samples gated against the golden (leader_eval.decide.adaptive)."""
    from leader_eval.decide.adaptive import AdaptiveDesign, run_adaptive
    from leader_eval.report.gate import format_gate_table

    if not (args.adaptive and args.budget is not None):
        raise LeaderEvalError(
            "--adaptive and --budget go together (e.g. --adaptive --budget 5), --across-suites needs both"
        )
    if getattr(args, "samples", None) is not None:
        raise LeaderEvalError(
            "--samples conflicts with --adaptive: the rounds set the samples per case, up to --budget"
        )
    design = AdaptiveDesign(budget=args.budget, alpha=args.alpha)
    try:
        res = run_adaptive(
            suite,
            options,
            design,
            golden_dir=args.golden,
            max_error_rate=args.max_error_rate,
            across_suites=args.across_suites,
            baseline=args.baseline,
        )
    except KeyboardInterrupt:
        print("\ninterrupted: every finished sample is kept; re-run the same command to resume", file=sys.stderr)
        return 130
    print(format_gate_table(res.gate))
    stop = res.record["stopped"]
    saved = res.record.get("cost_saved_estimate")
    cost = f", cost saved ~{saved:.4g} {res.record.get('currency', '')}".rstrip() if saved is not None else ""
    print(
        f"adaptive: stopped at round {stop['round']} with {stop['samples_per_case']} of {design.budget} samples per "
        f"case ({stop['why']}){cost}"
    )
    print(inert(res.gate.headline()))
    print(f"run: {res.run.path}")
    return res.gate.exit_status
