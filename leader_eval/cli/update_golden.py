"""``leader-eval update-golden RUN --baseline NAME``: make a trusted run the baseline (no gate)."""

from __future__ import annotations

import argparse
import sys

from leader_eval.cli.output import split_values
from leader_eval.decide.golden import check_golden_covers, golden_path, load_golden, parse_tolerances, update_golden
from leader_eval.runs.evaluate import read_run


def run(args: argparse.Namespace) -> int:
    """``update-golden RUN_DIR --baseline NAME``: make a trusted run the baseline (no gate)."""
    run = read_run(args.run)
    path = golden_path(args.golden, run.manifest["identity"]["suite"], args.baseline)
    check_golden_covers(path, load_golden(path), run)  # an unreadable or foreign golden: exit 2
    result = update_golden(
        run,
        args.golden,
        baseline=args.baseline,
        tolerances=parse_tolerances(split_values(args.tolerance)) or None,
        max_error_rate=args.max_error_rate,
    )
    if not result.written and not result.reason.startswith("golden already matches"):
        print(f"golden not written: {result.path}: {result.reason}", file=sys.stderr)
        return 1
    print(result.reason if result.written else f"{result.path}: {result.reason}")
    return 0
