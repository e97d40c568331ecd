"""Reports of recorded runs and of the decisions over them: terminal tables (``terminal``, and
``gate``, ``compare``, ``checkpoints``, ``plan``, ``flaky`` for what ``decide`` returns) and one
self-contained HTML file (``html``). ``decide`` returns data; only this package formats it.

The run's terminal functions are imported eagerly; the HTML side (and matplotlib behind its plots)
loads only when one of its names is used, as do the checkpoint names (the recommendation itself
lives in ``decide.checkpoints``).
"""

from __future__ import annotations

from typing import Any

from leader_eval.report.terminal import format_show, format_summary, highlight, metrics_table, table

_HTML_NAMES = (
    "render_report",
    "write_report",
    "write_run_report",
    "report_markdown_link",
    "artifact_markdown_line",
    "REPORT_NAME",
)
_CHECKPOINT_NAMES = ("CheckpointRecommendation", "recommend_checkpoint", "checkpoint_order")


def __getattr__(name: str) -> Any:
    if name in _HTML_NAMES:
        from leader_eval.report import html

        return getattr(html, name)
    if name in _CHECKPOINT_NAMES:
        from leader_eval.decide import checkpoints

        return getattr(checkpoints, name)
    if name == "recommendation_lines":
        from leader_eval.report.checkpoints import recommendation_lines

        return recommendation_lines
    raise AttributeError(f"module 'leader_eval.report' has no attribute {name!r}")


__all__ = [
    "REPORT_NAME",
    "CheckpointRecommendation",
    "artifact_markdown_line",
    "checkpoint_order",
    "format_show",
    "format_summary",
    "highlight",
    "metrics_table",
    "recommend_checkpoint",
    "recommendation_lines",
    "render_report",
    "report_markdown_link",
    "table",
    "write_report",
    "write_run_report",
]
