"""The plugin's session state, one object in ``config.stash`` (syrupy's pattern)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pytest

from leader_eval.pytest_plugin.config import PluginOptions

#: the ``user_properties`` key of a case record; its value is a JSON string (JUnit shows it as is)
RECORD_KEY = "leader_eval_case"


@dataclass
class PluginState:
    options: PluginOptions
    #: suite name -> case id -> case record (from whichever worker scored it)
    records: dict[str, dict[str, dict[str, Any]]] = field(default_factory=lambda: defaultdict(dict))
    #: suite name -> {"path", "all_cases", "run_dir", ...}
    suite_meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: suite name -> the case ids this session selected (after -k, -m, --deselect, --le-case)
    collected: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    gate_lines: list[str] = field(default_factory=list)
    #: a suite file was collected, or a test that evaluates cases ran (a session given --le-*
    #: options without either is a usage error: its options would have been ignored)
    suites_seen: bool = False
    backend: Any = None  # resolved once per process, on the first suite that samples


STATE = pytest.StashKey[PluginState]()
