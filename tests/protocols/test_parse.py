"""Tool-call parsers: strict acceptance, strict refusals with a reason, lenient extraction,
visible text, spans, and the "what did the model do instead" diagnostic."""

from __future__ import annotations

import json

import pytest

from leader_eval.protocols import (
    MAX_CALLS,
    NO_CALL_ERROR,
    NOT_ALONE_ERROR,
    PROTOCOLS,
    TOO_MANY_CALLS_ERROR,
    parse_output,
)

EOT = ("<|im_end|>", "<|eot_id|>")
THINK = ("<think>", "</think>")

SEND = {"name": "send_message_to_chat", "arguments": {"message": "Gather wood, everyone."}}

STRICT_OK = {
    "json": json.dumps({"tool": "send_message_to_chat", "arguments": {"message": "Gather wood, everyone."}}),
    "hermes": f"<tool_call>\n{json.dumps(SEND)}\n</tool_call>",
    "kimi_k2": (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.send_message_to_chat:0"
        '<|tool_call_argument_begin|>{"message": "Gather wood, everyone."}<|tool_call_end|>'
        "<|tool_calls_section_end|>"
    ),
    "llama3_json": (
        '<|python_tag|>{"name": "send_message_to_chat", "parameters": {"message": "Gather wood, everyone."}}'
    ),
    "pythonic": '[send_message_to_chat(message="Gather wood, everyone.")]',
    "anthropic_xml": (
        "<tool_use><name>send_message_to_chat</name>"
        '<arguments>{"message": "Gather wood, everyone."}</arguments></tool_use>'
    ),
}


@pytest.mark.parametrize("protocol", sorted(STRICT_OK))
def test_each_protocol_parses_its_own_format_strictly(protocol: str) -> None:
    text = f"\n  {STRICT_OK[protocol]}\n<|im_end|>"
    r = parse_output(text, protocol, eot_tokens=EOT)
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == [("send_message_to_chat", {"message": "Gather wood, everyone."})]
    assert r.calls[0].protocol == protocol
    assert r.visible_text == ""
    assert r.other_protocols == ()
    start, end = r.calls[0].span
    assert text[start:end] == r.calls[0].raw
    assert r.lenient_calls == r.calls


def test_openai_api_tool_calls() -> None:
    api = [{"id": "c1", "type": "function", "function": {"name": "send", "arguments": '{"message": "hi"}'}}]
    r = parse_output("On it.", "openai", api_tool_calls=api)
    assert r.strict_ok
    assert r.calls[0].name == "send" and r.calls[0].arguments == {"message": "hi"}
    assert r.calls[0].span is None
    assert r.visible_text == "On it."


@pytest.mark.parametrize(
    ("arguments", "error"),
    [("", "empty"), ("[1]", "must hold a JSON object"), ('{"a": 1} junk', "text after"), ("{bad", "invalid JSON")],
)
def test_openai_arguments_must_be_one_json_object(arguments: str, error: str) -> None:
    api = [{"type": "function", "function": {"name": "send", "arguments": arguments}}]
    r = parse_output("", "openai", api_tool_calls=api)
    assert not r.strict_ok
    assert error in (r.error or "")


def test_openai_lenient_unwraps_double_encoded_arguments() -> None:
    api = [{"type": "function", "function": {"name": "send", "arguments": json.dumps('{"message": "hi"}')}}]
    r = parse_output("", "openai", api_tool_calls=api)
    assert not r.strict_ok
    assert r.lenient_calls[0].arguments == {"message": "hi"}


def test_json_array_is_parallel_calls_with_own_spans() -> None:
    text = '[{"name": "a", "arguments": {"x": 1}}, {"tool": "b", "parameters": {}}]'
    r = parse_output(text, "json")
    assert r.strict_ok
    assert [c.name for c in r.calls] == ["a", "b"]
    assert [text[s:e] for s, e in (c.span for c in r.calls)] == [c.raw for c in r.calls]
    assert r.calls[0].raw == '{"name": "a", "arguments": {"x": 1}}'


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"tool": "a", "arguments": {}, "why": "x"}', "unexpected key 'why'"),
        ('{"tool": "a"}', "no 'arguments' or 'parameters' key"),
        ('{"tool": "a", "arguments": "{\\"x\\": 1}"}', "JSON-encoded string"),
        ('{"tool": "a", "arguments": {}}}', "text after the JSON object"),
        ('{"tool": "a", "arguments": {"x": NaN}}', "NaN"),
        ('{"tool": "", "arguments": {}}', "non-empty string"),
        ("[]", "empty array"),
        ('{"tool": "a", "arguments": {', "invalid JSON"),
    ],
)
def test_json_strict_refusals_say_why(text: str, error: str) -> None:
    r = parse_output(text, "json")
    assert not r.strict_ok and r.calls == ()
    assert error in (r.error or ""), r.error


