"""``compare``'s checkpoint lines: the recommendation's table for more than two configurations
(the recommendation itself, the order of checkpoints and the decision: ``decide.checkpoints``)."""

from __future__ import annotations

from collections.abc import Sequence

from leader_eval.decide.checkpoints import recommend_checkpoint
from leader_eval.decide.compare import Comparison
from leader_eval.report.terminal import table

__all__ = ["recommendation_lines"]


def recommendation_lines(comparison: Comparison, order: Sequence[str] | None = None) -> list[str]:
    """``compare``'s terminal lines for more than two configurations (none for two)."""
    if len(comparison.groups) < 3 and not order:
        return []
    rec = recommend_checkpoint(comparison, order, fallback=True)
    if rec is None:
        return []
    rows = [
        [
            r.name,
            f"{r.value:.3f} [{r.low:.3f}, {r.high:.3f}]",
            "best" if r.p_worse is None else f"{r.diff:+.3f} [{r.diff_low:+.3f}, {r.diff_high:+.3f}]",
            "-" if r.p_worse is None else f"{r.p_worse:.3f} (Holm level {r.level:.4f})",
            ("credibly worse: " + "; ".join(r.worse_in))
            if r.credibly_worse
            else ("RECOMMENDED" if r.name == rec.recommended else "candidate"),
        ]
        for r in rec.rows
    ]
    last = (
        f"recommended checkpoint: {rec.recommended} (earliest not credibly worse than the best, {rec.best}, "
        f"in any of {', '.join(rec.metrics)})"
        if rec.recommended is not None
        else "no checkpoint recommended: every one is credibly worse than another in a gated metric"
    )
    return [
        "",
        f"checkpoints (order from {rec.order_source}), {rec.metric} vs the best over {rec.n_cases} cases, "
        f"one-sided paired test on each gated metric, Holm-Tarone over checkpoints and metrics at alpha {rec.alpha:g}:",
        table(["checkpoint", f"{rec.metric} [95% CI]", "minus best [95% CI]", "p (worse than best)", ""], rows),
        last,
    ]
