"""The loop a run samples on: uvloop's by default where it is installed, asyncio's on request, and
a bad ``LEADER_EVAL_EVENT_LOOP`` a one-line error (exit 2) before anything is read or sampled."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

if sys.platform == "win32":
    pytest.skip("uvloop does not run on Windows (a core dependency elsewhere)", allow_module_level=True)
import uvloop

from leader_eval.cli.app import main
from leader_eval.errors import LeaderEvalError
from leader_eval.runs import event_loop
from leader_eval.runs.evaluate import run
from leader_eval.runs.options import RunOptions
from leader_eval.sampling.backends.base import Completion, SampleRequest
from tests.support.scripted import ScriptedBackend, call


class LoopNoting(ScriptedBackend):
    """A scripted backend that notes the type of the loop each request is sampled on."""

    def __init__(self) -> None:
        super().__init__([call("send_message_to_chat", message="Hi team, we build a treehouse!")])
        self.loops: set[type] = set()

    async def sample(self, request: SampleRequest) -> list[Completion]:
        self.loops.add(type(asyncio.get_running_loop()))
        return await super().sample(request)


def _run(suite: Path, tmp_path: Path) -> tuple[LoopNoting, Path]:
    backend = LoopNoting()
    out = tmp_path / "run"
    result = run(suite, RunOptions(seed=1, samples=2, out=out, progress=False, cache=False), backend=backend)
    assert result.summary["overall"]["n_scored"] == backend.requests > 0
    return backend, out


def test_a_run_samples_on_uvloop_by_default(mini_suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(event_loop.ENV, raising=False)
    backend, _ = _run(mini_suite, tmp_path)
    assert backend.loops == {uvloop.Loop}


def test_asyncio_keeps_asyncio_loop_and_the_same_records(
    mini_suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(event_loop.ENV, "uvloop")
    _, on_uv = _run(mini_suite, tmp_path / "uv")
    monkeypatch.setenv(event_loop.ENV, " AsyncIO ")
    backend, on_asyncio = _run(mini_suite, tmp_path / "asyncio")
    assert all(issubclass(t, asyncio.BaseEventLoop) and not issubclass(t, uvloop.Loop) for t in backend.loops)
    assert backend.loops
    # what was sampled and scored does not depend on the loop
    for name in ("samples.jsonl", "results.jsonl", "cases.json"):
        assert (on_uv / name).read_bytes() == (on_asyncio / name).read_bytes(), name


@pytest.mark.parametrize("value", ["trio", "uv loop", "1"])
def test_an_unknown_loop_is_a_one_line_error_before_anything_runs(
    mini_suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    monkeypatch.setenv(event_loop.ENV, value)
    backend = LoopNoting()
    with pytest.raises(LeaderEvalError, match=r"LEADER_EVAL_EVENT_LOOP=.*not an event loop"):
        run(mini_suite, RunOptions(seed=1, out=tmp_path / "run", progress=False, cache=False), backend=backend)
    assert backend.requests == 0 and not (tmp_path / "run").exists()
    status = main(["run", str(mini_suite), "--model", "replay:nowhere", "--out", str(tmp_path / "cli")])
    err = capsys.readouterr().err
    assert status == 2 and "LEADER_EVAL_EVENT_LOOP" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "cli").exists()
    # every command that samples says so first, before it reads a suite (this one does not exist)
    missing = str(tmp_path / "no-such-suite.yaml")
    for argv in (
        ["run", missing, "--suite-root", str(tmp_path), "--model", "replay:nowhere"],
        ["run", missing, "--model", "replay:a", "--model", "replay:b"],
        ["judge-pair", missing, str(tmp_path / "a"), str(tmp_path / "b")],
        ["judge-check", missing, str(tmp_path / "labels.jsonl")],
    ):
        status = main(argv)
        err = capsys.readouterr().err
        assert status == 2 and "LEADER_EVAL_EVENT_LOOP" in err and len(err.strip().splitlines()) == 1, (argv, err)


def test_uvloop_asked_for_but_missing_is_an_error_and_by_default_asyncio_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # an import of it now fails
    monkeypatch.setenv(event_loop.ENV, "uvloop")
    coro = asyncio.sleep(0)
    with pytest.raises(LeaderEvalError, match="uvloop is not installed"):
        event_loop.run(coro)
    monkeypatch.delenv(event_loop.ENV)

    async def loop_type() -> type:
        return type(asyncio.get_running_loop())

    assert not issubclass(event_loop.run(loop_type()), uvloop.Loop)
