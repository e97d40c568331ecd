"""``command_r``: Cohere Command R7B / Command A actions, a JSON list between action tokens::

    <|START_ACTION|>[
        {"tool_call_id": "0", "tool_name": NAME, "parameters": {...}},
        ...
    ]<|END_ACTION|>

JSON arguments. ``tool_call_id`` (a string) is optional: the templates write it, the system
prompt asks only for ``tool_name`` and ``parameters``. A plan before the action is the reasoning
block ``<|START_THINKING|>...<|END_THINKING|>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from leader_eval.protocols import _json_list, _scan
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.types import ToolCall, json_type

START, END = "<|START_ACTION|>", "<|END_ACTION|>"
_KEYS = frozenset({"tool_call_id", "tool_name", "parameters"})


def _call(obj: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(obj, dict):
        for key in obj:
            if key not in _KEYS:
                raise _scan.Fail(f"unexpected key {key!r} in tool call object")
        if "tool_call_id" in obj:
            if not isinstance(obj["tool_call_id"], str):
                raise _scan.Fail(f"tool_call_id must be a string, got {json_type(obj['tool_call_id'])}")
            obj = {k: v for k, v in obj.items() if k != "tool_call_id"}
    return _scan.call_from_object(obj, name_keys=("tool_name",), args_keys=("parameters",), strict=True)


def _read(obj: Any, strict: bool) -> tuple[str, dict[str, Any]]:
    return _call(obj)


def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    if not text.startswith(START, lo):
        raise _scan.Fail(_scan.NO_CALL_ERROR)
    # the action list is read element by element (each call keeps its own span) by the one
    # reader of a JSON array of calls
    calls, end = _json_list.array_calls(text, _scan.skip_ws(text, lo + len(START)), hi, memo, _read, "command_r")
    pos = _scan.skip_ws(text, end)
    if not text.startswith(END, pos):
        raise _scan.Fail(f"expected {END} at offset {pos}")
    pos += len(END)
    if pos != hi:
        raise _scan.Fail(f"text after {END} at offset {pos}")
    return calls, [(lo, hi)]


def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
    text, budget = scan.text, scan.budget()
    for s in _scan.find_all(text, START, scan.start):
        if budget.spent:
            return
        got = scan.decode(_scan.skip_ws(text, s + len(START)), budget)
        if got is None or not isinstance(got[0], list | dict):
            budget.fail()
            continue
        e = scan.close_after(got[1], END)
        for obj in got[0] if isinstance(got[0], list) else [got[0]]:
            try:
                name, args = _scan.call_from_object(
                    obj, name_keys=("tool_name", "name"), args_keys=("parameters", "arguments"), strict=False
                )
            except _scan.Fail:
                continue
            yield ToolCall(name, args, "command_r", (s, e), text[s:e])


PROTOCOL = ToolCallProtocol(
    name="command_r",
    strict=strict,
    lenient=lenient,
    lenient_needs=(START,),
    opening=re.escape(START),
    closing=(re.escape(END),),
    template_markers=(START,),
)
