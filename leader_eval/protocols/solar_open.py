"""``solar_open``: Upstage Solar Open's tool-call turn::

    <|tool_calls|><|tool_call:begin|>ID<|tool_call:name|>NAME<|tool_call:args|>{...}<|tool_call:end|>...<|calls|>

JSON arguments. The output after the generation prompt (``<|begin|>assistant``) starts with
``<|tool_calls|>``; a reasoning message before it (``<|think|>...<|end|>``) is followed by
``<|begin|>assistant`` again. ``<|calls|>`` ends the turn (a server may strip it as a stop
token); nothing may follow it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from leader_eval.protocols import _scan
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.types import ToolCall, json_type

START = "<|begin|>assistant"
CALLS_BEGIN, CALLS_END = "<|tool_calls|>", "<|calls|>"
CALL_BEGIN, NAME, ARGS, CALL_END = (
    "<|tool_call:begin|>",
    "<|tool_call:name|>",
    "<|tool_call:args|>",
    "<|tool_call:end|>",
)

# ID<|tool_call:name|>NAME<|tool_call:args|>: neither holds markup or whitespace; bounded
_HEAD = re.compile(r"([^\s<>|]{1,128})<\|tool_call:name\|>([^\s<>|]{1,256})<\|tool_call:args\|>")
_LENIENT_HEAD = re.compile(
    r"\s*(?:[^\s<>|]{1,128}\s*)?<\|tool_call:name\|>\s*([^\s<>|]{1,256})\s*<\|tool_call:args\|>\s*"
)


def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    pos = lo
    if text.startswith(START, pos):
        pos = _scan.skip_ws(text, pos + len(START))
    if not text.startswith(CALLS_BEGIN, pos):
        if text.startswith(CALL_BEGIN, pos):
            raise _scan.Fail(f"tool call without {CALLS_BEGIN} at offset {pos}")
        raise _scan.Fail(_scan.NO_CALL_ERROR if pos == lo else f"expected {CALLS_BEGIN} at offset {pos}")
    pos = _scan.skip_ws(text, pos + len(CALLS_BEGIN))
    calls: list[ToolCall] = []
    while text.startswith(CALL_BEGIN, pos):
        if len(calls) == _scan.MAX_CALLS:
            raise _scan.Fail(_scan.TOO_MANY_CALLS_ERROR)
        start = pos
        m = _HEAD.match(text, pos + len(CALL_BEGIN))
        if not m:
            raise _scan.Fail(f"expected ID{NAME}NAME{ARGS} at offset {pos + len(CALL_BEGIN)}")
        value, end = _scan.decode(text, m.end(), memo)
        if not isinstance(value, dict):
            raise _scan.Fail(f"arguments must be a JSON object, got {json_type(value)}")
        pos = _scan.skip_ws(text, end)
        if not text.startswith(CALL_END, pos):
            raise _scan.Fail(f"expected {CALL_END} at offset {pos}")
        pos += len(CALL_END)
        calls.append(ToolCall(m.group(2), value, "solar_open", (start, pos), text[start:pos]))
        pos = _scan.skip_ws(text, pos)
    if not calls:
        raise _scan.Fail(f"expected {CALL_BEGIN} at offset {pos}")
    if text.startswith(CALLS_END, pos):
        pos += len(CALLS_END)
    if pos != hi:
        raise _scan.Fail(f"expected {CALL_BEGIN} or {CALLS_END} at offset {pos}")
    return calls, [(lo, hi)]


def _head(text: str, s: int) -> tuple[str, int] | None:
    m = _LENIENT_HEAD.match(text, s + len(CALL_BEGIN))
    return (m.group(1), m.end()) if m else None


def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
    return _scan.headed_calls(scan, CALL_BEGIN, _head, "solar_open", CALL_END)


PROTOCOL = ToolCallProtocol(
    name="solar_open",
    strict=strict,
    lenient=lenient,
    lenient_needs=(CALL_BEGIN,),
    opening=r"(?:<\|begin\|>assistant\s*)?<\|tool_calls\|>|<\|tool_call:begin\|>",
    closing=(re.escape(CALLS_END), re.escape(CALL_END)),
    inner=(re.escape(NAME), re.escape(ARGS)),  # <|begin|>assistant is the role header, no call markup
    template_markers=(CALL_BEGIN,),
    tokens=(
        "<|begin|>",
        "<|tool_calls|>",
        "<|calls|>",
        "<|tool_call:begin|>",
        "<|tool_call:name|>",
        "<|tool_call:args|>",
        "<|tool_call:end|>",
    ),
)
