"""numpy imported with OpenBLAS's idle spin bounded, and the caller's environment left alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from leader_eval.bounded.numeric import IDLE_SPIN, THREAD_TIMEOUT

ROOT = Path(__file__).resolve().parents[2]

# Records every change to the C environment (what OpenBLAS reads as it loads) and whether numpy
# had loaded by then, imports the module under test, and reports what it saw.
PROBE = """
import json, os, sys
seen = []
def hook(event, args):
    if event in ("os.putenv", "os.unsetenv"):
        key = args[0].decode() if isinstance(args[0], bytes) else args[0]
        value = args[1].decode() if len(args) > 1 and isinstance(args[1], bytes) else (args[1] if len(args) > 1 else None)
        if key == %r:
            seen.append([event, value, "numpy" in sys.modules])
sys.addaudithook(hook)
if sys.argv[1] == "numpy-first":
    import numpy
if sys.argv[1] == "thread-alive":  # another thread, as a DNS lookup in aiohttp's resolver
    import threading
    done = threading.Event()
    threading.Thread(target=done.wait, daemon=True).start()
import leader_eval.bounded.numeric as numeric
print(json.dumps({"seen": seen, "after": os.environ.get(%r), "numpy": numeric.np.__name__}))
"""


def _probe(mode: str, env_value: str | None) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != THREAD_TIMEOUT}
    if env_value is not None:
        env[THREAD_TIMEOUT] = env_value
    env["PYTHONPATH"] = str(ROOT)
    code = PROBE % (THREAD_TIMEOUT, THREAD_TIMEOUT)
    out = subprocess.run([sys.executable, "-c", code, mode], env=env, capture_output=True, text=True, check=True)
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_the_first_import_sets_the_idle_spin_while_numpy_loads_and_removes_it() -> None:
    got = _probe("fresh", None)
    # set before numpy loaded (OpenBLAS reads it then), removed once it had
    assert got["seen"] == [["os.putenv", IDLE_SPIN, False], ["os.unsetenv", None, True]]
    assert got["after"] is None
    assert got["numpy"] == "numpy"


def test_a_callers_own_setting_is_kept() -> None:
    got = _probe("fresh", "12")
    assert got["seen"] == []
    assert got["after"] == "12"


@pytest.mark.parametrize("env_value", [None, "12"])
def test_a_process_that_imported_numpy_first_is_left_alone(env_value: str | None) -> None:
    got = _probe("numpy-first", env_value)
    assert got["seen"] == []
    assert got["after"] == env_value


def test_the_environment_is_left_alone_while_another_thread_runs() -> None:
    """A C library reading the environment in another thread must never see it change: numpy is
    then imported as it is."""
    got = _probe("thread-alive", None)
    assert got["seen"] == []
    assert got["after"] is None
    assert got["numpy"] == "numpy"
