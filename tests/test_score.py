"""CaseScorer on handcrafted samples: the verdict, its primary reason, hard fails, where a leak
is, and what is never scored. No model needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leader_eval.protocols import parse_output
from leader_eval.render import render_messages
from leader_eval.score import CaseScorer, ModelInfo, SampleScore, _call_dict, case_scorer
from leader_eval.suite import Suite, load_suite
from leader_eval.types import Sample

SUITE = """\
name: score-tests
description: handcrafted samples for the scoring glue
protocol: json
scaffold:
  messages:
    - role: system
      content: "You are {{ agent_name }}. Goal: {{ current_goal }}. Act only through the chat tool."
    - role: user
      content: "{{ request }}"
tools:
  - name: send_message_to_chat
    description: Post to the room.
    parameters:
      type: object
      properties:
        message: {type: string, minLength: 1}
      required: [message]
      additionalProperties: false
leakage:
  markers: ["[NO CHAT]"]
hard_fail: [empty, leak_tool_markup, leak_special_token]
defaults:
  vars: {agent_name: Mira}
cases:
  - id: kickoff
    vars: {current_goal: build a windmill by the river, request: "What are we doing?"}
    expect:
      calls:
        - tool: send_message_to_chat
          args:
            message: {mentions_goal: true}
  - id: lenient_hard
    vars: {current_goal: build a windmill by the river, request: "Say hi."}
    hard_fail: [leak_marker]
    expect:
      calls:
        - tool: send_message_to_chat
          args:
            message: {contains: windmill}
"""

SMOLLM2 = ModelInfo(special_tokens=("<|im_end|>", "<|endoftext|>", "<|im_start|>"), eot_tokens=("<|im_end|>",))
THINKER = ModelInfo(
    special_tokens=("<|im_end|>", "<|im_start|>"), eot_tokens=("<|im_end|>",), reasoning_tags=("<think>", "</think>")
)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    path: Path = tmp_path_factory.mktemp("suite") / "score.yaml"
    path.write_text(SUITE)
    return load_suite(path)


def _scorer(suite: Suite, case_id: str = "kickoff", model: ModelInfo = SMOLLM2) -> CaseScorer:
    case = next(c for c in suite.cases if c.id == case_id)
    messages = render_messages(suite, case)
    prompt = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return case_scorer(suite, case, "json", model, messages, prompt + "<|im_start|>assistant\n")


def _sample(text: str, case_id: str = "kickoff", **kw: object) -> Sample:
    return Sample(case_id, 0, 0, "k", kw.pop("outcome", "ok"), text=text, stop_reason="stop", **kw)  # type: ignore[arg-type]


def _call(message: str) -> str:
    return json.dumps({"name": "send_message_to_chat", "arguments": {"message": message}})


def _failed(score: SampleScore) -> dict[str, dict[str, object]]:
    return {c["check"]: c for c in score.failed_checks}


def test_a_valid_call_passes(suite: Suite) -> None:
    s = _scorer(suite).score(_sample(_call("Team, today we build the windmill by the river!") + "<|im_end|>"))
    assert s.passed and s.reason is None and not s.hard_fail
    assert s.strict_format and s.lenient_format and s.tool_correct and not s.leaked
    assert s.partial_credit == 1.0
    assert [c["name"] for c in s.calls] == ["send_message_to_chat"]


def test_a_call_with_prose_around_it_is_unparseable(suite: Suite) -> None:
    text = "Sure, here you go:\n" + _call("Let's build the windmill by the river.")
    s = _scorer(suite).score(_sample(text))
    assert not s.passed and s.reason == "unparseable"
    assert not s.strict_format and s.lenient_format  # the call is there, the output is not the protocol
    assert s.calls == [] and len(s.lenient_calls) == 1


def test_tool_markup_inside_a_message_is_a_located_hard_leak(suite: Suite) -> None:
    text = _call("<tool_use><name>send_message_to_chat</name></tool_use> build the windmill by the river")
    s = _scorer(suite).score(_sample(text))
    assert s.strict_format and not s.passed and s.leaked
    assert s.reason == "leak_tool_markup" and s.hard_fail
    leak = _failed(s)["leakage"]
    assert leak["hard"]
    wheres = {f["where"] for f in leak["findings"]}  # type: ignore[union-attr]
    assert wheres == {"call[0].arguments.message"}
    assert all(f["reason"] == "leak_tool_markup" for f in leak["findings"])  # type: ignore[union-attr]


@pytest.mark.parametrize("outcome", ["error", "context_overflow"])
def test_a_sample_the_model_never_produced_is_not_scored(suite: Suite, outcome: str) -> None:
    s = _scorer(suite).score(_sample("", outcome=outcome, error="server said 500"))
    assert not s.scored and not s.passed and not s.hard_fail
    assert s.reason == ("context_overflow" if outcome == "context_overflow" else "sampler_error")
    assert s.calls == [] and [c["check"] for c in s.checks] == [outcome]


def test_hard_fail_follows_the_case_list(suite: Suite) -> None:
    text = _call("[NO CHAT] build the windmill by the river")
    # the suite's hard_fail list does not name leak_marker ...
    soft = _scorer(suite, "kickoff").score(_sample(text))
    assert soft.reason == "leak_marker" and not soft.hard_fail
    # ... the case's own list does
    hard = _scorer(suite, "lenient_hard").score(_sample(text, case_id="lenient_hard"))
    assert hard.reason == "leak_marker" and hard.hard_fail
    assert _failed(hard)["leakage"]["hard"] and not _failed(soft)["leakage"]["hard"]


def test_a_declared_reasoning_block_is_kept_as_reasoning_not_a_leak(suite: Suite) -> None:
    text = "<think>Bo asked first; the goal is the windmill.</think>\n" + _call("We build the windmill by the river.")
    s = _scorer(suite, model=THINKER).score(_sample(text + "<|im_end|>"))
    assert s.passed and not s.leaked
    assert s.reasoning == "Bo asked first; the goal is the windmill."
    # the same text from a model that declares no reasoning block: a visible leak, not the protocol
    undeclared = _scorer(suite).score(_sample(text))
    assert not undeclared.passed and undeclared.reasoning is None
    assert undeclared.reason == "unparseable" and undeclared.leaked


def test_score_dicts_of_calls_are_tool_call_dicts() -> None:
    text = json.dumps(
        [
            {"name": "a", "arguments": {"x": [1, 2.5, {"y": None}], "z": True}},
            {"name": "b", "arguments": {"s": "é"}},
        ]
    )
    calls = parse_output(text, "json").calls
    for c in calls:
        d = _call_dict(c)
        assert d == c.to_dict()
        assert d["arguments"] is not c.arguments  # a copy, as asdict makes
