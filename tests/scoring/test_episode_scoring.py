"""Episode checks on recorded step outputs: goal, prerequisites, errors, forbidden tools, loops, final message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from leader_eval.scoring.aggregate import case_results, summarize
from leader_eval.scoring.episode import episode_data, score_episode
from leader_eval.scoring.scorer import ModelInfo
from leader_eval.suite.load import load_suite
from tests.support.episodes import EPISODE_SUITE, write_repo

EOT = "<|im_end|>"
MODEL = ModelInfo(special_tokens=(EOT, "<|im_start|>"), eot_tokens=(EOT,))


def _call(tool: str, **args: Any) -> str:
    return json.dumps({"tool": tool, "arguments": args}) + EOT


def _episode(suite: Any, outputs: list[str], *, index: int = 0, outcome: str = "ok") -> list[dict[str, Any]]:
    """Step records for ``outputs`` as the loop writes them (calls parsed, results from the world)."""
    from leader_eval.sampling.episode import EpisodeRunner

    case = suite.cases[0]

    class _NoSampler:  # only apply_chat_template is used: prompts are not under test here
        model_id = "recorded"
        default_protocol = "json"

        def apply_chat_template(self, messages: Any, tools: Any) -> Any:
            from leader_eval.types import Prompt

            return Prompt(text="\n".join(m["content"] for m in messages), token_ids=None, messages=messages)

    runner = EpisodeRunner(suite, case, _NoSampler(), None, "json", {"special_tokens": [EOT]}, None)  # type: ignore[arg-type]
    history: list[dict[str, Any]] = []
    for k, text in enumerate(outputs):
        parsed = runner.parse(text, None)
        calls = [{"tool": c.name, "arguments": c.arguments} for c in parsed.calls]
        before = [(c["tool"], c["arguments"]) for r in history for c in r["calls"]]
        results = runner.world.answer([*before, *((c["tool"], c["arguments"]) for c in calls)])[len(before) :]
        prompt = runner.prompt(history)
        history.append(
            {
                "slot": f"{case.id}#{index}#{k}",
                "case_id": case.id,
                "index": index,
                "seed": k,
                "key": str(k),
                "outcome": outcome if k == len(outputs) - 1 else "ok",
                "text": text,
                "token_ids": [],
                "stop_reason": "stop",
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "error": None if outcome == "ok" else "boom",
                "timings": {},
                "step": k,
                "prompt": {"text": prompt.text, "messages": prompt.messages},
                "calls": calls,
                "results": [r.to_dict() for r in results],
                "end": None,
            }
        )
    return history


@pytest.fixture
def suite(tmp_path: Path) -> Any:
    return load_suite(write_repo(tmp_path))


def _failed(score: Any) -> dict[str, str]:
    return {c["check"]: c["reason"] for c in score.checks if not c["passed"]}


def test_goal_reached_at_its_step(suite: Any) -> None:
    steps = _episode(
        suite,
        [_call("lookup", topic="weather"), _call("send_message_to_chat", message="Team, we build a bridge today!")],
    )
    s = score_episode(suite, suite.cases[0], steps, "json", MODEL)
    assert s.passed and s.tool_correct, _failed(s)
    d = episode_data(s)
    assert d is not None and d["goal_reached"] and d["steps_to_goal"] == 2


def test_goal_arguments_must_hold(suite: Any) -> None:
    steps = _episode(suite, [_call("send_message_to_chat", message="hello everyone")])
    s = score_episode(suite, suite.cases[0], steps, "json", MODEL)
    assert not s.passed and _failed(s)["goal"] == "goal_not_reached"
    assert s.reason == "goal_not_reached"


def test_forbidden_tool_fails_even_when_the_goal_is_reached(suite: Any) -> None:
    steps = _episode(
        suite, [_call("click_ui", element="send"), _call("send_message_to_chat", message="We build a bridge")]
    )
    s = score_episode(suite, suite.cases[0], steps, "json", MODEL)
    assert s.tool_correct and not s.passed
    assert _failed(s) == {"forbidden_tools": "forbidden_tool"}


def test_no_call_step_and_step_checks(suite: Any) -> None:
    steps = _episode(
        suite,
        ["I will click the button <think>hmm</think>", _call("send_message_to_chat", message="We build a bridge")],
    )
    s = score_episode(suite, suite.cases[0], steps, "json", MODEL)
    failed = _failed(s)
    assert failed["no_call_step"] == "no_call"
    assert "steps" in failed
    d = episode_data(s)
    assert d is not None and d["no_call_steps"] == [0] and d["leaked_steps"] == [0]
    assert d["step_leak_rate"] == 0.5 and s.leaked


def test_prerequisite_needs_a_successful_result(tmp_path: Path) -> None:
    text = EPISODE_SUITE.replace(
        "        args: {message: {mentions_goal: true}}\n",
        "        args: {message: {mentions_goal: true}}\n        after: [lookup]\n",
    )
    suite = load_suite(write_repo(tmp_path, text))
    send = _call("send_message_to_chat", message="We build a bridge")
    # the first goal lookup errors (the sequence), so the first message does not count
    steps = _episode(suite, [_call("lookup", topic="goal"), send, _call("lookup", topic="goal"), send])
    s = score_episode(suite, suite.cases[0], steps, "json", MODEL)
    d = episode_data(s)
    assert d is not None and d["steps_to_goal"] == 4
    no_lookup = score_episode(suite, suite.cases[0], _episode(suite, [send]), "json", MODEL)
    assert not no_lookup.tool_correct


def test_an_error_result_is_not_the_goal_and_a_retry_is(tmp_path: Path) -> None:
    text = EPISODE_SUITE.replace(
        "    episode:\n      goal:",
        "    episode:\n      fixtures:\n        - tool: send_message_to_chat\n          sequence: [{error: busy}, {result: {sent: true}}]\n      goal:",
    )
    suite = load_suite(write_repo(tmp_path, text))
    send = _call("send_message_to_chat", message="We build a bridge")
    once = score_episode(suite, suite.cases[0], _episode(suite, [send]), "json", MODEL)
    assert not once.tool_correct
    twice = score_episode(suite, suite.cases[0], _episode(suite, [send, send]), "json", MODEL)
    assert twice.tool_correct and twice.passed  # loop_k defaults to 3: one retry is no loop


def test_final_message_constraints(tmp_path: Path) -> None:
    text = EPISODE_SUITE.replace(
        "      end: {on_no_call: false}\n",
        "      end: {on_no_call: false}\n      final:\n        message: {contains: Ada}\n",
    )
    suite = load_suite(write_repo(tmp_path, text))
    ok = score_episode(
        suite,
        suite.cases[0],
        _episode(suite, [_call("send_message_to_chat", message="Ada, we build a bridge")]),
        "json",
        MODEL,
    )
    assert ok.passed, _failed(ok)
    bad = score_episode(
        suite,
        suite.cases[0],
        _episode(suite, [_call("send_message_to_chat", message="We build a bridge")]),
        "json",
        MODEL,
    )
    assert _failed(bad) == {"final": "wrong_value"}


def test_a_sampler_error_in_any_step_is_never_a_pass(suite: Any) -> None:
    steps = _episode(suite, [_call("send_message_to_chat", message="We build a bridge"), ""], outcome="error")
    s = score_episode(suite, suite.cases[0], steps, "json", MODEL)
    assert not s.passed and s.outcome == "error" and not s.scored


def test_episode_metrics_with_counts(suite: Any) -> None:
    reached = score_episode(
        suite,
        suite.cases[0],
        _episode(suite, [_call("lookup", topic="weather"), _call("send_message_to_chat", message="We build a bridge")]),
        "json",
        MODEL,
    )
    looped = score_episode(
        suite, suite.cases[0], _episode(suite, [_call("lookup", topic="weather")] * 3, index=1), "json", MODEL
    )
    rec = case_results(suite.cases, [reached, looped])[0]
    assert rec["goal_rate"] == 0.5 and rec["loop_rate"] == 0.5
    assert rec["steps_to_goal"] == 2 and rec["n_steps_to_goal"] == 1
    m = summarize(suite, [rec])["overall"]["metrics"]
    assert m["goal_rate"]["value"] == 0.5
    assert m["steps_to_goal"]["n_samples"] == 1 and not m["steps_to_goal"]["gated"]
    assert m["loop_rate"]["higher_is_better"] is False


def _run_of(suite: Any, scores: list[Any], label: str = "v1") -> Any:
    from leader_eval.runs.evaluate import Run

    results = case_results(suite.cases, scores)
    summary = summarize(suite, results)
    manifest = {
        "identity": {
            "suite": suite.name,
            "suite_hash": suite.content_hash,
            "model_id": "local:smollm2",
            "protocol": "json",
            "run_seed": 1,
            "cases": {c.id: {"samples": 2} for c in suite.cases},
        },
        "run_id": f"run-{label}",
        "label": label,
        "status": "complete",
        "scorer_version": __import__("leader_eval.store.formats", fromlist=["SCORER_VERSION"]).SCORER_VERSION,
    }
    return Run(Path("."), manifest, [], scores, results, summary)


def test_the_gate_pairs_episode_metrics_by_case(tmp_path: Path) -> None:
    from leader_eval.decide.gate import gate
    from leader_eval.decide.golden import build_golden

    goals = ["build a bridge", "plant a garden", "map the trails", "paint the barn", "fix the well", "bake bread"]
    cases = "".join(
        f"  - id: c{i}\n    vars: {{current_goal: {g}}}\n    episode:\n      goal:\n"
        "        tool: send_message_to_chat\n        args: {message: {mentions_goal: true}}\n"
        for i, g in enumerate(goals)
    )
    text = EPISODE_SUITE[: EPISODE_SUITE.index("cases:\n") + len("cases:\n")] + cases
    suite = load_suite(write_repo(tmp_path, text))

    def scores(good: bool) -> list[Any]:
        out = []
        for case, goal in zip(suite.cases, goals, strict=True):
            sub = type(suite)(**{**suite.__dict__, "cases": (case,)})
            message = f"Team, today we {goal}!" if good else "Hello everyone"
            for i in range(2):
                steps = _episode(
                    sub, [_call("lookup", topic="weather"), _call("send_message_to_chat", message=message)], index=i
                )
                out.append(score_episode(suite, case, steps, "json", MODEL))
        return out

    good, bad = _run_of(suite, scores(True), "v1"), _run_of(suite, scores(False), "v2")
    assert good.summary["overall"]["metrics"]["goal_rate"]["value"] == 1.0
    golden = build_golden(good)
    assert golden["metrics"]["goal_rate"]["value"] == 1.0
    assert all(rec["goal_rate"] == 1.0 for rec in golden["cases"].values())
    assert gate(good, golden).exit_status == 0
    result = gate(bad, golden)
    assert result.exit_status == 1
    rows = {r.metric: r for r in result.rows}
    assert rows["goal_rate"].verdict == "fail" and rows["goal_rate"].paired

    # compare pairs the two checkpoints by case on the episode metrics too
    from leader_eval.decide.compare import compare_runs

    comparison = compare_runs([good, bad])
    diffs = {d.metric: d for d in comparison.pairs[0].metrics}
    assert diffs["goal_rate"].verdict == "regression"
    assert "loop_rate" in diffs and "step_leak_rate" in diffs
    assert comparison.exit_status == 1
