"""The episode loop on the embedded model: resumption after SIGKILL, warm == cold, replay, show.

Kept small for CI: two short episodes per run (two cases, one sample each, max_tokens 24, at
most 3 steps).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from leader_eval.sampling.backends.base import SampleRequest, SamplingParams
from tests.support.episodes import LOOP_SUITE, write_repo

ROOT = Path(__file__).resolve().parents[2]
RUN_ARGS = ["--samples", "1", "--max-tokens", "24", "--seed", "11", "-q"]


def _env(tmp: Path, block_llama: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    path = [str(ROOT)]
    if block_llama:  # a llama_cpp that cannot be imported, ahead of the real one
        shim = tmp / "no_llama"
        (shim / "llama_cpp").mkdir(parents=True, exist_ok=True)
        (shim / "llama_cpp" / "__init__.py").write_text("raise ImportError('llama_cpp is blocked in this test')\n")
        path.insert(0, str(shim))
    env["PYTHONPATH"] = os.pathsep.join([*path, env.get("PYTHONPATH", "")])
    env["LEADER_EVAL_CACHE_DIR"] = str(tmp / "cache")
    return env


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "leader_eval", *args], env=env, capture_output=True, text=True, timeout=600
    )


def _steps(run: Path) -> list[dict[str, Any]]:
    """The step records in slot order (the file holds them in the order they finished)."""
    from leader_eval.store.run_store import read_steps

    recs = [r for steps in read_steps(run).values() for r in steps]  # each with its prompt resolved
    return sorted(recs, key=lambda r: r["slot"])


def _comparable(rec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in rec.items() if k != "timings"}


@pytest.fixture(scope="module")
def episode_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    return write_repo(root)


@pytest.fixture(scope="module")
def uninterrupted(episode_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("whole")
    out = tmp / "run"
    proc = _cli("run", str(episode_repo), "--out", str(out), *RUN_ARGS, env=_env(tmp))
    assert proc.returncode == 0, proc.stderr
    return out


def test_sigkill_mid_episode_resumes_at_the_last_finished_step(
    episode_repo: Path, uninterrupted: Path, tmp_path: Path
) -> None:
    whole = _steps(uninterrupted)
    assert len(whole) >= 3, "the test needs episodes of several steps"
    out = tmp_path / "run"
    env = _env(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "leader_eval", "run", str(episode_repo), "--out", str(out), *RUN_ARGS],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    steps_file = out / "steps.jsonl"
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if steps_file.exists() and steps_file.read_bytes().count(b"\n") >= 1:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the run finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = steps_file.read_bytes()
    finished = before[: before.rfind(b"\n") + 1]  # a torn last line is not a finished step
    n_before = finished.count(b"\n")
    assert 1 <= n_before < len(whole), "killed mid-run"

    again = _cli("run", str(episode_repo), "--out", str(out), *RUN_ARGS, env=env)
    assert again.returncode == 0, again.stderr
    after = steps_file.read_bytes()
    assert after.startswith(finished), "finished steps are kept byte for byte"
    resumed = _steps(out)
    slots = [r["slot"] for r in resumed]
    assert len(slots) == len(set(slots)), "every finished step appears exactly once"
    assert {r["slot"]: _comparable(r) for r in resumed} == {r["slot"]: _comparable(r) for r in whole}
    for name in ("cases.json",):
        assert json.loads((out / name).read_text()) == json.loads((uninterrupted / name).read_text())
    got = json.loads((out / "summary.json").read_text())["overall"]
    want = json.loads((uninterrupted / "summary.json").read_text())["overall"]
    assert got == want


def test_a_step_does_not_depend_on_what_the_kv_cache_held(uninterrupted: Path) -> None:
    from leader_eval.sampling.backends import resolve_backend

    later = [r for r in _steps(uninterrupted) if r["step"] >= 1 and r["outcome"] == "ok"]
    assert later, "the run has no second step to resample"
    target = later[-1]
    other = next(r for r in _steps(uninterrupted) if r["slot"] != target["slot"])
    manifest = json.loads((uninterrupted / "manifest.json").read_text())
    params = SamplingParams(**{**manifest["identity"]["cases"][target["case_id"]]["params"], "stop": ()})

    def sample(backend: Any, rec: dict[str, Any]) -> str:
        prompt = backend.apply_chat_template(rec["prompt"]["messages"], None)
        assert prompt.text == rec["prompt"]["text"]
        (c,) = asyncio.run(backend.sample(SampleRequest(prompt=prompt, params=params, seeds=[rec["seed"]])))
        return str(c.text)

    cold = resolve_backend("local:smollm2")  # a fresh llama.cpp context: nothing cached
    try:
        cold_text = sample(cold, target)
        sample(cold, other)  # now the cache holds another prompt's prefix and body
        warm_text = sample(cold, target)
    finally:
        asyncio.run(cold.aclose())
    assert cold_text == warm_text == target["text"]


def test_show_case_prints_the_transcript(uninterrupted: Path, tmp_path: Path) -> None:
    steps = _steps(uninterrupted)
    case_id = steps[0]["case_id"]
    proc = _cli("show", str(uninterrupted), "--case", case_id, env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for r in (r for r in steps if r["case_id"] == case_id):
        assert f"-- step {r['step'] + 1} " in out
        assert "raw: " + repr(r["text"]) in out  # the raw output, special tokens visible
        for res in r["results"]:
            shown = f"result: {res['result']!r}" if res["ok"] else f"error result: {res['error']!r}"
            assert shown in out
    assert "goal" in out
    summary = json.loads((uninterrupted / "results.jsonl").read_text().splitlines()[0])
    for c in summary["checks"]:
        if not c["passed"]:
            assert f"x episode {c['check']}: {c['reason']}" in out


def test_replay_rescores_without_llama_cpp_and_the_loop_threshold_moves_the_loop_rate(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    suite = write_repo(root, LOOP_SUITE)
    recorded = tmp_path / "recorded"
    proc = _cli("run", str(suite), "--out", str(recorded), "--seed", "3", "-q", env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    original = json.loads((recorded / "summary.json").read_text())["overall"]["metrics"]

    blocked = _env(tmp_path, block_llama=True)
    check = subprocess.run([sys.executable, "-c", "import llama_cpp"], env=blocked, capture_output=True)
    assert check.returncode != 0

    same = tmp_path / "replay_same"
    proc = _cli("run", str(suite), "--model", f"replay:{recorded}", "--out", str(same), "-q", env=blocked)
    assert proc.returncode == 0, proc.stderr
    replayed = json.loads((same / "summary.json").read_text())["overall"]["metrics"]
    assert replayed == original
    # the same steps, outputs and scripted results (a replayed step's key addresses the prompt text,
    # the recorded one its token ids)
    drop = ("timings", "key")
    assert [{k: v for k, v in r.items() if k not in drop} for r in _steps(same)] == [
        {k: v for k, v in r.items() if k not in drop} for r in _steps(recorded)
    ]

    # the oracle: episodes in which one call was made twice (the loop suite's calls take no arguments)
    by_episode: dict[tuple[str, int], list[str]] = {}
    for r in _steps(recorded):
        by_episode.setdefault((r["case_id"], r["index"]), []).extend(
            c["tool"] + json.dumps(c["arguments"], sort_keys=True) for c in r["calls"]
        )
    looped = sum(any(calls.count(c) >= 2 for c in calls) for calls in by_episode.values())
    assert looped > 0, "the loop suite's greedy episodes should repeat a call"
    assert original["loop_rate"]["value"] == 0.0  # loop_k 4 cannot be reached in 3 steps

    suite.write_text(LOOP_SUITE.replace("loop_k: 4", "loop_k: 2"))
    tighter = tmp_path / "replay_k2"
    proc = _cli("run", str(suite), "--model", f"replay:{recorded}", "--out", str(tighter), "-q", env=blocked)
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((tighter / "summary.json").read_text())["overall"]["metrics"]
    assert metrics["loop_rate"]["value"] == pytest.approx(looped / len(by_episode))
    assert metrics["goal_rate"] == original["goal_rate"]


def test_the_golden_keeps_and_the_gate_checks_episode_metrics(uninterrupted: Path, tmp_path: Path) -> None:
    env = _env(tmp_path)
    golden_dir = tmp_path / "golden"
    made = _cli("gate", str(uninterrupted), "--golden", str(golden_dir), "--update-golden", env=env)
    assert made.returncode == 0, made.stdout + made.stderr
    (path,) = list(golden_dir.rglob("*.json"))
    golden = json.loads(path.read_text())
    for name in ("goal_rate", "loop_rate", "step_leak_rate"):
        assert name in golden["metrics"], golden["metrics"].keys()
    assert len(golden["cases"]) == 2
    assert all("goal_rate" in c and "loop_rate" in c for c in golden["cases"].values())

    same = _cli("gate", str(uninterrupted), "--golden", str(golden_dir), env=env)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "goal_rate" in same.stdout


def test_a_cancelled_episode_keeps_its_step_in_flight_and_samples_no_further(tmp_path: Path) -> None:
    """Ctrl-C while the leader's steps are in flight (scripted roles, no model): each step that
    comes back within the grace period is recorded, then its episode stops; no next step and no
    teammate turn is sampled (a re-run resumes from the recorded steps)."""
    import leader_eval
    from leader_eval.runs.options import RunOptions
    from leader_eval.store.run_store import RunDir
    from tests.support.teammates import scripted_customer, scripted_leader, write_desk

    suite = write_desk(tmp_path / "repo")
    leader, customer = scripted_leader(), scripted_customer()
    sent: list[str] = []
    answer, reply = leader.sample, customer.sample

    async def slow(request: SampleRequest) -> Any:
        sent.append(request.prompt.text)
        if len(sent) == 1:  # what asyncio.Runner does on Ctrl-C, while the first steps are in flight
            main = next(t for t in asyncio.all_tasks() if t.get_coro().__qualname__ == "_sample_and_close")
            asyncio.get_running_loop().call_later(0.01, main.cancel)
        await asyncio.sleep(0.05)
        return await answer(request)

    turns: list[str] = []

    async def replied(request: SampleRequest) -> Any:
        turns.append(request.prompt.text)
        return await reply(request)

    leader.sample, customer.sample = slow, replied  # type: ignore[method-assign]
    out = tmp_path / "run"
    options = RunOptions(out=out, seed=3, progress=False, cache=False)
    with pytest.raises(asyncio.CancelledError):
        leader_eval.run(suite, options, backend=leader, teammates={"customer": customer})
    steps = [r for recs in RunDir(out).read_steps().values() for r in recs]
    assert 1 <= len(sent) <= 4  # the four episodes' first steps at most
    assert len(steps) == len(sent) and all(r["step"] == 0 for r in steps)
    assert turns == []  # no teammate turn after the cancel
    # (a real Ctrl-C reaches the run as KeyboardInterrupt: "interrupted"; a bare cancel "failed")
    assert json.loads((out / "manifest.json").read_text())["status"] in ("interrupted", "failed")
