"""A suite's stress requirements (``gate: stress:``) run from pytest with ``--le-stress``: one
``suite.yaml::stress`` item sweeps the lengths the requirements name with the session's sampling
options, and fails when a requirement is not met; without ``--le-stress`` it is skipped, never
passed. The sweep here is a recording (replayed through ``--le-model replay:``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.studies.test_stress import RECALL

pytest_plugins = ["pytester"]

REQUIREMENT = "\ngate:\n  stress:\n    - at: 2500\n      min: {score: 0.9}\n"


def _suite(where: Path) -> Path:
    shutil.copytree(RECALL.parent / "templates", where / "templates")
    path = where / "recall.yaml"
    path.write_text(RECALL.read_text(encoding="utf-8") + REQUIREMENT, encoding="utf-8")
    return path


#: the pytester session's model: the embedded tokenizer and template with a canned reply (a test
#: double of the model, named as such: ScriptedBackend); everything else is the real plugin
CONFTEST = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
import leader_eval.pytest_plugin.items as items
from leader_eval.sampling.backends import resolve_backend
from tests.studies.test_stress import ScriptedBackend

items.resolve_backend = lambda sampling: ScriptedBackend(resolve_backend("local:smollm2"), "I am not sure.")
"""


def test_a_collapsed_sweep_fails_its_declared_floor_under_pytest(pytester: pytest.Pytester) -> None:
    _suite(pytester.path)
    pytester.makeconftest(CONFTEST)
    common = ["recall.yaml::stress", "-p", "no:cacheprovider", "--le-seed=0", f"--rootdir={pytester.path}"]

    skipped = pytester.runpytest_subprocess(*common, "-rs")
    assert skipped.ret == pytest.ExitCode.OK and "1 skipped" in skipped.stdout.str(), skipped.stdout.str()
    assert "run with --le-stress" in skipped.stdout.str()

    res = pytester.runpytest_subprocess(*common, "--le-stress")
    text = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.TESTS_FAILED, text
    assert "FAILED recall.yaml::stress" in text, text
    assert "FAIL: 1 of 1 stress requirement(s) not met" in text and "against the floor 0.9" in text
    assert "Traceback" not in text
    # the sweep sampled exactly the length the requirement names, into the session's run directory
    (sweep,) = (pytester.path / "runs").glob("*__stress*/stress.json")
    assert json.loads(sweep.read_text(encoding="utf-8"))["steps"] == [2500]
