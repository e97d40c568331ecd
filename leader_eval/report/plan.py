"""``leader-eval plan``'s power table (the plan itself: ``decide.plan``)."""

from __future__ import annotations

import math

from leader_eval.decide.plan import MAX_SAMPLES, PowerPlan
from leader_eval.inert import inert
from leader_eval.report.terminal import table

__all__ = ["format_plan"]


def format_plan(plan: PowerPlan, *, source: str = "") -> str:
    """The power table for the terminal (plain text, one row per drop)."""
    left = f"; Tarone leaves out {', '.join(plan.left_out)} (their tests cannot reach it)" if plan.left_out else ""
    test = "exact stratified count test" if plan.test == "exact_count" else "paired t-test over cases"
    lines = [
        f"power plan for {plan.metric}{' from ' + source if source else ''}: golden {plan.golden_value:.3f} over "
        f"{plan.n_cases} cases, {plan.golden_samples} samples per case; tolerance {plan.tolerance:g}; {test}",
        f"gate level: one-sided alpha {plan.alpha:g} / {len(plan.family)} = {plan.level:.4g} "
        f"(Holm's first step over {', '.join(plan.family)}{left})",
        table(
            ["drop", f"power at {plan.run_samples} samples/case", "samples/case for 80% power"],
            [
                [f"{d:.2f}", f"{pw:.2f}", str(k) if k is not None else f"> {MAX_SAMPLES}"]
                for d, (pw, k) in sorted(plan.rows.items())
            ],
        ),
        f"(seeded simulation, {plan.n_sim} draws per cell; samples/case for 80% assumes the golden is re-recorded "
        "with as many samples as the run; power is a floor: a metric tested after another was rejected gets more)",
    ]
    lines.extend(f"note: {n}" for n in plan.notes)
    if not math.isfinite(plan.golden_value):
        lines.append("note: the golden value is not a number")
    return inert("\n".join(lines), multiline=True)  # a fragment from a suite, run or golden: one line, no escapes
