"""``leader-eval overlap SUITE --train FILE...``: n-gram overlap with a training set."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from leader_eval.studies.overlap import format_overlap_report, overlap_report
from leader_eval.suite.load import load_suite


def run(args: argparse.Namespace) -> int:
    suite = load_suite(args.suite)
    report = overlap_report(suite, [Path(p) for p in args.train], n=args.n, threshold=args.threshold)
    print(json.dumps(report.to_dict(), indent=2) if args.json else format_overlap_report(report))
    return 0
