"""The four formats that put a JSON array of calls behind a marker (``_json_list.py``): Apriel,
Nemotron Nano v2, Granite 3 and Apertus. Strict accepts exactly the format; refusals say why;
the lenient reading finds calls in prose; hostile inputs stay fast."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from leader_eval.protocols import MAX_CALLS, REGISTRY, TOO_MANY_CALLS_ERROR, detect, parse_output
from tests.support.template_calls import CORPUS

EOT = ("<|im_end|>", "<|end|>")
CALLS = [("assign_task", {"agent": "Bo", "task": "wheat", "n": 2, "ok": True, "x": None}), ("wait", {})]


def _objects(protocol: str, calls: list[tuple[str, dict[str, Any]]]) -> str:
    if protocol == "apertus":
        return json.dumps([{name: args} for name, args in calls])
    return json.dumps([{"name": name, "arguments": args} for name, args in calls])


def _text(protocol: str, calls: list[tuple[str, dict[str, Any]]] = CALLS, body: str | None = None) -> str:
    body = _objects(protocol, calls) if body is None else body
    return {
        "apriel": f"<tool_calls>{body}</tool_calls>",
        "nemotron_v2": f"<TOOLCALL>{body}</TOOLCALL>",
        "granite3": f"<|tool_call|>{body}",
        "apertus": f"<|tools_prefix|>{body}<|tools_suffix|>",
    }[protocol]


FORMATS = ("apriel", "nemotron_v2", "granite3", "apertus")


@pytest.mark.parametrize("protocol", FORMATS)
def test_the_format_parses_strictly_with_a_span_per_call(protocol: str) -> None:
    text = "\n" + _text(protocol) + "\n<|end|>\n"
    r = parse_output(text, protocol, eot_tokens=EOT)
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == CALLS
    assert all(c.protocol == protocol and text[c.span[0] : c.span[1]] == c.raw for c in r.calls if c.span)
    assert r.visible_text == "" and r.other_protocols == ()


@pytest.mark.parametrize("protocol", FORMATS)
@pytest.mark.parametrize(
    ("mutate", "error"),
    [
        (lambda p, t: "Sure. " + t, "not alone"),
        (lambda p, t: t + " Done.", "text after the tool calls"),
        (lambda p, t: t + t, "a second"),
        (lambda p, t: _text(p, body="[]"), "empty array"),
        (lambda p, t: _text(p, body=_objects(p, CALLS)[1:-1]), "expected a JSON array"),
        (lambda p, t: _text(p, body=_objects(p, CALLS)[:-1]), "expected ',' or ']'"),
    ],
)
def test_strict_refusals_say_why(protocol: str, mutate: Any, error: str) -> None:
    r = parse_output(mutate(protocol, _text(protocol)), protocol, eot_tokens=EOT)
    assert not r.strict_ok and error in (r.error or ""), r.error


@pytest.mark.parametrize("protocol", ("apriel", "nemotron_v2", "apertus"))
def test_the_closing_tag_is_required(protocol: str) -> None:
    close = {"apriel": "</tool_calls>", "nemotron_v2": "</TOOLCALL>", "apertus": "<|tools_suffix|>"}[protocol]
    r = parse_output(_text(protocol).removesuffix(close), protocol)
    assert not r.strict_ok and f"expected {close}" in (r.error or "")
    assert [c.name for c in r.lenient_calls] == ["assign_task", "wait"]


@pytest.mark.parametrize("protocol", ("apriel", "nemotron_v2", "granite3"))
def test_name_arguments_objects_strictly(protocol: str) -> None:
    for body, error in (
        ('[{"name": "a", "parameters": {}}]', "unexpected key 'parameters'"),
        ('[{"name": "a", "arguments": "{}"}]', "JSON-encoded string"),
        ('[{"name": "a", "arguments": {}, "why": 1}]', "unexpected key 'why'"),
    ):
        r = parse_output(_text(protocol, body=body), protocol)
        assert not r.strict_ok and error in (r.error or ""), (body, r.error)
        assert [c.name for c in r.lenient_calls] == ["a"]  # the lenient reading forgives all three


def test_apriel_calls_may_carry_the_id_its_template_writes() -> None:
    body = '[{"name": "a", "arguments": {"n": 1}, "id": "call_1"}]'
    assert parse_output(_text("apriel", body=body), "apriel").calls[0].arguments == {"n": 1}
    r = parse_output(_text("apriel", body=body.replace('"call_1"', "1")), "apriel")
    assert not r.strict_ok and "id must be a string" in (r.error or "") and r.lenient_calls


def test_apriel_reasoning_ends_at_the_final_response_marker() -> None:
    # Apriel 1.6's generation prompt opens "Here are my reasoning steps:"; the model closes it
    text = "The user wants Bo on wheat.\n[BEGIN FINAL RESPONSE]\n" + _text("apriel") + "\n<|end|>"
    tags = ("Here are my reasoning steps:", "[BEGIN FINAL RESPONSE]")
    r = parse_output(text, "apriel", eot_tokens=EOT, reasoning_tags=tags)
    assert r.strict_ok and r.reasoning == "The user wants Bo on wheat.\n" and len(r.calls) == 2
    assert not parse_output(text, "apriel", eot_tokens=EOT).strict_ok


def test_apriel_15_closes_its_final_response_with_a_marker_declared_as_an_end_of_turn() -> None:
    # Apriel 1.5's system prompt asks for "[BEGIN FINAL RESPONSE] ... [END FINAL RESPONSE]"
    text = "Bo should take the wheat.\n[BEGIN FINAL RESPONSE]\n" + _text("apriel") + "\n[END FINAL RESPONSE]\n<|end|>"
    tags = ("Here are my reasoning steps:", "[BEGIN FINAL RESPONSE]")
    r = parse_output(text, "apriel", eot_tokens=(*EOT, "[END FINAL RESPONSE]"), reasoning_tags=tags)
    assert r.strict_ok and len(r.calls) == 2
    assert not parse_output(text, "apriel", eot_tokens=EOT, reasoning_tags=tags).strict_ok


def test_apertus_inner_thoughts_are_reasoning() -> None:
    text = "<|inner_prefix|>Bo takes wheat.<|inner_suffix|>" + _text("apertus")
    r = parse_output(text, "apertus", reasoning_tags=("<|inner_prefix|>", "<|inner_suffix|>"))
    assert r.strict_ok and r.reasoning == "Bo takes wheat." and len(r.calls) == 2


def test_apertus_objects_hold_one_key_the_tool_name() -> None:
    for body, error in (
        ('[{"a": {}, "b": {}}]', "exactly one key"),
        ('[{"a": 5}]', "must be a JSON object"),
        ('[{"name": "a", "arguments": {}}]', "exactly one key"),
        ('[{" ": {}}]', "non-empty"),
    ):
        r = parse_output(_text("apertus", body=body), "apertus")
        assert not r.strict_ok and error in (r.error or ""), (body, r.error)


def test_granite3_accepts_no_other_opening() -> None:
    r = parse_output('<tool_call>[{"name": "a", "arguments": {}}]', "granite3")
    assert not r.strict_ok and r.error == "no tool call"


@pytest.mark.parametrize(
    ("stem", "protocol"),
    [
        ("unsloth-Apriel-1.5", "apriel"),
        ("Apriel-1.6-15b-Thinker-fixed", "apriel"),
        ("NVIDIA-Nemotron-Nano-v2", "nemotron_v2"),
        ("ibm-granite-granite-3.3-2B-Instruct", "granite3"),
        ("Apertus-8B-Instruct", "apertus"),
        ("MiniMax-M1", None),  # its <tool_calls> holds JSON lines, not an array: not Apriel's
        ("ibm-granite-granite-4.0", "hermes"),
    ],
)
def test_detected_from_the_template(stem: str, protocol: str | None) -> None:
    got = detect(chat_template=(CORPUS / f"{stem}.jinja").read_text(encoding="utf-8"))
    assert got == protocol if protocol else got != "apriel"


@pytest.mark.parametrize("protocol", FORMATS)
def test_markup_and_attempts(protocol: str) -> None:
    p = REGISTRY[protocol]
    opening = _text(protocol, body="")
    assert p.is_attempt("  " + opening) and not p.is_attempt("Sure " + opening)


@pytest.mark.parametrize("protocol", FORMATS)
@pytest.mark.parametrize(
    "make",
    [
        lambda p: _text(p, body="[" + "[" * 50_000),
        lambda p: _text(p, body="x") * 40_000,
        lambda p: _text(p, body=json.dumps([{"name": "a", "arguments": {"m": "x" * 1_000_000}}])) + " tail",
        lambda p: _text(p, body='[{"name": "a", "arguments": {}}, ' + '{"a": 1}, ' * 60_000 + "]"),
    ],
)
def test_hostile_inputs_stay_fast(protocol: str, make: Any) -> None:
    text = make(protocol)
    t = time.perf_counter()
    r = parse_output(text, protocol)
    assert time.perf_counter() - t < 2.0  # quadratic work would take minutes; the bench times it
    assert not r.strict_ok


def _many(protocol: str, n: int) -> str:
    calls = [("a", {"n": 1})] * n
    return {
        "apriel": _text("apriel", calls),
        "nemotron_v2": _text("nemotron_v2", calls),
        "granite3": _text("granite3", calls),
        "apertus": _text("apertus", calls),
        "gemma4": "<|tool_call>call:a{n:1}<tool_call|>" * n,
        "functionary": '<function=a>{"n": 1}</function>' * n,
        "lfm2": "<|tool_call_start|>[" + ", ".join(["a(n=1)"] * n) + "]<|tool_call_end|>",
    }[protocol]


@pytest.mark.parametrize("protocol", [*FORMATS, "gemma4", "functionary", "lfm2"])
def test_more_calls_than_a_turn_holds_fail_strict(protocol: str) -> None:
    ok = parse_output(_many(protocol, MAX_CALLS), protocol)
    assert ok.strict_ok and len(ok.calls) == MAX_CALLS
    over = parse_output(_many(protocol, MAX_CALLS + 1), protocol)
    assert not over.strict_ok and over.error == TOO_MANY_CALLS_ERROR and over.calls == ()
    assert 0 < len(over.lenient_calls) <= MAX_CALLS
