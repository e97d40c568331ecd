"""pytest plugin: suites as test files, one item per case, gated against golden baselines.

Installed with leader-eval (entry point ``pytest11: leader_eval``), so it is active in every
pytest session of every repo that has the package. It therefore stays out of the way unless
asked: every option is ``--le-*`` and every ini key ``leader_eval_*`` (no clash with a conftest's
``--model``), only configured files are collected (``leader_eval_suites`` ini globs, default
``evals/**/*.yaml``, or a YAML path on the command line), and nothing beyond pytest and the
standard library is imported until a suite is collected. See docs/pytest.md.

Hooks follow pytest's reference (https://docs.pytest.org/en/stable/reference/reference.html#hooks);
state lives in one dataclass in ``config.stash`` (``state.py``). The parts:

- ``config``: options and which files are suites;
- ``items``: suite files (sampled once, in the collector's ``setup``), case items, the fixture;
- ``session``: setup checks, case records from every worker, the gate item, exit status;
- ``gate``: per suite, the session's case records against the golden (subsets paired);
- ``ci``: GitHub annotations and step summary, pruning of old run directories.

How sampling meets xdist. Under xdist's default ``load`` mode the cases of one file would land on
several workers and each would sample the suite again, so when the user asks for ``-n N``
without naming a mode and suites are configured, the plugin picks ``loadfile``: a suite's cases
go to one worker and every case is sampled exactly once. Per-case records travel to the
controller in ``user_properties`` (JSON strings, which JUnit XML also shows as they are), where
``pytest_sessionfinish`` aggregates them with the same functions as the CLI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from leader_eval.pytest_plugin.config import (
    add_options,
    check_globs_match,
    check_rootdir_kept,
    is_suite_path,
    read_options,
    suites_configured,
)
from leader_eval.pytest_plugin.state import RECORD_KEY, STATE, PluginState

__all__ = ["RECORD_KEY", "STATE", "PluginState"]


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "leader_eval: a leader-eval suite case")
    config.addinivalue_line("markers", "stress: a long-context stress case")
    options = read_options(config)
    if not hasattr(config, "workerinput"):  # the controller checks once; a worker's error reads badly
        check_rootdir_kept(config)
        check_globs_match(options, config.rootpath)
    config.stash[STATE] = PluginState(options)
    from leader_eval.pytest_plugin.session import EvalSession

    config.pluginmanager.register(EvalSession(config), "leader_eval_session")
    # xdist: one worker per suite file, so each case is sampled exactly once (see module doc).
    numprocesses = getattr(config.option, "numprocesses", None)
    if (
        numprocesses
        and getattr(config.option, "dist", "no") in ("no", "load")
        and suites_configured(options, config.rootpath)
    ):
        config.option.dist = "loadfile"


def pytest_report_header(config: pytest.Config) -> str | None:
    """Name the configuration file the session's settings come from (docs/configuration.md)."""
    state = config.stash.get(STATE, None)
    found = state.options.config_file if state is not None else None
    return f"leader-eval: settings from {found.display} (ini and --le-* beat it)" if found is not None else None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    state = parent.config.stash.get(STATE, None)
    if state is None or not is_suite_path(file_path, state.options, parent.config.rootpath):
        return None
    from leader_eval.pytest_plugin.items import SuiteFile

    suite_file: pytest.Collector = SuiteFile.from_parent(parent, path=file_path)
    return suite_file


@pytest.fixture(scope="session")
def leader_eval(pytestconfig: pytest.Config) -> Any:
    """Sample and score cases written in Python: ``leader_eval.evaluate(request, SUITE, CASE_ID)``."""
    from leader_eval.pytest_plugin.items import LeaderEvalFixture

    return LeaderEvalFixture(pytestconfig)
