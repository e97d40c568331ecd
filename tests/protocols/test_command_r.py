"""Cohere Command R7B / Command A ``<|START_ACTION|>[...]<|END_ACTION|>`` actions."""

from __future__ import annotations

import time

import pytest

from leader_eval.protocols import NOT_ALONE_ERROR, REGISTRY, parse_output

ONE = '{"tool_call_id": "0", "tool_name": "pause", "parameters": {"minutes": 5}}'
OK = f"<|START_ACTION|>[\n    {ONE}\n]<|END_ACTION|>"
THINKING = ("<|START_THINKING|>", "<|END_THINKING|>")


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        (OK + "<|END_OF_TURN_TOKEN|>", [("pause", {"minutes": 5})]),
        ('<|START_ACTION|>[{"tool_name": "wait", "parameters": {}}]<|END_ACTION|>', [("wait", {})]),
        (
            f'<|START_ACTION|>[{ONE},\n {{"tool_call_id": "1", "tool_name": "a", "parameters": {{"s": "<|END_ACTION|>"}}}}]'
            "<|END_ACTION|>",
            [("pause", {"minutes": 5}), ("a", {"s": "<|END_ACTION|>"})],
        ),
    ],
)
def test_strict_reads_the_action(text: str, calls: list[tuple[str, object]]) -> None:
    r = parse_output(text, "command_r", eot_tokens=("<|END_OF_TURN_TOKEN|>",))
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == calls
    assert r.visible_text == ""


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (OK.removesuffix("<|END_ACTION|>"), "expected <|END_ACTION|>"),
        (f"<|START_ACTION|>{ONE}<|END_ACTION|>", "expected a JSON array of tool calls"),
        ("<|START_ACTION|>[]<|END_ACTION|>", "empty array"),
        ('<|START_ACTION|>[{"tool_call_id": 0, "tool_name": "a", "parameters": {}}]<|END_ACTION|>', "must be a string"),
        ('<|START_ACTION|>[{"name": "a", "parameters": {}}]<|END_ACTION|>', "unexpected key 'name'"),
        ('<|START_ACTION|>[{"tool_name": "a"}]<|END_ACTION|>', "no 'parameters' key"),
        ('<|START_ACTION|>[{"tool_name": "a", "parameters": "{}"}]<|END_ACTION|>', "JSON-encoded string"),
        (OK + " Done.", "text after <|END_ACTION|>"),
        (OK.replace("\n]", "\n] ok"), "expected <|END_ACTION|>"),
    ],
)
def test_strict_refusals_name_the_reason(text: str, reason: str) -> None:
    r = parse_output(text, "command_r")
    assert not r.strict_ok and r.calls == ()
    assert reason in (r.error or "")


def test_prose_before_fails_strict_and_lenient_finds_the_call() -> None:
    r = parse_output("<|START_RESPONSE|>On it.<|END_RESPONSE|>" + OK, "command_r")
    assert r.error == NOT_ALONE_ERROR
    assert [(c.name, c.arguments) for c in r.lenient_calls] == [("pause", {"minutes": 5})]


def test_a_plan_before_the_action_is_the_reasoning_block() -> None:
    r = parse_output("<|START_THINKING|>I will pause.<|END_THINKING|>" + OK, "command_r", reasoning_tags=THINKING)
    assert r.strict_ok, r.error
    assert r.reasoning == "I will pause."


def test_the_markup_is_the_protocols_own() -> None:
    p = REGISTRY["command_r"]
    assert p.is_attempt("\n<|START_ACTION|>[") and p.owns("<|END_ACTION|>")
    assert not p.is_attempt("Action: [") and not p.owns("<|START_RESPONSE|>")


@pytest.mark.parametrize(
    "text",
    [
        "<|START_ACTION|>" * 100_000,
        "<|START_ACTION|>[" * 50_000,
        ("<|START_ACTION|>[{" + '"a": [' * 50) * 2_000,
        "<|START_ACTION|>[" + f"{ONE}," * 300 + f"{ONE}]<|END_ACTION|>",
    ],
)
def test_hostile_inputs_stay_fast(text: str) -> None:
    t = time.perf_counter()
    r = parse_output(text, "command_r")
    assert time.perf_counter() - t < 1.0
    assert not r.strict_ok
