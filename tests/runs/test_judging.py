"""Rubric judges over a run: recorded, resumed without asking again, replayed with no model.

The judge here is a test double (``ScriptedBackend``): its verdict is a function of the judged
text, so what a run records and scores can be asserted exactly."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from leader_eval.cli.run import judge_errors_over_limit
from leader_eval.errors import LeaderEvalError
from leader_eval.runs.evaluate import run
from leader_eval.runs.options import RunOptions
from leader_eval.runs.trusted import NamedModel, Trusted
from leader_eval.store.run_store import JUDGEMENTS, RunDir
from leader_eval.suite.load import load_suite
from tests.support.scripted import ScriptedBackend, call

SUITE = """\
name: judged
protocol: json
sampling: {temperature: 0.7, max_tokens: 64, samples: 2, seed: 7}
scaffold:
  messages:
    - role: user
      content: "{{ request }}"
tools:
  - name: send_message_to_chat
    parameters:
      type: object
      properties: {message: {type: string}}
      required: [message]
judges:
  polite:
    model_role: grader
    rubric: The message is polite.
    judged: {argument: send_message_to_chat.message}
  helpful:
    model_role: grader
    rubric: The message helps.
    scale: {min: 1, max: 5}
    judged: {argument: send_message_to_chat.message}
cases:
  - id: greet
    vars: {request: say hello}
    expect: {calls: [{tool: send_message_to_chat}]}
  - id: thank
    vars: {request: say thanks}
    expect: {calls: [{tool: send_message_to_chat}]}
