"""``leader-eval judge-check SUITE LABELLED``: a suite's judges against human labels (docs/judges.md)."""

from __future__ import annotations

import argparse
import json

from leader_eval.runs.judge_check import format_report, judge_check
from leader_eval.runs.model_spec import roles_from_pairs
from leader_eval.runs.trusted import Trusted, assemble


def run(args: argparse.Namespace) -> int:
    # ROLE=SPEC [--flag value ...], parsed with run's option table like --model-role; the
    # configuration file's model roles (args.trusted, cli/settings.py) rank below the command line
    cli = Trusted(roles_from_pairs(args.judge, source="--judge"))
    files = getattr(args, "trusted", None)
    report = judge_check(
        args.suite,
        args.labelled,
        assemble(files=files, cli=cli),
        criteria=args.criterion,
        k=args.k,
        out_dir=args.calibration_dir,
        progress=True,
    )
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0
