"""leader-eval: evaluate and regression-test fine-tuned agent checkpoints.

The library API the CLI and the pytest plugin share::

    from leader_eval import load_suite, run, read_run, RunOptions

    result = run("suites/leader_core.yaml", RunOptions(model="local:smollm2", seed=7))
    print(result.summary["overall"]["metrics"]["score"])

Scoring one raw output without a backend (docs/api.md)::

    from leader_eval import score_output

    r = score_output("suites/leader_core.yaml", text, case="kickoff")
    r.passed, r.reason, r.hard_fail, r.failed_reasons, r.leaks
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from leader_eval import _deprecated
from leader_eval.version import __version__

_deprecated.install()  # the 0.2 module paths, for one release (CHANGELOG.md)

__all__ = [
    "CheckContext",
    "CheckResult",
    "CheckVerdict",
    "Finding",
    "ModelInfo",
    "Reason",
    "RunOptions",
    "SampleScore",
    "Suite",
    "ToolCall",
    "__version__",
    "load_suite",
    "read_run",
    "register_check",
    "register_model_role",
    "run",
    "score_output",
]

if TYPE_CHECKING:
    from leader_eval.runs.evaluate import read_run, run
    from leader_eval.runs.options import RunOptions
    from leader_eval.runs.trusted import register_check, register_model_role
    from leader_eval.scoring.api import load_suite, score_output
    from leader_eval.scoring.scorer import SampleScore
    from leader_eval.suite.load import Suite
    from leader_eval.types import CheckContext, CheckResult, CheckVerdict, Finding, ModelInfo, Reason, ToolCall

_LAZY = {
    "run": "leader_eval.runs.evaluate",
    "read_run": "leader_eval.runs.evaluate",
    "RunOptions": "leader_eval.runs.options",
    "register_check": "leader_eval.runs.trusted",
    "register_model_role": "leader_eval.runs.trusted",
    "load_suite": "leader_eval.scoring.api",
    "score_output": "leader_eval.scoring.api",
    "ModelInfo": "leader_eval.types",
    "SampleScore": "leader_eval.scoring.scorer",
    "Suite": "leader_eval.suite.load",
    "CheckResult": "leader_eval.types",
    "CheckContext": "leader_eval.types",
    "CheckVerdict": "leader_eval.types",
    "Finding": "leader_eval.types",
    "Reason": "leader_eval.types",
    "ToolCall": "leader_eval.types",
}


def __getattr__(name: str) -> Any:
    # Imported on first use, so `import leader_eval` (and the pytest plugin's entry point) stays cheap.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(module), name)
