"""``leader-eval show RUN``: raw outputs (repr) with parsed calls and failed checks."""

from __future__ import annotations

import argparse

from leader_eval.report import format_show
from leader_eval.runs.evaluate import read_run


def run(args: argparse.Namespace) -> int:
    run = read_run(args.run)
    print(format_show(run, case_id=args.case, failed=args.failed, limit=args.limit))
    for name, lines in sorted(run.unreadable.items()):
        shown = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
        print(f"unreadable: {len(lines)} line(s) of {run.path / name} could not be read and were skipped ({shown})")
    return 0
