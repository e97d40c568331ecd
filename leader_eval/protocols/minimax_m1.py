"""``minimax_m1``: MiniMax-M1's calls, one JSON object per line in one block::

    <tool_calls>
    {"name": "NAME", "arguments": {...}}
    {"name": "NAME", "arguments": {...}}
    </tool_calls>

Each object has exactly ``name`` and ``arguments`` (an object); whitespace between the objects
and around the tags. Arguments are JSON (never text to type).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from leader_eval.protocols import _scan
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.types import ToolCall

OPEN, CLOSE = "<tool_calls>", "</tool_calls>"


def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    if not text.startswith(OPEN, lo):
        raise _scan.Fail(_scan.NO_CALL_ERROR)
    calls: list[ToolCall] = []
    pos = _scan.skip_ws(text, lo + len(OPEN))
    while pos < hi and text.startswith("{", pos):
        if len(calls) == _scan.MAX_CALLS:
            raise _scan.Fail(_scan.TOO_MANY_CALLS_ERROR)
        obj, end = _scan.decode(text, pos, memo)
        name, args = _scan.call_from_object(obj, name_keys=("name",), args_keys=("arguments",), strict=True)
        calls.append(ToolCall(name, args, "minimax_m1", (pos, end), text[pos:end]))
        pos = _scan.skip_ws(text, end)
    if not calls:
        raise _scan.Fail(f'expected {{"name": ..., "arguments": ...}} at offset {pos}')
    if not text.startswith(CLOSE, pos):
        raise _scan.Fail(f"expected a call object or {CLOSE} at offset {pos}")
    pos += len(CLOSE)
    if _scan.skip_ws(text, pos) < hi:
        raise _scan.Fail(f"text after {CLOSE} at offset {pos}")
    return calls, [(lo, pos)]


def _read(obj: Any) -> tuple[str, dict[str, Any]]:
    return _scan.call_from_object(obj, name_keys=("name",), args_keys=("arguments", "parameters"), strict=False)


def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
    """The call objects that follow each ``<tool_calls>`` (an array there is another family's)."""
    text, budget = scan.text, scan.budget()
    for s in _scan.find_all(text, OPEN, scan.start):
        if budget.spent:
            return
        pos = _scan.skip_ws(text, s + len(OPEN))
        while text.startswith("{", pos) and not budget.spent:
            got = scan.decode(pos, budget)
            if got is None:
                budget.fail()
                break
            try:
                name, args = _read(got[0])
            except _scan.Fail:
                budget.fail()
                break
            e = scan.close_after(got[1], CLOSE)
            yield ToolCall(name, args, "minimax_m1", (pos, e), text[pos:e])
            pos = _scan.skip_ws(text, got[1])


PROTOCOL = ToolCallProtocol(
    name="minimax_m1",
    strict=strict,
    lenient=lenient,
    opening=r"<tool_calls>",
    closing=(r"</tool_calls>",),
    # the template's assistant turn (written with "\n" escapes in the template source); Apriel's
    # templates write <tool_calls>[...] too, with a JSON array
    template_markers=("ai name=assistant\\n<tool_calls>", "ai name=assistant\n<tool_calls>"),
    lenient_needs=(OPEN,),
)
