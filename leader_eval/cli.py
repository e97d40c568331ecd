"""``leader-eval``: a thin shell over the library API. Bad input exits 2 with one line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from leader_eval.argtypes import (
    int_list,
    non_negative_float,
    non_negative_int,
    open_probability,
    positive_float,
    positive_int,
    probability,
    protocol_name,
)
from leader_eval.errors import LeaderEvalError


def _split(values: Sequence[str] | None) -> list[str]:
    return [v for item in values or [] for v in item.split(",") if v]


def _backend_options(args: argparse.Namespace) -> dict[str, object]:
    """Options only some samplers take: Tinker's tokenizer/base model/renderer, a server's API mode."""
    out: dict[str, object] = {}
    if args.model.startswith("tinker"):
        for name in ("tokenizer", "base_model", "renderer"):
            if getattr(args, name, None):
                out[name] = getattr(args, name)
    if args.model.startswith("openai:"):
        # the backend's own in-flight limit would otherwise cap --concurrency at its default
        out["max_concurrency"] = args.concurrency
        if args.api_mode:
            out["mode"] = args.api_mode
        if args.api_key_env:
            out["api_key_env"] = args.api_key_env
        if args.template_gguf:
            out["gguf_path"] = args.template_gguf
        if args.chat_template:
            out["chat_template"] = Path(args.chat_template).read_text(encoding="utf-8")
        if args.max_response_bytes is not None:
            out["max_response_bytes"] = args.max_response_bytes
    if args.request_timeout is not None and args.model.startswith(("openai:", "tinker")):
        out["timeout_s"] = args.request_timeout
    if args.cache_id:
        out["cache_id"] = args.cache_id
    return out


def cmd_run(args: argparse.Namespace) -> int:
    from leader_eval.error_rule import error_verdict
    from leader_eval.evaluate import run
    from leader_eval.report import format_summary
    from leader_eval.runner import RunOptions

    options = RunOptions(
        model=args.model,
        samples=args.samples,
        seed=args.seed,
        tags=_split(args.tags),
        case_ids=_split(args.case),
        limit=args.limit,
        out=Path(args.out) if args.out else None,
        protocol=args.protocol,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        concurrency=args.concurrency,
        context_length=args.context_length,
        progress=not args.quiet,
        label=args.label,
        max_samples=args.max_samples,
        cache=not args.no_cache,
        backend_options=_backend_options(args),
    )
    try:
        result = run(args.suite, options)
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


def _print_report_path(run_dir: Path) -> None:
    """Write the run's report.html and print its path; a report failure never fails the recorded run."""
    from leader_eval.report import write_run_report

    try:
        print(f"report: {write_run_report(run_dir)}")
    except (OSError, ValueError, LeaderEvalError) as err:
        print(f"warning: report.html not written: {err}", file=sys.stderr)


def cmd_lint(args: argparse.Namespace) -> int:
    from leader_eval.backends import resolve_backend
    from leader_eval.render import render_case
    from leader_eval.report import table
    from leader_eval.suite import load_suite

    backend = resolve_backend(args.model) if not args.no_tokens else None
    status = 0
    for path in args.suite:
        try:
            suite = load_suite(path)
            rows = []
            for case in suite.cases:
                if backend is None:
                    from leader_eval.render import render_messages

                    render_messages(suite, case)
                    rows.append([case.id, case.line, "-"])
                    continue
                rc = render_case(suite, case, backend)
                n = rc.prompt.n_tokens
                ctx = backend.context_length
                note = " (exceeds context)" if ctx and n and n > ctx else ""
                rows.append([case.id, case.line, f"{n}{note}"])
        except LeaderEvalError as err:
            print(f"error: {err}", file=sys.stderr)
            status = 2
            continue
        print(f"{path}: ok, {len(suite.cases)} cases, {len(suite.tools)} tools, hash {suite.content_hash}")
        if args.verbose or backend is not None:
            print(table(["case", "line", "prompt tokens"], [[str(c) for c in r] for r in rows]))
    return status


def cmd_show(args: argparse.Namespace) -> int:
    from leader_eval.evaluate import read_run
    from leader_eval.report import format_show

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
    from leader_eval.golden import format_gate_table, gate_markdown, gate_run_dir

    result = gate_run_dir(
        args.run,
        args.golden,
        label=args.label,
        update=args.update_golden,
        strict=args.strict,
        tolerances=_split(args.tolerance),
        max_error_rate=args.max_error_rate,
    )
    print(format_gate_table(result))
    from leader_eval.report import report_markdown_link

    _write_markdown(gate_markdown(result) + report_markdown_link(args.run), args.markdown)
    return result.exit_status


