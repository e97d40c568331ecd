"""``leader-eval compare RUN RUN...``: paired comparison of runs (and the checkpoint recommendation)."""

from __future__ import annotations

import argparse

from leader_eval.cli.output import split_values, write_markdown
from leader_eval.decide.compare import compare_runs
from leader_eval.report import artifact_markdown_line, write_report
from leader_eval.report.compare import compare_markdown, format_compare


def run(args: argparse.Namespace) -> int:
    comparison = compare_runs(args.runs, alpha=args.alpha, across_suites=args.across_suites)
    order = split_values(args.order) or None
    print(format_compare(comparison, order=order))
    markdown = compare_markdown(comparison)
    if args.report:
        path = write_report(args.runs, args.report, comparison=comparison, order=order)
        print(f"report: {path}")
        markdown += "\n" + artifact_markdown_line(path)  # its place in the CI artifact, not on the runner
    write_markdown(markdown, args.markdown)
    return comparison.exit_status
