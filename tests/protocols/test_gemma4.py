"""``gemma4``: Gemma 4's own literal syntax, strictly and leniently, its typed values, its stop at
``<|tool_response>`` and its thought channel; hostile inputs stay fast."""

from __future__ import annotations

import time

import pytest

from leader_eval.protocols import REGISTRY, detect, parse_output
from tests.support.template_calls import CORPUS, assistant_output

Q = '<|"|>'
CHANNEL = ("<|channel>", "<channel|>")


def _call(body: str) -> str:
    return f"<|tool_call>call:{body}<tool_call|>"


def _parse(text: str, **kw: object) -> object:
    return parse_output(text, "gemma4", eot_tokens=("<turn|>", "<eos>"), **kw)  # type: ignore[arg-type]


def test_values_keep_the_types_the_syntax_gives_them() -> None:
    text = _call(
        f"post{{s:{Q}42{Q},n:42,f:-0.5,e:1e-07,t:true,b:false,z:None,o:{{k:{Q}v{Q},deep:{{x:[]}}}},"
        f"xs:[1,{Q}two{Q},[true],{{a:None}}],empty:{Q}{Q},multi word key:1}}"
    )
    r = _parse(text)
    assert r.strict_ok, r.error
    assert r.calls[0].arguments == {
        "s": "42",
        "n": 42,
        "f": -0.5,
        "e": 1e-07,
        "t": True,
        "b": False,
        "z": None,
        "o": {"k": "v", "deep": {"x": []}},
        "xs": [1, "two", [True], {"a": None}],
        "empty": "",
        "multi word key": 1,
    }


def test_strings_hold_anything_but_the_quote_token() -> None:
    message = 'She said "ship it" {"k": 1} <b>x</b>\nline two, key:value [1] \\ \u6771\u4eac'
    r = _parse(_call(f"send{{message:{Q}{message}{Q}}}"))
    assert r.strict_ok and r.calls[0].arguments == {"message": message}


def test_parallel_calls_and_the_stop_at_the_tool_response() -> None:
    text = _call("a{}") + _call(f"b{{x:{Q}y{Q}}}") + "<|tool_response>"
    r = _parse(text)
    assert r.strict_ok and [(c.name, c.arguments) for c in r.calls] == [("a", {}), ("b", {"x": "y"})]
    assert r.visible_text == "" and r.calls[1].raw == _call(f"b{{x:{Q}y{Q}}}")
    # whitespace between calls, and an end of turn instead of the tool response
    assert _parse(_call("a{}") + "\n" + _call("b{}") + "<turn|>").strict_ok


def test_the_thought_channel_is_reasoning() -> None:
    text = "<|channel>thought\nCall the tool.<channel|>" + _call("a{n:1}")
    r = _parse(text, reasoning_tags=CHANNEL)
    assert r.strict_ok and r.reasoning == "thought\nCall the tool." and r.calls[0].arguments == {"n": 1}
    assert not _parse(text).strict_ok  # undeclared, the channel is text before the call


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (_call("a{n:null}"), "bare word 'null'"),
        (_call("a{t:True}"), "bare word 'True'"),
        (_call(f"a{{s:{Q}open}}"), "is not closed"),
        (_call('a{"s": 1}'), "expected a key"),
        (_call("a{n:1.5.3}"), "expected a value"),
        (_call("a{xs:[1}"), "expected ',' or ']'"),
        (_call("a{n:1,n:2}"), "given twice"),
        (_call("a{n:1,}"), "expected a key"),
        (_call("a{n:1 m:2}"), "expected ',' or '}'"),
        (_call("a{n:42abc}"), "expected a value"),
        ("<|tool_call>a{}<tool_call|>", "expected 'call:'"),
        ("<|tool_call>call:a{}", "expected <tool_call|>"),
        ("<|tool_call>call:a{}<turn|>x", "expected <tool_call|>"),
        (_call("a{}") + "x", "expected <|tool_call> or <|tool_response>"),
        (_call("a{xs:[" + "1," * 4096 + "1]}"), "more than 4096 values"),
        (_call("a{}") + "<|tool_response>response:a{}", "text after <|tool_response>"),
        (_call("a{n:" + "[" * 200 + "]" * 200 + "}"), "nested too deeply"),
        ("Sure. " + _call("a{}"), "not alone"),
        (_call("a{}") + " Done.", "expected <|tool_call>"),
    ],
)
def test_strict_refusals_say_why(text: str, error: str) -> None:
    r = _parse(text)
    assert not r.strict_ok and error in (r.error or ""), r.error


def test_a_string_holding_the_quote_token_is_refused_not_guessed() -> None:
    # the template writes the string raw: <|"|> inside it ends it early, and what follows is no value
    text = assistant_output(CORPUS / "google-gemma-4-31B-it-interleaved.jinja", [("a", {"s": f"x{Q}y"})])
    r = _parse(text)
    assert not r.strict_ok and "expected ',' or '}'" in (r.error or "")


def test_lenient_reading_forgives_and_finds_calls_in_prose() -> None:
    text = f"I will call it now: <|tool_call>pause{{minutes:5,why:null,ok:True}} and then {_call('b{}')} ok"
    r = _parse(text)
    assert not r.strict_ok
    assert [(c.name, c.arguments) for c in r.lenient_calls] == [
        ("pause", {"minutes": 5, "why": None, "ok": True}),
        ("b", {}),
    ]
    assert REGISTRY["gemma4"].owns("<tool_call|>") and REGISTRY["gemma4"].owns('<|"|>')
    assert REGISTRY["gemma4"].is_attempt("  <|tool_call>call:x{") and not REGISTRY["gemma4"].is_attempt("call:x{}")


def test_detected_from_the_template() -> None:
    for stem in ("google-gemma-4-31B-it", "google-gemma-4-31B-it-interleaved"):
        assert detect(chat_template=(CORPUS / f"{stem}.jinja").read_text(encoding="utf-8")) == "gemma4"


@pytest.mark.parametrize(
    "text",
    [
        f"<|tool_call>call:a{{s:{Q}" * 40_000,
        "<|tool_call>call:a{" + "k:{" * 50_000,
        "<|tool_call>call:a{" + "k:1," * 250_000,
        _call("a{" + ",".join(f"k{i}:1" for i in range(150_000)) + "}"),
        _call("a{s:" + Q + "x" * 1_000_000 + Q + "}") * 2 + " tail",
        "<|tool_call>" * 100_000,
    ],
)
def test_hostile_inputs_stay_fast(text: str) -> None:
    t = time.perf_counter()
    r = _parse(text)
    assert time.perf_counter() - t < 2.0  # quadratic work would take minutes; the bench times it
    assert not r.strict_ok
