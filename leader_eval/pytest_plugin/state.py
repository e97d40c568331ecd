"""The plugin's session state, one object in ``config.stash`` (syrupy's pattern)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pytest

from leader_eval.pytest_plugin.config import PluginOptions

#: the ``user_properties`` key of a case record; its value is a JSON string (JUnit shows it as is)
RECORD_KEY = "leader_eval_case"

#: what one gate decides: (suite name, model label); the label is "" in a one-model session and
#: an entry's run label in a model matrix (items ``CASE[label]``, gates ``leader-eval-gate[label]``)
GateKey = tuple[str, str]


@dataclass
class PluginState:
    options: PluginOptions
    #: (suite, label) -> case id -> case record (from whichever worker scored it)
    records: dict[GateKey, dict[str, dict[str, Any]]] = field(default_factory=lambda: defaultdict(dict))
    #: (suite, label) -> {"path", "all_cases", "run_dir", ...}
    suite_meta: dict[GateKey, dict[str, Any]] = field(default_factory=dict)
    #: (suite, label) -> the case ids this session selected (after -k, -m, --deselect, --le-case)
    collected: dict[GateKey, set[str]] = field(default_factory=lambda: defaultdict(set))
    gate_lines: list[str] = field(default_factory=list)
    #: a suite file was collected, or a test that evaluates cases ran (a session given --le-*
    #: options without either is a usage error: its options would have been ignored)
    suites_seen: bool = False
    backend: Any = None  # resolved once per process, on the first suite that samples
    #: a model matrix: label -> (entry's sampling values, backend), in the entries' order;
    #: resolved once per process (``items.matrix_models``), the same labels on every worker
    models: dict[str, tuple[dict[str, Any], Any]] | None = None


STATE = pytest.StashKey[PluginState]()
