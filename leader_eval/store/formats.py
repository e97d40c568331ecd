"""Versions of the files leader-eval writes, and the rule for reading older or newer ones.

A run directory's ``manifest.json`` and a golden file carry ``format_version`` (the layout of the
file) and ``scorer_version`` (the checks that produced its numbers; ``SCORER_VERSION``).
Files written before 0.2.0 carry no ``format_version`` (a golden had ``format: 1``) and read as
version 1: their layout is today's. A file of a version this leader-eval does not know is refused
with one line saying what to do (upgrade leader-eval for a newer file; re-run or re-create it for
an unknown older one), never read half-way. A scorer version that differs is not a format
problem: the gate reads the golden and warns (docs/gating.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from leader_eval.errors import LeaderEvalError

#: the layout of manifest.json (and the files beside it) this leader-eval writes
RUN_FORMAT_VERSION = 1
#: the checks that produced a run's numbers, as its manifest and a golden made from it record them
SCORER_VERSION = "1"
#: the layout of golden/<suite>/<baseline>.json this leader-eval writes: 2 adds ``baseline`` and
#: ``sampling`` (the sampling identity of the run it was made from); 0.2.0's version 1 still reads,
#: with its sampling unknown (docs/design-0.3.md section 1)
GOLDEN_FORMAT_VERSION = 2

_WHAT = {"run": ("run directory", "re-run the suite"), "golden": ("golden file", "re-create it with --update-golden")}


def format_version(data: Mapping[str, Any], kind: str) -> Any:
    """The file's declared layout version (1 for files written before versions were recorded)."""
    if "format_version" in data:
        return data["format_version"]
    if kind == "golden" and "format" in data:  # 0.1.0 wrote the golden's version as ``format``
        return data["format"]
    return 1


def check_format(path: str | Path, data: Mapping[str, Any], kind: str) -> None:
    """Refuse a file whose layout this leader-eval cannot read (``LeaderEvalError``, one line)."""
    current = RUN_FORMAT_VERSION if kind == "run" else GOLDEN_FORMAT_VERSION
    version = format_version(data, kind)
    what, redo = _WHAT[kind]
    if isinstance(version, bool) or not isinstance(version, int):
        raise LeaderEvalError(f"{path}:1: {what} format_version {version!r} is not an integer; {redo}")
    if version > current:
        raise LeaderEvalError(
            f"{path}:1: {what} format {version} is newer than this leader-eval reads ({current}): "
            "upgrade leader-eval (pip install -U leader-eval)"
        )
    if version < 1:
        raise LeaderEvalError(f"{path}:1: {what} format {version} is no longer read (current {current}); {redo}")
