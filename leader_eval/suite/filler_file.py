"""A suite's own stress filler: ``stress: {filler: FILE}`` names a YAML list of history items.

The items are whatever the suite's history variable (a case's ``stress.events_var``) holds and
its scaffold renders: mappings in the suite's own shape (``{when, customer, message}``) or plain
strings. ``leader-eval stress`` draws them, seeded and without replacement, in front of a case's
own history. The file is a suite file: resolved inside the suite root (outside it, one-line
error), size-bounded, and part of the suite's content hash (read through ``files.read_text``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from leader_eval.errors import SuiteError
from leader_eval.suite.files import read_text, resolve_in_root
from leader_eval.suite.yaml_source import JsonPath, line_of, load_yaml

__all__ = ["load_filler"]


def load_filler(path: Path, data: dict[str, Any], lines: dict[JsonPath, int], root: Path) -> tuple[Any, ...] | None:
    """The items of the suite's ``stress.filler`` file (None when it names none)."""
    spec = data.get("stress") or {}
    ref = spec.get("filler")
    if ref is None:
        return None
    line = line_of(lines, ("stress", "filler"))
    target = resolve_in_root(path, ref, line, root=root, what="stress filler")
    if not target.is_file():
        raise SuiteError(path, line, f"stress filler {ref!r}: no such file ({target})")
    text = read_text(target, what="stress filler", named_in=str(path), line=line)
    items, item_lines = load_yaml(target, text)
    if not isinstance(items, list) or not items:
        raise SuiteError(target, 1, "a stress filler file must be a non-empty YAML list of history items")
    for i, item in enumerate(items):
        if not (isinstance(item, str) and item.strip()) and not (isinstance(item, dict) and item):
            raise SuiteError(
                target, line_of(item_lines, (i,)), f"filler item {i + 1}: a mapping or a non-empty string, not {item!r}"
            )
    return tuple(items)
