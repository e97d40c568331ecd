"""``leader-eval gate RUN``: gate a run directory against its golden baseline."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from leader_eval.cli.output import split_values, write_markdown
from leader_eval.decide.gate import gate_run_dir
from leader_eval.errors import LeaderEvalError
from leader_eval.inert import inert
from leader_eval.report import report_markdown_link
from leader_eval.report.gate import format_gate_table, gate_markdown
from leader_eval.runs.history import record_gate


def run(args: argparse.Namespace) -> int:
    if args.label is not None:
        # 0.2's `gate --label X` read golden/<suite>/X.json; silently gating against main instead
        # would compare with a file the user did not name
        raise LeaderEvalError(
            f"gate --label no longer chooses the golden (0.3): gate against a baseline with --baseline {args.label}"
        )
    result = gate_run_dir(
        args.run,
        args.golden,
        baseline=args.baseline,
        update=args.update_golden,
        strict=args.strict,
        allow_missing=args.allow_missing_golden,
        tolerances=split_values(args.tolerance),
        max_error_rate=args.max_error_rate,
    )
    print(format_gate_table(result))
    try:  # the history page reads it; never the gate's outcome
        record_gate(Path(args.run), result.baseline, result.record())
    except (OSError, LeaderEvalError) as err:
        print(inert(f"warning: the verdict was not recorded in the run: {err}"), file=sys.stderr)

    write_markdown(gate_markdown(result) + report_markdown_link(args.run), args.markdown)
    return result.exit_status
