"""How the ``leader-eval`` process ends (``cli/shutdown.py``): with the command's status, every line
it printed and every ``atexit`` handler run, but without freeing its objects one by one, unless
another thread still runs or ``LEADER_EVAL_FAST_EXIT=0`` asks for the usual exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _process(body: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``body`` (setup code), then the console entry point with ``args``, in a fresh interpreter
    whose standard streams are pipes (block-buffered, as in CI)."""
    script = textwrap.dedent(body) + textwrap.dedent(
        f"""
        import sys
        from leader_eval.cli.app import console_main
        sys.argv = ["leader-eval", *{list(args)!r}]
        console_main()
        """
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        # the caller's own LEADER_EVAL_FAST_EXIT is not the test's
        env={
            **{k: v for k, v in os.environ.items() if k != "LEADER_EVAL_FAST_EXIT"},
            "PYTHONPATH": str(ROOT),
            **(env or {}),
        },
    )


FREED_AT_TEARDOWN = """
class Noisy:
    def __del__(self):
        sys.stderr.write("freed at teardown\\n")

import sys
kept = Noisy()
"""


def test_the_status_every_printed_line_and_the_exit_handlers_survive_the_fast_exit() -> None:
    done = _process(
        FREED_AT_TEARDOWN
        + """
import atexit
atexit.register(lambda: print("exit handler ran"))
""",
        "schema",
    )
    assert done.returncode == 0, done.stderr
    schema, handler = done.stdout.rsplit("}", 1)
    assert json.loads(schema + "}")["type"] == "object"  # the whole document, flushed from its buffer
    assert handler.strip() == "exit handler ran"
    assert "freed at teardown" not in done.stderr  # the objects were not freed one by one


def test_a_failing_command_keeps_its_status_and_its_one_line_error(tmp_path: Path) -> None:
    done = _process("", "run", str(tmp_path / "missing.yaml"))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "missing.yaml" in done.stderr


@pytest.mark.parametrize("why", ["asked", "thread"])
def test_the_usual_exit_where_asked_or_where_a_thread_still_runs(why: str) -> None:
    setup = FREED_AT_TEARDOWN
    if why == "thread":  # an orderly exit waits for it to finish its work
        setup += """
import threading, time
def work():
    time.sleep(0.5)
    sys.stderr.write("thread finished\\n")
threading.Thread(target=work).start()
"""
    done = _process(setup, "schema", "--path", env={"LEADER_EVAL_FAST_EXIT": "0"} if why == "asked" else None)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).is_file()
    assert "freed at teardown" in done.stderr
    if why == "thread":
        assert "thread finished" in done.stderr


def test_main_called_in_process_returns_its_status() -> None:
    from leader_eval.cli.app import main

    assert main(["schema", "--path"]) == 0  # and this test's process goes on


def test_a_profiler_or_another_program_running_it_gets_the_usual_exit(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    prof = tmp_path / "run.prof"
    done = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "leader_eval", "schema", "--path"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert prof.is_file()  # the profiler wrote its results after the program returned
    caller = textwrap.dedent(
        """
        import runpy, sys
        sys.argv = ["leader-eval", "schema", "--path"]
        try:
            runpy.run_module("leader_eval", run_name="__main__")
        except SystemExit as stop:
            print("the caller goes on after status", stop.code)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", caller], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("the caller goes on after status 0")
