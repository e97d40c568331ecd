"""A failed check as one line, as ``show``, an episode's transcript and a pytest failure print it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leader_eval.inert import inert

__all__ = ["failed_check_line"]


def failed_check_line(prefix: str, c: Mapping[str, Any]) -> str:
    """``x check: reason [hard] detail``; a detail quotes the model (an argument key, a tool name)."""
    hard = " [hard]" if c.get("hard") else ""
    return (
        f"{prefix}{inert(c['check'])}: {inert(c['reason'] or 'failed')}{hard} {inert(c.get('detail') or '')}".rstrip()
    )
