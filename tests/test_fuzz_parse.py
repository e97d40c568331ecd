"""Fuzzing: no text or bytes makes a parser raise, and parsing and scoring are deterministic."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leader_eval.checks.toolcall import match_calls
from leader_eval.protocols import PROTOCOLS, ParseResult, parse_output
from leader_eval.protocols._scan import Budget, try_decode, window_charges

# Fragments of every protocol's markup, so generated text reaches deep into each parser.
MARKUP = [
    "<tool_call>",
    "</tool_call>",
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "functions.f:0",
    "<|python_tag|>",
    "<tool_use>",
    "</tool_use>",
    "<name>",
    "</name>",
    "<arguments>",
    "</arguments>",
    "<function_calls>",
    "</function_calls>",
    '<invoke name="f">',
    "</invoke>",
    '<parameter name="a">',
    "</parameter>",
    "<think>",
    "</think>",
    "<|im_end|>",
    '{"name": "f", "arguments": ',
    '{"tool": "f", "parameters": ',
    "[f(a=",
    "g.h(",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    '"',
    "'",
    ",",
    ";",
    ":",
    "1",
    "1.5",
    "true",
    "null",
    "NaN",
    "\\",
    "\n",
    " ",
    "é",
    "\x00",
    "\ud800",
]

texts = st.one_of(
    st.text(max_size=300),
    st.lists(st.one_of(st.sampled_from(MARKUP), st.text(max_size=5)), max_size=60).map("".join),
)

TOOLS = {"f": {"type": "object", "properties": {"a": {"type": "integer"}}}}
EXPECT = {"calls": [{"tool": "f", "args": {"a": {"one_of": [1, 2]}}}]}


def _parse(text: str | bytes, protocol: str) -> ParseResult:
    return parse_output(
        text,  # type: ignore[arg-type]
        protocol,
        eot_tokens=("<|im_end|>",),
        reasoning_tags=("<think>", "</think>"),
        api_tool_calls=[
            {"type": "function", "function": {"name": "f", "arguments": text if isinstance(text, str) else ""}}
        ],
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts)
def test_any_text_parses_without_raising_and_deterministically(text: str) -> None:
    for protocol in PROTOCOLS:
        first = _parse(text, protocol)
        second = _parse(text, protocol)
        assert first == second
        assert first.strict_ok == (first.error is None)
        if not first.strict_ok:
            assert first.calls == () and first.consumed == ()
        for c in first.calls + first.lenient_calls:
            if c.span is not None:
                assert text[c.span[0] : c.span[1]] == c.raw
        scores = [r.to_dict() for r in match_calls(first.lenient_calls, EXPECT, TOOLS)]
        assert scores == [r.to_dict() for r in match_calls(first.lenient_calls, EXPECT, TOOLS)]
        json.dumps(scores, default=str)


@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=300))
def test_any_bytes_parse_without_raising(data: bytes) -> None:
    for protocol in PROTOCOLS:
        assert _parse(data, protocol) == _parse(data, protocol)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=700),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(value=json_values, before=st.text(max_size=40), after=st.text(max_size=40), indent=st.sampled_from([None, 2]))
def test_known_decode_spends_what_a_fresh_decode_spends(
    value: object, before: str, after: str, indent: int | None
) -> None:
    # parse_output hands the strict parser's decodes to the lenient scans, which replay
    # window_charges instead of decoding again: the spending (and so every budget decision) must
    # be the one a fresh try_decode makes
    doc = json.dumps({"name": "f", "arguments": {"v": value}}, indent=indent)
    text = before + doc + after
    charges: list[int] = []
    got = try_decode(text, len(before), Budget(10**9), charges)
    assert got is not None and got[1] == len(before) + len(doc)
    assert tuple(charges) == window_charges(len(text), len(before), got[1])
