"""``leader-eval compare-adaptive``: rounds on both sides, the paired compare after each, stop when the
verdict is settled."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from leader_eval.decide.adaptive import AdaptiveDesign
from leader_eval.decide.adaptive_compare import compare_adaptive, split_config
from leader_eval.errors import LeaderEvalError
from leader_eval.report.compare import format_compare
from leader_eval.runs.model_spec import one_model
from leader_eval.runs.options import run_options
from leader_eval.runs.trusted import assemble


def run(args: argparse.Namespace) -> int:
    """``compare-adaptive --a SUITE[@MODEL] --b SUITE[@MODEL] --budget B``: rounds on both sides
    (leader_eval.decide.adaptive_compare), the paired compare after each, stop when the verdict is settled."""
    if getattr(args, "samples", None) is not None:
        raise LeaderEvalError("--samples conflicts with compare-adaptive: the rounds set the samples, up to --budget")
    design = AdaptiveDesign(budget=args.budget, alpha=args.alpha, futility=args.futility)
    base = run_options(
        one_model(vars(args), command="compare-adaptive"),
        out=None,
        progress=not args.quiet,
        trusted=getattr(args, "trusted", None) or assemble(),
    )
    sides = []
    for text in (args.a, args.b):
        suite, model = split_config(text)
        sides.append((suite, replace(base, model=model) if model else base))
    try:
        res = compare_adaptive(sides[0], sides[1], design, Path(args.out), across_suites=args.across_suites)
    except KeyboardInterrupt:
        print("\ninterrupted: every finished sample is kept; re-run the same command to resume", file=sys.stderr)
        return 130
    print(format_compare(res.comparison))
    for look in res.record["looks"]:
        print(
            f"look {look['round']}: {look['samples_per_case']} samples per case, level {look['level']:.3g}: "
            f"{look['decision']}"
        )
    stop = res.record["stopped"]
    print(
        f"adaptive compare: stopped at round {stop['round']} with {stop['samples_per_case']} of {design.budget} "
        f"samples per case on each side ({stop['why']})"
    )
    print(f"record: {res.path}")
    return res.comparison.exit_status
