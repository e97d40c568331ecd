"""``leader-eval stress SUITE``: the long-context sweep."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from leader_eval.cli.output import print_report_path, split_values
from leader_eval.runs.model_spec import one_model
from leader_eval.runs.options import run_options
from leader_eval.runs.trusted import assemble
from leader_eval.scoring.error_rule import error_verdict
from leader_eval.studies.stress import format_stress_table, stress
from leader_eval.studies.stress_gate import format_requirements


def run(args: argparse.Namespace) -> int:
    # the sampling and backend options are run's table (leader_eval.runs.options)
    options = run_options(
        one_model(vars(args), command="stress"),
        out=Path(args.out) if args.out else None,
        trusted=getattr(args, "trusted", None) or assemble(),
    )
    result = stress(
        args.suite,
        options=options,
        tokens=args.tokens,
        steps=[n for group in args.steps or [] for n in group] or None,
        case_ids=split_values(args.cases) or None,
        depths=split_values(args.depths) or None,
        strict=args.strict,
    )
    print(format_stress_table(result))
    requirements = format_requirements(result.requirements)
    if requirements:
        print(requirements)
        if args.cases or args.depths:
            # a pass here speaks for what was swept, not for the suite's other cases or depths
            cases = sorted({v.case_id for v in result.variants})
            depths = sorted({v.depth for v in result.variants if v.depth})
            print(
                f"judged on this sweep only: case(s) {', '.join(cases)}"
                + (f"; depth(s) {', '.join(depths)}" if depths else "")
                + " (--cases/--depths: the suite's other stress cases and depths were not swept)"
            )
    if result.out:
        print_report_path(result.out)
    # a context overflow is what a sweep measures; any other sampler error fails it
    verdict = error_verdict(result.run.summary, args.max_error_rate, overflow_is_error=False)
    if verdict.failed:
        print(verdict.message(), file=sys.stderr)
        return 1
    return 1 if any(r.failed for r in result.requirements) else 0
