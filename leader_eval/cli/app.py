"""``leader-eval``: a thin shell over the library API. Bad input exits 2 with one line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from leader_eval.errors import LeaderEvalError
from leader_eval.inert import GuardedStream, inert
from leader_eval.runs.argtypes import (
    int_list,
    name_component,
    non_negative_float,
    open_probability,
    positive_int,
    probability,
    sample_count,
)
from leader_eval.runs.options import add_arguments as add_sampling_arguments
from leader_eval.store.run_store import ADAPTIVE_COMPARE, REPORT


def _split(values: Sequence[str] | None) -> list[str]:
    return [v for item in values or [] for v in item.split(",") if v]


def cmd_run(args: argparse.Namespace) -> int:
    from leader_eval.report import format_summary
    from leader_eval.runs.evaluate import run
    from leader_eval.runs.options import run_options
    from leader_eval.scoring.error_rule import error_verdict

    # the sampling options are the shared table's (leader_eval.runs.options), as in the pytest plugin
    options = run_options(
        vars(args),
        tags=_split(args.tags),
        case_ids=_split(args.case),
        limit=args.limit,
        out=Path(args.out) if args.out else None,
        progress=not args.quiet,
    )
    suite: object = args.suite
    if args.suite_root:
        from leader_eval.suite.load import load_suite

        suite = load_suite(args.suite, root=args.suite_root)
    if args.prices:
        from dataclasses import replace

        from leader_eval.scoring.aggregate import parse_prices

        prices = parse_prices(args.prices)
        options = replace(options, extra_manifest={**options.extra_manifest, "prices": prices})
    if args.shard:
        from leader_eval.runs.merge import shard_options

        options = shard_options(options, args.shard, suite)  # type: ignore[arg-type]
    if args.adaptive or args.budget is not None or args.across_suites:
        return _run_adaptive(args, suite, options)
    try:
        result = run(suite, options)  # type: ignore[arg-type]
    except KeyboardInterrupt:
        print("\ninterrupted: every finished sample is kept; re-run the same command to resume", file=sys.stderr)
        return 130
    print(format_summary(result))
    _print_report_path(result.path)
    verdict = error_verdict(result.summary, args.max_error_rate)
    if verdict.failed:
        print(verdict.message(), file=sys.stderr)
        return 1
    return 0


def _run_adaptive(args: argparse.Namespace, suite: object, options: object) -> int:
    """``run --adaptive --budget B``: rounds of samples gated against the golden (leader_eval.decide.adaptive)."""
    from leader_eval.decide.adaptive import AdaptiveDesign, run_adaptive
    from leader_eval.errors import LeaderEvalError
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


def cmd_compare_adaptive(args: argparse.Namespace) -> int:
    """``compare-adaptive --a SUITE[@MODEL] --b SUITE[@MODEL] --budget B``: rounds on both sides
    (leader_eval.decide.adaptive_compare), the paired compare after each, stop when the verdict is settled."""
    from dataclasses import replace

    from leader_eval.decide.adaptive import AdaptiveDesign
    from leader_eval.decide.adaptive_compare import compare_adaptive, split_config
    from leader_eval.report.compare import format_compare
    from leader_eval.runs.options import run_options

    if getattr(args, "samples", None) is not None:
        raise LeaderEvalError("--samples conflicts with compare-adaptive: the rounds set the samples, up to --budget")
    design = AdaptiveDesign(budget=args.budget, alpha=args.alpha, futility=args.futility)
    base = run_options(vars(args), out=None, progress=not args.quiet)
    sides = []
    for text in (args.a, args.b):
        suite, model = split_config(text)
        sides.append((suite, replace(base, model=model) if model else base))
    try:
        res = compare_adaptive(sides[0], sides[1], design, Path(args.out), across_suites=args.across_suites)
    except KeyboardInterrupt:
        print("\ninterrupted: every finished sample is kept; re-run the same command to resume", file=sys.stderr)
        return 130
    print(format_compare(res.comparison))
    for look in res.record["looks"]:
        print(
            f"look {look['round']}: {look['samples_per_case']} samples per case, level {look['level']:.3g}: "
            f"{look['decision']}"
        )
    stop = res.record["stopped"]
    print(
        f"adaptive compare: stopped at round {stop['round']} with {stop['samples_per_case']} of {design.budget} "
        f"samples per case on each side ({stop['why']})"
    )
    print(f"record: {res.path}")
    return res.comparison.exit_status


def _print_report_path(run_dir: Path) -> None:
    """Write the run's report.html and print its path; a report failure never fails the recorded run."""
    from leader_eval.report import write_run_report

    try:
        print(f"report: {write_run_report(run_dir)}")
    except (OSError, ValueError, LeaderEvalError) as err:
        print(f"warning: {REPORT} not written: {err}", file=sys.stderr)