def cmd_compare(args: argparse.Namespace) -> int:
    from leader_eval.compare import compare_markdown, compare_runs, format_compare

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


def cmd_report(args: argparse.Namespace) -> int:
    from leader_eval.report import write_report

    out = write_report(args.runs, args.out, order=_split(args.order) or None, across_suites=args.across_suites)
    print(f"report: {out}")
    return 0


def cmd_stress(args: argparse.Namespace) -> int:
    from leader_eval.error_rule import error_verdict
    from leader_eval.stress import format_stress_table, stress

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

    from leader_eval.cache import cache_info, cache_prune

    if args.action == "info":
        print(json.dumps(cache_info(), indent=2))
    else:
        print(json.dumps(cache_prune(older_than_days=args.older_than_days), indent=2))
    return 0


def cmd_overlap(args: argparse.Namespace) -> int:
    import json

    from leader_eval.overlap import format_overlap_report, overlap_report
    from leader_eval.suite import load_suite

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


class OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line (``leader-eval run: error: argument --limit: ...``), exit status 2.

    Subcommand parsers inherit the class (``add_subparsers`` builds them with ``type(self)``).
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="leader-eval", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="sample a suite on a model, score it and record the run")
    r.add_argument("suite")
    r.add_argument(
        "--model",
        default="local:smollm2",
        help="local:smollm2 | gguf:PATH | replay:RUN_DIR | openai:URL#MODEL | tinker://...",
    )
    r.add_argument("--samples", type=positive_int, help="samples per case (default: the suite's)")
    r.add_argument("--seed", type=int, help="run seed (default: fresh, recorded in the manifest)")
    r.add_argument("--tags", action="append", help="only cases with one of these tags (comma-separated)")
    r.add_argument("--case", action="append", help="only these case ids (comma-separated)")
    r.add_argument("--limit", type=positive_int, help="only the first N selected cases")
    r.add_argument("--out", help="run directory (re-running into it resumes)")
    r.add_argument("--protocol", type=protocol_name, help="tool-call protocol (beats the suite's and the backend's)")
    r.add_argument("--temperature", type=non_negative_float)
    r.add_argument("--max-tokens", type=positive_int)
    r.add_argument("--concurrency", type=positive_int, default=64)
    r.add_argument("--context-length", type=positive_int, help="override the model's context length")
    r.add_argument("--label", help="label for golden files (default: derived from --model)")
    r.add_argument("--tokenizer", help="tinker: local path of the base model's Hugging Face tokenizer (offline)")
    r.add_argument("--base-model", help="tinker: base model name, when it cannot be resolved from the checkpoint")
    r.add_argument("--renderer", help="tinker: a tinker-cookbook renderer name (qwen3, kimi_k2, ...)")
    r.add_argument("--api-mode", choices=["completions", "chat"], help="openai: completions (raw text) or chat")
    r.add_argument(
        "--template-gguf", help="openai completions mode: read the chat template and tokenizer from this GGUF"
    )
    r.add_argument("--chat-template", help="openai completions mode: a jinja2 chat template file")
    r.add_argument("--api-key-env", help="openai: environment variable holding the API key (default OPENAI_API_KEY)")
    r.add_argument("--max-samples", type=non_negative_int, help="stop cleanly after this many new samples (cost cap)")
    r.add_argument("--no-cache", action="store_true", help="do not read or write the sample cache")
    _add_max_error_rate(r)
    r.add_argument(
        "--request-timeout",
        type=positive_float,
        help="openai/tinker: seconds one request may take, body included (openai default 120; "
        "a sample with its retries gets 3x this)",
    )
    r.add_argument(
        "--max-response-bytes",
        type=positive_int,
        help="openai: cap on a response body after decompression (default 8388608); larger is a sample error",
    )
    r.add_argument(
        "--cache-id",
        help="name the weights behind a remote model for the sample cache (remote servers are never "
        "served from the cache across runs without it)",
    )
    r.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    r.set_defaults(func=cmd_run)

    li = sub.add_parser("lint", help="validate suites, render every case, count prompt tokens")
    li.add_argument("suite", nargs="+")
    li.add_argument("--model", default="local:smollm2", help="model whose chat template and tokenizer count tokens")
    li.add_argument("--no-tokens", action="store_true", help="skip the chat template and token counts")
    li.add_argument("-v", "--verbose", action="store_true")
    li.set_defaults(func=cmd_lint)

    sh = sub.add_parser("show", help="print raw outputs (repr) with parsed calls and failed checks")
    sh.add_argument("run")
    sh.add_argument("--case")
    sh.add_argument("--failed", action="store_true", help="only samples that failed")
    sh.add_argument("--limit", type=positive_int)
    sh.set_defaults(func=cmd_show)

    g = sub.add_parser("gate", help="gate a run directory against its golden baseline (exit 1 on credible regression)")
    g.add_argument("run")
    g.add_argument("--golden", default="golden", help="golden directory")
    g.add_argument("--label", help="golden label (default: derived from the run's model)")
    g.add_argument("--update-golden", action="store_true", help="rewrite the golden from this run if it is complete")
    g.add_argument("--strict", action="store_true", help="fail when there is no golden yet")
    g.add_argument("--tolerance", action="append", help="METRIC=VALUE, overrides the golden's (repeatable)")
    g.add_argument("--markdown", help="append a Markdown summary to this file")
    _add_max_error_rate(g)
    g.set_defaults(func=cmd_gate)

    c = sub.add_parser(
        "compare", help="compare runs: paired differences, flips, verdict (exit 1 on credible regression)"
    )
    c.add_argument("runs", nargs="+", help="run directories; runs of one label+suite+sampling are pooled")
    c.add_argument("--alpha", type=open_probability, default=0.05)
    c.add_argument(
        "--across-suites",
        action="store_true",
        help="allow runs of different suite content (scaffold variants with the same case ids)",
    )
    c.add_argument("--markdown", help="append a Markdown summary to this file")
    c.add_argument("--report", help="also write the comparison as one self-contained HTML file")
    c.add_argument("--order", action="append", help="checkpoint order of the labels (comma-separated)")
    c.set_defaults(func=cmd_compare)

    rp = sub.add_parser(
        "report", help="one self-contained HTML report of runs (several: comparison, flips, checkpoints)"
    )
    rp.add_argument("runs", nargs="+", help="run directories")
    rp.add_argument("-o", "--out", default="report.html", help="output file (default report.html)")
    rp.add_argument("--order", action="append", help="checkpoint order of the labels (comma-separated)")
    rp.add_argument("--across-suites", action="store_true", help="allow runs of different suite content")
    rp.set_defaults(func=cmd_report)

    st = sub.add_parser(
        "stress", help="grow the event log to long prompts; score vs prompt length, context overflow apart"
    )
    st.add_argument("suite")
    st.add_argument("--model", default="local:smollm2")
    st.add_argument("--tokens", type=positive_int, default=40000, help="largest prompt length, in the model's tokens")
    st.add_argument(
        "--steps", action="append", type=int_list(), help="prompt lengths, e.g. 4000,8000,16000,32000,40000"
    )
    st.add_argument("--cases", action="append", help="case ids (default: the suite's stress cases)")
    st.add_argument("--depths", action="append", help="where the deciding fact goes: start,middle,end")
    st.add_argument("--samples", type=positive_int)
    st.add_argument("--seed", type=int)
    st.add_argument("--out")
    st.add_argument("--context-length", type=positive_int, help="override the model's context length")
    _add_max_error_rate(st)
    st.set_defaults(func=cmd_stress)

    ca = sub.add_parser("cache", help="the content-addressed sample cache: info | prune")
    ca.add_argument("action", choices=["info", "prune"])
    ca.add_argument(
        "--older-than-days", type=non_negative_float, help="prune only records cached before this many days ago"
    )
    ca.set_defaults(func=cmd_cache)

    ov = sub.add_parser("overlap", help="n-gram overlap of a suite's cases with a training set (held-out hygiene)")
    ov.add_argument("suite")
    ov.add_argument("--train", action="append", required=True, help="training JSONL (repeatable)")
    ov.add_argument("--n", type=positive_int, default=13, help="n-gram length in words")
    ov.add_argument("--threshold", type=probability, default=0.1, help="flag cases whose overlap fraction reaches this")
    ov.add_argument("--json", action="store_true")
    ov.set_defaults(func=cmd_overlap)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.func(args)
    except LeaderEvalError as err:
        print(f"error: {err}", file=sys.stderr)
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
