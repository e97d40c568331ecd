"""``muse_glimmer``: ATEM calls, one ``to=NAME<|message|><atem:function_calls>`` message per call."""

from __future__ import annotations

import time

import pytest

from leader_eval.protocols import NO_CALL_ERROR, parse_output

SCHEMA = {"post": {"type": "object", "properties": {"message": {"type": "string"}, "ok": {"type": "boolean"}}}}


def _msg(name: str, body: str = '<atem:parameter name="message">hi</atem:parameter>\n') -> str:
    return f'to={name}<|message|><atem:function_calls>\n<atem:invoke name="{name}">\n{body}</atem:invoke>\n</atem:function_calls>'


def _parse(text: str):  # type: ignore[no-untyped-def]
    return parse_output(text, "muse_glimmer", eot_tokens=("<|eot|>",), tool_schemas=SCHEMA)


def test_one_and_parallel_messages() -> None:
    one = _parse(" " + _msg("post", '<atem:parameter name="ok">true</atem:parameter>\n') + "<|eot|>")
    assert one.strict_ok, one.error
    assert one.calls[0].arguments == {"ok": True} and one.visible_text == ""
    two = _parse(" " + _msg("post") + "<|eom|><|start|>assistant " + _msg("wait", ""))
    assert [(c.name, c.arguments) for c in two.calls] == [("post", {"message": "hi"}), ("wait", {})]


def test_a_reasoning_message_is_set_aside_when_declared() -> None:
    r = parse_output(
        " to=self<|message|>think first<|eom|><|start|>assistant " + _msg("post"),
        "muse_glimmer",
        reasoning_tags=("to=self<|message|>", "<|eom|><|start|>assistant"),
    )
    assert r.strict_ok and r.reasoning == "think first"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("to=user<|message|>Hello", NO_CALL_ERROR),
        ("to=pause<|message|>Hello", "expected <atem:function_calls>"),
        ("Hello", NO_CALL_ERROR),
        (_msg("post").replace("to=post", "to=other"), "the message is to=other but invokes 'post'"),
        (_msg("post") + " bye", "expected <|eom|><|start|>assistant or the end"),
        (_msg("post") + "<|eom|><|start|>assistant", "expected ' to=NAME<|message|>'"),
        (_msg("post").replace("to=post<|message|>", ""), "expected to=NAME<|message|>"),
        (_msg("post").replace("</atem:function_calls>", ""), "expected </atem:function_calls>"),
        (_msg("post", "x"), "expected <atem:parameter name=...> or </atem:invoke>"),
    ],
)
def test_strict_refuses_what_is_not_exactly_the_format(text: str, reason: str) -> None:
    r = _parse(text)
    assert not r.strict_ok and not r.calls
    assert r.error is not None and reason in r.error


def test_lenient_finds_invokes_without_the_message_header() -> None:
    r = _parse("Sure: " + _msg("post"))
    assert [c.name for c in r.lenient_calls] == ["post"]


@pytest.mark.parametrize(
    "text",
    [
        "to=a<|message|><atem:function_calls>" * 40_000,
        '<atem:invoke name="a"><atem:parameter name="b">' * 30_000,
        _msg("a") + "<|eom|><|start|>assistant " * 50_000,
    ],
)
def test_hostile_inputs_stay_fast(text: str) -> None:
    t = time.perf_counter()
    assert not _parse(text).strict_ok
    assert time.perf_counter() - t < 1.0