def cmd_lint(args: argparse.Namespace) -> int:
    from leader_eval.report import table
    from leader_eval.sampling.backends import resolve_backend
    from leader_eval.suite.lint import MAX_PRINTED_ERRORS, lint_file

    paths, status = _suite_paths(args.suite)
    backend = resolve_backend(args.model) if not args.no_tokens and paths else None
    for path in paths:
        # every error of the file, each on its own line (leader_eval.suite.lint)
        result = lint_file(path, root=args.suite_root, backend=backend)
        for err in result.errors[:MAX_PRINTED_ERRORS]:
            print(f"error: {inert(err, multiline=True)}", file=sys.stderr)  # it may quote the suite
        if len(result.errors) > MAX_PRINTED_ERRORS:
            print(f"error: {path}: {len(result.errors) - MAX_PRINTED_ERRORS} more errors not shown", file=sys.stderr)
        if result.errors or result.suite is None:
            status = 2
            continue
        suite = result.suite
        print(f"{path}: ok, {len(suite.cases)} cases, {len(suite.tools)} tools, hash {suite.content_hash}")
        if args.verbose or backend is not None:
            print(table(["case", "line", "prompt tokens"], [[str(c) for c in r] for r in result.rows]))
    return status


def _suite_paths(items: Sequence[str]) -> tuple[list[str], int]:
    """Files, directories (every ``*.yaml``/``*.yml`` under them) and globs (``**`` allowed) ->
    the suite files in order, and status 2 when an item names nothing (reported on stderr)."""
    import glob

    out: list[str] = []
    status = 0
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(str(f) for f in p.rglob("*") if f.suffix in (".yaml", ".yml") and f.is_file())
        elif glob.has_magic(item):
            found = sorted(f for f in glob.glob(item, recursive=True) if Path(f).is_file())
        else:
            found = [item]
        if not found:
            print(f"error: {item}: no suite file (*.yaml, *.yml) there", file=sys.stderr)
            status = 2
        out.extend(f for f in found if f not in out)
    return out, status


def cmd_schema(args: argparse.Namespace) -> int:
    from importlib import resources

    schema = resources.files("leader_eval.suite.schema").joinpath("suite.schema.json")
    if args.path:
        print(schema)
    else:
        print(schema.read_text(encoding="utf-8"), end="")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from leader_eval.report import format_show
    from leader_eval.runs.evaluate import read_run

    run = read_run(args.run)
    print(format_show(run, case_id=args.case, failed=args.failed, limit=args.limit))
    for name, lines in sorted(run.unreadable.items()):
        shown = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
        print(f"unreadable: {len(lines)} line(s) of {run.path / name} could not be read and were skipped ({shown})")
    return 0


def _write_markdown(text: str, target: str | None) -> None:
    """Append to --markdown FILE, and to $GITHUB_STEP_SUMMARY when a CI sets it."""
    import os

    for dest in (target, os.environ.get("GITHUB_STEP_SUMMARY")):
        if dest:
            with open(dest, "a", encoding="utf-8") as f:
                f.write(text.rstrip() + "\n\n")


def cmd_gate(args: argparse.Namespace) -> int:
    from leader_eval.decide.gate import gate_run_dir
    from leader_eval.report.gate import format_gate_table, gate_markdown

    if args.label is not None:
        # 0.2's `gate --label X` read golden/<suite>/X.json; silently gating against main instead
        # would compare with a file the user did not name
        raise LeaderEvalError(
            f"gate --label no longer chooses the golden (0.3): gate against a baseline with --baseline {args.label}"
        )
    result = gate_run_dir(
        args.run,
        args.golden,
        baseline=args.baseline,
        update=args.update_golden,
        strict=args.strict,
        allow_missing=args.allow_missing_golden,
        tolerances=_split(args.tolerance),
        max_error_rate=args.max_error_rate,
    )
    print(format_gate_table(result))
    from leader_eval.report import report_markdown_link

    _write_markdown(gate_markdown(result) + report_markdown_link(args.run), args.markdown)
    return result.exit_status


