"""Mistral's ``[TOOL_CALLS]`` control token, in two variants.

``mistral`` (tokenizer v3, Mistral Nemo): one JSON list of call objects after the token::

    [TOOL_CALLS][{"name": NAME, "arguments": {...}, "id": "abcDEF123"}, ...]

``mistral_v11`` (tokenizer v11 and later: Mistral Small 3.2, Devstral, Ministral 3): the token
before every call, the name as text, an optional ``[CALL_ID]`` (v11 writes it, v13 does not),
the JSON arguments after ``[ARGS]``::

    [TOOL_CALLS]NAME[CALL_ID]abcDEF123[ARGS]{...}[TOOL_CALLS]NAME2[ARGS]{...}

Both carry JSON arguments and have no closing token: the turn ends with the end of sequence.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from leader_eval.protocols import _json_list, _scan
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.types import ToolCall, json_type

TOOL_CALLS, ARGS, CALL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"

# the v11 head: NAME, optional [CALL_ID]ID, [ARGS]; names and ids hold no markup or whitespace
# and are bounded, so the match is linear
_HEAD = re.compile(r"([^\s\[\]{}<>\"]{1,256})(?:\[CALL_ID\]([A-Za-z0-9_\-]{1,64}))?\[ARGS\]")
_LENIENT_HEAD = re.compile(r"\s*([^\s\[\]{}<>\"]{1,256})\s*(?:\[CALL_ID\]\s*[A-Za-z0-9_\-]{1,64}\s*)?\[ARGS\]\s*")
_LIST_KEYS = frozenset({"name", "arguments", "id"})


def _list_call(obj: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(obj, dict):
        for key in obj:
            if key not in _LIST_KEYS:
                raise _scan.Fail(f"unexpected key {key!r} in tool call object")
        if "id" in obj:
            if not isinstance(obj["id"], str):
                raise _scan.Fail(f"call id must be a string, got {json_type(obj['id'])}")
            obj = {k: v for k, v in obj.items() if k != "id"}
    return _scan.call_from_object(obj, name_keys=("name",), args_keys=("arguments",), strict=True)


def _read_list(obj: Any, strict: bool) -> tuple[str, dict[str, Any]]:
    return _list_call(obj)


def strict_list(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    if not text.startswith(TOOL_CALLS, lo):
        raise _scan.Fail(_scan.NO_CALL_ERROR)
    # element by element, so each call keeps its own span (the one reader of a JSON array of calls)
    calls, end = _json_list.array_calls(
        text, _scan.skip_ws(text, lo + len(TOOL_CALLS)), hi, memo, _read_list, "mistral"
    )
    if end != hi:
        raise _scan.Fail(f"text after the list of calls at offset {end}")
    return calls, [(lo, hi)]


def lenient_list(scan: _scan.Scan) -> Iterator[ToolCall]:
    text, budget = scan.text, scan.budget()
    for s in _scan.find_all(text, TOOL_CALLS, scan.start):
        if budget.spent:
            return
        got = scan.decode(_scan.skip_ws(text, s + len(TOOL_CALLS)), budget)
        if got is None or not isinstance(got[0], list | dict):
            budget.fail()
            continue
        for obj in got[0] if isinstance(got[0], list) else [got[0]]:
            try:
                name, args = _scan.call_from_object(
                    obj, name_keys=("name",), args_keys=("arguments", "parameters"), strict=False
                )
            except _scan.Fail:
                continue
            yield ToolCall(name, args, "mistral", (s, got[1]), text[s : got[1]])


def strict_v11(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    if not text.startswith(TOOL_CALLS, lo):
        raise _scan.Fail(_scan.NO_CALL_ERROR)
    calls: list[ToolCall] = []
    pos = lo
    while pos < hi:
        if len(calls) == _scan.MAX_CALLS:
            raise _scan.Fail(_scan.TOO_MANY_CALLS_ERROR)
        if not text.startswith(TOOL_CALLS, pos):
            raise _scan.Fail(f"expected {TOOL_CALLS} at offset {pos}")
        start = pos
        m = _HEAD.match(text, pos + len(TOOL_CALLS))
        if not m:
            raise _scan.Fail(f"expected NAME, an optional {CALL_ID}ID and {ARGS} at offset {pos + len(TOOL_CALLS)}")
        value, end = _scan.decode(text, m.end(), memo)
        if not isinstance(value, dict):
            raise _scan.Fail(f"arguments must be a JSON object, got {json_type(value)}")
        calls.append(ToolCall(m.group(1), value, "mistral_v11", (start, end), text[start:end]))
        pos = _scan.skip_ws(text, end)
    return calls, [(lo, hi)]


def _v11_head(text: str, s: int) -> tuple[str, int] | None:
    m = _LENIENT_HEAD.match(text, s + len(TOOL_CALLS))
    return (m.group(1), m.end()) if m else None


def lenient_v11(scan: _scan.Scan) -> Iterator[ToolCall]:
    return _scan.headed_calls(scan, TOOL_CALLS, _v11_head, "mistral_v11")


_OPEN = re.escape(TOOL_CALLS)

#: v11+: [ARGS] is in every template that writes the name as text (Nemo's has no [ARGS])
V11 = ToolCallProtocol(
    name="mistral_v11",
    strict=strict_v11,
    lenient=lenient_v11,
    lenient_needs=(ARGS,),
    opening=_OPEN,
    inner=(re.escape(ARGS), re.escape(CALL_ID)),
    template_markers=(ARGS,),
)
LIST = ToolCallProtocol(
    name="mistral",
    strict=strict_list,
    lenient=lenient_list,
    lenient_needs=(TOOL_CALLS,),
    opening=_OPEN,
    template_markers=(TOOL_CALLS,),
)

#: the module's protocols (tests/protocols/test_protocols.py reads them)
VARIANTS = (V11, LIST)
