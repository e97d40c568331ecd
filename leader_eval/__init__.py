"""leader-eval: evaluate and regression-test fine-tuned agent checkpoints.

The library API the CLI and the pytest plugin share::

    from leader_eval import load_suite, run, read_run, RunOptions

    result = run("suites/leader_core.yaml", RunOptions(model="local:smollm2", seed=7))
    print(result.summary["overall"]["metrics"]["score"])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"
__all__ = ["RunOptions", "__version__", "load_suite", "read_run", "run"]

if TYPE_CHECKING:
    from leader_eval.evaluate import read_run, run
    from leader_eval.runner import RunOptions
    from leader_eval.suite import load_suite


def __getattr__(name: str) -> Any:
    # Imported on first use, so `import leader_eval` (and the pytest plugin's entry point) stays cheap.
    if name in ("run", "read_run"):
        from leader_eval import evaluate

        return getattr(evaluate, name)
    if name == "RunOptions":
        from leader_eval.runner import RunOptions

        return RunOptions
    if name == "load_suite":
        from leader_eval.suite import load_suite

        return load_suite
    raise AttributeError(name)
