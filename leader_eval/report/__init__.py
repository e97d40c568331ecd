"""Reports of recorded runs: terminal tables (``terminal``) and one self-contained HTML file (``html``).

The terminal functions are imported eagerly (``compare`` and ``golden`` use ``table``); the HTML
side (and matplotlib behind its plots) loads only when one of its names is used.
"""

from __future__ import annotations

from typing import Any

from leader_eval.report.terminal import format_show, format_summary, highlight, metrics_table, table

_HTML_NAMES = ("render_report", "write_report", "write_run_report", "report_markdown_link", "REPORT_NAME")
_CHECKPOINT_NAMES = ("CheckpointRecommendation", "recommend_checkpoint", "checkpoint_order", "recommendation_lines")


def __getattr__(name: str) -> Any:
    if name in _HTML_NAMES:
        from leader_eval.report import html

        return getattr(html, name)
    if name in _CHECKPOINT_NAMES:
        from leader_eval.report import checkpoints

        return getattr(checkpoints, name)
    raise AttributeError(f"module 'leader_eval.report' has no attribute {name!r}")


__all__ = [
    "REPORT_NAME",
    "CheckpointRecommendation",
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
