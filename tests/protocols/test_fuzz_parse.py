"""Fuzzing: no text or bytes makes a parser raise, and parsing and scoring are deterministic."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leader_eval.checks.toolcall import match_calls
from leader_eval.protocols import PROTOCOLS, ParseResult, parse_output
from leader_eval.protocols._scan import DECODER, Budget, try_decode, window_charges

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


def _window_by_window(text: str, pos: int, budget: Budget, charges: list[int]) -> tuple[object, int] | None:
    """try_decode as specified: windows of 512, 2,048, 8,192, ... characters (at most the rest
    of the text), each decoded in turn while the failure is that window's own cut."""
    n = len(text)
    for stop in dict.fromkeys(min(n, pos + 512 * 4**k) for k in range(12)):
        size = stop - pos
        charges.append(size)
        if not budget.spend(size):
            charges.append(-1)
            return None
        try:
            value, end = DECODER.raw_decode(text[pos:stop])
        except json.JSONDecodeError as exc:
            if stop < n and (exc.pos >= size - 16 or exc.msg.startswith("Unterminated string")):
                continue  # the window's own cut: a larger one may hold the value
            return None
        except (RecursionError, ValueError, MemoryError):
            return None
        return value, pos + end
    return None


def _same_as_window_by_window(text: str, pos: int, budget_chars: int, failures_spent: int) -> None:
    got_budget, want_budget = Budget(budget_chars), Budget(budget_chars)
    for b in (got_budget, want_budget):
        b.fails_left -= failures_spent
    got_charges: list[int] = []
    want_charges: list[int] = []
    got = try_decode(text, pos, got_budget, got_charges)
    want = _window_by_window(text, pos, want_budget, want_charges)
    assert repr(got) == repr(want)
    assert got_charges == want_charges
    assert (got_budget.left, got_budget.fails_left) == (want_budget.left, want_budget.fails_left)


_JUNK = ["'", "NaN", "-Infinity", "-", "tru", ",", "}", "]", ":", "\\x", "\\u12", "\x00", "\n", "1e", "01", '"', "\\"]


@settings(max_examples=300, deadline=None)
@given(
    value=json_values,
    before=st.text(max_size=20),
    after=st.text(max_size=20),
    indent=st.sampled_from([None, 1]),
    repeat=st.sampled_from([1, 4, 12, 40]),
    cut=st.floats(0, 1),
    junk=st.none() | st.tuples(st.floats(0, 1), st.sampled_from(_JUNK)),
    budget=st.sampled_from([10**9, 600, 3000, 9000, 40_000]),
)
def test_lenient_decode_answers_and_spends_as_window_by_window(
    value: object,
    before: str,
    after: str,
    indent: int | None,
    repeat: int,
    cut: float,
    junk: tuple[float, str] | None,
    budget: int,
) -> None:
    # try_decode decodes an object or array once, in its largest early window, and charges the
    # smaller windows from that outcome: the answer and every charge (so every budget decision
    # of a lenient scan) must be those of decoding window by window, for whole values, values
    # cut anywhere (a truncated output) and broken ones, across the 512/2048/8192 windows
    doc = json.dumps({"name": "f", "arguments": {"v": [value] * repeat}}, indent=indent)
    if junk is not None:
        at = int(junk[0] * len(doc))
        doc = doc[:at] + junk[1] + doc[at:]
    doc = doc[: max(1, int(cut * len(doc)))] if cut < 0.7 else doc
    _same_as_window_by_window(before + doc + after, len(before), budget, 0)


def test_lenient_decode_matches_window_by_window_at_every_cut() -> None:
    # every prefix (step 7) of calls that cross the 512, 2048 and 8192 windows, and the whole
    # calls with an error placed before, at and after each window's last 16 characters
    msg = 'Ada, please take the "map" of the river.\n' * 300
    docs = [
        json.dumps({"name": "f", "arguments": {"message": msg[:size], "n": [1, 2.5, None]}})
        for size in (600, 3000, 12000)
    ]
    for doc in docs:
        for stop in range(1, len(doc) + 1, 7):
            _same_as_window_by_window(doc[:stop], 0, 10**9, 0)
            _same_as_window_by_window("x" + doc[:stop], 1, 10**9, 0)
        for edge in (512, 2048, 8192):
            for at in range(edge - 24, min(edge + 8, len(doc))):
                for junk in ("\x01", "\\x"):  # an error exactly at ``at`` inside the message
                    broken = doc[:at] + junk + doc[at:]
                    _same_as_window_by_window(broken, 0, 10**9, 0)
                    _same_as_window_by_window(broken, 0, 2600, 0)


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(
        st.sampled_from(["f(a=1)", "g.h(b='x\u00e9')", 'k(c="\\\\")', " ", "\n", "\r", "\r\n", "\t"]),
        min_size=1,
        max_size=12,
    ),
    before=st.sampled_from(["", "Sure:\r", "x\r\n", "caf\u00e9 "]),
)
def test_pythonic_calls_keep_their_text_across_every_line_break(parts: list[str], before: str) -> None:
    # Python ends a line at \r\n, \r and \n: a call after a lone \r once put its line past the
    # last one the parser knew of (an IndexError out of parse_output, under every protocol)
    calls = [p for p in parts if "(" in p] or ["f(a=1)"]
    layout = "".join(p for p in parts if "(" not in p)
    text = before + "[" + layout + ("," + layout).join(calls) + "]"
    got = parse_output(text, "pythonic")
    found = got.calls if got.strict_ok else got.lenient_calls
    assert [c.name for c in found] == [c.split("(")[0] for c in calls]
    for c in found:
        assert c.span is not None and text[c.span[0] : c.span[1]] == c.raw
        assert c.raw.startswith(c.name) and c.raw.endswith(")")
    assert "pythonic" in parse_output(text, "json").other_protocols
