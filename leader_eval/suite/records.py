"""What a loaded suite is: its records, the suite JSON Schema, and the lint rule for its regexes.

``load.py`` builds these records from a file; rendering, episode specs and the world read them.
They live apart from the loader so that every module the loader calls can name them without
importing the loader back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from leader_eval.bounded.limits import LimitExceeded
from leader_eval.bounded.regex import check_regex
from leader_eval.errors import SuiteError
from leader_eval.suite.tool_schema import LoadedSchemas
from leader_eval.suite.yaml_source import JsonPath
from leader_eval.types import BoundCheck

__all__ = ["Case", "ScaffoldMessage", "Suite", "Tool", "check_suite_regex", "suite_schema"]


@dataclass(frozen=True)
class ScaffoldMessage:
    role: str
    template: str  # jinja2 source
    origin: str  # "file.yaml:12" or template path, for error messages
    line: int  # line of the template source in ``origin``'s file (1 for a file)
    path: str  # file that holds the template source


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass(frozen=True)
class Case:
    id: str
    line: int
    vars: dict[str, Any]
    expect: dict[str, Any]
    tags: tuple[str, ...] = ()
    weight: float = 1.0
    split: str | None = None
    description: str = ""
    sampling: dict[str, Any] = field(default_factory=dict)
    hard_fail: tuple[str, ...] = ()
    stress: dict[str, Any] = field(default_factory=dict)
    episode: Any = None  # an EpisodeSpec for a multi-turn case (leader_eval.suite.episode_spec)
    #: the data file the case comes from (``cases_from:``; None: the suite file); ``line`` is then
    #: its line there, or its row (from 0) when ``row``
    source: str | None = None
    row: bool = False

    def where(self, suite_path: str | Path) -> tuple[str, int | None]:
        """Where errors about this case point: ``SuiteError``'s path and line."""
        if self.source is None:
            return str(suite_path), self.line
        return (f"{self.source}:row {self.line}", None) if self.row else (self.source, self.line)


@dataclass(frozen=True)
class Suite:
    name: str
    path: Path
    description: str
    protocol: str | None
    sampling: dict[str, Any]
    scaffold: tuple[ScaffoldMessage, ...]
    tools: tuple[Tool, ...]
    cases: tuple[Case, ...]
    leakage: dict[str, Any]
    checks: dict[str, Any]
    render: dict[str, Any]
    context_length: int | None
    content_hash: str
    lines: dict[JsonPath, int] = field(repr=False, compare=False, default_factory=dict)
    #: the folder every referenced file must lie in (files.resolve_in_root)
    root: Path = field(default=Path("."), compare=False)
    #: tool schemas with their $ref targets loaded; ``tool_schemas.validator(name)`` never fetches
    tool_schemas: LoadedSchemas | None = field(default=None, repr=False, compare=False)
    #: the ``gate:`` section (budgets, floors, ceilings, judge, detect, underpowered; ``gate_spec``):
    #: left out of ``content_hash``, copied into the golden
    gate: dict[str, Any] = field(default_factory=dict)
    #: the k of pass@k / pass^k every summary reports (empty: 1 and the samples per case)
    pass_k: tuple[int, ...] = ()
    #: prices per million tokens for the run's cost estimate (``prompt_per_million``, ...)
    prices: dict[str, Any] = field(default_factory=dict)
    world: Any = field(repr=False, compare=False, default=None)  # scripted tools (leader_eval.suite.world)
    #: the items of the suite's ``stress: {filler: FILE}`` (``suite.filler_file``), None for the default
    stress_filler: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)
    #: the Python checks ``checks: python:`` names, each with its function from trusted
    #: configuration (``runs.python_checks.bind_checks``); empty until bound, and a suite naming
    #: checks is never scored unbound (``scoring.python_check``)
    python_checks: tuple[BoundCheck, ...] = field(repr=False, compare=False, default=())
    #: rubric judges (``judges:``; ``suite.judge_spec.JudgeSpec``), by criterion in file order
    judges: tuple[Any, ...] = ()

    def case_sampling(self, case: Case) -> dict[str, Any]:
        return {**self.sampling, **case.sampling}


@cache
def suite_schema() -> dict[str, Any]:
    text = resources.files("leader_eval.suite.schema").joinpath("suite.schema.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def check_suite_regex(path: str | Path, line: int | None, pattern: str) -> None:
    """A ``SuiteError`` at ``path:line`` when a suite regex is invalid, too long or catastrophic."""
    try:
        check_regex(pattern)
    except LimitExceeded as exc:
        raise SuiteError(path, line, str(exc)) from exc
