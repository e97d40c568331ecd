"""A simulated teammate in episodes, with scripted backends for both roles (no model).

What a user relies on: the teammate's reply reaches the leader's next prompt; a stop phrase ends
the conversation; ``max_turns`` bounds it; the scripted tools keep answering beside it; every turn
is recorded in ``turns.jsonl`` and a replay re-scores the run with no model; an undefined role is
one line before anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import leader_eval
from leader_eval.errors import LeaderEvalError
from leader_eval.runs.options import RunOptions
from leader_eval.runs.trusted import NamedModel, Trusted
from leader_eval.store.run_store import TURNS, RunDir
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
