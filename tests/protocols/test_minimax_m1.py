"""``minimax_m1``: MiniMax-M1's ``<tool_calls>`` block of one JSON call object per line."""

from __future__ import annotations

import time

import pytest

from leader_eval.protocols import NO_CALL_ERROR, NOT_ALONE_ERROR, detect, parse_output

CALLS = '<tool_calls>\n{"name": "post", "arguments": {"message": "a\\nb", "n": 1}}\n{"name": "wait", "arguments": {}}\n</tool_calls>'


def _parse(text: str):  # type: ignore[no-untyped-def]
    return parse_output(text, "minimax_m1", eot_tokens=("<end_of_sentence>",))


def test_a_block_of_calls_parses_as_json() -> None:
    r = _parse(CALLS + "<end_of_sentence>")
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == [("post", {"message": "a\nb", "n": 1}), ("wait", {})]
    assert r.visible_text == ""


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Sure. " + CALLS, NOT_ALONE_ERROR),
        (CALLS + " done", "text after </tool_calls>"),
        ("hello", NO_CALL_ERROR),
        ("<tool_calls>\n</tool_calls>", 'expected {"name": ..., "arguments": ...}'),
        ('<tool_calls>\n[{"name": "a", "arguments": {}}]\n</tool_calls>', 'expected {"name"'),
        ('<tool_calls>\n{"name": "a", "arguments": {}}\n', "expected a call object or </tool_calls>"),
        ('<tool_calls>\n{"name": "a", "arguments": "{}"}\n</tool_calls>', "JSON-encoded string"),
        ('<tool_calls>\n{"name": "a", "parameters": {}}\n</tool_calls>', "unexpected key 'parameters'"),
        ('<tool_calls>\n{"name": "a", "arguments": {}} x\n</tool_calls>', "expected a call object"),
        (CALLS + "\n" + CALLS, "text after </tool_calls>"),
    ],
)
def test_strict_refuses_what_is_not_exactly_the_format(text: str, reason: str) -> None:
    r = _parse(text)
    assert not r.strict_ok and not r.calls
    assert r.error is not None and reason in r.error


def test_lenient_reads_the_objects_after_the_tag_not_an_array() -> None:
    r = _parse("I'll call: " + CALLS)
    assert [c.name for c in r.lenient_calls] == ["post", "wait"]
    r = _parse('<tool_calls>[{"name": "a", "arguments": {}}]</tool_calls>')
    assert r.lenient_calls == ()  # Apriel's array form is not M1's


def test_detect_tells_minimax_m1_from_apriel_which_also_writes_tool_calls() -> None:
    from tests.support.template_calls import CORPUS

    assert detect(chat_template=(CORPUS / "MiniMax-M1.jinja").read_text(encoding="utf-8")) == "minimax_m1"
    assert detect(chat_template=(CORPUS / "unsloth-Apriel-1.5.jinja").read_text(encoding="utf-8")) != "minimax_m1"


@pytest.mark.parametrize(
    "text", ["<tool_calls>" * 100_000, "<tool_calls>{" * 100_000, '<tool_calls>{"name": ' * 50_000]
)
def test_hostile_inputs_stay_fast(text: str) -> None:
    t = time.perf_counter()
    assert not _parse(text).strict_ok
    assert time.perf_counter() - t < 1.0
