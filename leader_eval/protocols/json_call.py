"""``json``: one plain JSON object ``{"tool"|"name": ..., "arguments"|"parameters": {...}}``, or
an array of them (parallel calls). For models without native tool calling."""

from __future__ import annotations

from collections.abc import Iterator

from leader_eval.protocols import _scan
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.types import ToolCall

NAME_KEYS = ("tool", "name")
ARGS_KEYS = ("arguments", "parameters")
#: an object or array whose first key is quoted (double quotes, or single: a Python dict is a
#: failed attempt too), or an empty one; ``{0:21}`` is no attempt, and nor is a Python list of
#: strings (``['wood', 'stone'] is what we need``): single quotes only as a dict key, ``{'tool':``
JSON_OPENING = r"[\[{][\s\[{]*(?:\"|\}|\])|(?:\[[\s\[]*)?\{\s*'[^'\n]{0,100}'\s*:"


def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    if text[lo] not in "{[":
        raise _scan.Fail(_scan.NO_CALL_ERROR)
    calls: list[ToolCall] = []
    if text[lo] == "{":
        obj, end = _scan.decode(text, lo, memo)
        if end != hi:
            raise _scan.Fail(f"text after the JSON object at offset {end}")
        name, args = _scan.call_from_object(obj, name_keys=NAME_KEYS, args_keys=ARGS_KEYS, strict=True)
        calls.append(ToolCall(name, args, "json", (lo, end), text[lo:end]))
        return calls, [(lo, end)]
    # An array of call objects: _scan.decode element by element so each call keeps its own span.
    pos = _scan.skip_ws(text, lo + 1)
    if pos < hi and text[pos] == "]":
        raise _scan.Fail("empty array of tool calls")
    while True:
        if len(calls) == _scan.MAX_CALLS:
            raise _scan.Fail(_scan.TOO_MANY_CALLS_ERROR)
        obj, end = _scan.decode(text, pos, memo)
        name, args = _scan.call_from_object(obj, name_keys=NAME_KEYS, args_keys=ARGS_KEYS, strict=True)
        calls.append(ToolCall(name, args, "json", (pos, end), text[pos:end]))
        pos = _scan.skip_ws(text, end)
        if pos < hi and text[pos] == ",":
            pos = _scan.skip_ws(text, pos + 1)
            continue
        if pos < hi and text[pos] == "]":
            break
        raise _scan.Fail(f"expected ',' or ']' in the array of tool calls at offset {pos}")
    if pos + 1 != hi:
        raise _scan.Fail(f"text after the JSON array at offset {pos + 1}")
    return calls, [(lo, hi)]


def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
    for obj, s, e in scan.call_objects():
        try:
            name, args = _scan.call_from_object(obj, name_keys=NAME_KEYS, args_keys=ARGS_KEYS, strict=False)
        except _scan.Fail:
            continue
        yield ToolCall(name, args, "json", (s, e), scan.text[s:e])


PROTOCOL = ToolCallProtocol(name="json", strict=strict, lenient=lenient, opening=JSON_OPENING, lenient_needs=("{",))
