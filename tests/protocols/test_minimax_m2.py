"""``minimax_m2``: ``<minimax:tool_call>`` blocks of ``<invoke>``/``<parameter>`` calls, values
typed by the tool's schema."""

from __future__ import annotations

import time

import pytest

from leader_eval.protocols import NO_CALL_ERROR, NOT_ALONE_ERROR, parse_output

SCHEMA = {"post": {"type": "object", "properties": {"message": {"type": "string"}, "n": {"type": "integer"}}}}
BLOCK = (
    '<minimax:tool_call>\n<invoke name="post">\n<parameter name="message">42</parameter>\n'
    '<parameter name="n">7</parameter>\n</invoke>\n<invoke name="wait">\n</invoke>\n</minimax:tool_call>'
)


def _parse(text: str):  # type: ignore[no-untyped-def]
    return parse_output(text, "minimax_m2", eot_tokens=("[e~[",), tool_schemas=SCHEMA)


def test_a_block_of_invokes_parses_with_typed_values() -> None:
    r = _parse(BLOCK + "[e~[\n")
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == [("post", {"message": "42", "n": 7}), ("wait", {})]


def test_reasoning_then_calls_and_several_blocks() -> None:
    r = parse_output(
        "<think>\nplan\n</think>\n\n" + BLOCK + "\n" + BLOCK, "minimax_m2", reasoning_tags=("<think>", "</think>")
    )
    assert r.strict_ok and len(r.calls) == 4 and r.reasoning == "\nplan\n"


def test_one_newline_around_a_value_is_dropped() -> None:
    r = _parse(
        '<minimax:tool_call><invoke name="post"><parameter name="message">\n a \n</parameter></invoke></minimax:tool_call>'
    )
    assert r.calls[0].arguments == {"message": " a "}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Sure. " + BLOCK, NOT_ALONE_ERROR),
        (BLOCK + " ok", "expected <minimax:tool_call> at offset"),
        ("hi", NO_CALL_ERROR),
        ('<invoke name="post"></invoke>', NO_CALL_ERROR),
        ("<minimax:tool_call>\n</minimax:tool_call>", 'expected <invoke name="...">'),
        ('<minimax:tool_call><invoke name="post"><parameter name="n">1</invoke></minimax:tool_call>', "is not closed"),
        (
            '<minimax:tool_call><invoke name="post">x</invoke></minimax:tool_call>',
            "expected <parameter name=...> or </invoke>",
        ),
        ('<minimax:tool_call><invoke name="post"></invoke>', "or </minimax:tool_call>"),
        ('<minimax:tool_call><invoke name=""></invoke></minimax:tool_call>', 'expected <invoke name="...">'),
        ('<minimax:tool_call><invoke name=" "></invoke></minimax:tool_call>', "empty tool name"),
        (
            '<minimax:tool_call><invoke name="p"><parameter name="a">1</parameter><parameter name="a">2</parameter></invoke></minimax:tool_call>',
            "given twice",
        ),
    ],
)
def test_strict_refuses_what_is_not_exactly_the_format(text: str, reason: str) -> None:
    r = _parse(text)
    assert not r.strict_ok and not r.calls
    assert r.error is not None and reason in r.error


def test_lenient_finds_invokes_in_a_block_inside_prose() -> None:
    r = _parse("Let me post. " + BLOCK + " Done.")
    assert [c.name for c in r.lenient_calls] == ["post", "wait"]
    assert "anthropic_xml" not in r.other_protocols  # the same invokes, inside this protocol's calls


@pytest.mark.parametrize(
    "text",
    [
        '<minimax:tool_call><invoke name="a">' * 50_000,
        '<minimax:tool_call><invoke name="a"><parameter name="b">' * 30_000,
        '<minimax:tool_call>\n<invoke name="a">\n' + '<parameter name="b">v</parameter>\n' * 40_000,
    ],
)
def test_hostile_inputs_stay_fast(text: str) -> None:
    t = time.perf_counter()
    assert not _parse(text).strict_ok
    assert time.perf_counter() - t < 1.0