def test_json_string_arguments_are_forgiven_only_by_the_lenient_reading() -> None:
    r = parse_output('{"tool": "a", "arguments": "{\\"x\\": 1}"}', "json")
    assert not r.strict_ok
    assert r.lenient_calls[0].arguments == {"x": 1}


def test_prose_around_a_call_fails_strict_but_lenient_finds_it() -> None:
    text = 'Sure! Here is my call: {"tool": "send", "arguments": {"message": "hi"}} Hope that helps.'
    r = parse_output(text, "json")
    assert not r.strict_ok
    assert r.error == NOT_ALONE_ERROR
    assert [c.name for c in r.lenient_calls] == ["send"]
    assert r.visible_text == text  # nothing was consumed: the room would see all of it


def test_plain_text_reply_has_no_call() -> None:
    r = parse_output("I will wait for the others.<|im_end|>", "hermes", eot_tokens=EOT)
    assert not r.strict_ok
    assert r.error == NO_CALL_ERROR
    assert r.visible_text == "I will wait for the others."
    assert r.lenient_calls == () and r.other_protocols == ()


def test_other_protocols_explain_what_the_model_did_instead() -> None:
    # The field-notes failure: a tool-call XML block written as chat text.
    text = 'Posting now. <tool_use><name>send</name><arguments>{"message": "hi"}</arguments></tool_use>'
    r = parse_output(text, "openai", api_tool_calls=[])
    assert not r.strict_ok
    assert r.other_protocols == ("anthropic_xml",)
    assert "<tool_use>" in r.visible_text


def test_json_inside_hermes_tags_is_not_reported_as_another_protocol() -> None:
    r = parse_output(STRICT_OK["hermes"], "hermes")
    assert r.other_protocols == ()
    r = parse_output(STRICT_OK["hermes"], "json")
    assert not r.strict_ok
    assert "hermes" in r.other_protocols


def test_hermes_several_calls_only_whitespace_between() -> None:
    one = f"<tool_call>\n{json.dumps(SEND)}\n</tool_call>"
    assert parse_output(f"{one}\n\n{one}", "hermes").strict_ok
    r = parse_output(f"{one} and {one}", "hermes")
    assert not r.strict_ok and "expected <tool_call>" in (r.error or "")
    assert len(r.lenient_calls) == 2


def test_hermes_text_before_the_call_is_not_strict() -> None:
    r = parse_output(f"Let me post.\n<tool_call>\n{json.dumps(SEND)}\n</tool_call>", "hermes")
    assert not r.strict_ok
    assert len(r.lenient_calls) == 1


def test_reasoning_block_is_set_aside_and_returned() -> None:
    text = f"<think>\nThe goal is wood.\n</think>\n\n{STRICT_OK['hermes']}<|im_end|>"
    r = parse_output(text, "hermes", eot_tokens=EOT, reasoning_tags=THINK)
    assert r.strict_ok
    assert r.reasoning == "\nThe goal is wood.\n"
    assert r.visible_text == ""


def test_reasoning_opened_by_the_prompt_is_recognised_by_its_closing_tag() -> None:
    text = f"The goal is wood.\n</think>\n{STRICT_OK['hermes']}"
    r = parse_output(text, "hermes", reasoning_tags=THINK)
    assert r.strict_ok and r.reasoning == "The goal is wood.\n"


def test_undeclared_or_misplaced_reasoning_stays_visible() -> None:
    text = f"<think>hmm</think>{STRICT_OK['hermes']}"
    r = parse_output(text, "hermes")  # the template declares no reasoning block
    assert not r.strict_ok
    assert "<think>" in r.visible_text
    r = parse_output("Hello <think>hmm</think>", "hermes", reasoning_tags=THINK)
    assert r.reasoning is None and "<think>" in r.visible_text


def test_unclosed_reasoning_fails_strict() -> None:
    r = parse_output("<think>I keep thinking about which button to click", "hermes", reasoning_tags=THINK)
    assert not r.strict_ok and "not closed" in (r.error or "")
    assert "<think>" in r.visible_text


def test_end_of_turn_tokens_only_at_the_end() -> None:
    body = STRICT_OK["json"]
    assert parse_output(f"{body}<|eot_id|>\n<|im_end|>", "json", eot_tokens=EOT).strict_ok
    r = parse_output(f"<|im_end|>{body}", "json", eot_tokens=EOT)
    assert not r.strict_ok


