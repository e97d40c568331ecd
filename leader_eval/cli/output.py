"""What several subcommands print or write: comma lists, the run's report path, the Markdown step summary."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from leader_eval.errors import LeaderEvalError
from leader_eval.report import write_run_report
from leader_eval.runs.evaluate import Run
from leader_eval.store.run_store import REPORT


def split_values(values: Sequence[str] | None) -> list[str]:
    return [v for item in values or [] for v in item.split(",") if v]


def print_report_path(run: Run | Path) -> None:
    """Write the run's report.html and print its path; a report failure never fails the recorded run."""
    try:
        print(f"report: {write_run_report(run)}")
    except (OSError, ValueError, LeaderEvalError) as err:
        print(f"warning: {REPORT} not written: {err}", file=sys.stderr)


def write_markdown(text: str, target: str | None) -> None:
    """Append to --markdown FILE, and to $GITHUB_STEP_SUMMARY when a CI sets it."""
    for dest in (target, os.environ.get("GITHUB_STEP_SUMMARY")):
        if dest:
            with open(dest, "a", encoding="utf-8") as f:
                f.write(text.rstrip() + "\n\n")
