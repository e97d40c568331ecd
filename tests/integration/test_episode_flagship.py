"""The flagship episode suite on the embedded model, gated by the pytest plugin against its golden.

The one test here samples the whole flagship (10 episodes x 2 samples, at most 3 steps of 64
tokens) under ``-n 2``: the committed golden was made with seed 7 by ``leader-eval run``, so the
same seed must reproduce it and pass the gate, and the gate must have checked the episode metrics.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "suites" / "leader_episodes.yaml"
GOLDEN = ROOT / "golden" / "leader_episodes" / "main.json"

pytestmark = [pytest.mark.model, pytest.mark.slow]


def test_the_plugin_gates_the_flagship_episodes_against_the_golden(tmp_path: Path) -> None:
    golden = json.loads(GOLDEN.read_text())
    for name in ("goal_rate", "loop_rate", "step_leak_rate"):
        assert name in golden["metrics"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LEADER_EVAL_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("GITHUB_ACTIONS", None)
    args = [
        sys.executable, "-m", "pytest", str(SUITE), "-n", "2", "-q", "-p", "no:cacheprovider",
        "--le-model", "local:smollm2", "--le-seed", "7", "--le-golden-dir", str(ROOT / "golden"),
        "--le-run-dir", str(tmp_path / "runs"), "--le-golden-strict",
        f"--rootdir={tmp_path}",
    ]  # fmt: skip
    proc = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    for name in ("goal_rate", "loop_rate", "step_leak_rate"):
        assert name in out, out[-4000:]
    (run,) = [p for p in (tmp_path / "runs").iterdir() if (p / "summary.json").exists()]
    metrics = json.loads((run / "summary.json").read_text())["overall"]["metrics"]
    for name in ("goal_rate", "loop_rate", "step_leak_rate"):
        assert metrics[name]["value"] == pytest.approx(golden["metrics"][name]["value"], abs=1e-4)