def test_kimi_parallel_calls_and_names_with_dots() -> None:
    text = (
        "<|tool_calls_section_begin|>"
        '<|tool_call_begin|>functions.math.add:0<|tool_call_argument_begin|>{"a": 1}<|tool_call_end|>'
        '<|tool_call_begin|> functions.send:1 <|tool_call_argument_begin|> {"m": "x"} <|tool_call_end|>'
        "<|tool_calls_section_end|>"
    )
    r = parse_output(text, "kimi_k2")
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == [("math.add", {"a": 1}), ("send", {"m": "x"})]
    assert r.consumed == ((0, len(text)),)


@pytest.mark.parametrize(
    "text",
    [
        '<|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>{"x": 1}<|tool_call_end|>',  # no section
        "<|tool_calls_section_begin|><|tool_call_begin|>a:0<|tool_call_argument_begin|>{}<|tool_call_end|>"
        "<|tool_calls_section_end|>",  # id without the functions. prefix
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>[1]"
        "<|tool_call_end|><|tool_calls_section_end|>",  # arguments not an object
    ],
)
def test_kimi_strict_refusals_with_lenient_fallback(text: str) -> None:
    r = parse_output(text, "kimi_k2")
    assert not r.strict_ok and r.error


def test_llama3_semicolon_separated_calls() -> None:
    text = '{"name": "a", "parameters": {"x": 1}}; {"name": "b", "arguments": {}}'
    r = parse_output(text, "llama3_json")
    assert r.strict_ok
    assert [c.name for c in r.calls] == ["a", "b"]
    assert not parse_output('{"name": "a", "parameters": {}} {"name": "b", "parameters": {}}', "llama3_json").strict_ok


def test_pythonic_literals_dotted_names_and_tuples() -> None:
    r = parse_output("[geo.distance(a=(1, 2.5), b={'k': [True, None]}), ping()]", "pythonic")
    assert r.strict_ok, r.error
    assert r.calls[0].name == "geo.distance"
    assert r.calls[0].arguments == {"a": [1, 2.5], "b": {"k": [True, None]}}
    assert r.calls[1].arguments == {}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('send(message="hi")', "inside a list"),
        ('[send("hi")]', "positional"),
        ("[send(message=x)]", "not a literal"),
        ("[send(**kw)]", "**kwargs"),
        ("[send(message=b'x')]", "no JSON equivalent"),
        ("[send(message='hi')] done", "text after"),
        ("[]", "empty list"),
    ],
)
def test_pythonic_strict_refusals(text: str, error: str) -> None:
    r = parse_output(text, "pythonic")
    assert not r.strict_ok
    assert error in (r.error or ""), r.error


def test_pythonic_spans_count_characters_not_bytes() -> None:
    text = '[a(m="héllo wörld"), b(n="ü")]'
    r = parse_output(text, "pythonic")
    assert [text[s:e] for s, e in (c.span for c in r.calls)] == ['a(m="héllo wörld")', 'b(n="ü")']


def test_anthropic_function_calls_invoke_form() -> None:
    text = (
        '<function_calls>\n<invoke name="send">\n<parameter name="message">Gather wood</parameter>\n'
        '<parameter name="count">3</parameter>\n<parameter name="tags">["a"]</parameter>\n</invoke>\n'
        '<invoke name="noop">\n</invoke>\n</function_calls>'
    )
    r = parse_output(text, "anthropic_xml")
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == [
        ("send", {"message": "Gather wood", "count": 3, "tags": ["a"]}),
        ("noop", {}),
    ]
    assert r.consumed == ((0, len(text)),)


def test_anthropic_strict_refusals() -> None:
    assert not parse_output("<tool_use><name>a</name></tool_use>", "anthropic_xml").strict_ok
    bad = '<function_calls><invoke name="a"><parameter name="x">1</parameter><parameter name="x">2</parameter>'
    assert "twice" in (parse_output(bad + "</invoke></function_calls>", "anthropic_xml").error or "")
    r = parse_output('<tool_use>{"name": "a", "input": {"x": 1}}</tool_use>', "anthropic_xml")
    assert not r.strict_ok
    assert r.lenient_calls[0].arguments == {"x": 1}


def test_unknown_protocol_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown protocol"):
        parse_output("", "xml")


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    "text",
    [
        "[" * 10_000 + "]" * 10_000,
        '{"a":' * 10_000 + "1" + "}" * 10_000,
        "<tool_call>" + '{"name": [' * 10_000,
        '{"name": "a", "arguments": {"n": ' + "9" * 5000 + "}}",
        "[f(a=" + "(" * 5000 + "1" + ")" * 5000 + ")]",
    ],
)
def test_pathological_inputs_fail_cleanly(protocol: str, text: str) -> None:
    r = parse_output(text, protocol)
    assert not r.strict_ok and r.error


