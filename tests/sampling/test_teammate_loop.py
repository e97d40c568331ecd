"""A simulated teammate in episodes, with scripted backends for both roles (no model).

What a user relies on: the teammate's reply reaches the leader's next prompt; a stop phrase ends
the conversation; ``max_turns`` bounds it; the scripted tools keep answering beside it; every turn
is recorded in ``turns.jsonl`` and a replay re-scores the run with no model; an undefined role is
one line before anything is written.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import leader_eval
from leader_eval.cli.app import main
from leader_eval.errors import LeaderEvalError
from leader_eval.runs.options import RunOptions
from leader_eval.runs.trusted import NamedModel, Trusted
from leader_eval.sampling.backends.base import Completion, SampleRequest
from leader_eval.store.run_store import STEPS, TURNS, RunDir
from tests.support.scripted import ScriptedBackend
from tests.support.teammates import TEAMMATE_SUITE, scripted_customer, scripted_leader, write_desk


def _run(suite: Path, out: Path, **kw: Any) -> leader_eval.Run:
    options = RunOptions(out=out, seed=3, progress=False, cache=False, trusted=kw.pop("trusted", Trusted()))
    return leader_eval.run(
        suite, options, backend=kw.pop("backend", scripted_leader()),
        teammates=kw.pop("teammates", {"customer": scripted_customer()}),
    )  # fmt: skip


def _turns(run: Path) -> list[dict[str, Any]]:
    return [t for per in RunDir(run).read_turns().values() for _, t in sorted(per.items())]


def test_the_reply_reaches_the_leader_and_the_stop_phrase_ends_the_conversation(tmp_path: Path) -> None:
    suite = write_desk(tmp_path / "repo")
    run = _run(suite, tmp_path / "run")
    steps = RunDir(run.path).read_steps()
    turns = RunDir(run.path).read_turns()
    assert len(steps) == 4  # two cases x two samples
    for key, recs in steps.items():
        assert [r["step"] for r in recs] == [0, 1], "the leader spoke twice, then the customer stopped"
        assert "[customer] When does it arrive?" in recs[1]["prompt"]["text"]  # the reply reached it
        per = turns[key]
        assert [per[k]["reply"] for k in (0, 1)] == ["When does it arrive?", "Thank you! ###DONE"]
        assert per[1]["end"] == "user_stop" and per[0]["end"] is None
        # the teammate saw the leader's messages as the user, its own reply as the assistant
        msgs = per[1]["prompt"]["messages"]
        assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
        assert msgs[0]["content"].startswith(f"You are {'Ada' if key[0] == 'late_order' else 'Bo'}, a customer")
    assert run.summary["overall"]["metrics"]["goal_rate"]["value"] == 1.0
    assert all(s.passed for s in run.scores), [s.reason for s in run.scores]
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert manifest["identity"]["teammates"]["customer"]["model_id"] == "scripted:customer"


def test_max_turns_bounds_the_conversation_and_the_tools_keep_answering(tmp_path: Path) -> None:
    text = TEAMMATE_SUITE.replace("max_turns: 3", "max_turns: 1")
    suite = write_desk(tmp_path / "repo", text)
    run = _run(suite, tmp_path / "run")
    for recs in RunDir(run.path).read_steps().values():
        assert len(recs) == 1, "one reply allowed: the episode ends after it"
    assert {t["end"] for t in _turns(run.path)} == {"max_turns"}
    assert run.summary["overall"]["metrics"]["goal_rate"]["value"] == 0.0


def test_a_changed_teammate_model_is_not_resumed_into_the_same_run(tmp_path: Path) -> None:
    suite = write_desk(tmp_path / "repo")
    _run(suite, tmp_path / "run")
    with pytest.raises(LeaderEvalError, match="teammates"):
        _run(suite, tmp_path / "run", teammates={"customer": scripted_customer("scripted:other")})


def test_an_undefined_role_is_one_line_before_anything_is_written(tmp_path: Path) -> None:
    suite = write_desk(tmp_path / "repo")
    out = tmp_path / "run"
    with pytest.raises(LeaderEvalError) as err:
        _run(suite, out, teammates={})
    msg = str(err.value)
    assert "\n" not in msg and "model role 'customer' is not defined" in msg
    assert f"{suite}:" in msg  # names the suite's line
    assert not out.exists()


def test_a_trusted_role_resolves_through_the_run_options(tmp_path: Path) -> None:
    suite = write_desk(tmp_path / "repo")
    trusted = Trusted(models={"customer": NamedModel("customer", {"model": "gguf:/nonexistent.gguf"}, "test")})
    with pytest.raises(LeaderEvalError, match=r"model role customer \(test\): --model gguf:/nonexistent.gguf: no such"):
        _run(suite, tmp_path / "run", teammates={}, trusted=trusted)
    assert not (tmp_path / "run").exists()


def test_replay_plays_both_roles_from_the_run(tmp_path: Path) -> None:
    suite = write_desk(tmp_path / "repo")
    run = _run(suite, tmp_path / "run")
    options = RunOptions(model=f"replay:{run.path}", out=tmp_path / "replayed", progress=False, cache=False)
    again = leader_eval.run(suite, options)  # no teammate given, no role defined: the run plays it
    assert [s.to_dict() for s in again.scores] == [s.to_dict() for s in run.scores]
    assert (tmp_path / "replayed" / TURNS).read_bytes() == (run.path / TURNS).read_bytes()


# ---------------------------------------------------------------------------------------------
# resumption after SIGKILL, and the embedded model in both roles

ROOT = Path(__file__).resolve().parents[2]
_KILLED_RUN = """\
import sys
import leader_eval
from leader_eval.cli.app import main
from leader_eval.runs.options import RunOptions
from tests.support.teammates import HangingCustomer, scripted_leader

