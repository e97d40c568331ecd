"""``leader-eval flaky RUN...``: flaky cases and run-to-run overdispersion of one checkpoint."""

from __future__ import annotations

import argparse
import json

from leader_eval.decide.flaky import find_flaky
from leader_eval.report.flaky import format_flaky


def run(args: argparse.Namespace) -> int:
    report = find_flaky(args.runs, alpha=args.alpha)
    print(json.dumps(report.to_dict(), indent=2) if args.json else format_flaky(report))
    return 0
