"""Pairwise judging of two runs, both orders: a judge that always prefers the first text is caught
by its order consistency and scores every pair a tie. The judges are test doubles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from leader_eval.runs.evaluate import run
from leader_eval.runs.options import RunOptions
from leader_eval.runs.pairwise import judge_pairs
from leader_eval.runs.trusted import NamedModel, Trusted
from tests.support.scripted import ScriptedBackend, call

SUITE = """\
name: pairs
protocol: json
sampling: {temperature: 0.7, max_tokens: 64, samples: 2, seed: 7}
scaffold: {messages: [{role: user, content: "{{ request }}"}]}
tools:
  - name: send
    parameters: {type: object, properties: {message: {type: string}}, required: [message]}
judges:
  politer:
    model_role: grader
    pairwise: true
    rubric: The message is polite.
    judged: {argument: send.message}
cases:
  - {id: a, vars: {request: hi}, expect: {calls: [{tool: send}]}}
  - {id: b, vars: {request: yo}, expect: {calls: [{tool: send}]}}
"""


def _trusted(pick: Any) -> Trusted:
    judge = ScriptedBackend([], pick=pick, model_id="test:pair-judge")
    return Trusted(models={"grader": NamedModel("grader", {"model": "test:pair-judge", "backend": judge}, "test")})


def _runs(tmp_path: Path) -> tuple[Path, Path, Path]:
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)
    out = []
    for name, message in (("rude", "Go away."), ("kind", "Thank you, friends!")):
        opts = RunOptions(out=tmp_path / name, progress=False, cache=False, trusted=_trusted(lambda p, s: ""))
        out.append(run(suite, opts, backend=ScriptedBackend([call("send", message=message)])).path)
    return suite, out[0], out[1]


def _prefers_thanks(prompt: str, seed: int) -> str:
    first = prompt.split("BEGIN JUDGED-TEXT-", 1)[1]
    return '{"better": "1"}' if first.split("\n", 2)[1].startswith("Thank") else '{"better": "2"}'


def test_a_fair_judge_prefers_the_polite_run_in_both_orders(tmp_path: Path) -> None:
    suite, rude, kind = _runs(tmp_path)
    got = judge_pairs(suite, rude, kind, _trusted(_prefers_thanks))["criteria"]["politer"]
    assert got["b_preferred"]["value"] == 1.0 and got["order_consistency"] == 1.0
    assert got["pairs"] == 4 and got["judge_calls"] == 8 and got["judge_errors"] == 0


def test_a_judge_that_always_picks_the_first_text_is_inconsistent_and_neutral(tmp_path: Path) -> None:
    suite, rude, kind = _runs(tmp_path)
    got = judge_pairs(suite, rude, kind, _trusted(lambda p, s: '{"better": "1"}'))["criteria"]["politer"]
    assert got["order_consistency"] == 0.0 and got["b_preferred"]["value"] == 0.5


def test_a_reply_that_is_not_a_preference_is_a_judge_error(tmp_path: Path) -> None:
    suite, rude, kind = _runs(tmp_path)
    got = judge_pairs(suite, rude, kind, _trusted(lambda p, s: "Text 2 is better"))["criteria"]["politer"]
    assert got["judge_errors"] == 8 and got["pairs_judged_both_orders"] == 0 and got["order_consistency"] is None


def test_a_preference_is_read_strictly() -> None:
    from leader_eval.runs.pairwise import parse_preference

    assert parse_preference(' {"better": "tie"}\n') == "tie"
    for bad in ('{"better": "1", "better": "2"}', '{"better": 1}', "1", '{"better": "1"} because', ""):
        assert parse_preference(bad) is None