def cmd_update_golden(args: argparse.Namespace) -> int:
    """``update-golden RUN_DIR --baseline NAME``: make a trusted run the baseline (no gate)."""
    from leader_eval.decide.golden import check_golden_covers, golden_path, load_golden, parse_tolerances, update_golden
    from leader_eval.runs.evaluate import read_run

    run = read_run(args.run)
    path = golden_path(args.golden, run.manifest["identity"]["suite"], args.baseline)
    check_golden_covers(path, load_golden(path), run)  # an unreadable or foreign golden: exit 2
    result = update_golden(
        run,
        args.golden,
        baseline=args.baseline,
        tolerances=parse_tolerances(_split(args.tolerance)) or None,
        max_error_rate=args.max_error_rate,
    )
    if not result.written and not result.reason.startswith("golden already matches"):
        print(f"golden not written: {result.path}: {result.reason}", file=sys.stderr)
        return 1
    print(result.reason if result.written else f"{result.path}: {result.reason}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from leader_eval.decide.compare import compare_runs
    from leader_eval.report.compare import compare_markdown, format_compare

    comparison = compare_runs(args.runs, alpha=args.alpha, across_suites=args.across_suites)
    order = _split(args.order) or None
    print(format_compare(comparison, order=order))
    markdown = compare_markdown(comparison)
    if args.report:
        from leader_eval.report import write_report

        path = write_report(args.runs, args.report, comparison=comparison, order=order)
        print(f"report: {path}")
        markdown += f"\nReport: [`{path}`]({path.as_posix()})\n"
    _write_markdown(markdown, args.markdown)
    return comparison.exit_status


def cmd_plan(args: argparse.Namespace) -> int:
    from leader_eval.decide.golden import DEFAULT_BASELINE, GoldenError, check_golden_suite, golden_path, load_golden
    from leader_eval.decide.plan import plan_power
    from leader_eval.report.plan import format_plan
    from leader_eval.suite.load import load_suite

    suite = load_suite(args.suite)
    baseline = args.baseline or args.label or DEFAULT_BASELINE  # --label: 0.2's name for the golden
    path = golden_path(args.golden, suite.name, baseline)
    golden = load_golden(path)
    if golden is None:
        raise GoldenError(
            f"{path}: no golden baseline {baseline!r} (create it from a trusted run: "
            f"leader-eval update-golden TRUSTED_RUN_DIR --golden {args.golden} --baseline {baseline})"
        )
    check_golden_suite(path, golden, suite.name)
    samples = args.samples or int(suite.sampling.get("samples", 1))
    plan = plan_power(golden, run_samples=samples, metric=args.metric, alpha=args.alpha)
    print(format_plan(plan, source=str(path)))
    if golden.get("suite_hash") != suite.content_hash:
        made = inert(golden.get("suite_hash"))  # the golden file's text
        print(f"note: the golden was made from other suite content ({made}); its rates still guide")
    return 0


def cmd_flaky(args: argparse.Namespace) -> int:
    import json

    from leader_eval.decide.flaky import find_flaky
    from leader_eval.report.flaky import format_flaky

    report = find_flaky(args.runs, alpha=args.alpha)
    print(json.dumps(report.to_dict(), indent=2) if args.json else format_flaky(report))
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from leader_eval.report import format_summary
    from leader_eval.runs.merge import merge_runs

    result = merge_runs(args.runs, args.out, suite=args.suite)
    print(format_summary(result))
    print(f"merged {len(args.runs)} shards into {args.out} (status {result.manifest.get('status')}): gate it once")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from leader_eval.report import write_report

    out = write_report(args.runs, args.out, order=_split(args.order) or None, across_suites=args.across_suites)
    print(f"report: {out}")
    return 0


def cmd_stress(args: argparse.Namespace) -> int:
    from leader_eval.scoring.error_rule import error_verdict
    from leader_eval.studies.stress import format_stress_table, stress

    result = stress(
        args.suite,
        model=args.model,
        tokens=args.tokens,
        steps=[n for group in args.steps or [] for n in group] or None,
        case_ids=_split(args.cases) or None,
        samples=args.samples,
        seed=args.seed,
        out=Path(args.out) if args.out else None,
        depths=_split(args.depths) or None,
        context_length=args.context_length,
    )
    print(format_stress_table(result))
    if result.out:
        _print_report_path(result.out)
    # a context overflow is what a sweep measures; any other sampler error fails it
    verdict = error_verdict(result.run.summary, args.max_error_rate, overflow_is_error=False)
    if verdict.failed:
        print(verdict.message(), file=sys.stderr)
        return 1
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    import json

    from leader_eval.store.cache import cache_info, cache_prune

    if args.action == "info":
        print(json.dumps(cache_info(), indent=2))
    else:
        print(json.dumps(cache_prune(older_than_days=args.older_than_days), indent=2))
    return 0


def cmd_overlap(args: argparse.Namespace) -> int:
    import json

    from leader_eval.studies.overlap import format_overlap_report, overlap_report
    from leader_eval.suite.load import load_suite

    suite = load_suite(args.suite)
    report = overlap_report(suite, [Path(p) for p in args.train], n=args.n, threshold=args.threshold)
    print(json.dumps(report.to_dict(), indent=2) if args.json else format_overlap_report(report))
    return 0


def _add_max_error_rate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-error-rate",
        type=probability,
        default=0.0,
        help="share of samples that may end in a sampler error before the run fails (default 0: none)",
    )


