"""``hermes``: Hermes / Qwen ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks,
one or more, only whitespace between them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.protocols._scan import (
    MAX_CALLS,
    NO_CALL_ERROR,
    TOO_MANY_CALLS_ERROR,
    Fail,
    Memo,
    Scan,
    call_from_object,
    decode,
    skip_ws,
)
from leader_eval.types import ToolCall

OPEN, CLOSE = "<tool_call>", "</tool_call>"


def strict(text: str, lo: int, hi: int, memo: Memo | None = None) -> StrictOut:
    if not text.startswith(OPEN, lo):
        raise Fail(NO_CALL_ERROR)
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []
    pos = lo
    while pos < hi:
        if len(calls) == MAX_CALLS:
            raise Fail(TOO_MANY_CALLS_ERROR)
        if not text.startswith(OPEN, pos):
            raise Fail(f"expected {OPEN} at offset {pos}")
        start = pos
        pos = skip_ws(text, pos + len(OPEN))
        obj, end = decode(text, pos, memo)
        name, args = call_from_object(obj, name_keys=("name",), args_keys=("arguments",), strict=True)
        pos = skip_ws(text, end)
        if not text.startswith(CLOSE, pos):
            raise Fail(f"expected {CLOSE} at offset {pos}")
        pos += len(CLOSE)
        calls.append(ToolCall(name, args, "hermes", (start, pos), text[start:pos]))
        spans.append((start, pos))
        pos = skip_ws(text, pos)
    return calls, spans


def _read(obj: Any) -> tuple[str, dict[str, Any]]:
    return call_from_object(obj, name_keys=("name",), args_keys=("arguments", "parameters"), strict=False)


def lenient(scan: Scan) -> Iterator[ToolCall]:
    for s, end, (name, args) in scan.tagged_json(OPEN, _read):
        e = scan.close_after(end, CLOSE)
        yield ToolCall(name, args, "hermes", (s, e), scan.text[s:e])


PROTOCOL = ToolCallProtocol(
    name="hermes",
    strict=strict,
    lenient=lenient,
    opening=r"<tool_call>",
    closing=(r"</tool_call>",),
    template_markers=("<tool_call>",),
    renderers=("qwen", "hermes"),
)
