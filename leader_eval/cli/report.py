"""``leader-eval report RUN...``: the HTML report of runs; ``--history DIR...``: the history page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from leader_eval.cli.output import split_values
from leader_eval.errors import LeaderEvalError
from leader_eval.inert import inert
from leader_eval.report import write_report
from leader_eval.store.run_store import MANIFEST, REPORT

HISTORY_PAGE = "history.html"


def run(args: argparse.Namespace) -> int:
    if args.history:
        return _history(args)
    out = write_report(
        args.runs, args.out or REPORT, order=split_values(args.order) or None, across_suites=args.across_suites
    )
    print(f"report: {out}")
    return 0


def _history(args: argparse.Namespace) -> int:
    from leader_eval.report.history import write_history

    if args.order or args.across_suites:
        raise LeaderEvalError("--history takes no --order or --across-suites (the page groups runs by suite itself)")
    first = Path(args.runs[0])
    default = first / HISTORY_PAGE if first.is_dir() and not (first / MANIFEST).exists() else Path(HISTORY_PAGE)
    path, history = write_history(args.runs, args.out or default)
    for note in history.notes:
        print(inert(f"note: {note}"), file=sys.stderr)
    print(f"history: {path} ({len(history.entries)} runs)")
    return 0