def _many(protocol: str, n: int) -> str:
    one = {"name": "send_message_to_chat", "arguments": {"message": "hi"}}
    if protocol == "json":
        return json.dumps([one] * n)
    if protocol == "hermes":
        return "\n".join([f"<tool_call>{json.dumps(one)}</tool_call>"] * n)
    if protocol == "llama3_json":
        return "; ".join([json.dumps({"name": "send_message_to_chat", "parameters": {"message": "hi"}})] * n)
    if protocol == "kimi_k2":
        body = "".join(
            f'<|tool_call_begin|>functions.send_message_to_chat:{i}<|tool_call_argument_begin|>{{"message": "hi"}}'
            "<|tool_call_end|>"
            for i in range(n)
        )
        return f"<|tool_calls_section_begin|>{body}<|tool_calls_section_end|>"
    if protocol == "pythonic":
        return "[" + ", ".join(["send_message_to_chat(message='hi')"] * n) + "]"
    assert protocol == "anthropic_xml"
    return "".join(
        ['<tool_use><name>send_message_to_chat</name><arguments>{"message": "hi"}</arguments></tool_use>'] * n
    )


@pytest.mark.parametrize("protocol", sorted(STRICT_OK))
def test_more_calls_than_a_turn_holds_fail_strict_and_lenient_stops_at_the_cap(protocol: str) -> None:
    ok = parse_output(_many(protocol, MAX_CALLS), protocol)
    assert ok.strict_ok and len(ok.calls) == MAX_CALLS
    over = parse_output(_many(protocol, MAX_CALLS + 1), protocol)
    assert not over.strict_ok and over.error == TOO_MANY_CALLS_ERROR and over.calls == ()
    assert 0 < len(over.lenient_calls) <= MAX_CALLS


def test_lenient_scans_reuse_the_strict_decode_and_agree_with_a_fresh_scan() -> None:
    # a strict-OK output: the llama3 diagnostic reads the object the strict json parse decoded;
    # a message long enough that the lenient window has to grow twice
    text = json.dumps({"name": "send_message_to_chat", "arguments": {"message": "word " * 2000}})
    r = parse_output(text, "json")
    assert r.strict_ok and r.other_protocols == ()
    # prose in front: strict fails, so every lenient scan decodes on its own
    prose = parse_output("Here: " + text, "json")
    assert not prose.strict_ok and [c.span for c in prose.lenient_calls] == [(6, 6 + len(text))]
    assert prose.lenient_calls[0].arguments == r.calls[0].arguments


def test_pythonic_call_count_is_not_fooled_by_commas_in_strings() -> None:
    # the early "too many calls" check reads commas with a rough tokenizer: strings full of
    # commas, brackets and odd quotes must not make a list of MAX_CALLS calls look longer
    one = 'f(a=\'x, y], (z\', b="""it\'s, a, \']\' """, c=[1, 2, 3])'
    text = "[" + ", ".join([one] * MAX_CALLS) + "]"
    r = parse_output(text, "pythonic")
    assert r.strict_ok and len(r.calls) == MAX_CALLS
    over = parse_output("[" + ", ".join([one] * (MAX_CALLS + 1)) + "]", "pythonic")
    assert over.error == TOO_MANY_CALLS_ERROR
    # a long list broken within its first MAX_CALLS elements fails as not Python
    broken = "[f(a=1), f(], " + ", ".join(["f(a=1)"] * (MAX_CALLS + 5)) + "]"
    assert parse_output(broken, "pythonic").error.startswith("not a Python expression")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("protocol", "text"),
    [
        ("json", '{"tool": "pause", "arguments": {"minutes": 5, "minutes": 6}}'),
        ("hermes", '<tool_call>{"name": "pause", "name": "wait", "arguments": {}}</tool_call>'),
        (
            "kimi_k2",
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.pause:0<|tool_call_argument_begin|>"
            '{"minutes": 5, "minutes": 6}<|tool_call_end|><|tool_calls_section_end|>',
        ),
        ("mistral_v11", '[TOOL_CALLS]pause[ARGS]{"minutes": 5, "minutes": 6}'),
        ("functionary", '<function=pause>{"minutes": 5, "minutes": 6}</function>'),
    ],
)
def test_a_key_given_twice_fails_strict_and_names_the_key(protocol: str, text: str) -> None:
    """Which of two values a model meant cannot be told: strict parsing refuses the object (as
    the XML-style formats refuse a parameter given twice); the lenient diagnostic still reads it."""
    r = parse_output(text, protocol)
    assert not r.strict_ok and "given twice" in (r.error or "")
    assert r.lenient_calls
