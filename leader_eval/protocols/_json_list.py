"""A marker, a JSON array of call objects, and (for most formats) a closing marker (private).

The shape that Apriel's ``<tool_calls>[...]</tool_calls>``, Nemotron Nano v2's
``<TOOLCALL>[...]</TOOLCALL>``, Granite 3's ``<|tool_call|>[...]`` and Apertus's
``<|tools_prefix|>[{"NAME": {...}}]<|tools_suffix|>`` share; what differs is the markers and how
one element names its tool (``read``). The plain ``json`` protocol's array is read here too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from leader_eval.protocols import _scan
from leader_eval.protocols._base import LenientExtractor, StrictOut, StrictParser
from leader_eval.types import ToolCall

#: read(element, strict) -> (tool name, arguments); raises ``Fail``
Reader = Callable[[Any, bool], tuple[str, dict[str, Any]]]


def array_calls(
    text: str, pos: int, hi: int, memo: _scan.Memo | None, read: Reader, protocol: str
) -> tuple[list[ToolCall], int]:
    """The array of calls opening at ``pos`` (its ``[``), decoded element by element so each
    call keeps its own span: the calls and where the array ends (after its ``]``)."""
    if pos >= hi or text[pos] != "[":
        raise _scan.Fail(f"expected a JSON array of tool calls at offset {pos}")
    calls: list[ToolCall] = []
    pos = _scan.skip_ws(text, pos + 1)
    if pos < hi and text[pos] == "]":
        raise _scan.Fail("empty array of tool calls")
    while True:
        if len(calls) == _scan.MAX_CALLS:
            raise _scan.Fail(_scan.TOO_MANY_CALLS_ERROR)
        obj, end = _scan.decode(text, pos, memo)
        name, args = read(obj, True)
        calls.append(ToolCall(name, args, protocol, (pos, end), text[pos:end]))
        pos = _scan.skip_ws(text, end)
        if pos < hi and text[pos] == ",":
            pos = _scan.skip_ws(text, pos + 1)
            continue
        if pos < hi and text[pos] == "]":
            return calls, pos + 1
        raise _scan.Fail(f"expected ',' or ']' in the array of tool calls at offset {pos}")


def name_arguments(obj: Any, strict: bool) -> tuple[str, dict[str, Any]]:
    """``{"name": ..., "arguments": {...}}`` (lenient: ``parameters`` too)."""
    args_keys = ("arguments",) if strict else ("arguments", "parameters")
    return _scan.call_from_object(obj, name_keys=("name",), args_keys=args_keys, strict=strict)


def _all_read(value: Any, read: Reader) -> list[tuple[str, dict[str, Any]]]:
    """Every element of a lenient array that reads as a call (a lone object is one call)."""
    out = []
    for element in value if isinstance(value, list) else [value]:
        try:
            out.append(read(element, False))
        except _scan.Fail:
            continue
    if not out:
        raise _scan.Fail("no call in the array")
    return out[: _scan.MAX_CALLS]


def tagged_array(
    open_tag: str, close_tag: str | None, read: Reader, protocol: str
) -> tuple[StrictParser, LenientExtractor]:
    """The strict parser and lenient extractor of ``open_tag [calls] close_tag``: one block, only
    whitespace between the pieces (``close_tag`` None: the array ends the output)."""

    def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
        if not text.startswith(open_tag, lo):
            raise _scan.Fail(_scan.NO_CALL_ERROR)
        calls, end = array_calls(text, _scan.skip_ws(text, lo + len(open_tag)), hi, memo, read, protocol)
        pos = _scan.skip_ws(text, end)
        if close_tag is not None:
            if not text.startswith(close_tag, pos):
                raise _scan.Fail(f"expected {close_tag} at offset {pos}")
            pos = _scan.skip_ws(text, pos + len(close_tag))
        if pos < hi:
            if text.startswith(open_tag, pos):
                raise _scan.Fail(f"a second {open_tag} block at offset {pos}: one block holds every call")
            raise _scan.Fail(f"text after the tool calls at offset {pos}")
        return calls, [(lo, hi)]

    def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
        for s, end, pairs in scan.tagged_json(open_tag, lambda value: _all_read(value, read)):
            e = scan.close_after(end, close_tag) if close_tag is not None else end
            for name, args in pairs:
                yield ToolCall(name, args, protocol, (s, e), scan.text[s:e])

    return strict, lenient
