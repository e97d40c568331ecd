"""``leader-eval judge-check SUITE LABELLED``: a suite's judges against human labels (docs/judges.md)."""

from __future__ import annotations

import argparse
import json

from leader_eval.runs.judge_check import format_report, judge_check
from leader_eval.runs.trusted import NamedModel, Trusted, assemble, split_pair


def run(args: argparse.Namespace) -> int:
    cli = Trusted()
    for text in args.judge:
        name, spec = split_pair(text, where="--judge")
        cli.models[name] = NamedModel(name, {"model": spec}, "--judge")
    report = judge_check(
        args.suite,
        args.labelled,
        assemble(cli=cli),
        criteria=args.criterion,
        k=args.k,
        out_dir=args.calibration_dir,
        progress=True,
    )
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0
