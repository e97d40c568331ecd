"""Scoring while sampling (``runs/live_scores.py``): what ``evaluate.run`` writes is what scoring
the run directory again writes, byte for byte, whichever samples were scored while sampling."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from leader_eval.runs import evaluate
from leader_eval.runs.evaluate import run, score_run
from leader_eval.runs.live_scores import LiveScores
from leader_eval.runs.options import RunOptions
from leader_eval.store.run_store import CASES, RESULTS, SUMMARY, RunDir
from leader_eval.suite.load import load_suite
from tests.conftest import MINIMAL_SUITE
from tests.support.scripted import ScriptedBackend, call

DERIVED = (RESULTS, CASES, SUMMARY)
OUTPUTS = [
    call("send_message_to_chat", message="hello team, our goal is to build a bridge"),
    "not a call",
    call("send_message_to_chat", message="hi"),
]


def _derived(path: Path) -> dict[str, bytes]:
    return {name: (path / name).read_bytes() for name in DERIVED}


def _rescored(run_dir: Path, suite: Path, tmp_path: Path) -> dict[str, bytes]:
    """The derived files of ``run_dir`` scored again from its records alone."""
    copy = tmp_path / "rescored"
    shutil.copytree(run_dir, copy)
    for name in DERIVED:
        (copy / name).unlink()
    score_run(RunDir(copy), load_suite(suite))
    return _derived(copy)


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    p = tmp_path / "mini.yaml"
    p.write_text(MINIMAL_SUITE.replace("samples: 2", "samples: 5"))
    return p


def _options(tmp_path: Path) -> RunOptions:
    return RunOptions(model="scripted:test", seed=3, out=tmp_path / "run", progress=False, cache=False)


def test_every_sample_is_scored_while_sampling_and_the_files_are_the_rescored_ones(
    suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    after: list[int] = []
    score_samples = evaluate.score_samples

    def counted(suite: Any, samples: Any, *args: Any) -> Any:
        after.append(len(samples))
        return score_samples(suite, samples, *args)

    monkeypatch.setattr(evaluate, "score_samples", counted)
    result = run(suite, _options(tmp_path), backend=ScriptedBackend(OUTPUTS))
    assert after == [0]  # nothing left to score once sampling ended
    assert len(result.scores) == 10 and {s.passed for s in result.scores} == {True, False}
    assert _derived(result.path) == _rescored(result.path, suite, tmp_path)


def test_a_sample_that_reads_back_otherwise_is_scored_again(suite: Path, tmp_path: Path) -> None:
    result = run(suite, _options(tmp_path), backend=ScriptedBackend(OUTPUTS))
    live = LiveScores(load_suite(suite), result.path)
    for smp in result.samples:  # scored with another output than the one on disk
        live.score(replace(smp, text="not a call") if smp.index == 0 else smp)
    assert len(live.scored) == 10
    assert sum(live.score_of(s) is None for s in result.samples) == 2  # index 0 of both cases
    loaded = load_suite(suite)
    assert live.case_record(loaded.cases[0], []) is None
    expected = _derived(result.path)
    score_run(RunDir(result.path), loaded, live=live)
    assert _derived(result.path) == expected


def test_a_sample_that_fails_to_score_while_sampling_is_scored_after(
    suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("scorer bug")

    monkeypatch.setattr("leader_eval.runs.live_scores.case_scorer", broken)
    result = run(suite, _options(tmp_path), backend=ScriptedBackend(OUTPUTS))
    assert len(result.scores) == 10
    assert _derived(result.path) == _rescored(result.path, suite, tmp_path)


def test_a_resumed_run_scores_its_earlier_samples_after_sampling(suite: Path, tmp_path: Path) -> None:
    options = _options(tmp_path)
    first = run(suite, replace(options, max_samples=4), backend=ScriptedBackend(OUTPUTS))
    assert len(first.samples) == 4 and first.manifest["status"] == "capped"
    resumed = run(suite, options, backend=ScriptedBackend(OUTPUTS))
    assert len(resumed.samples) == 10 and resumed.manifest["status"] == "complete"
    assert _derived(resumed.path) == _rescored(resumed.path, suite, tmp_path)


def test_a_run_with_every_sample_recorded_samples_and_scores_nothing_new(suite: Path, tmp_path: Path) -> None:
    first = run(suite, _options(tmp_path), backend=ScriptedBackend(OUTPUTS))
    expected = _derived(first.path)
    backend = ScriptedBackend(OUTPUTS)
    again = run(suite, _options(tmp_path), backend=backend)  # resumes a complete run: never yields to drain
    assert backend.requests == 0 and again.stats is not None and again.stats.reused == 10
    assert _derived(again.path) == expected


@pytest.mark.parametrize(("backlog", "busy_turns"), [(3, 10_000), (10_000, 16)])
def test_a_loop_never_idle_still_gets_its_samples_scored_while_it_samples(
    suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backlog: int, busy_turns: int
) -> None:
    """``drain`` prefers turns of the loop that run nothing else; a loop never idle (a server that
    answers without pause, or a loaded machine where no turn looks idle) still gets its samples
    scored before sampling ends: once ``MAX_BACKLOG`` wait, or after ``MAX_BUSY_TURNS`` busy
    turns, never spinning until the end. What is written is what scoring after sampling writes."""
    import asyncio
    import time

    from leader_eval.runs import live_scores

    monkeypatch.setattr(live_scores, "MAX_BACKLOG", backlog)
    monkeypatch.setattr(live_scores, "MAX_BUSY_TURNS", busy_turns)
    result = run(suite, _options(tmp_path), backend=ScriptedBackend(OUTPUTS))
    live = LiveScores(load_suite(suite), result.path)
    scored_while_busy: list[int] = []

    async def busy_loop() -> None:  # every turn of the loop runs this for 0.5 ms: never idle
        drain = asyncio.create_task(live.drain())
        for sample in result.samples:
            live.on_sample(sample)
        end = time.perf_counter() + 1.0
        while time.perf_counter() < end and len(live.scored) < 10:
            spin = time.perf_counter() + 0.0005
            while time.perf_counter() < spin:
                pass
            await asyncio.sleep(0)
        scored_while_busy.append(len(live.scored))
        live.close()
        await drain

    asyncio.run(busy_loop())
    assert scored_while_busy == [10]
    expected = _derived(result.path)
    score_run(RunDir(result.path), load_suite(suite), live=live)
    assert _derived(result.path) == expected


@pytest.mark.parametrize("tuned", [False, True])
def test_the_collector_skips_its_last_passes_only_after_a_run_that_ended_well(tuned: bool) -> None:
    """At exit the process freezes what is left (its last collections walk every object) only when
    the last run ended well: after one that raised, what it left mid-flight is finalized by those
    passes, also where the caller tuned the collector itself during that run."""
    import gc

    from leader_eval.runs import evaluate as ev

    was = gc.isenabled()
    try:
        if tuned:
            gc.disable()
        with ev._long_lived_frozen():
            pass
        assert ev._exit_hook == [True]
        with pytest.raises(RuntimeError), ev._long_lived_frozen():
            raise RuntimeError("interrupted")
        assert ev._exit_hook == [False]
    finally:
        if was:
            gc.enable()


# A child process: numpy is not loaded by importing the run path; it loads while the first
# requests wait on the network (``bounded.numeric``, ``LiveScores.drain``), not before them.
NUMPY_PROBE = """
import asyncio, json, sys, time
from pathlib import Path
from leader_eval.runs.evaluate import run
from leader_eval.runs.options import RunOptions
from tests.support.scripted import ScriptedBackend, call

