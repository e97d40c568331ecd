"""Kimi K3's channels: the ``tools`` block after an empty ``response`` channel parses strictly,
each argument read as its ``type`` attribute says; text in the response channel is text around
the calls; refusals name their reason; the lenient reading and hostile inputs."""

from __future__ import annotations

import time

import pytest

from leader_eval.protocols import NO_CALL_ERROR, NOT_ALONE_ERROR, REGISTRY, TOO_MANY_CALLS_ERROR, parse_output

THINK = ("<|open|>think<|sep|>", "<|close|>think<|sep|>")
RESPONSE = "<|open|>response<|sep|><|close|>response<|sep|>"


def _arg(key: str, kind: str, value: str) -> str:
    return f'<|open|>argument key="{key}" type="{kind}"<|sep|>{value}<|close|>argument<|sep|>'


def _call(name: str, *args: str, index: int = 1) -> str:
    return f'<|open|>call tool="{name}" index="{index}"<|sep|>{"".join(args)}<|close|>call<|sep|>'


def _tools(*calls: str) -> str:
    return f"<|open|>tools<|sep|>{''.join(calls)}<|close|>tools<|sep|>"


FULL = (
    "I should post.<|close|>think<|sep|>"
    + RESPONSE
    + _tools(
        _call(
            "post",
            _arg("message", "string", "42 <b>x</b>\nline"),
            _arg("count", "number", "3"),
            _arg("ratio", "number", "0.5"),
            _arg("urgent", "boolean", "false"),
            _arg("reviewer", "null", "null"),
            _arg("meta", "object", '{"a": [1]}'),
            _arg("items", "array", "[1, 2]"),
        ),
        _call("wait", index=2),
    )
    + "<|close|>message<|sep|>"
)


def test_the_tools_block_parses_strictly_each_value_read_as_its_type_says() -> None:
    r = parse_output(FULL, "kimi_k3", reasoning_tags=THINK, eot_tokens=("<|end_of_msg|>",))
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == [
        (
            "post",
            {
                "message": "42 <b>x</b>\nline",
                "count": 3,
                "ratio": 0.5,
                "urgent": False,
                "reviewer": None,
                "meta": {"a": [1]},
                "items": [1, 2],
            },
        ),
        ("wait", {}),
    ]
    assert r.reasoning == "I should post." and r.visible_text == ""


def test_without_thinking_the_prompt_opened_the_response_channel() -> None:
    text = "<|close|>response<|sep|>" + _tools(_call("wait"))
    assert parse_output(text, "kimi_k3").strict_ok


def test_a_call_may_carry_one_json_object_and_attributes_are_unescaped() -> None:
    body = '<|open|>json type="object"<|sep|>{"q": "a\\"b"}<|close|>json<|sep|>'
    text = RESPONSE + _tools(f'<|open|>call tool="find&amp;go" index="1"<|sep|>{body}<|close|>call<|sep|>')
    r = parse_output(text, "kimi_k3")
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == [("find&go", {"q": 'a"b'})]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("<|open|>response<|sep|>On it.<|close|>response<|sep|>" + _tools(_call("wait")), NOT_ALONE_ERROR),
        ("<|open|>response<|sep|>Hello.<|close|>response<|sep|><|close|>message<|sep|>", NO_CALL_ERROR),
        (_tools(_call("wait")), "expected <|close|>response<|sep|> before the tools block"),
        (RESPONSE + _tools(_call("wait")) + " done", "text after <|close|>tools<|sep|>"),
        (RESPONSE + _tools(), 'expected <|open|>call tool="..."'),
        (
            RESPONSE + _tools(_call("post", _arg("count", "number", "three"))),
            'is not a JSON number as its type="number"',
        ),
        (RESPONSE + _tools(_call("post", _arg("on", "boolean", "True"))), 'type="boolean" says'),
        (RESPONSE + _tools(_call("post", _arg("m", "object", "[1]"))), 'type="object" says'),
        (RESPONSE + _tools(_call("post", _arg("m", "text", "x"))), "expected <|open|>argument"),
        (RESPONSE + _tools(_call("post", _arg("m", "string", "a"), _arg("m", "string", "b"))), "given twice"),
        (RESPONSE + '<|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|>', "expected <|open|>argument"),
    ],
)
def test_strict_refusals_name_the_reason(text: str, error: str) -> None:
    r = parse_output(text, "kimi_k3")
    assert not r.strict_ok
    assert error in r.error, r.error  # type: ignore[operator]


def test_a_string_holding_the_close_token_is_refused_not_guessed() -> None:
    text = RESPONSE + _tools(_call("post", _arg("m", "string", "a<|close|>argument<|sep|>b")))
    assert not parse_output(text, "kimi_k3").strict_ok


def test_too_many_calls_fail_strict() -> None:
    assert parse_output(RESPONSE + _tools(*[_call("wait")] * 257), "kimi_k3").error == TOO_MANY_CALLS_ERROR


def test_lenient_reads_calls_anywhere_and_forgives_types() -> None:
    text = "Posting now " + _call("post", _arg("count", "number", "3"), _arg("x", "number", "lots")) + " ok"
    r = parse_output(text, "kimi_k3", tool_schemas={"post": {"properties": {"count": {"type": "integer"}}}})
    assert [(c.name, c.arguments) for c in r.lenient_calls] == [("post", {"count": 3, "x": "lots"})]
    assert parse_output(text, "hermes").other_protocols == ("kimi_k3",)


def test_its_markup_is_its_own_and_token_shaped() -> None:
    p = REGISTRY["kimi_k3"]
    assert p.is_attempt("<|open|>tools<|sep|>") and p.owns("<|close|>argument<|sep|>")
    assert p.owns('<|open|>call tool="post" index="1"<|sep|>') and not p.owns("<|open|>response<|sep|>")


@pytest.mark.parametrize(
    "text",
    [
        '<|open|>call tool="f" index="1"<|sep|><|open|>argument key="k" type="string"<|sep|>' * 12_000,
        "<|open|>tools<|sep|>" * 50_000,
        '<|open|>call tool="f" index="1"<|sep|><|open|>json type="object"<|sep|>{"a":' * 15_000,
    ],
    ids=["unclosed-arguments", "tool-blocks", "unclosed-json"],
)
def test_hostile_inputs_stay_fast(text: str) -> None:
    t = time.perf_counter()
    parse_output(text, "kimi_k3")
    parse_output(text, "json")
    assert time.perf_counter() - t < 1.0


@pytest.mark.parametrize(
    ("text", "visible"),
    [
        ("<|open|>response<|sep|>Hello team.<|close|>response<|sep|><|close|>message<|sep|>", "Hello team."),
        ("Hello team.<|close|>response<|sep|>", "Hello team."),  # the prompt opened the channel
        ("I greet.<|close|>think<|sep|><|open|>response<|sep|>Hi<|close|>response<|sep|><|close|>message<|sep|>", "Hi"),
        ("Plain text, no channel", "Plain text, no channel"),
    ],
)
def test_a_plain_reply_is_shown_without_its_channel_tokens(text: str, visible: str) -> None:
    r = parse_output(text, "kimi_k3", reasoning_tags=THINK)
    assert r.error == NO_CALL_ERROR and r.visible_text == visible


def test_a_reply_beside_calls_keeps_the_calls_markup_visible() -> None:
    text = "<|open|>response<|sep|>On it.<|close|>response<|sep|>" + _tools(_call("wait"))
    r = parse_output(text, "kimi_k3")
    assert r.error == NOT_ALONE_ERROR and r.visible_text.startswith("On it.<|open|>tools<|sep|>")
