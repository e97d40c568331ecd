"""``leader-eval report RUN...``: the HTML report of runs."""

from __future__ import annotations

import argparse

from leader_eval.cli.output import split_values
from leader_eval.report import write_report


def run(args: argparse.Namespace) -> int:
    out = write_report(args.runs, args.out, order=split_values(args.order) or None, across_suites=args.across_suites)
    print(f"report: {out}")
    return 0