at_import = "numpy" in sys.modules

class Waits(ScriptedBackend):
    async def sample(self, request):  # the network: answers once numpy has loaded, or after 20 s
        end = time.monotonic() + 20
        while "numpy" not in sys.modules and time.monotonic() < end:
            await asyncio.sleep(0.01)
        seen.append("numpy" in sys.modules)
        return await super().sample(request)

seen = []
out = Path(sys.argv[2])
run(Path(sys.argv[1]), RunOptions(model="scripted:test", seed=3, out=out, progress=False, cache=False),
    backend=Waits([call("send_message_to_chat", message="hi")]))
print(json.dumps({"at_import": at_import, "seen": seen}))
"""


def _probe(script: str, suite: Path, out: Path) -> Any:
    """What a child process running ``script`` (the suite and run directory as arguments) prints
    last, as JSON: the process imports only what the run path imports."""
    import json
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root), LEADER_EVAL_CACHE_DIR="off")
    done = subprocess.run(
        [sys.executable, "-c", script, str(suite), str(out)],
        env=env, cwd=root, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.splitlines()[-1])


def test_numpy_loads_while_the_first_requests_are_in_flight(suite: Path, tmp_path: Path) -> None:
    got = _probe(NUMPY_PROBE, suite, tmp_path / "run")
    assert got["at_import"] is False  # importing the run path does not load it
    assert got["seen"] and all(got["seen"])  # loaded while every request was still waiting


# A child process: a suite of one-sample cases is sampled, scored and summarised without numpy.
NO_NUMPY_PROBE = """
import json, sys
from pathlib import Path
from leader_eval.runs.evaluate import run
from leader_eval.runs.options import RunOptions
from tests.support.scripted import ScriptedBackend, call

out = Path(sys.argv[2])
result = run(Path(sys.argv[1]), RunOptions(model="scripted:test", seed=3, out=out, progress=False, cache=False),
             backend=ScriptedBackend([call("send_message_to_chat", message="hi"), "not a call"]))
print(json.dumps({"numpy": "numpy" in sys.modules, "samples": len(result.samples)}))
"""


def test_a_suite_of_one_sample_cases_never_loads_numpy(tmp_path: Path) -> None:
    """Every case score is 0 or 1: Wilson intervals and latency quantiles need no numpy (it costs
    a process ~0.06 s of CPU); tests/stats and tests/scoring/test_aggregate.py hold those figures
    to numpy's, bit for bit."""
    suite = tmp_path / "one.yaml"
    suite.write_text(MINIMAL_SUITE.replace("samples: 2", "samples: 1"))
    assert _probe(NO_NUMPY_PROBE, suite, tmp_path / "run") == {"numpy": False, "samples": 2}
    assert _rescored(tmp_path / "run", suite, tmp_path) == _derived(tmp_path / "run")
