"""``minicpm5``: ``<function name=..><param name=..>`` calls, CDATA values taken exactly, the rest
Python's ``str()`` typed by the tool's schema."""

from __future__ import annotations

import time

import pytest

from leader_eval.protocols import NO_CALL_ERROR, NOT_ALONE_ERROR, parse_output

SCHEMA = {
    "post": {
        "type": "object",
        "properties": {"message": {"type": "string"}, "ok": {"type": "boolean"}, "meta": {"type": "object"}},
    }
}
CALL = '<function name="post"><param name="message"><![CDATA[a <b>\n& "c"]]></param><param name="ok">True</param><param name="meta">{\'k\': None}</param></function>'


def _parse(text: str):  # type: ignore[no-untyped-def]
    return parse_output(text, "minicpm5", eot_tokens=("<|im_end|>",), tool_schemas=SCHEMA)


def test_a_call_with_cdata_and_python_values() -> None:
    r = _parse(CALL + "\n" + CALL.replace('"post"', '"wait"', 1) + "<|im_end|>")
    assert r.strict_ok, r.error
    assert r.calls[0].arguments == {"message": 'a <b>\n& "c"', "ok": True, "meta": {"k": None}}
    assert [c.name for c in r.calls] == ["post", "wait"]


def test_a_cdata_body_is_exact_and_plain_text_is_kept() -> None:
    r = _parse('<function name="post"><param name="message"><![CDATA[\n x \n]]></param></function>')
    assert r.calls[0].arguments == {"message": "\n x \n"}
    assert _parse('<function name="post"><param name="message"> x </param></function>').calls[0].arguments == {
        "message": " x "
    }


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Ok. " + CALL, NOT_ALONE_ERROR),
        (CALL + " ok", 'expected <function name="...">'),
        ("hi", NO_CALL_ERROR),
        ('<function name="p"><param name="a"><![CDATA[x]]> </param></function>', "after the CDATA section"),
        ('<function name="p"><param name="a"><![CDATA[x</param></function>', "is not closed"),
        ('<function name="p"><param name="a">1</param>', "or </function>"),
        ('<function name="p"><param name="a">1</param><param name="a">1</param></function>', "given twice"),
    ],
)
def test_strict_refuses_what_is_not_exactly_the_format(text: str, reason: str) -> None:
    r = _parse(text)
    assert not r.strict_ok and not r.calls
    assert r.error is not None and reason in r.error


def test_lenient_finds_calls_in_prose() -> None:
    r = _parse("I will post " + CALL + " now")
    assert [c.name for c in r.lenient_calls] == ["post"]


@pytest.mark.parametrize(
    "text",
    [
        '<function name="a"><param name="b"><![CDATA[' * 30_000,
        '<function name="a">' * 60_000,
        '<function name="a">' + '<param name="b">v</param>' * 40_000,
    ],
)
def test_hostile_inputs_stay_fast(text: str) -> None:
    t = time.perf_counter()
    assert not _parse(text).strict_ok
    assert time.perf_counter() - t < 1.0
