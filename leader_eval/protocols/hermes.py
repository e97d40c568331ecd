"""``hermes``: Hermes / Qwen ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks,
one or more, only whitespace between them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from leader_eval.protocols import _scan
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.types import ToolCall

OPEN, CLOSE = "<tool_call>", "</tool_call>"


def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    if not text.startswith(OPEN, lo):
        raise _scan.Fail(_scan.NO_CALL_ERROR)
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []
    pos = lo
    while pos < hi:
        if len(calls) == _scan.MAX_CALLS:
            raise _scan.Fail(_scan.TOO_MANY_CALLS_ERROR)
        if not text.startswith(OPEN, pos):
            raise _scan.Fail(f"expected {OPEN} at offset {pos}")
        start = pos
        pos = _scan.skip_ws(text, pos + len(OPEN))
        obj, end = _scan.decode(text, pos, memo)
        name, args = _scan.call_from_object(obj, name_keys=("name",), args_keys=("arguments",), strict=True)
        pos = _scan.skip_ws(text, end)
        if not text.startswith(CLOSE, pos):
            raise _scan.Fail(f"expected {CLOSE} at offset {pos}")
        pos += len(CLOSE)
        calls.append(ToolCall(name, args, "hermes", (start, pos), text[start:pos]))
        spans.append((start, pos))
        pos = _scan.skip_ws(text, pos)
    return calls, spans


def _read(obj: Any) -> tuple[str, dict[str, Any]]:
    return _scan.call_from_object(obj, name_keys=("name",), args_keys=("arguments", "parameters"), strict=False)


def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
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
    lenient_needs=(OPEN,),
)
