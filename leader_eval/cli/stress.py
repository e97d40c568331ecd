"""``leader-eval stress SUITE``: the long-context sweep."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from leader_eval.cli.output import print_report_path, split_values
from leader_eval.scoring.error_rule import error_verdict
from leader_eval.studies.stress import format_stress_table, stress


def run(args: argparse.Namespace) -> int:
    result = stress(
        args.suite,
        model=args.model,
        tokens=args.tokens,
        steps=[n for group in args.steps or [] for n in group] or None,
        case_ids=split_values(args.cases) or None,
        samples=args.samples,
        seed=args.seed,
        out=Path(args.out) if args.out else None,
        depths=split_values(args.depths) or None,
        context_length=args.context_length,
    )
    print(format_stress_table(result))
    if result.out:
        print_report_path(result.out)
    # a context overflow is what a sweep measures; any other sampler error fails it
    verdict = error_verdict(result.run.summary, args.max_error_rate, overflow_is_error=False)
    if verdict.failed:
        print(verdict.message(), file=sys.stderr)
        return 1
    return 0