options = RunOptions(out=sys.argv[2], seed=3, progress=False, cache=False)
leader_eval.run(sys.argv[1], options, backend=scripted_leader(), teammates={"customer": HangingCustomer(after=3)})
"""


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


def _comparable(recs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["slot"]: {k: v for k, v in r.items() if k != "timings"} for r in recs}


def test_sigkill_mid_conversation_keeps_finished_turns_byte_for_byte(tmp_path: Path) -> None:
    suite = write_desk(tmp_path / "repo")
    whole = _run(suite, tmp_path / "whole")
    out = tmp_path / "run"
    # the customer answers three times, then hangs: the process is killed while it waits
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_RUN, str(suite), str(out)],
        env=_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    turns_file = out / TURNS
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if turns_file.exists() and turns_file.read_bytes().count(b"\n") >= 3:
                break
            time.sleep(0.01)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else "the run ended before it was killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    finished = {name: (out / name).read_bytes() for name in (TURNS, STEPS)}
    assert finished[TURNS].count(b"\n") == 3 < len(_turns(whole.path)), "killed mid-conversation"

    resumed = _run(suite, out)  # the same run again: it resumes
    for name, before in finished.items():
        assert (out / name).read_bytes().startswith(before), f"finished {name} records are kept byte for byte"
    got = _turns(out)
    assert len({t["slot"] for t in got}) == len(got), "no turn is sampled twice"
    assert _comparable(got) == _comparable(_turns(whole.path))
    assert [s.to_dict() for s in resumed.scores] == [s.to_dict() for s in whole.scores]


def test_the_embedded_model_plays_both_roles_and_the_run_replays_offline(tmp_path: Path) -> None:
    """One small live run of the example suite (one episode: a leader step and the customer's
    reply, which ends it: max_turns 1), then its replay with llama_cpp blocked: the same steps,
    the same teammate reply, the same metrics. (That the reply reaches the leader's next prompt
    is shown above with scripted backends: the scaffold renders it the same for any model.)"""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    suite = repo / "teammate.yaml"
    text = (ROOT / "suites" / "examples" / "teammate.yaml").read_text()
    suite.write_text(text.replace("    max_turns: 2\n", "    max_turns: 1\n", 1))
    trusted = Trusted(models={"customer": NamedModel("customer", {"model": "local:smollm2", "max_tokens": 32}, "test")})
    options = RunOptions(
        out=tmp_path / "live", seed=1, samples=1, max_tokens=64, progress=False, cache=False, trusted=trusted
    )
    live = leader_eval.run(suite, options)
    turns = _turns(live.path)
    assert len(turns) == 1 and turns[0]["role"] == "customer" and turns[0]["outcome"] == "ok" and turns[0]["reply"]
    assert turns[0]["end"] == "max_turns"
    # the customer model read its persona, then the leader's message as the user
    assert [m["role"] for m in turns[0]["prompt"]["messages"]] == ["system", "user"]
    assert "You are Ada, a customer." in turns[0]["prompt"]["text"]
    manifest = json.loads((live.path / "manifest.json").read_text())
    assert manifest["identity"]["teammates"]["customer"]["model_id"] == "local:smollm2"

    proc = subprocess.run(
        [sys.executable, "-m", "leader_eval", "run", str(suite), "--model", f"replay:{live.path}",
         "--out", str(tmp_path / "replayed"), "-q"],
        env=_env(tmp_path, block_llama=True), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    replayed = json.loads((tmp_path / "replayed" / "summary.json").read_text())["overall"]["metrics"]
    assert replayed == live.summary["overall"]["metrics"]
    drop = ("timings", "key")
    assert [{k: v for k, v in t.items() if k not in drop} for t in _turns(tmp_path / "replayed")] == [
        {k: v for k, v in t.items() if k not in drop} for t in turns
    ]


def test_show_and_the_report_print_each_teammate_reply_after_the_step_it_answers(tmp_path: Path) -> None:
    suite = write_desk(tmp_path / "repo")
    run = _run(suite, tmp_path / "run")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["show", str(run.path), "--case", "late_order"]) == 0
    out = buf.getvalue()
    assert "teammate customer" in out and "raw: 'When does it arrive?'" in out
    assert out.index("-- step 1 ") < out.index("When does it arrive?") < out.index("-- step 2 ")
    assert "ended: user_stop" in out
    # and the HTML report shows each reply after its step
    html = tmp_path / "report.html"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["report", str(run.path), "-o", str(html)]) == 0
    page = html.read_text()
    assert "teammate reply" in page and "When does it arrive?" in page


class _FailingCustomer(ScriptedBackend):
    async def sample(self, request: SampleRequest) -> list[Completion]:
        return [Completion(text="", token_ids=[], stop_reason=None, error="server said 500") for _ in request.seeds]


def test_a_teammate_the_sampler_failed_is_a_sampler_error_never_a_pass(tmp_path: Path) -> None:
    suite = write_desk(tmp_path / "repo")
    run = _run(suite, tmp_path / "run", teammates={"customer": _FailingCustomer([], model_id="scripted:failing")})
    assert {t["end"] for t in _turns(run.path)} == {"teammate_error"}
    assert all(s.outcome == "error" and not s.passed and s.reason == "sampler_error" for s in run.scores)
    assert all(s.outcome == "error" and "teammate: server said 500" in (s.error or "") for s in run.samples)


def test_in_messages_mode_the_reply_is_a_user_turn_after_the_tool_results(tmp_path: Path) -> None:
    suite = write_desk(
        tmp_path / "repo", TEAMMATE_SUITE.replace("  max_steps: 4\n", "  max_steps: 4\n  transcript: messages\n")
    )
    run = _run(suite, tmp_path / "run")
    steps = RunDir(run.path).read_steps()[("late_order", 0)]
    tail = steps[1]["prompt"]["messages"][-3:]
    assert [m["role"] for m in tail] == ["assistant", "tool", "user"]
    assert tail[-1]["content"] == "When does it arrive?"


def test_the_sample_cap_reserves_the_teammates_turns(tmp_path: Path) -> None:
    suite = write_desk(tmp_path / "repo")
    options = RunOptions(out=tmp_path / "run", seed=3, progress=False, cache=False, max_samples=13, trusted=Trusted())
    run = leader_eval.run(suite, options, backend=scripted_leader(), teammates={"customer": scripted_customer()})
    # each episode reserves max_steps 4 + max_turns 3: 13 leaves room for one episode of four
    assert run.manifest["status"] == "capped"
    assert len(RunDir(run.path).read_steps()) == 1
