"""``functiongemma``: FunctionGemma's calls in gemma4's syntax with its own control tokens,
strictly and leniently, its stop at ``<start_function_response>``; hostile inputs stay fast."""

from __future__ import annotations

import time

import pytest

from leader_eval.protocols import REGISTRY, detect, parse_output

E = "<escape>"


def _call(body: str) -> str:
    return f"<start_function_call>call:{body}<end_function_call>"


def _parse(text: str) -> object:
    return parse_output(text, "functiongemma", eot_tokens=("<end_of_turn>", "<eos>"))  # type: ignore[arg-type]


def test_googles_documented_call_reads_as_written() -> None:
    r = _parse(_call(f"get_current_temperature{{location:{E}Paris{E},unit:{E}celsius{E}}}"))
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments, c.protocol) for c in r.calls] == [
        ("get_current_temperature", {"location": "Paris", "unit": "celsius"}, "functiongemma")
    ]


def test_values_keep_their_types_and_strings_hold_anything_but_the_escape_token() -> None:
    message = 'She said "ship it" {"k": 1}, key:value [1] <b>x</b>\n\u6771\u4eac'
    text = _call(f"post{{s:{E}{message}{E},n:15,f:-0.5,t:true,b:false,z:None,o:{{k:[1,{E}two{E}]}}}}")
    r = _parse(text)
    assert r.strict_ok, r.error
    assert r.calls[0].arguments == {"s": message, "n": 15, "f": -0.5, "t": True, "b": False, "z": None,
                                    "o": {"k": [1, "two"]}}  # fmt: skip


def test_parallel_calls_and_the_stop_at_the_tool_response() -> None:
    r = _parse(_call("a{}") + "\n" + _call(f"b{{x:{E}y{E}}}") + "<start_function_response>")
    assert r.strict_ok and [(c.name, c.arguments) for c in r.calls] == [("a", {}), ("b", {"x": "y"})]
    assert r.visible_text == ""
    assert _parse(_call("a{}") + "<end_of_turn>").strict_ok


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (_call("a{n:null}"), "bare word 'null'"),
        (_call(f"a{{s:{E}open}}"), "is not closed with <escape>"),
        (_call('a{"s": 1}'), "expected a key"),
        ("<start_function_call>a{}<end_function_call>", "expected 'call:' after <start_function_call>"),
        ("<start_function_call>call:a{}", "expected <end_function_call>"),
        (_call("a{}") + "x", "expected <start_function_call> or <start_function_response>"),
        (_call("a{}") + "<start_function_response>response:a{}", "text after <start_function_response>"),
        ("Sure. " + _call("a{}"), "not alone"),
        ("<|tool_call>call:a{}<tool_call|>", "no tool call"),  # Gemma 4's tokens are not FunctionGemma's
    ],
)
def test_strict_refusals_say_why(text: str, error: str) -> None:
    r = _parse(text)
    assert not r.strict_ok and error in (r.error or ""), r.error


def test_lenient_reading_finds_calls_in_prose_and_the_markup_is_its_own() -> None:
    r = _parse(f"Calling now: <start_function_call>pause{{minutes:5,why:null,ok:True}} then {_call('b{}')} ok")
    assert not r.strict_ok
    assert [(c.name, c.arguments) for c in r.lenient_calls] == [
        ("pause", {"minutes": 5, "why": None, "ok": True}),
        ("b", {}),
    ]
    p = REGISTRY["functiongemma"]
    assert p.owns("<end_function_call>") and p.owns("<escape>") and p.owns("<start_function_response>")
    assert p.is_attempt("  <start_function_call>call:x{") and not p.is_attempt("call:x{}")


def test_detected_from_a_template_that_writes_its_calls() -> None:
    # no FunctionGemma template is in fixtures/chat_templates (none can be fetched here): the
    # marker is the call token its template writes an assistant's calls with
    template = "{{- '<start_function_call>call:' + tool_call.function.name + '{' -}}"
    assert detect(chat_template=template) == "functiongemma"


HOSTILE = (
    f"<start_function_call>call:a{{s:{E}" * 40_000,
    "<start_function_call>call:a{" + "k:{" * 50_000,
    "<start_function_call>call:a{" + "k:1," * 250_000,
    _call("a{s:" + E + "x" * 1_000_000 + E + "}") * 2 + " tail",
    "<start_function_call>" * 50_000,
)


def test_hostile_inputs_stay_fast() -> None:
    # quadratic work would take minutes on any of them; the bench times the parsers
    for text in HOSTILE:
        t = time.perf_counter()
        assert not _parse(text).strict_ok and time.perf_counter() - t < 2.0, text[:40]