"""

LEADER = [
    call("send_message_to_chat", message="Hello team, thank you!"),
    call("send_message_to_chat", message="Go away."),
]


def _judge_reply(prompt: str, seed: int) -> str:
    rude = "Go away." in prompt
    if '"score"' in prompt:
        return '{"score": 1}' if rude else '{"score": 5}'
    return '{"verdict": "fail"}' if rude else '{"verdict": "pass"}'


def _suite(tmp_path: Path, text: str = SUITE) -> Path:
    p = tmp_path / "judged.yaml"
    p.write_text(text)
    return p


def _options(tmp_path: Path, judge: Any, **kw: Any) -> RunOptions:
    trusted = Trusted(models={"grader": NamedModel("grader", {"model": "test:judge", "backend": judge}, "test")})
    return RunOptions(out=tmp_path / "run", progress=False, cache=False, trusted=trusted, **kw)


def test_judged_run_records_each_judgement_and_scores_it_as_a_metric(tmp_path: Path) -> None:
    judge = ScriptedBackend([], pick=_judge_reply, model_id="test:judge")
    result = run(_suite(tmp_path), _options(tmp_path, judge), backend=ScriptedBackend(LEADER))
    metrics = result.summary["overall"]["metrics"]
    # one of each case's two samples is rude: every verdict is read, none is an error
    assert metrics["judge:polite"]["value"] == pytest.approx(0.5)
    assert metrics["judge:helpful"]["value"] == pytest.approx(0.5)
    assert metrics["judge:polite"]["n_judged"] == 4 and metrics["judge:polite"]["n_judge_errors"] == 0
    assert judge.requests == 8
    records = RunDir(result.path).read_judgements()
    assert len(records) == 8 and all(r["judge"]["model_id"] == "test:judge" for r in records.values())


def test_a_killed_judging_resumes_without_asking_the_judge_again(tmp_path: Path) -> None:
    judge = ScriptedBackend([], pick=_judge_reply, model_id="test:judge")
    first = run(_suite(tmp_path), _options(tmp_path, judge), backend=ScriptedBackend(LEADER))
    path = first.path / JUDGEMENTS
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:3]) + lines[3][:20])  # killed mid-write of the fourth judgement
    again = ScriptedBackend([], pick=_judge_reply, model_id="test:judge")
    second = run(_suite(tmp_path), _options(tmp_path, again), backend=ScriptedBackend(LEADER))
    assert again.requests == 5  # the three whole records are kept; the torn one is asked again
    assert second.summary["overall"]["metrics"]["judge:polite"] == first.summary["overall"]["metrics"]["judge:polite"]


def test_replay_rescores_judgements_without_any_model(tmp_path: Path) -> None:
    judge = ScriptedBackend([], pick=_judge_reply, model_id="test:judge")
    first = run(_suite(tmp_path), _options(tmp_path, judge), backend=ScriptedBackend(LEADER))
    never = ScriptedBackend([], pick=lambda p, s: pytest.fail("replay asked a judge"), model_id="test:judge")
    opts = _options(tmp_path, never, model=f"replay:{first.path}")
    opts.out = tmp_path / "replayed"
    replayed = run(_suite(tmp_path), opts)
    assert never.requests == 0
    for name in ("judge:polite", "judge:helpful"):
        assert (
            replayed.summary["overall"]["metrics"][name]["value"] == first.summary["overall"]["metrics"][name]["value"]
        )


@pytest.mark.parametrize(
    "reply",
    ['{"verdict": "pass"} and more', "pass", '{"verdict": "PASS"}', '{"verdict": "pass", "why": 1}', ""],
)
def test_a_reply_that_is_not_a_verdict_is_a_judge_error_never_a_pass(tmp_path: Path, reply: str) -> None:
    judge = ScriptedBackend([reply], model_id="test:judge")
    text = SUITE.replace("  helpful:", "  unused:").replace("rubric: The message helps.", "rubric: x\n    tags: [none]")
    result = run(_suite(tmp_path, text), _options(tmp_path, judge), backend=ScriptedBackend(LEADER))
    m = result.summary["overall"]["metrics"]["judge:polite"]
    assert m["n_judged"] == 0 and m["n_judge_errors"] == 4 and m["judge_error_rate"] == 1.0
    assert m["value"] is None or m["n_cases"] == 0
    # the run itself fails, as the gate would: `leader-eval run` exits 1 naming the criterion
    (line,) = judge_errors_over_limit(result.summary)
    assert line.startswith("judge polite: 4 judge error(s), rate 1.0 > max_error_rate 0")


def test_a_judge_timeout_is_a_judge_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEADER_EVAL_INTERRUPT_GRACE_S", "0")  # the hung call is dropped at once

    class Hung(ScriptedBackend):
        async def sample(self, request: Any) -> Any:
            await asyncio.Event().wait()  # never answers

    opts = _options(tmp_path, Hung([], model_id="test:judge"))
    opts.trusted.models["grader"] = NamedModel(
        "grader", {**opts.trusted.models["grader"].values, "request_timeout": 0.01}, "test"
    )
    result = run(_suite(tmp_path), opts, backend=ScriptedBackend(LEADER))
    rec = next(iter(RunDir(result.path).read_judgements().values()))
    assert rec["error"] and "timed out" in rec["error"]
    assert result.summary["overall"]["metrics"]["judge:polite"]["n_judge_errors"] == 4


def test_an_undefined_judge_role_is_one_line_before_anything_is_sampled(tmp_path: Path) -> None:
    leader = ScriptedBackend(LEADER)
    opts = RunOptions(out=tmp_path / "run", progress=False, cache=False, trusted=Trusted())
    with pytest.raises(LeaderEvalError) as err:
        run(_suite(tmp_path), opts, backend=leader)
    assert "judged.yaml:" in str(err.value) and "'grader' is not defined" in str(err.value)
    assert "\n" not in str(err.value)
    assert leader.requests == 0 and not (tmp_path / "run").exists()


def test_the_judge_is_asked_with_the_verdict_constraint(tmp_path: Path) -> None:
    seen: list[Any] = []

    class Recording(ScriptedBackend):
        async def sample(self, request: Any) -> Any:
            seen.append(request.constraint)
            return await super().sample(request)

    run(_suite(tmp_path), _options(tmp_path, Recording([], pick=_judge_reply, model_id="test:judge")),
        backend=ScriptedBackend(LEADER))  # fmt: skip
    assert seen and all(c is not None for c in seen)
    assert {json.dumps(c.json_schema, sort_keys=True) for c in seen} == {
        json.dumps({"type": "object", "properties": {"verdict": {"type": "string", "enum": ["pass", "fail"]}},
                    "required": ["verdict"], "additionalProperties": False}, sort_keys=True),
        json.dumps({"type": "object", "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5}},
                    "required": ["score"], "additionalProperties": False}, sort_keys=True),
    }  # fmt: skip


def test_suite_loads_judges_with_their_rubric_hash(tmp_path: Path) -> None:
    suite = load_suite(_suite(tmp_path))
    assert [j.name for j in suite.judges] == ["polite", "helpful"]
    assert suite.judges[0].rubric_sha256 != suite.judges[1].rubric_sha256


def test_shards_merge_their_judgements_into_the_unsharded_figures(tmp_path: Path) -> None:
    from leader_eval.runs.merge import merge_runs, shard_options

    suite = _suite(tmp_path)
    judge = ScriptedBackend([], pick=_judge_reply, model_id="test:judge")
    full = run(suite, _options(tmp_path, judge, seed=7), backend=ScriptedBackend(LEADER))
    shards = []
    for i in (1, 2):
        opts = shard_options(_options(tmp_path, judge, seed=7), f"{i}/2", suite)
        opts.out = tmp_path / f"shard{i}"
        shards.append(run(suite, opts, backend=ScriptedBackend(LEADER)).path)
    merged = merge_runs(shards, tmp_path / "merged", suite=suite)
    assert len(RunDir(merged.path).read_judgements()) == 8
    for name in ("judge:polite", "judge:helpful"):
        assert merged.summary["overall"]["metrics"][name] == full.summary["overall"]["metrics"][name]