def _add_baseline(parser: argparse.ArgumentParser, prefix: str = "", default: str | None = "main") -> None:

    parser.add_argument(
        "--baseline",
        type=name_component,
        default=default,
        help=prefix + "the golden baseline to gate against: GOLDEN/<suite>/<baseline>.json, any model (default main)",
    )


class OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line (``leader-eval run: error: argument --limit: ...``), exit status 2.

    Subcommand parsers inherit the class (``add_subparsers`` builds them with ``type(self)``).
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from leader_eval.version import __version__

    p = OneLineParser(prog="leader-eval", description=__doc__)
    p.add_argument("--version", action="version", version=f"leader-eval {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="sample a suite on a model, score it and record the run")
    r.add_argument("suite", help="suite YAML file")
    add_sampling_arguments(r)  # the same table as the pytest plugin's --le-* options
    r.add_argument("--tags", action="append", help="only cases with one of these tags (comma-separated)")
    r.add_argument("--case", action="append", help="only these case ids (comma-separated)")
    r.add_argument("--limit", type=positive_int, help="only the first N selected cases")
    r.add_argument("--out", help="run directory (re-running into it resumes)")
    r.add_argument(
        "--prices",
        metavar="PROMPT,COMPLETION[,CURRENCY]",
        help="prices per million prompt and completion tokens for the cost estimate (beats the suite's prices)",
    )
    r.add_argument(
        "--shard",
        metavar="I/N",
        help="run only shard I of N (deterministic by case id; needs --seed); merge the shards with leader-eval merge",
    )
    r.add_argument(
        "--adaptive",
        action="store_true",
        help="sample in rounds and stop once more samples cannot change the gate's decision (needs --budget)",
    )
    r.add_argument("--budget", type=sample_count, help="with --adaptive: at most this many samples per case")
    r.add_argument("--golden", default="golden", help="with --adaptive: golden directory (or one .json file)")
    _add_baseline(r, "with --adaptive: ")
    r.add_argument("--alpha", type=float, default=0.05, help="with --adaptive: the gate's family-wise level")
    r.add_argument(
        "--across-suites",
        action="store_true",
        help="with --adaptive: gate against a golden of another variant of the suite (same case ids)",
    )
    r.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    r.add_argument("--suite-root", help="folder every file the suite references must lie in (docs/security.md)")
    r.set_defaults(func=cmd_run)

    li = sub.add_parser("lint", help="validate suites, render every case, count prompt tokens")
    li.add_argument("suite", nargs="+", help="suite files, directories (every *.yaml under them) or globs")
    li.add_argument("--model", default="local:smollm2", help="model whose chat template and tokenizer count tokens")
    li.add_argument("--no-tokens", action="store_true", help="skip the chat template and token counts")
    li.add_argument("-v", "--verbose", action="store_true", help="list every case with its line")
    li.add_argument("--suite-root", help="folder every file the suite references must lie in (docs/security.md)")
    li.set_defaults(func=cmd_lint)

    sh = sub.add_parser("show", help="print raw outputs (repr) with parsed calls and failed checks")
    sh.add_argument("run", help="run directory")
    sh.add_argument("--case", help="only this case id")
    sh.add_argument("--failed", action="store_true", help="only samples that failed")
    sh.add_argument("--limit", type=positive_int, help="at most this many samples")
    sh.set_defaults(func=cmd_show)

    g = sub.add_parser("gate", help="gate a run directory against its golden baseline (exit 1 on credible regression)")
    g.add_argument("run", help="run directory")
    g.add_argument("--golden", default="golden", help="golden directory (or one golden .json file)")
    _add_baseline(g)
    g.add_argument("--label", help="refused: in 0.2 it chose the golden; use --baseline (0.3)")
    g.add_argument("--update-golden", action="store_true", help="rewrite the golden from this run if it is complete")
    g.add_argument(
        "--allow-missing-golden",
        action="store_true",
        help="a missing golden warns instead of failing (a suite's very first run only)",
    )
    g.add_argument(
        "--strict", action="store_true", help="CI mode (docs/gating.md); a missing golden fails with or without it"
    )
    g.add_argument("--tolerance", action="append", help="METRIC=VALUE, overrides the golden's (repeatable)")
    g.add_argument("--markdown", help="append a Markdown summary to this file")
    _add_max_error_rate(g)
    g.set_defaults(func=cmd_gate)

    ug = sub.add_parser(
        "update-golden", help="make a complete run of a trusted model the suite's baseline golden (no gate)"
    )
    ug.add_argument("run", help="run directory of the trusted model")
    ug.add_argument("--golden", default="golden", help="golden directory (or one golden .json file)")
    _add_baseline(ug)
    ug.add_argument("--tolerance", action="append", help="METRIC=VALUE, beats the existing golden's (repeatable)")
    _add_max_error_rate(ug)
    ug.set_defaults(func=cmd_update_golden)

    c = sub.add_parser(
        "compare", help="compare runs: paired differences, flips, verdict (exit 1 on credible regression)"
    )
    c.add_argument("runs", nargs="+", help="run directories; runs of one label+suite+sampling are pooled")
    c.add_argument(
        "--alpha", type=open_probability, default=0.05, help="significance level of the verdict (default 0.05)"
    )
    c.add_argument(
        "--across-suites",
        action="store_true",
        help="allow runs of different suite content (scaffold variants with the same case ids)",
    )
    c.add_argument("--markdown", help="append a Markdown summary to this file")
    c.add_argument("--report", help="also write the comparison as one self-contained HTML file")
    c.add_argument("--order", action="append", help="checkpoint order of the labels (comma-separated)")
    c.set_defaults(func=cmd_compare)

    ca = sub.add_parser(
        "compare-adaptive",
        help="sample two configurations in rounds and compare after each; stop once the verdict is settled",
    )
    ca.add_argument("--a", required=True, metavar="SUITE[@MODEL]", help="baseline A: suite YAML and model")
    ca.add_argument("--b", required=True, metavar="SUITE[@MODEL]", help="candidate B: suite YAML and model")
    add_sampling_arguments(ca)  # shared by both sides; --model is the default for a side without @MODEL
    ca.add_argument("--budget", required=True, type=sample_count, help="at most this many samples per case per side")
    ca.add_argument("--out", required=True, help=f"output directory: OUT/a, OUT/b and {ADAPTIVE_COMPARE}")
    ca.add_argument(
        "--alpha", type=open_probability, default=0.05, help="level of each direction's verdict (default 0.05)"
    )
    ca.add_argument(
        "--futility",
        type=float,
        default=0.01,
        help="stop with no credible difference when its conditional power falls below this (default 0.01)",
    )
    ca.add_argument(
        "--across-suites",
        action="store_true",
        help="allow A and B of different suite content (scaffold variants with the same case ids)",
    )
    ca.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    ca.set_defaults(func=cmd_compare_adaptive)

    pl = sub.add_parser("plan", help="power of the gate to catch drops, and samples per case for 80%% power")
    pl.add_argument("suite", help="suite YAML (its name finds the golden; its samples per case are the default)")
    pl.add_argument("--golden", default="golden", help="golden directory (or one golden .json file)")
    _add_baseline(pl, default=None)  # None: --label (0.2) may still name it, else main
    pl.add_argument("--label", type=name_component, help="0.2's name for --baseline (deprecated)")
    pl.add_argument("--samples", type=sample_count, help="samples per case of the runs to gate (default: the suite's)")
    pl.add_argument("--metric", default="score", help="gating metric to plan for (default: score)")
    pl.add_argument("--alpha", type=float, default=0.05, help="the gate's family-wise level (default 0.05)")
    pl.set_defaults(func=cmd_plan)

    mg = sub.add_parser("merge", help="merge the shards of one run (run --shard I/N) into one run directory")
    mg.add_argument("runs", nargs="+", help="the shard run directories, every shard 1..N once")
    mg.add_argument("--out", required=True, help="new run directory for the merged run")
    mg.add_argument("--suite", help="suite file to score with (default: the path the shards recorded)")
    mg.set_defaults(func=cmd_merge)

    fl = sub.add_parser("flaky", help="flaky cases and run-to-run overdispersion over runs of one checkpoint")
    fl.add_argument("runs", nargs="+", help="run directories of one checkpoint and suite, different seeds")
    fl.add_argument("--alpha", type=float, default=0.05, help="level of the overdispersion test (Holm over cases)")
    fl.add_argument("--json", action="store_true", help="print the report as JSON")
    fl.set_defaults(func=cmd_flaky)

    rp = sub.add_parser(
        "report", help="one self-contained HTML report of runs (several: comparison, flips, checkpoints)"
    )
    rp.add_argument("runs", nargs="+", help="run directories")
    rp.add_argument("-o", "--out", default=REPORT, help=f"output file (default {REPORT})")
    rp.add_argument("--order", action="append", help="checkpoint order of the labels (comma-separated)")
    rp.add_argument("--across-suites", action="store_true", help="allow runs of different suite content")
    rp.set_defaults(func=cmd_report)

    st = sub.add_parser(
        "stress", help="grow the event log to long prompts; score vs prompt length, context overflow apart"
    )
    st.add_argument("suite", help="suite YAML file")
    st.add_argument(
        "--model", default="local:smollm2", help="local:smollm2 | gguf:PATH | openai:URL#MODEL | tinker://..."
    )
    st.add_argument("--tokens", type=positive_int, default=40000, help="largest prompt length, in the model's tokens")
    st.add_argument(
        "--steps", action="append", type=int_list(), help="prompt lengths, e.g. 4000,8000,16000,32000,40000"
    )
    st.add_argument("--cases", action="append", help="case ids (default: the suite's stress cases)")
    st.add_argument("--depths", action="append", help="where the deciding fact goes: start,middle,end")
    st.add_argument("--samples", type=sample_count, help="samples per case and length (default: the suite's)")
    st.add_argument("--seed", type=int, help="run seed (default: fresh, recorded in the manifest)")
    st.add_argument("--out", help="run directory of the sweep")
    st.add_argument("--context-length", type=positive_int, help="override the model's context length")
    _add_max_error_rate(st)
    st.set_defaults(func=cmd_stress)

    ca = sub.add_parser("cache", help="the content-addressed sample cache: info | prune")
    ca.add_argument("action", choices=["info", "prune"], help="info: size and location; prune: delete old records")
    ca.add_argument(
        "--older-than-days", type=non_negative_float, help="prune only records cached before this many days ago"
    )
    ca.set_defaults(func=cmd_cache)

    ov = sub.add_parser("overlap", help="n-gram overlap of a suite's cases with a training set (held-out hygiene)")
    ov.add_argument("suite", help="suite YAML file")
    ov.add_argument("--train", action="append", required=True, help="training JSONL (repeatable)")
    ov.add_argument("--n", type=positive_int, default=13, help="n-gram length in words")
    ov.add_argument("--threshold", type=probability, default=0.1, help="flag cases whose overlap fraction reaches this")
    ov.add_argument("--json", action="store_true", help="print the report as JSON")
    ov.set_defaults(func=cmd_overlap)
    sc = sub.add_parser("schema", help="print the suite JSON Schema (for editors: see docs/suite-format.md)")
    sc.add_argument("--path", action="store_true", help="print the schema file's path instead of its content")
    sc.set_defaults(func=cmd_schema)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # every line printed below is guarded, whichever print site forgot to make its text inert
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = GuardedStream(streams[0]), GuardedStream(streams[1])
    try:
        return _main(args)
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        sys.stdout, sys.stderr = streams


def _main(args: argparse.Namespace) -> int:
    try:
        status: int = args.func(args)
    except LeaderEvalError as err:
        from leader_eval.secrets import scrub

        # a message may quote what a server, a suite or a golden holds: no secret, escape or CI command
        print(f"error: {inert(scrub(str(err)), multiline=True)}", file=sys.stderr)
        return err.exit_status
    except BrokenPipeError:
        return 0
    except OSError as err:  # the environment (disk full, permissions), not a bug: one line, no traceback
        where = f"{err.filename}: " if err.filename else ""
        print(f"error: {where}{err.strerror or err}", file=sys.stderr)
        return 2
    return status


if __name__ == "__main__":
    sys.exit(main())
