"""Upstage Solar Open's ``<|tool_calls|>...<|calls|>`` turn."""

from __future__ import annotations

import time

import pytest

from leader_eval.protocols import NOT_ALONE_ERROR, REGISTRY, parse_output


def call(name: str, args: str, cid: str = "call00001") -> str:
    return f"<|tool_call:begin|>{cid}<|tool_call:name|>{name}<|tool_call:args|>{args}<|tool_call:end|>"


OK = "<|tool_calls|>" + call("pause", '{"minutes": 5}') + "<|calls|>"


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        (OK, [("pause", {"minutes": 5})]),
        (OK.removesuffix("<|calls|>"), [("pause", {"minutes": 5})]),  # a server strips the stop token
        ("<|begin|>assistant" + OK, [("pause", {"minutes": 5})]),
        (
            "<|tool_calls|>" + call("a", '{"s": "<|tool_call:end|>"}') + "\n" + call("b.c", "{}", "x-2") + "<|calls|>",
            [("a", {"s": "<|tool_call:end|>"}), ("b.c", {})],
        ),
    ],
)
def test_strict_reads_the_turn(text: str, calls: list[tuple[str, object]]) -> None:
    r = parse_output(text, "solar_open", eot_tokens=("<|end|>",))
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == calls
    assert r.visible_text == ""


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (call("pause", "{}") + "<|calls|>", "without <|tool_calls|>"),
        ("<|tool_calls|><|calls|>", "expected <|tool_call:begin|>"),
        ("<|tool_calls|>" + call("pause", "{}", cid=""), "expected ID<|tool_call:name|>"),
        ("<|tool_calls|>" + call("pause", "[]"), "must be a JSON object"),
        ("<|tool_calls|>" + call("pause", "{}").removesuffix("<|tool_call:end|>"), "expected <|tool_call:end|>"),
        (OK + " Done.", "expected <|tool_call:begin|> or <|calls|>"),
        ("<|begin|>assistant Sure.", "expected <|tool_calls|>"),
    ],
)
def test_strict_refusals_name_the_reason(text: str, reason: str) -> None:
    r = parse_output(text, "solar_open")
    assert not r.strict_ok and r.calls == ()
    assert reason in (r.error or "")


def test_prose_before_fails_strict_and_lenient_finds_the_call() -> None:
    r = parse_output("Pausing. " + OK, "solar_open")
    assert r.error == NOT_ALONE_ERROR
    assert [(c.name, c.arguments) for c in r.lenient_calls] == [("pause", {"minutes": 5})]


def test_a_reasoning_message_before_the_turn_is_set_aside() -> None:
    r = parse_output(
        "<|think|>Need a pause.<|end|><|begin|>assistant" + OK, "solar_open", reasoning_tags=("<|think|>", "<|end|>")
    )
    assert r.strict_ok, r.error
    assert r.reasoning == "Need a pause."


def test_the_markup_is_the_protocols_own() -> None:
    p = REGISTRY["solar_open"]
    assert p.is_attempt("<|tool_calls|>") and p.is_attempt("<|begin|>assistant<|tool_calls|>")
    assert all(p.owns(t) for t in ("<|calls|>", "<|tool_call:end|>", "<|tool_call:name|>", "<|tool_call:args|>"))
    assert not p.owns("<|tool_call|>") and not p.owns("<|begin|>assistant")


@pytest.mark.parametrize(
    "text",
    [
        "<|tool_calls|>" + "<|tool_call:begin|>" * 50_000,
        "<|tool_call:begin|>" + "a" * 300_000 + "<|tool_call:name|>",
        ("<|tool_call:begin|>i<|tool_call:name|>f<|tool_call:args|>{" + '"a": [' * 50) * 2_000,
        "<|tool_calls|>" + call("f", "{}") * 300,
    ],
)
def test_hostile_inputs_stay_fast(text: str) -> None:
    t = time.perf_counter()
    r = parse_output(text, "solar_open")
    assert time.perf_counter() - t < 1.0
    assert not r.strict_ok
